package picker

import (
	"runtime"
	"strconv"
	"testing"
	"time"
	"unsafe"

	"github.com/tpsroute/tpsroute/route"
)

// TestAffinityReleasedAtTTL: entries go at their TTL, not only when the
// table is full.
func TestAffinityReleasedAtTTL(t *testing.T) {
	ds, _ := fleet()
	a := newAffinity(5*time.Minute, defaultAffinityEntries)
	for i := range 1000 {
		a.put("old-"+strconv.Itoa(i), ds[0].Key(), t0)
	}
	equal(t, a.len(), 1000, "entries within the TTL")
	for i := range 1000 {
		a.put("new-"+strconv.Itoa(i), ds[1].Key(), t0.Add(5*time.Minute))
	}
	equal(t, a.len(), 1000, "entries after the first keys' TTL")
	_, _, found := a.get("old-1", t0.Add(5*time.Minute))
	equal(t, found, false, "an expired key is released")
	k, live, _ := a.get("new-1", t0.Add(5*time.Minute))
	equal(t, live, true, "a new key is live")
	equal(t, k, ds[1].Key(), "a new key's deployment")
}

// TestAffinityKeepsNoKey: a cache key that shares the memory of a request
// body (as gjson's results do) does not keep the body alive once served.
func TestAffinityKeepsNoKey(t *testing.T) {
	ds, src := fleet()
	p := newPicker(t, ds, src, strictOrder())
	released := make(chan struct{})
	func() {
		body := make([]byte, 4<<20)
		copy(body, "session-1")
		runtime.AddCleanup(&body[0], func(chan struct{}) { close(released) }, released)
		key := unsafe.String(&body[0], len("session-1"))
		p.Served(key, ds[1].Key(), t0)
	}()
	for range 20 {
		runtime.GC()
		select {
		case <-released:
			plan := mustPick(t, p, route.Request{Model: "llama", CacheKey: "session-1"}, t0.Add(time.Minute))
			equal(t, plan.Deployments[0].Reason, route.ReasonAffinity, "the key still hits")
			return
		default:
			runtime.Gosched()
		}
	}
	t.Fatal("the body of a served cache key is still reachable")
}
