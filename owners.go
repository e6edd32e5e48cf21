package tpsroute

import (
	"sync"

	"github.com/tpsroute/tpsroute/measure"
)

// MaxResponseIDs is how many Responses API ids (response ids, and the
// conversation ids calls named) a Client remembers with the deployment that
// holds their state: about 100 bytes each, 10 MB in all, and never more
// than maxOwnedID bytes of id each (about 40 MB). The oldest is forgotten
// first. In fleet mode the replicas share them through Redis (Fleet.Owned
// and Fleet.Owner), and an id learned from another replica counts here too.
const MaxResponseIDs = 100_000

// maxOwnedID is the longest id owners keeps. Real ids are tens of bytes
// ("resp_" and 48 hex digits); a longer one, from an upstream's answer or a
// caller's conversation, is not remembered, and a call naming it is routed
// as for any id the Client does not know: to one deployment, without
// fallbacks.
const maxOwnedID = 256

// owners remembers which deployment holds the state of each stored Response
// and conversation (response id -> deployment key), so that a call naming
// it goes there only. It holds at most max ids; the oldest put is forgotten
// first. It is safe for concurrent use.
type owners struct {
	mu   sync.Mutex
	max  int
	m    map[string]measure.Key
	ring []string // ids in the order put, a circular buffer once full
	next int
}

func newOwners(max int) *owners { return &owners{max: max, m: make(map[string]measure.Key)} }

// put records that the deployment with key k holds id's state.
func (o *owners) put(id string, k measure.Key) {
	if len(id) > maxOwnedID {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if _, ok := o.m[id]; ok {
		o.m[id] = k
		return
	}
	if len(o.ring) < o.max {
		o.ring = append(o.ring, id)
	} else {
		delete(o.m, o.ring[o.next])
		o.ring[o.next] = id
		o.next = (o.next + 1) % o.max
	}
	o.m[id] = k
}

// get returns the key of the deployment that holds id's state.
func (o *owners) get(id string) (measure.Key, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	k, ok := o.m[id]
	return k, ok
}
