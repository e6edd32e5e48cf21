package picker

import (
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tpsroute/tpsroute/internal/registry"
	"github.com/tpsroute/tpsroute/measure"
	"github.com/tpsroute/tpsroute/route"
)

// coldSetup returns one warm deployment "w" and n cold ones "c0".."c<n-1>"
// of model "m", with a source that knows only the warm one.
func coldSetup(n int) ([]route.Deployment, *fakeSource) {
	ds := []route.Deployment{dep("w", "us", "m")}
	for i := range n {
		ds = append(ds, dep(fmt.Sprintf("c%d", i), "us", "m"))
	}
	src := newSource()
	src.set(ds[0].Key(), warm(0.2, 100))
	return ds, src
}

// TestColdShareLowTraffic checks that at 1 pick/s the cold probes of each
// interval stay within ColdShare of its picks, plus one per cold deployment,
// and that every cold deployment still gets a probe in every interval.
func TestColdShareLowTraffic(t *testing.T) {
	tests := []struct {
		name  string
		cold  int
		share float64 // Options.ColdShare
		want  float64 // the share in effect
	}{
		{"one cold, default share", 1, 0, defaultColdShare},
		{"three cold, default share", 3, 0, defaultColdShare},
		{"one cold, 10%", 1, 0.1, 0.1},
		{"two cold, 50%", 2, 0.5, 0.5},
	}
	const interval, perInterval, intervals = 10 * time.Second, 10, 10
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ds, src := coldSetup(tt.cold)
			p := newPicker(t, ds, src, route.Options{ColdShare: tt.share, Exploration: -1, Band: -1, Seed: 1})
			total := 0
			for w := range intervals {
				probes := map[string]int{}
				n := 0
				for i := range perInterval {
					now := t0.Add(time.Duration(w)*interval + time.Duration(i)*time.Second)
					first := mustPick(t, p, route.Request{Model: "m"}, now).Deployments[0]
					if first.Reason == route.ReasonColdProbe {
						probes[first.Key().Provider]++
						n++
					} else {
						require.Equal(t, "w", first.Key().Provider, "interval %d pick %d: a non-probe goes to the warm deployment", w, i)
					}
				}
				limit := int(math.Ceil(tt.want*perInterval)) + tt.cold
				assert.LessOrEqual(t, n, limit, "interval %d: probes %v over %d picks", w, probes, perInterval)
				assert.Len(t, probes, tt.cold, "interval %d: every cold deployment probed", w)
				total += n
			}
			assert.Equal(t, uint64(total), p.Stats().ColdProbes, "Stats().ColdProbes")
			got := float64(total) / (perInterval * intervals)
			assert.LessOrEqual(t, got, tt.want+float64(tt.cold+1)/perInterval, "overall probe share")
		})
	}
}

// TestColdShareModerateTraffic checks that at 20 picks/s a cold deployment
// gets ColdProbes probes (the samples measure needs by default) within one
// interval, and no more.
func TestColdShareModerateTraffic(t *testing.T) {
	ds, src := coldSetup(1)
	p := newPicker(t, ds, src, route.Options{Seed: 1})
	const step = 50 * time.Millisecond // 20 picks/s
	probes, tenth := 0, time.Duration(-1)
	for i := range 200 { // one 10 s interval
		at := time.Duration(i) * step
		first := mustPick(t, p, route.Request{Model: "m"}, t0.Add(at)).Deployments[0]
		if i == 0 {
			assert.Equal(t, route.ReasonColdProbe, first.Reason, "first pick")
		}
		if first.Reason == route.ReasonColdProbe {
			require.Equal(t, "c0", first.Key().Provider)
			probes++
			if probes == defaultColdProbes {
				tenth = at
			}
		}
	}
	assert.Equal(t, defaultColdProbes, probes, "probes in one interval")
	assert.Equal(t, registry.DefaultMinSamples, defaultColdProbes, "ColdProbes default covers MinSamples")
	require.GreaterOrEqual(t, tenth, time.Duration(0))
	assert.LessOrEqual(t, tenth, 3*time.Second, "the 10th probe comes within ceil(9/share) picks")
	// The next interval gives the next probes.
	assert.Equal(t, route.ReasonColdProbe, mustPick(t, p, route.Request{Model: "m"}, t0.Add(10*time.Second)).Deployments[0].Reason)
}

// TestColdShareConcurrent checks the share cap under concurrent picks in one
// interval: the probes stay within ceil(ColdShare*picks) plus one per cold
// deployment, and the cap is what bounds them (it is nearly reached).
func TestColdShareConcurrent(t *testing.T) {
	const goroutines, each, cold = 8, 250, 3
	ds, src := coldSetup(cold)
	p := newPicker(t, ds, src, route.Options{ColdProbes: 1000, Exploration: -1, Band: -1, Seed: 7})
	var probes atomic.Int64
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for i := range each {
				// Clock reads slightly out of order across goroutines, all
				// within one interval.
				now := t0.Add(time.Duration(i*goroutines+(goroutines-g)) * time.Millisecond)
				plan, err := p.PickAt(route.Request{Model: "m"}, now)
				if !assert.NoError(t, err) {
					return
				}
				if plan.Deployments[0].Reason == route.ReasonColdProbe {
					probes.Add(1)
				}
			}
		})
	}
	wg.Wait()
	const picks = goroutines * each
	n := probes.Load()
	assert.Equal(t, uint64(n), p.Stats().ColdProbes, "Stats().ColdProbes")
	assert.LessOrEqual(t, n, int64(math.Ceil(defaultColdShare*picks))+cold, "probes over %d concurrent picks", picks)
	assert.GreaterOrEqual(t, n, int64(defaultColdShare*picks)-10, "the share cap, not something else, bounds the probes")
}

// TestColdShareDisabled checks that a negative ColdShare leaves ColdProbes
// as the only limit.
func TestColdShareDisabled(t *testing.T) {
	ds, src := coldSetup(2)
	p := newPicker(t, ds, src, route.Options{ColdShare: -1, Exploration: -1, Band: -1, Seed: 1})
	n := 0
	for i := range 40 {
		if mustPick(t, p, route.Request{Model: "m"}, t0.Add(time.Duration(i)*time.Millisecond)).Deployments[0].Reason == route.ReasonColdProbe {
			n++
		}
	}
	assert.Equal(t, 2*defaultColdProbes, n, "probes of two cold deployments, no share cap")
}

// TestColdFirstPickIsProbe checks that a cold deployment's first pick of an
// interval is a probe, even when the share is spent.
func TestColdFirstPickIsProbe(t *testing.T) {
	ds, src := coldSetup(2)
	p := newPicker(t, ds, src, route.Options{ColdShare: 0.01, Exploration: -1, Band: -1, Seed: 1})
	var firsts, why []string
	for i := range 4 {
		plan := mustPick(t, p, route.Request{Model: "m"}, t0.Add(time.Duration(i)*time.Second))
		firsts = append(firsts, plan.Deployments[0].Key().Provider)
		why = append(why, plan.Deployments[0].Reason)
	}
	// c0 twice (its first probe, then the one probe the share allows beyond
	// it), then c1's first probe although the 1% share is spent, then w.
	assert.Equal(t, []string{"c0", "c0", "c1", "w"}, firsts)
	assert.Equal(t, []string{route.ReasonColdProbe, route.ReasonColdProbe, route.ReasonColdProbe, route.ReasonBest}, why)
	// A new interval: first picks are probes again.
	plan := mustPick(t, p, route.Request{Model: "m"}, t0.Add(10*time.Second))
	assert.Equal(t, route.ReasonColdProbe, plan.Deployments[0].Reason, "first pick of the next interval")
}

// TestColdCatchesUpWithRegistry runs a real registry.Registry at its default
// MinSamples: a slow deployment is warm when a faster one arrives cold, and
// at 5 picks/s, each pick's first deployment recording its call's sample,
// the faster one must lead on score within 15 s (with the old default of
// two cold probes per 10 s and no share it took 20 s here, half of the
// samples coming from the 5% exploration).
func TestColdCatchesUpWithRegistry(t *testing.T) {
	reg := registry.New(measure.Options{})
	slow, fast := dep("slow", "us", "m"), dep("fast", "us", "m")
	for i := range registry.DefaultMinSamples {
		reg.RecordAt(t0.Add(time.Duration(i-registry.DefaultMinSamples)*time.Second), slow.Key(), sample(300*time.Millisecond, 100))
	}
	est, ok := reg.Estimate(slow.Key())
	require.True(t, ok && est.OK, "slow is warm at the start")
	p := newPicker(t, []route.Deployment{slow, fast}, reg, route.Options{Seed: 1})

	const step = 200 * time.Millisecond // 5 picks/s
	led := time.Duration(-1)
	for i := range 150 { // 30 s
		at := time.Duration(i) * step
		plan := mustPick(t, p, route.Request{Model: "m"}, t0.Add(at))
		var fs, ss *route.Candidate
		for j := range plan.Deployments {
			switch c := &plan.Deployments[j]; c.Key().Provider {
			case "fast":
				fs = c
			case "slow":
				ss = c
			}
		}
		require.NotNil(t, fs)
		require.NotNil(t, ss)
		if fs.Expected.OK && fs.Score > ss.Score {
			led = at
			assert.Equal(t, "fast", plan.Deployments[0].Key().Provider, "the leader is picked")
			break
		}
		// The call runs on the first deployment and its sample is recorded.
		tpsv := 100.0
		if plan.Deployments[0].Key().Provider == "fast" {
			tpsv = 200
		}
		reg.RecordAt(t0.Add(at), plan.Deployments[0].Key(), sample(300*time.Millisecond, tpsv))
	}
	require.GreaterOrEqual(t, led, time.Duration(0), "fast never led within 30 s")
	assert.LessOrEqual(t, led, 15*time.Second, "fast leads on score")
	t.Logf("fast leads on score after %v of picks", led)
}

// TestColdProbeOneInFlight checks that a cold deployment with a call in
// flight gets no other cold probe until that call has answered: the probes
// go to a cold deployment with none in flight, and when every cold one has
// one, the call goes to the measured leader (one probe per doubtful
// deployment at a time, never a burst that measures it under its own load;
// docs/ROUTING.md, "Random fleets").
func TestColdProbeOneInFlight(t *testing.T) {
	tests := []struct {
		name     string
		inFlight []int64 // of c0, c1
		want     string
		reason   string
	}{
		{"neither in flight: the first cold", []int64{0, 0}, "c0", route.ReasonColdProbe},
		{"c0 in flight: c1", []int64{1, 0}, "c1", route.ReasonColdProbe},
		{"c1 in flight: c0", []int64{0, 2}, "c0", route.ReasonColdProbe},
		{"both in flight: the warm leader", []int64{1, 1}, "w", route.ReasonBest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ds, src := coldSetup(2)
			for i, n := range tt.inFlight {
				src.set(ds[1+i].Key(), registry.Estimate{InFlight: n})
			}
			p := newPicker(t, ds, src, route.Options{Exploration: -1, Band: -1, Seed: 1})
			first := mustPick(t, p, route.Request{Model: "m"}, t0).Deployments[0]
			assert.Equal(t, tt.want, first.Key().Provider)
			assert.Equal(t, tt.reason, first.Reason)
		})
	}
}
