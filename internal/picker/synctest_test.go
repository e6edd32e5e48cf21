package picker

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/tpsroute/tpsroute/route"
)

// TestPickUsesTheClock checks that Pick (not PickAt) reads the current time
// for affinity TTLs, cooldowns and cold-probe windows, on synctest's fake clock.
func TestPickUsesTheClock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ds, src := fleet()
		cold := dep("new", "us", "llama")
		ds = append(ds, cold)
		o := strictOrder()
		o.ColdProbes = 1
		h := fakeHealth{ds[0].Key(): {CoolingUntil: time.Now().Add(30 * time.Second)}}
		p := newPicker(t, ds, src, o, h)

		first := func(r route.Request) route.Candidate {
			t.Helper()
			plan, err := p.Pick(r)
			if err != nil {
				t.Fatal(err)
			}
			return plan.Deployments[0]
		}
		equal(t, first(route.Request{Model: "llama"}).Reason, route.ReasonColdProbe, "probe")
		equal(t, first(route.Request{Model: "llama"}).Key(), ds[2].Key(), "fast is cooling; cheap is next")

		p.Served("s", ds[1].Key(), time.Now())
		time.Sleep(time.Minute)
		equal(t, first(route.Request{Model: "llama", CacheKey: "s"}).Reason, route.ReasonAffinity, "affinity within TTL")
		equal(t, first(route.Request{Model: "llama"}).Reason, route.ReasonColdProbe, "a new probe window")
		equal(t, first(route.Request{Model: "llama"}).Key(), ds[0].Key(), "cooldown over")

		time.Sleep(5 * time.Minute)
		if c := first(route.Request{Model: "llama", CacheKey: "s"}); c.Reason == route.ReasonAffinity {
			t.Errorf("affinity after its TTL: %s", c.Key())
		}
		equal(t, p.Stats().AffinityBroken, uint64(1), "expired affinity counted as broken")
	})
}
