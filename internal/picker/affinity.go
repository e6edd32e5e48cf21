package picker

import (
	"container/heap"
	"hash/maphash"
	"sync"
	"time"

	"github.com/tpsroute/tpsroute/measure"
)

const affinityShards = 16

// affinity maps cache keys to the deployment that served them last, with a
// TTL and a fixed capacity. Lookups never wait: a lookup that would contend
// with a writer counts as a miss.
//
// It holds no cache key: each is stored as its 64-bit hash under a seed
// drawn at start, so an entry costs the same whatever the key's length and
// keeps nothing of the request it came from alive (a key taken from a body
// may share the body's memory). Two keys with the same hash share an entry;
// at 10,000 entries that happens with odds of about 3 in 10^12, and costs one
// call a cache miss. An entry is released at the first write to its shard
// after its TTL, and the least recently served entry makes room for a new
// one once the shard is full.
type affinity struct {
	ttl    time.Duration
	seed   maphash.Seed
	shards [affinityShards]affinityShard
}

type affinityShard struct {
	mu  sync.RWMutex
	m   map[uint64]*affinityEntry
	exp expiryHeap // every entry of m, the soonest to expire first
	max int        // the entries the shard holds at most
}

type affinityEntry struct {
	key     measure.Key
	expires time.Time
	hash    uint64
	index   int // in the shard's expiryHeap
}

// newAffinity returns an empty affinity of about entries keys. The shards'
// maps grow as keys arrive rather than being sized up front: a Picker whose
// requests carry few cache keys then holds no megabytes of empty slots that
// every garbage collection would scan.
func newAffinity(ttl time.Duration, entries int) *affinity {
	a := &affinity{ttl: ttl, seed: maphash.MakeSeed()}
	per := max(entries/affinityShards, 1)
	for i := range a.shards {
		a.shards[i].m = make(map[uint64]*affinityEntry)
		a.shards[i].max = per
	}
	return a
}

func (a *affinity) hash(cacheKey string) (uint64, *affinityShard) {
	h := maphash.String(a.seed, cacheKey)
	return h, &a.shards[h%affinityShards]
}

// get returns the key that served cacheKey, if within the TTL at now. found
// says an entry existed at all (expired and not yet released, or not).
func (a *affinity) get(cacheKey string, now time.Time) (k measure.Key, live, found bool) {
	h, s := a.hash(cacheKey)
	if !s.mu.TryRLock() {
		return k, false, false
	}
	e, ok := s.m[h]
	if ok {
		k, live = e.key, now.Before(e.expires)
	}
	s.mu.RUnlock()
	return k, live, ok
}

func (a *affinity) put(cacheKey string, k measure.Key, now time.Time) {
	h, s := a.hash(cacheKey)
	expires := now.Add(a.ttl)
	s.mu.Lock()
	defer s.mu.Unlock()
	// Release what expired.
	for len(s.exp) > 0 && !now.Before(s.exp[0].expires) {
		delete(s.m, heap.Pop(&s.exp).(*affinityEntry).hash)
	}
	if e, ok := s.m[h]; ok {
		e.key, e.expires = k, expires
		heap.Fix(&s.exp, e.index)
		return
	}
	if len(s.m) >= s.max {
		delete(s.m, heap.Pop(&s.exp).(*affinityEntry).hash) // the least recently served
	}
	e := &affinityEntry{key: k, expires: expires, hash: h}
	s.m[h] = e
	heap.Push(&s.exp, e)
}

func (a *affinity) len() int {
	n := 0
	for i := range a.shards {
		s := &a.shards[i]
		s.mu.RLock()
		n += len(s.m)
		s.mu.RUnlock()
	}
	return n
}

// expiryHeap is a container/heap of entries by expiry, each knowing its index.
type expiryHeap []*affinityEntry

func (h expiryHeap) Len() int           { return len(h) }
func (h expiryHeap) Less(i, j int) bool { return h[i].expires.Before(h[j].expires) }
func (h expiryHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}
func (h *expiryHeap) Push(x any) {
	e := x.(*affinityEntry)
	e.index = len(*h)
	*h = append(*h, e)
}
func (h *expiryHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return e
}
