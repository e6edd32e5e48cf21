package picker

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tpsroute/tpsroute/internal/registry"
	"github.com/tpsroute/tpsroute/measure"
	"github.com/tpsroute/tpsroute/route"
	"github.com/tpsroute/tpsroute/tps"
)

func sample(ttft time.Duration, tpsv float64) tps.Sample {
	return tps.Sample{TTFT: ttft, TPS: tpsv, TPSOK: true, Total: ttft + time.Second, OutputTokens: 100}
}

// TestRegistryHandles checks that a Picker over a *registry.Registry reads
// estimates through handles exactly as through Registry.Estimate, including
// across a prune that kills the handles and a key recorded again afterwards.
func TestRegistryHandles(t *testing.T) {
	var _ HandleSource = (*registry.Registry)(nil)
	ds := []route.Deployment{dep("a", "us", "m"), dep("b", "us", "m"), dep("w", "us", route.Wildcard)}
	reg := registry.New(measure.Options{MinSamples: 1, TTL: time.Minute})
	o := strictOrder()
	o.ColdProbes = -1 // cold deployments only go behind warm ones
	viaHandles := newPicker(t, ds, reg, o)
	viaEstimate := newPicker(t, ds, estimateOnly{reg}, o)
	check := func(t *testing.T, now time.Time, first string) {
		t.Helper()
		h := mustPick(t, viaHandles, route.Request{Model: "m"}, now)
		e := mustPick(t, viaEstimate, route.Request{Model: "m"}, now)
		assert.Equal(t, e.Explain(), h.Explain(), "handles and Estimate agree")
		if first != "" { // all cold: a weighted draw, equal for equal seeds
			assert.Equal(t, first, h.Deployments[0].Key().String(), "first")
		}
	}
	steps := []struct {
		name  string
		do    func(now time.Time)
		first string
	}{
		{"all_cold", func(time.Time) {}, ""},
		{"b_fast", func(now time.Time) {
			reg.RecordAt(now, ds[0].Key(), sample(time.Second, 10))
			reg.RecordAt(now, ds[1].Key(), sample(100*time.Millisecond, 500))
			reg.RecordAt(now, measure.Key{Provider: "w", Region: "us", Model: "m"}, sample(time.Second, 20))
		}, "b/us/m"},
		{"pruned_all_cold_again", func(now time.Time) {
			require.Equal(t, 3, reg.PruneAt(now.Add(2*time.Minute)))
		}, ""},
		{"a_recorded_again_new_handle", func(now time.Time) {
			reg.RecordAt(now.Add(3*time.Minute), ds[0].Key(), sample(100*time.Millisecond, 900))
		}, "a/us/m"},
		{"b_back_and_faster", func(now time.Time) {
			reg.RecordAt(now.Add(3*time.Minute), ds[1].Key(), sample(50*time.Millisecond, 2000))
		}, "b/us/m"},
	}
	now := t0
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			st.do(now)
			check(t, now.Add(3*time.Minute), st.first)
		})
	}
}

// TestRegistryHandlesRace picks while another goroutine records and prunes,
// for the race detector.
func TestRegistryHandlesRace(t *testing.T) {
	ds := []route.Deployment{dep("a", "us", "m"), dep("b", "us", "m")}
	reg := registry.New(measure.Options{MinSamples: 1, TTL: time.Minute})
	p := newPicker(t, ds, reg, route.Options{Seed: 1})
	var wg sync.WaitGroup
	wg.Add(3)
	go func() {
		defer wg.Done()
		for i := range 300 {
			reg.RecordAt(t0.Add(time.Duration(i)*time.Minute), ds[i%2].Key(), sample(time.Second, float64(10+i)))
		}
	}()
	go func() {
		defer wg.Done()
		for i := range 300 {
			reg.PruneAt(t0.Add(time.Duration(i)*time.Minute + 90*time.Second))
		}
	}()
	go func() {
		defer wg.Done()
		for i := range 3000 {
			plan, err := p.PickAt(route.Request{Model: "m"}, t0.Add(time.Duration(i)*time.Second))
			if err != nil || len(plan.Deployments) != 2 {
				t.Errorf("pick %d: %v, %d deployments", i, err, len(plan.Deployments))
				return
			}
		}
	}()
	wg.Wait()
}
