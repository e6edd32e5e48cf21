package picker

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/tpsroute/tpsroute/internal/registry"
	"github.com/tpsroute/tpsroute/measure"
	"github.com/tpsroute/tpsroute/route"
	"github.com/tpsroute/tpsroute/tps"
)

// TestRecoveredLeaderRegainsLead is issue 16's recovery target on the real
// Registry: a leader whose TPS fell 3× for two minutes, and so lost its
// traffic, is re-measured by exploration and leads again within 30 s of
// recovering at 1 call/s and within 10 s at 10 calls/s; while it is slow it
// gets a small share.
func TestRecoveredLeaderRegainsLead(t *testing.T) {
	for _, tc := range []struct {
		name   string
		every  time.Duration
		within time.Duration
	}{
		{"1 call/s", time.Second, 30 * time.Second},
		{"10 calls/s", 100 * time.Millisecond, 10 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reg := registry.New(measure.Options{})
			ds := []route.Deployment{
				{Provider: "lead", Region: "us", Model: "m", BaseURL: "http://lead"},
				{Provider: "next", Region: "us", Model: "m", BaseURL: "http://next"},
			}
			p, err := New(ds, reg, nil, route.Options{Seed: 7})
			if err != nil {
				t.Fatal(err)
			}
			ranked, err := New(ds, reg, nil, route.Options{Exploration: route.Off, Band: route.Off})
			if err != nil {
				t.Fatal(err)
			}
			rng := rand.New(rand.NewPCG(3, 4))
			start := time.Unix(1_700_000_000, 0)
			now := start
			speed := func(i int) float64 {
				el := now.Sub(start)
				if i == 0 && el >= 2*time.Minute && el < 4*time.Minute {
					return 300 // a third of next's... of its own 1500, below next's 600
				}
				return []float64{1500, 600}[i]
			}
			step := func() int {
				now = now.Add(tc.every)
				plan, err := p.PickAt(route.Request{Model: "m"}, now)
				if err != nil {
					t.Fatal(err)
				}
				i := 0
				if plan.Deployments[0].Key().Provider == "next" {
					i = 1
				}
				noise := math.Exp(0.1 * rng.NormFloat64())
				reg.RecordAt(now, ds[i].Key(), tps.Sample{TTFT: 200 * time.Millisecond, TPS: speed(i) * noise, TPSOK: true, OutputTokens: 200})
				return i
			}
			slowCalls, slowTotal := 0, 0
			for now.Sub(start) < 4*time.Minute {
				i := step()
				if el := now.Sub(start); el >= 2*time.Minute+10*time.Second {
					slowTotal++
					if i == 0 {
						slowCalls++
					}
				}
			}
			if share := float64(slowCalls) / float64(slowTotal); share > 0.15 {
				t.Errorf("the slow leader's share while slow = %.3f, want ≤ 0.15", share)
			}
			recovered := now
			for now.Sub(recovered) < 2*tc.within {
				if step() == 0 && testing.Verbose() {
					e, _ := reg.Estimate(ds[0].Key())
					t.Logf("re-measured %v after recovering: TPS p50 %.0f", now.Sub(recovered), e.TPSP50)
				}
				plan, _ := ranked.PickAt(route.Request{Model: "m"}, now)
				if plan.Deployments[0].Key().Provider == "lead" {
					t.Logf("leads again %v after recovering (slow share %.3f)", now.Sub(recovered), float64(slowCalls)/float64(slowTotal))
					if d := now.Sub(recovered); d > tc.within {
						t.Errorf("regained the lead after %v, want within %v", d, tc.within)
					}
					return
				}
			}
			t.Errorf("did not regain the lead within %v", 2*tc.within)
		})
	}
}

// A deployment measured before stays warm when its window empties: it keeps
// the level it last showed and is not probed as new.
func TestStaleWindowStaysWarm(t *testing.T) {
	reg := registry.New(measure.Options{Window: measure.WindowOptions{Length: time.Minute}})
	ds := []route.Deployment{dep("a", "us", "m"), dep("b", "us", "m")}
	p := newPicker(t, ds, reg, strictOrder())
	now := t0
	for i := range 20 {
		now = now.Add(time.Second)
		reg.RecordAt(now, ds[i%2].Key(), tps.Sample{TTFT: 100 * time.Millisecond, TPS: []float64{100, 500}[i%2], TPSOK: true})
	}
	mustPick(t, p, route.Request{Model: "m"}, now)
	for range 30 { // b alone for three minutes: a's window empties
		now = now.Add(6 * time.Second)
		reg.RecordAt(now, ds[1].Key(), tps.Sample{TTFT: 100 * time.Millisecond, TPS: 500, TPSOK: true})
	}
	reg.PruneAt(now) // republishes a's estimate: its window is empty
	if e, _ := reg.Estimate(ds[0].Key()); e.Samples != 0 || e.TPSEWMA == 0 {
		t.Fatalf("a's estimate %+v: want an empty window and its last level", e)
	}
	plan := mustPick(t, p, route.Request{Model: "m"}, now)
	equal(t, order(plan), []string{"b/us/m", "a/us/m"}, "order")
	a := plan.Deployments[1]
	equal(t, a.Reason, route.ReasonRanked, "a's reason")
	equal(t, a.Expected.OK, true, "a's Expected.OK")
	if math.Abs(a.Expected.TPS-100) > 5 {
		t.Errorf("a's TPS %v, want its last level 100", a.Expected.TPS)
	}
}

// One slow first token over MaxTTFT does not demote a deployment: the SLO
// reads the window's percentile, which the peak-sensitive EWMA's jump does
// not move.
func TestSLOOutlierDoesNotDemote(t *testing.T) {
	ds := []route.Deployment{dep("a", "us", "m"), dep("b", "us", "m")}
	ds[0].Price, ds[1].Price = measure.Price{Output: 1}, measure.Price{Output: 2}
	src := newSource()
	e := warm(0.2, 500)
	e.TTFTEWMA = 0.3 // one 300 ms first token
	src.set(ds[0].Key(), e)
	src.set(ds[1].Key(), warm(0.2, 500))
	p := newPicker(t, ds, src, route.Options{Policy: route.Cost, SLO: route.SLO{MaxTTFT: 250 * time.Millisecond}, Exploration: route.Off, Band: route.Off, Seed: 1})
	plan := mustPick(t, p, route.Request{Model: "m"}, t0)
	equal(t, order(plan), []string{"a/us/m", "b/us/m"}, "order")
	equal(t, plan.Deployments[0].Violations, route.Violation(0), "violations")
	equal(t, plan.Deployments[0].Expected.TTFT, 0.3, "the blended TTFT still shows the outlier")
}

// When every deployment violates the SLO the closest to meeting it leads,
// whatever the policy prefers, and exploration still runs.
func TestAllViolateClosestLeads(t *testing.T) {
	ds := []route.Deployment{dep("cheap", "us", "m"), dep("mid", "us", "m"), dep("dear", "us", "m")}
	for i := range ds {
		ds[i].Price = measure.Price{Output: float64(i + 1)}
	}
	src := newSource()
	src.set(ds[0].Key(), at(warm(0.2, 300), t0.Add(-time.Minute)))
	src.set(ds[1].Key(), at(warm(0.2, 900), t0.Add(-time.Minute)))
	src.set(ds[2].Key(), at(warm(0.2, 700), t0))
	p := newPicker(t, ds, src, route.Options{Policy: route.Cost, SLO: route.SLO{MinTPS: 1000}, Band: route.Off, Seed: 1})
	n := map[string]int{}
	for range 2000 {
		plan := mustPick(t, p, route.Request{Model: "m"}, t0)
		n[plan.Deployments[0].Key().Provider+"/"+plan.Deployments[0].Reason]++
	}
	if n["mid/"+route.ReasonSLO] < 1500 {
		t.Errorf("first places %v: want mid, closest to 1000 tok/s, to lead", n)
	}
	if n["dear/"+route.ReasonExplore] == 0 {
		t.Errorf("first places %v: want exploration of dear, the next closest", n)
	}
	if n["cheap/"+route.ReasonExplore] > 20 {
		t.Errorf("first places %v: cheap, the farthest, explored too often", n)
	}
}

// A prior (Deployment.Expected) ranks a new deployment from its first pick,
// worth three samples, and fades as measurements arrive.
func TestPriorRanksNewDeployment(t *testing.T) {
	reg := registry.New(measure.Options{})
	ds := []route.Deployment{dep("plain", "us", "m"), dep("known", "us", "m")}
	ds[1].Expected = route.Prior{TPS: 1000, TTFT: 300 * time.Millisecond}
	p := newPicker(t, ds, reg, route.Options{Exploration: route.Off, Band: route.Off, ColdProbes: route.Off, Seed: 1})
	plan := mustPick(t, p, route.Request{Model: "m"}, t0)
	equal(t, order(plan), []string{"known/us/m", "plain/us/m"}, "order with no samples")
	known := plan.Deployments[0]
	equal(t, known.Reason, route.ReasonBest, "known's reason")
	equal(t, [3]any{known.Expected.OK, known.Expected.TPS, known.Expected.TTFT}, [3]any{true, 1000.0, 0.3}, "known's figures: the prior")
	now := t0
	for range 30 { // measured at 500 tok/s, 100 ms
		now = now.Add(time.Second)
		reg.RecordAt(now, ds[1].Key(), tps.Sample{TTFT: 100 * time.Millisecond, TPS: 500, TPSOK: true})
	}
	e := mustPick(t, p, route.Request{Model: "m"}, now).Deployments[0].Expected
	// exp((3 ln 1000 + 30 ln 500) / 33) = 532.
	if math.Abs(e.TPS-532) > 5 || e.TTFT > 0.12 {
		t.Errorf("after 30 samples: TPS %.1f TTFT %.3f, want about 532 and about 0.11", e.TPS, e.TTFT)
	}
}

// A former leader whose newest sample began a change back toward its best
// (registry.Estimate.TPSPending) is re-measured by every pick that finds it
// with no call in flight, one confirming call at a time; a pending
// change that points only a little way back (noise) gets no such call, nor
// does a rise of a deployment at its best.
func TestPendingRecoveryConfirmedAtOnce(t *testing.T) {
	ds := []route.Deployment{dep("lead", "us", "m"), dep("next", "us", "m")}
	src := newSource()
	p := newPicker(t, ds, src, route.Options{Seed: 1, Exploration: 1e-9, Band: route.Off})
	t0 := time.Unix(1_700_000_000, 0)
	kl, kn := ds[0].Key(), ds[1].Key()
	src.set(kn, at(warm(0.2, 600), t0))
	src.set(kl, at(warm(0.2, 1500), t0))
	first := func(now time.Time) string {
		return mustPick(t, p, route.Request{Model: "m"}, now).Deployments[0].Key().Provider
	}
	equal(t, first(t0), "lead", "the fast one leads")
	now := t0.Add(time.Second)
	src.set(kl, at(warm(0.2, 300), now))
	equal(t, first(now), "next", "slowed, it lost the lead")
	slow := func(pend float64, inFlight int64, now time.Time) registry.Estimate {
		e := at(warm(0.2, 300), now)
		e.TPSPending, e.InFlight = pend, inFlight
		return e
	}
	now = now.Add(time.Second)
	src.set(kl, slow(1400, 0, now))
	equal(t, first(now), "lead", "a recovery pending, no call in flight")
	src.set(kl, slow(1400, 1, now))
	equal(t, first(now), "next", "its confirming call is in flight")
	now = now.Add(time.Second)
	src.set(kl, slow(1450, 0, now))
	equal(t, first(now), "lead", "the next confirming call, once that one is back")
	now = now.Add(time.Second)
	src.set(kl, slow(400, 0, now))
	equal(t, first(now), "next", "noise: pending less than halfway back")
	// next is at its best: its pending rise is not a recovery to confirm.
	now = now.Add(time.Second)
	src.set(kl, at(warm(0.2, 1500), now))
	equal(t, first(now), "lead", "recovered")
	e := at(warm(0.2, 600), now)
	e.TPSPending = 1400
	src.set(kn, e)
	equal(t, first(now), "lead", "a rise of a deployment at its best")
}
