package picker

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tpsroute/tpsroute/internal/registry"
	"github.com/tpsroute/tpsroute/measure"
	"github.com/tpsroute/tpsroute/route"
)

func spread(n int) ([]route.Deployment, *fakeSource) {
	ds := make([]route.Deployment, n)
	src := newSource()
	for i := range ds {
		ds[i] = dep(fmt.Sprintf("p%03d", i), "us", "m")
		ds[i].Price = measure.Price{Input: float64(i%7) / 10, Output: float64(i%5) / 5}
		src.set(ds[i].Key(), warm(0.1+float64(i)*0.01, 1000/float64(i+1)))
	}
	return ds, src
}

// at returns e as last sampled at t.
func at(e registry.Estimate, t time.Time) registry.Estimate {
	e.Newest = t
	return e
}

// TestExplorationFollowsChance: a pick explores a deployment with the chance
// that it would now lead, so a clearly worse one measured recently is left
// alone, a near one unseen for five minutes (driftTime) is re-measured, and
// a former leader that fell behind is re-measured the more the longer it
// goes unseen.
func TestExplorationFollowsChance(t *testing.T) {
	const picks = 5000
	ds := []route.Deployment{dep("a", "us", "m"), dep("b", "us", "m"), dep("c", "us", "m")}
	explored := func(p *Picker, now time.Time) map[string]float64 {
		n := map[string]float64{}
		for range picks {
			plan := mustPick(t, p, route.Request{Model: "m"}, now)
			if plan.Deployments[0].Reason == route.ReasonExplore {
				n[plan.Deployments[0].Key().Provider] += 1.0 / picks
			}
		}
		return n
	}
	t.Run("fresh and clearly worse: left alone", func(t *testing.T) {
		src := newSource()
		src.set(ds[0].Key(), at(warm(0.2, 1000), t0))
		src.set(ds[1].Key(), at(warm(0.2, 900), t0))
		src.set(ds[2].Key(), at(warm(0.2, 250), t0))
		got := explored(newPicker(t, ds, src, route.Options{Band: -1, Seed: 42}), t0)
		if got["b"] > 0.01 || got["c"] > 0 {
			t.Errorf("explored %v, want b ≤ 1%% and c never", got)
		}
	})
	t.Run("unseen for five minutes: the near one is re-measured, the far one not", func(t *testing.T) {
		src := newSource()
		src.set(ds[0].Key(), at(warm(0.2, 1000), t0))
		src.set(ds[1].Key(), at(warm(0.2, 900), t0.Add(-5*time.Minute)))
		src.set(ds[2].Key(), at(warm(0.2, 250), t0.Add(-5*time.Minute)))
		p := newPicker(t, ds, src, route.Options{Band: -1, Seed: 42})
		got := explored(p, t0)
		if got["b"] < 0.1 || got["c"] > 0.005 {
			t.Errorf("explored %v, want b ≥ 10%% and c ≤ 0.5%%", got)
		}
		if b := got["b"]; b > defaultExploration+0.02 {
			t.Errorf("explored b %.3f, above the %.2f cap", b, defaultExploration)
		}
		equal(t, p.Stats().Explorations > 0, true, "Stats().Explorations counted")
		capped := explored(newPicker(t, ds, src, route.Options{Exploration: 0.05, Band: -1, Seed: 42}), t0)
		if capped["b"] > 0.06 {
			t.Errorf("Exploration 0.05: explored %v", capped)
		}
		if off := explored(newPicker(t, ds, src, route.Options{Exploration: route.Off, Band: -1, Seed: 42}), t0); len(off) != 0 {
			t.Errorf("Exploration Off: explored %v", off)
		}
	})
	t.Run("a former leader is re-measured as it goes unseen", func(t *testing.T) {
		src := newSource()
		src.set(ds[0].Key(), at(warm(0.2, 1000), t0))
		src.set(ds[1].Key(), at(warm(0.2, 900), t0))
		src.set(ds[2].Key(), at(warm(0.2, 2000), t0))
		p := newPicker(t, ds, src, route.Options{Band: -1, Seed: 42})
		equal(t, mustPick(t, p, route.Request{Model: "m"}, t0).Deployments[0].Key().Provider, "c", "leader")
		fell := t0.Add(time.Second)
		src.set(ds[2].Key(), at(warm(0.2, 250), fell)) // a tenth of the leader's speed now
		if got := explored(p, fell)["c"]; got > 0.001 {
			t.Errorf("just measured slow: explored %.4f", got)
		}
		// At its best c would lead by far, so its chance is 10/50 (the 20%
		// cap), less the share b, unseen 11 s and 10% behind, takes.
		if got := explored(p, fell.Add(10*time.Second))["c"]; got < 0.14 || got > 0.21 {
			t.Errorf("unseen 10 s: explored %.4f, want about 10/50 = 20%%, a little less", got)
		}
		if got := explored(p, fell.Add(40*time.Second))["c"]; got < 0.1 {
			t.Errorf("unseen 40 s: explored %.4f, want half the 20%% cap or more (b, unseen 40 s too, takes the rest)", got)
		}
	})
}

func TestExplorationSeedIsDeterministic(t *testing.T) {
	run := func(seed uint64) []string {
		ds, src := spread(6)
		for _, d := range ds[1:] { // unseen for a while: explored
			e, _ := src.Estimate(d.Key())
			src.set(d.Key(), at(e, t0.Add(-30*time.Minute)))
		}
		p := newPicker(t, ds, src, route.Options{Exploration: 0.3, Seed: seed})
		var firsts []string
		for range 200 {
			firsts = append(firsts, mustPick(t, p, route.Request{Model: "m"}, t0).Deployments[0].Key().Provider)
		}
		return firsts
	}
	equal(t, run(7), run(7), "same seed")
	a, b := run(7), run(8)
	if fmt.Sprint(a) == fmt.Sprint(b) {
		t.Error("different seeds gave the same 200 picks")
	}
}

func TestBandWeightedDraw(t *testing.T) {
	a, b, c := dep("a", "", "m"), dep("b", "", "m"), dep("c", "", "m")
	b.Weight = 3
	src := newSource()
	src.set(a.Key(), warm(0.2, 100))
	src.set(b.Key(), warm(0.2, 98)) // within the default 5% band
	src.set(c.Key(), warm(0.2, 90)) // outside it
	p := newPicker(t, []route.Deployment{a, b, c}, src, route.Options{Exploration: -1, Seed: 3})
	counts := map[string]int{}
	const picks = 10000
	for range picks {
		plan := mustPick(t, p, route.Request{Model: "m"}, t0)
		counts[plan.Deployments[0].Key().Provider]++
		equal(t, plan.Deployments[0].Reason, route.ReasonBand, "reason")
	}
	if got := float64(counts["b"]) / picks; math.Abs(got-0.75) > 0.02 {
		t.Errorf("share of b (weight 3) = %.3f, want 0.75 ± 0.02", got)
	}
	equal(t, counts["c"], 0, "picks of c (outside the band)")
	equal(t, p.Stats().BandPicks, uint64(counts["b"]), "BandPicks")
}

func TestColdStart(t *testing.T) {
	ds, src := spread(3)
	cold := dep("new", "us", "m")
	ds = append(ds, cold)

	t.Run("probed first and warms quickly", func(t *testing.T) {
		src := src
		p := newPicker(t, ds, src, route.Options{Exploration: -1, Seed: 1})
		samples := 0
		now := t0
		var warmedAt int
		for i := range 1000 {
			plan := mustPick(t, p, route.Request{Model: "m"}, now)
			for _, c := range plan.Deployments {
				if c.Key() == cold.Key() && c.Reason != route.ReasonColdProbe && samples < 3 {
					equal(t, c.Reason, route.ReasonCold, "cold reason behind warm ones")
				}
				if math.IsNaN(c.Score) {
					t.Fatal("NaN score")
				}
			}
			if plan.Deployments[0].Key() == cold.Key() && samples < 3 {
				if i == 0 {
					equal(t, plan.Deployments[0].Reason, route.ReasonColdProbe, "first pick reason")
				}
				samples++ // the call ran; measure records it
				if samples == 3 {
					src.set(cold.Key(), warm(0.05, 5000))
					warmedAt = i
				}
			}
			if samples == 3 && i > warmedAt {
				equal(t, plan.Deployments[0].Key(), cold.Key(), "recovered deployment wins")
				break
			}
			now = now.Add(100 * time.Millisecond)
		}
		equal(t, samples, 3, "samples")
		// Two probes per 10 s: the third sample comes by the second window.
		if warmedAt > 101 {
			t.Errorf("third sample at pick %d (%.1fs), want within ~10s", warmedAt, float64(warmedAt)/10)
		}
		if st := p.Stats(); st.ColdProbes != 3 {
			t.Errorf("ColdProbes = %d, want 3", st.ColdProbes)
		}
	})
	t.Run("probes are capped per window", func(t *testing.T) {
		src := newSource()
		for _, d := range ds[:3] {
			src.set(d.Key(), warm(0.2, 100))
		}
		p := newPicker(t, ds, src, route.Options{Exploration: -1, ColdProbes: 3, Seed: 1})
		n := 0
		for range 100 {
			if mustPick(t, p, route.Request{Model: "m"}, t0).Deployments[0].Reason == route.ReasonColdProbe {
				n++
			}
		}
		equal(t, n, 3, "probes in one instant")
		if mustPick(t, p, route.Request{Model: "m"}, t0.Add(10*time.Second)).Deployments[0].Reason != route.ReasonColdProbe {
			t.Error("no probe in the next window")
		}
	})
	t.Run("a clock read out of order does not renew the budget", func(t *testing.T) {
		// Concurrent picks read the clock before they run, so a pick may
		// come with a slightly earlier now than the one before it.
		src := newSource()
		for _, d := range ds[:3] {
			src.set(d.Key(), warm(0.2, 100))
		}
		p := newPicker(t, ds, src, route.Options{Exploration: -1, ColdProbes: 2, Seed: 1})
		probes := 0
		for _, at := range []time.Duration{time.Millisecond, 2 * time.Millisecond, 0, time.Millisecond, 0} {
			if mustPick(t, p, route.Request{Model: "m"}, t0.Add(at)).Deployments[0].Reason == route.ReasonColdProbe {
				probes++
			}
		}
		equal(t, probes, 2, "probes within one window, clock read out of order")
		// A clock stepped back by more than the interval starts afresh.
		equal(t, mustPick(t, p, route.Request{Model: "m"}, t0.Add(-11*time.Second)).Deployments[0].Reason, route.ReasonColdProbe, "after a big step back")
	})
	t.Run("all cold are spread, not herded", func(t *testing.T) {
		cold := []route.Deployment{dep("a", "", "m"), dep("b", "", "m"), dep("c", "", "m")}
		cold[2].Weight = 2
		p := newPicker(t, cold, nil, route.Options{ColdProbes: -1, Seed: 4})
		counts := map[string]int{}
		for range 4000 {
			plan := mustPick(t, p, route.Request{Model: "m"}, t0)
			counts[plan.Deployments[0].Key().Provider]++
			equal(t, plan.Deployments[0].Reason, route.ReasonColdProbe, "reason")
		}
		for prov, want := range map[string]float64{"a": 0.25, "b": 0.25, "c": 0.5} {
			if got := float64(counts[prov]) / 4000; math.Abs(got-want) > 0.03 {
				t.Errorf("share of %s = %.3f, want %.2f ± 0.03", prov, got, want)
			}
		}
	})
	t.Run("one sample is compared", func(t *testing.T) {
		// Successive elimination: after one sample a deployment is ranked on
		// it, so a wide fleet's cold start costs one probe a deployment.
		src := newSource()
		for _, d := range ds[:3] {
			src.set(d.Key(), warm(0.2, 100))
		}
		src.set(cold.Key(), registry.Estimate{TTFTP95: 0.2, TTFTP50: 0.2, TPSP50: 900, TTFTEWMA: 0.2, TPSEWMA: 900, Samples: 1, TPSSamples: 1})
		p := newPicker(t, ds, src, route.Options{ColdProbes: -1, Exploration: -1, Seed: 1})
		plan := mustPick(t, p, route.Request{Model: "m"}, t0)
		equal(t, plan.Deployments[0].Key(), cold.Key(), "the fast one leads after one sample")
		equal(t, plan.Deployments[0].Reason, route.ReasonBest, "reason")
	})
	t.Run("never scored as fast", func(t *testing.T) {
		src := newSource()
		for _, d := range ds[:3] {
			src.set(d.Key(), warm(2, 10))
		}
		// A not-OK estimate with tiny numbers and no sample must not win
		// Latency (one sample is compared: minCompare).
		src.set(cold.Key(), registry.Estimate{TTFTP95: 0.001, TPSP50: 1e6, Samples: 0})
		p := newPicker(t, ds, src, route.Options{Policy: route.Latency, ColdProbes: -1, Exploration: -1, Seed: 1})
		plan := mustPick(t, p, route.Request{Model: "m"}, t0)
		last := plan.Deployments[len(plan.Deployments)-1]
		equal(t, last.Key(), cold.Key(), "cold deployment last")
		equal(t, last.Reason, route.ReasonCold, "reason")
	})
}

// TestPickNeverNaN drives Pick with hostile statistics and health.
func TestPickNeverNaN(t *testing.T) {
	vals := []float64{0, -1, 1e-300, 1e-9, 0.05, 1, 250, 1e9, 1e300, math.MaxFloat64, math.Inf(1), math.Inf(-1), math.NaN()}
	rng := rand.New(rand.NewPCG(1, 2))
	pickVal := func() float64 { return vals[rng.IntN(len(vals))] }
	ds, _ := spread(8)
	ds[7] = dep("wild", "us", route.Wildcard)
	for i := range 3000 {
		src := newSource()
		health := fakeHealth{}
		for _, d := range ds {
			k := d.ForModel("m").Key()
			src.set(k, registry.Estimate{
				TTFTP50: pickVal(), TTFTP95: pickVal(), TPSP50: pickVal(), TPSP95: pickVal(),
				TTFTEWMA: pickVal(), TPSEWMA: pickVal(), ErrorRate: pickVal(),
				Samples: int64(rng.IntN(3)) - 1, OK: rng.IntN(3) > 0, InFlight: int64(rng.IntN(3)) - 1,
			})
			health[k] = route.Status{Breaker: route.BreakerState(rng.IntN(3)), NoHeadroom: rng.IntN(5) == 0}
		}
		p := newPicker(t, ds, src, route.Options{Seed: uint64(i) + 1, Policy: route.Policy(rng.IntN(4))}, health)
		req := route.Request{
			Model: "m", Policy: route.Policy(rng.IntN(5)), LatencyMetric: route.LatencyMetric(rng.IntN(3)),
			ExpectedOutputTokens: int64(rng.IntN(3)) * 1e9, CacheKey: "k",
			SLO: route.SLO{MaxTTFT: time.Duration(rng.IntN(2)) * time.Second, MinTPS: float64(rng.IntN(2)) * 100,
				MaxErrorRate: float64(rng.IntN(2)) / 2, Strict: rng.IntN(4) == 0},
		}
		p.Served("k", ds[rng.IntN(len(ds))].ForModel("m").Key(), t0)
		plan, err := p.PickAt(req, t0)
		if req.Policy > route.Cost {
			if err == nil || errors.Is(err, route.ErrNoDeployment) {
				t.Fatalf("iteration %d: unknown policy gave %v", i, err)
			}
			continue
		}
		if err != nil && len(plan.Excluded) == 0 {
			t.Fatalf("iteration %d: %v", i, err)
		}
		if n := len(plan.Deployments) + len(plan.Excluded); n != len(ds) {
			t.Fatalf("iteration %d: %d candidates, want %d", i, n, len(ds))
		}
		seen := map[measure.Key]bool{}
		for _, c := range append(plan.Deployments, plan.Excluded...) {
			if math.IsNaN(c.Score) || math.IsInf(c.Score, 0) || math.IsNaN(c.Cost) || math.IsNaN(c.Expected.TTFT) || math.IsNaN(c.Expected.TPS) {
				t.Fatalf("iteration %d: NaN or Inf in %+v", i, c)
			}
			if seen[c.Key()] {
				t.Fatalf("iteration %d: %s twice", i, c.Key())
			}
			seen[c.Key()] = true
		}
		_ = plan.Explain()
	}
}

func FuzzPick(f *testing.F) {
	f.Add(0.5, 100.0, 0.0, 1.0, int64(10), true, uint8(1))
	f.Add(math.NaN(), math.Inf(1), -1.0, 1e308, int64(-5), false, uint8(3))
	f.Fuzz(func(t *testing.T, ttft, tps, errRate, ewma float64, samples int64, ok bool, policy uint8) {
		ds, src := spread(3)
		src.set(ds[0].Key(), registry.Estimate{TTFTP95: ttft, TTFTP50: ttft, TPSP50: tps, TPSP95: tps,
			TTFTEWMA: ewma, TPSEWMA: ewma, ErrorRate: errRate, Samples: samples, OK: ok})
		p := newPicker(t, ds, src, route.Options{Seed: 9})
		plan, err := p.PickAt(route.Request{Model: "m", Policy: route.Policy(policy % 4), LatencyMetric: route.LatencyCompletion,
			SLO: route.SLO{MaxErrorRate: 0.5, MinTPS: 1}}, t0)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range plan.Deployments {
			if math.IsNaN(c.Score) {
				t.Fatalf("NaN score for %s", c.Key())
			}
		}
	})
}

func TestConcurrentPick(t *testing.T) {
	ds, src := spread(16)
	p := newPicker(t, ds, src, route.Options{Seed: 5, ColdProbes: 1})
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 500 {
				ck := fmt.Sprintf("s%d", i%17)
				plan, err := p.PickAt(route.Request{Model: "m", CacheKey: ck}, t0.Add(time.Duration(i)*time.Millisecond))
				if err != nil {
					t.Error(err)
					return
				}
				p.Served(ck, plan.Deployments[0].Key(), t0)
				if g == 0 && i%50 == 0 {
					src.set(ds[i%16].Key(), warm(0.3, float64(i)))
				}
			}
		}()
	}
	wg.Wait()
	st := p.Stats()
	equal(t, st.Picks, uint64(8*500), "Picks")
	if st.AffinityHits == 0 {
		t.Error("no affinity hits under concurrency")
	}
}

// TestCostCold checks that under Cost, where the expected cost is known
// without samples, cold deployments are ordered by cost and the first place
// goes to the cheapest once the cold-probe budgets are spent, rather than to
// a blind weighted draw; probes, exploration and the band still apply, and
// the other policies still spread over cold deployments.
func TestCostCold(t *testing.T) {
	priced := func(provider string, in, out, w float64) route.Deployment {
		d := dep(provider, "us", "m")
		d.Price, d.Weight = measure.Price{Input: in, Output: out}, w
		return d
	}
	// Cheapest first: c ($0.35), a ($1.25), b ($2.50) per 1000 in + 250 out
	// tokens; b carries a heavy weight that a blind draw would follow.
	cold := []route.Deployment{priced("a", 1, 1, 1), priced("b", 2, 2, 50), priced("c", 0.1, 1, 1)}
	near := []route.Deployment{priced("a", 1, 1, 1), priced("b", 1.01, 1, 3), priced("c", 5, 5, 1)}
	tests := []struct {
		name      string
		ds        []route.Deployment
		opts      route.Options
		req       route.Request
		picks     int
		wantOrder []string           // order of the last pick
		wantFirst map[string]float64 // share of first places over picks, ± 0.03
		wantWhy   string             // Reason of the first place in the last pick
	}{
		{
			name: "probes off: cheapest first, by cost", ds: cold,
			opts: route.Options{Policy: route.Cost, ColdProbes: -1, Exploration: -1, Band: -1, Seed: 1},
			req:  route.Request{Model: "m"}, picks: 200,
			wantOrder: []string{"c/us/m", "a/us/m", "b/us/m"},
			wantFirst: map[string]float64{"c": 1}, wantWhy: route.ReasonBest,
		},
		{
			name: "default exploration spends nothing on dearer deployments: their cost is known", ds: cold,
			opts: route.Options{Policy: route.Cost, ColdProbes: -1, Seed: 2},
			req:  route.Request{Model: "m"}, picks: 4000,
			wantFirst: map[string]float64{"c": 1},
		},
		{
			name: "band draws by weight among near-equal costs", ds: near,
			opts: route.Options{Policy: route.Cost, ColdProbes: -1, Exploration: -1, Seed: 3},
			req:  route.Request{Model: "m"}, picks: 4000,
			wantFirst: map[string]float64{"a": 0.25, "b": 0.75, "c": 0},
		},
		{
			name: "request policy override", ds: cold,
			opts: route.Options{ColdProbes: -1, Exploration: -1, Band: -1, Seed: 1},
			req:  route.Request{Model: "m", Policy: route.Cost}, picks: 50,
			wantOrder: []string{"c/us/m", "a/us/m", "b/us/m"},
			wantFirst: map[string]float64{"c": 1}, wantWhy: route.ReasonBest,
		},
		{
			name: "throughput still spreads by weight", ds: cold,
			opts: route.Options{ColdProbes: -1, Exploration: -1, Band: -1, Seed: 4},
			req:  route.Request{Model: "m"}, picks: 4000,
			wantFirst: map[string]float64{"a": 1.0 / 52, "b": 50.0 / 52, "c": 1.0 / 52},
			wantWhy:   route.ReasonColdProbe,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newPicker(t, tt.ds, nil, tt.opts)
			counts := map[string]int{}
			var plan route.Plan
			for range tt.picks {
				plan = mustPick(t, p, tt.req, t0)
				counts[plan.Deployments[0].Key().Provider]++
				for _, c := range plan.Deployments {
					if math.IsNaN(c.Score) || c.Expected.OK {
						t.Fatalf("%s: score %v, Expected.OK %v on a cold deployment", c.Key(), c.Score, c.Expected.OK)
					}
				}
			}
			if tt.wantOrder != nil {
				equal(t, order(plan), tt.wantOrder, "order")
			}
			if tt.wantWhy != "" {
				equal(t, plan.Deployments[0].Reason, tt.wantWhy, "first reason")
			}
			for prov, want := range tt.wantFirst {
				if got := float64(counts[prov]) / float64(tt.picks); math.Abs(got-want) > 0.03 {
					t.Errorf("first-place share of %s = %.3f, want %.3f ± 0.03", prov, got, want)
				}
			}
		})
	}

	t.Run("probes spend their budget cheapest first, then the cheapest leads", func(t *testing.T) {
		p := newPicker(t, cold, nil, route.Options{Policy: route.Cost, ColdProbes: 2, Exploration: -1, Band: -1, Seed: 1})
		var firsts, why []string
		for range 8 {
			plan := mustPick(t, p, route.Request{Model: "m"}, t0)
			firsts = append(firsts, plan.Deployments[0].Key().Provider)
			why = append(why, plan.Deployments[0].Reason)
		}
		equal(t, firsts, []string{"c", "c", "a", "a", "b", "b", "c", "c"}, "first places")
		equal(t, why[5:], []string{route.ReasonColdProbe, route.ReasonBest, route.ReasonBest}, "reasons once budgets are spent")
		equal(t, p.Stats().ColdProbes, uint64(6), "ColdProbes")
	})

	t.Run("warm before cold; cold ones by cost behind them", func(t *testing.T) {
		ds := append([]route.Deployment{priced("w", 9, 9, 1)}, cold...)
		src := newSource()
		src.set(ds[0].Key(), warm(5, 1)) // slow and dear, but measured
		p := newPicker(t, ds, src, route.Options{Policy: route.Cost, ColdProbes: -1, Exploration: -1, Band: -1, Seed: 1})
		plan := mustPick(t, p, route.Request{Model: "m"}, t0)
		equal(t, order(plan), []string{"w/us/m", "c/us/m", "a/us/m", "b/us/m"}, "order")
		equal(t, reasons(plan), []string{route.ReasonBest, route.ReasonCold, route.ReasonCold, route.ReasonCold}, "reasons")
	})

	t.Run("cold is never 0 ms under a latency SLO", func(t *testing.T) {
		ds := append([]route.Deployment{priced("w", 9, 9, 1)}, cold...)
		src := newSource()
		src.set(ds[0].Key(), warm(0.2, 100))
		p := newPicker(t, ds, src, route.Options{Policy: route.Latency, ColdProbes: -1, Exploration: -1, Band: -1, Seed: 1,
			SLO: route.SLO{MaxTTFT: time.Second}})
		plan := mustPick(t, p, route.Request{Model: "m"}, t0)
		equal(t, plan.Deployments[0].Key().Provider, "w", "measured deployment first")
		for _, c := range plan.Deployments[1:] {
			equal(t, c.Reason, route.ReasonCold, c.Key().String()+" reason")
		}
	})
}

// The per-sample spread is TPS's p95/p50 (its fast tail, the noise) when
// TPS has one, so that slow periods, which lift TTFT's p95 (its slow tail),
// do not read as noise; TTFT's only when TPS has none.
func TestNoteSpread(t *testing.T) {
	e := registry.Estimate{TPSP50: 1000, TPSP95: 1200, TTFTP50: 0.2, TTFTP95: 1}
	var it item
	it.note(&e)
	if it.spread != 1.2 {
		t.Errorf("spread %v, want TPS's 1.2", it.spread)
	}
	e.TPSP50, e.TPSP95 = 0, 0
	it.note(&e)
	if it.spread != 5 {
		t.Errorf("spread %v without TPS figures, want TTFT's 5", it.spread)
	}
	e.TTFTP95 = 0
	it.note(&e)
	if it.spread != 0 {
		t.Errorf("spread %v without either, want 0 (unknown)", it.spread)
	}
}

// TestRememberNotOneSample: one sample is not a level. A deployment's
// first sample, however fast, is not remembered as its best (in cuts-33 of
// the random fleets a lucky first sample made a deployment 20% behind the
// leader a contender, explored a dozen times over three minutes); its
// level on two samples is, and so is one sample beside a prior (worth
// priorSamples).
func TestRememberNotOneSample(t *testing.T) {
	tests := []struct {
		name    string
		samples int64
		prior   float64
		kept    bool
	}{
		{"one_sample", 1, 0, false},
		{"two_samples", 2, 0, true},
		{"one_sample_and_a_prior", 1, priorSamples, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var m memo
			var rising atomic.Int64
			it := item{newest: t0.UnixNano(), prior: tt.prior}
			it.exp.TPS, it.exp.TPSOK, it.exp.TTFT, it.exp.TTFTOK, it.exp.Samples = 740, true, 0.5, true, tt.samples
			m.remember(&it, t0.UnixNano(), &rising)
			tps, ttft := 0.0, 0.0
			if tt.kept {
				tps, ttft = 740, 0.5
			}
			equal(t, math.Float64frombits(m.bestTPS.Load()), tps, "TPS best")
			equal(t, math.Float64frombits(m.bestTTFT.Load()), ttft, "TTFT best")
		})
	}
}

// TestKeepBestRunningMean: the remembered best takes the first level whole,
// moves a peakSmoothing-th of the way to a better one (so one lucky
// estimate does not make it), ignores a worse one, and takes any level once
// the stored one is older than peakMemory.
func TestKeepBestRunningMean(t *testing.T) {
	var best atomic.Uint64
	var at atomic.Int64
	higher := func(v, b float64) (bool, bool) { return v > b, v >= 0.8*b }
	now := t0.UnixNano()
	got := func() float64 { return math.Float64frombits(best.Load()) }
	keepBest(&best, &at, 1000, now, higher)
	equal(t, got(), 1000.0, "the first level, whole")
	keepBest(&best, &at, 1800, now+1, higher)
	equal(t, got(), 1100.0, "an eighth of the way to a better one")
	for i := range 30 {
		keepBest(&best, &at, 1800, now+2+int64(i), higher)
	}
	if got() < 1750 || got() > 1800 {
		t.Errorf("after 30 more levels of 1800: %v, want most of the way", got())
	}
	b := got()
	keepBest(&best, &at, 500, now+40, higher)
	equal(t, got(), b, "a worse level leaves it")
	keepBest(&best, &at, 500, now+40+peakMemory+1, higher)
	equal(t, got(), 500.0, "older than peakMemory: replaced")
}

// TestLoadProbe: a leader with calls in flight whose load dependence is
// untested (registry.Estimate.LoadUntested) has about loadProbe of its
// picks sent to the next candidate, even one clearly worse, and only that
// one; an idle leader, a tested one, or exploration switched off, none.
func TestLoadProbe(t *testing.T) {
	const picks = 5000
	ds := []route.Deployment{dep("a", "us", "m"), dep("b", "us", "m"), dep("c", "us", "m")}
	for _, c := range []struct {
		name     string
		flight   int64
		untested bool
		opts     route.Options
		want     float64 // b's share of explorations
	}{
		{"untested, two in flight", 2, true, route.Options{Band: -1, Seed: 42}, loadProbe},
		{"untested, idle", 0, true, route.Options{Band: -1, Seed: 42}, 0},
		{"tested, two in flight", 2, false, route.Options{Band: -1, Seed: 42}, 0},
		{"untested, exploration off", 2, true, route.Options{Band: -1, Seed: 42, Exploration: -1}, 0},
		{"untested, a near runner-up unseen for 5 minutes: its own chance", 2, true, route.Options{Band: -1, Seed: 42}, -1},
	} {
		t.Run(c.name, func(t *testing.T) {
			src := newSource()
			lead := at(warm(0.2, 1000), t0)
			lead.InFlight, lead.LoadUntested = c.flight, c.untested
			src.set(ds[0].Key(), lead)
			src.set(ds[1].Key(), at(warm(0.2, 400), t0))
			if c.want < 0 { // b's own chance is above loadProbe
				src.set(ds[1].Key(), at(warm(0.2, 900), t0.Add(-5*time.Minute)))
			}
			src.set(ds[2].Key(), at(warm(0.2, 300), t0))
			p := newPicker(t, ds, src, c.opts)
			n := map[string]float64{}
			for range picks {
				plan := mustPick(t, p, route.Request{Model: "m"}, t0)
				if plan.Deployments[0].Reason == route.ReasonExplore {
					n[plan.Deployments[0].Key().Provider] += 1.0 / picks
				}
			}
			if c.want < 0 {
				if n["b"] < 0.15 {
					t.Errorf("explored %v, want b at its own chance, above %.2f", n, loadProbe)
				}
				return
			}
			if math.Abs(n["b"]-c.want) > 0.015 || n["c"] > 0 {
				t.Errorf("explored %v, want b %.2f and c never", n, c.want)
			}
		})
	}
	t.Run("through a Registry's handles", func(t *testing.T) {
		// The leader's Estimate says LoadUntested (it has no load samples)
		// and two calls are in flight: the Picker reads the flag through
		// the handle's published Estimate, and keeps it for the next picks.
		reg := registry.New(measure.Options{MinSamples: 1})
		reg.RecordAt(t0, ds[0].Key(), sample(100*time.Millisecond, 1000))
		reg.RecordAt(t0, ds[1].Key(), sample(100*time.Millisecond, 400))
		reg.RecordAt(t0, ds[2].Key(), sample(100*time.Millisecond, 300))
		est, _ := reg.Estimate(ds[0].Key())
		require.True(t, est.LoadUntested)
		end1, end2 := reg.BeginAt(t0, ds[0].Key()), reg.BeginAt(t0, ds[0].Key())
		p := newPicker(t, ds, reg, route.Options{Band: -1, Seed: 42})
		b := 0
		for range picks {
			plan := mustPick(t, p, route.Request{Model: "m"}, t0)
			if r := plan.Deployments[0]; r.Reason == route.ReasonExplore && r.Key().Provider == "b" {
				b++
			}
		}
		end1()
		end2()
		if d := float64(b)/picks - loadProbe; math.Abs(d) > 0.015 {
			t.Errorf("b explored in %.3f of picks, want %.2f", float64(b)/picks, loadProbe)
		}
	})
}
