package sim

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The classes of the generator's space (Space.Class): each is a sub-space
// that stresses one way a fleet changes or misbehaves, on top of the common
// draws (Generate).
const (
	// ClassDrift: the leader slows gradually (Drift), from 1.3 to 2.5 times
	// the runner-up's speed to about half of it over the run.
	ClassDrift = "drift"
	// ClassBatching: two or three deployments, the fastest batching live
	// (LoadK 1 to 4, Scenario.Live), under 8 to 32 closed-loop callers.
	ClassBatching = "batching"
	// ClassWidth: 8 to 16 deployments from cold, one good (700 to 1200
	// tok/s) and the others at 100 tok/s to 45% of it, over 400 calls.
	ClassWidth = "width"
	// ClassSteps: one or two step changes of speed or TTFT, or an outage
	// (503), each recovering or not.
	ClassSteps = "steps"
	// ClassTails: heavy-tailed TTFT (TTFTPareto) and periodic slowdowns
	// (Noisy).
	ClassTails = "tails"
	// ClassLimits: concurrency limits answered with 429 and Retry-After
	// (Limit), and random 429s, under enough callers to reach them.
	ClassLimits = "limits"
	// ClassCuts: streams cut mid-way (Errors.Cut), resets and 500s on one
	// to three deployments, the fastest often among them.
	ClassCuts = "cuts"
)

// Classes returns the generator's classes, sorted.
func Classes() []string {
	return []string{ClassBatching, ClassCuts, ClassDrift, ClassLimits, ClassSteps, ClassTails, ClassWidth}
}

// Space is the part of the generator's space Generate draws from. The zero
// Space draws each fleet's class uniformly from Classes and aims at 100
// calls a fleet (400 for ClassWidth). It is a plain value.
type Space struct {
	// Class restricts the draw to one class; empty draws one per fleet.
	Class string
	// Calls is about how many calls a fleet's workload sends (the duration
	// is set from the expected call time); 0 means 100, and ClassWidth
	// always sends about 400.
	Calls int
}

// GenerateError is a Space that Generate cannot draw from.
type GenerateError struct {
	Class string
}

// Error returns "sim: generate: unknown class ...".
func (e *GenerateError) Error() string {
	return "sim: generate: unknown class " + strconv.Quote(e.Class) + " (have " + strings.Join(Classes(), ", ") + ")"
}

// Generate draws a random fleet and workload from sp, reproducibly: the same
// seed and Space give the same Scenario. Every fleet has, before its class's
// features:
//
//   - 2 to 16 deployments (2 + 15·u·v for uniform u and v: half the fleets
//     have at most 4; a class may narrow it), base TPS log-uniform in
//     100–1500 tok/s, TTFT log-uniform in 0.1–1.2 s, log-normal per-call
//     noise of spread 0–0.3;
//   - with probability 0.3, prompt-size dependence (ContextK 2k–30k tokens,
//     PrefillTPS 2k–50k tok/s) and prompts of two sizes, 100–400 and
//     600–2000 words;
//   - answers of one to three lengths in 50–400 tokens;
//   - a closed loop of 1 to 32 callers (log-uniform) or an open loop of
//     0.5 to 10 calls/s, even or Poisson, each with probability 1/2;
//   - a duration that gives about sp.Calls calls, and at least 20 a
//     deployment, at the deployments' mean call time, between 5 s and 1 h.
//
// The scenario is Live (speeds evaluated chunk by chunk), has the
// throughput objective, no prices and no priors, and is named
// "CLASS-SEED"; its Seed is seed.
func Generate(seed uint64, sp Space) (*Scenario, error) {
	class := sp.Class
	r := rand.New(rand.NewPCG(mix(seed), 0x6e6e))
	if class == "" {
		cs := Classes()
		class = cs[r.IntN(len(cs))]
	}
	if !slices.Contains(Classes(), class) {
		return nil, &GenerateError{Class: class}
	}
	calls := sp.Calls
	if calls <= 0 {
		calls = 100
	}
	g := &gen{r: r}
	n := 2 + int(15*r.Float64()*r.Float64()) // 2 to 16, mostly few
	switch class {
	case ClassBatching:
		n = 2 + r.IntN(2)
	case ClassWidth:
		n = 8 + r.IntN(9)
		calls = 400
	}
	calls = max(calls, 20*n) // a wide fleet's cold start is not the whole run
	sc := &Scenario{Name: class + "-" + strconv.FormatUint(seed, 10), Class: class, Seed: seed, Live: true,
		Description: "drawn by sim.Generate from the " + class + " class"}
	for i := range n {
		sc.Deployments = append(sc.Deployments, Deployment{
			Provider: "p" + strconv.Itoa(i),
			TPS:      math.Round(g.logU(100, 1500)),
			TTFT:     Duration(time.Duration(g.logU(0.1, 1.2) * float64(time.Second)).Round(time.Millisecond)),
			Sigma:    math.Round(r.Float64()*0.3*100) / 100,
		})
	}
	w := &sc.Workload
	w.Shuffle, w.Keyed = true, true
	for range 1 + r.IntN(3) {
		w.OutputTokens = append(w.OutputTokens, 50+r.IntN(351))
	}
	if r.Float64() < 0.3 {
		w.InputTokens = []int{100 + r.IntN(301), 600 + r.IntN(1401)}
		for i := range sc.Deployments {
			d := &sc.Deployments[i]
			d.ContextK = math.Round(g.logU(2000, 30000))
			d.PrefillTPS = math.Round(g.logU(2000, 50000))
		}
	}
	if r.IntN(2) == 0 {
		w.Concurrency = int(math.Round(g.logU(1, 32)))
	} else {
		w.Rate = math.Round(g.logU(0.5, 10)*10) / 10
		w.Poisson = r.IntN(2) == 0
	}
	g.class(sc, class)
	// The duration: calls at the mean call time of the deployments.
	var per float64
	outMean := 0.0
	for _, o := range w.OutputTokens {
		outMean += float64(o) / float64(len(w.OutputTokens))
	}
	for _, d := range sc.Deployments {
		per += (time.Duration(d.TTFT).Seconds() + outMean/d.TPS) / float64(len(sc.Deployments))
	}
	secs := float64(calls) / w.Rate
	if w.Concurrency > 0 {
		secs = float64(calls) * per / float64(w.Concurrency)
	}
	secs = min(max(secs, 5), 3600)
	sc.Duration = Duration(time.Duration(secs * float64(time.Second)).Round(time.Second))
	g.timed(sc, class, time.Duration(sc.Duration))
	if err := sc.Validate(); err != nil {
		return nil, fmt.Errorf("sim: generate: seed %d: %w", seed, err)
	}
	return sc, nil
}

// mix is splitmix64's finaliser: neighbouring seeds give unrelated
// streams (PCG's first draws from seeds 1, 2, 3 are alike).
func mix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return x ^ x>>31
}

// gen holds a draw's random source.
type gen struct{ r *rand.Rand }

// logU draws log-uniformly from [lo, hi].
func (g *gen) logU(lo, hi float64) float64 {
	return lo * math.Exp(g.r.Float64()*math.Log(hi/lo))
}

// u draws uniformly from [lo, hi).
func (g *gen) u(lo, hi float64) float64 { return lo + g.r.Float64()*(hi-lo) }

// leader returns the index of the fastest deployment and of the runner-up.
func leader(sc *Scenario) (best, second int) {
	best, second = -1, -1
	for i, d := range sc.Deployments {
		switch {
		case best < 0 || d.TPS > sc.Deployments[best].TPS:
			best, second = i, best
		case second < 0 || d.TPS > sc.Deployments[second].TPS:
			second = i
		}
	}
	return best, second
}

// class adds a class's features that do not depend on the duration.
func (g *gen) class(sc *Scenario, class string) {
	r, ds, w := g.r, sc.Deployments, &sc.Workload
	switch class {
	case ClassDrift:
		b, s := leader(sc)
		ds[b].TPS = math.Round(ds[s].TPS * g.u(1.3, 2.5))
	case ClassBatching:
		b, _ := leader(sc)
		ds[b].TPS = math.Round(g.u(1.5, 3) * ds[b].TPS)
		ds[b].LoadK = math.Round(g.u(1, 4)*10) / 10
		for i := range ds {
			if i != b && r.IntN(2) == 0 {
				ds[i].LoadK = math.Round(g.u(8, 32))
			}
		}
		w.Rate, w.Poisson = 0, false
		w.Concurrency = 8 + r.IntN(25)
	case ClassWidth:
		b := r.IntN(len(ds))
		ds[b].TPS = math.Round(g.u(700, 1200))
		for i := range ds {
			if i != b {
				ds[i].TPS = math.Round(g.u(100, 0.45*ds[b].TPS))
			}
			ds[i].Sigma = math.Round(r.Float64()*0.2*100) / 100
		}
		w.Concurrency = 0
		w.Rate = math.Round(g.u(1, 5)*10) / 10
	case ClassTails:
		for i := range ds {
			if r.IntN(2) == 0 {
				ds[i].TTFTPareto = math.Round(g.u(1.2, 2.5)*10) / 10
			}
		}
	case ClassLimits:
		b, _ := leader(sc)
		for i := range ds {
			if i == b || r.IntN(3) == 0 {
				ds[i].Limit = 1 + r.IntN(4)
				ds[i].Errors.RetryAfter = Duration(time.Duration(1+r.IntN(5)) * time.Second)
			}
			if r.IntN(4) == 0 {
				ds[i].Errors.RateLimit = math.Round(g.u(0.02, 0.2)*100) / 100
			}
		}
		if w.Concurrency > 0 {
			w.Concurrency = max(w.Concurrency, 4+r.IntN(29))
		}
	case ClassCuts:
		b, _ := leader(sc)
		for k := range 1 + r.IntN(3) {
			i := r.IntN(len(ds))
			if k == 0 && r.IntN(2) == 0 {
				i = b
			}
			e := &ds[i].Errors
			e.Cut = math.Round(g.u(0.05, 0.3)*100) / 100
			if r.IntN(3) == 0 {
				e.Reset = math.Round(g.u(0.01, 0.1)*100) / 100
			}
			if r.IntN(3) == 0 {
				e.ServerError = math.Round(g.u(0.01, 0.1)*100) / 100
			}
		}
	}
}

// timed adds a class's features placed in time, once the duration is known.
func (g *gen) timed(sc *Scenario, class string, total time.Duration) {
	r, ds := g.r, sc.Deployments
	at := func(lo, hi float64) Duration {
		return Duration(time.Duration(g.u(lo, hi) * float64(total)).Round(time.Second))
	}
	switch class {
	case ClassDrift:
		b, s := leader(sc)
		from := at(0.1, 0.4)
		// Half the runner-up's speed at about 0.8 of the run, then held.
		left := (0.8*float64(total) - float64(from)) / float64(time.Second)
		ds[b].Drift = Drift{From: from, Rate: math.Log(0.5*ds[s].TPS/ds[b].TPS) / left,
			Floor: 0.4 * ds[s].TPS / ds[b].TPS}
	case ClassSteps:
		b, _ := leader(sc)
		for range 1 + r.IntN(2) {
			i := r.IntN(len(ds))
			if r.Float64() < 0.6 {
				i = b
			}
			if len(ds[i].Phases) > 0 {
				continue
			}
			ph := Phase{From: at(0.2, 0.6)}
			switch r.IntN(3) {
			case 0:
				ph.TPSFactor = math.Round(g.u(0.15, 0.5)*100) / 100
			case 1:
				ph.TTFTFactor = math.Round(g.u(3, 6)*10) / 10
				ph.TPSFactor = math.Round(g.u(0.5, 0.9)*100) / 100
			default:
				ph.Status = 503
			}
			ds[i].Phases = append(ds[i].Phases, ph)
			if r.IntN(2) == 0 {
				ds[i].Phases = append(ds[i].Phases, Phase{From: ph.From + at(0.1, 0.3)})
			}
		}
	case ClassTails:
		for range 1 + r.IntN(3) {
			i := r.IntN(len(ds))
			ds[i].Noisy = Noisy{Every: at(0.05, 0.3), Length: at(0.02, 0.08), Depth: math.Round(g.u(0.2, 0.5)*100) / 100}
			if ds[i].Noisy.Length <= 0 {
				ds[i].Noisy.Length = Duration(time.Second)
			}
			if ds[i].Noisy.Every <= 0 {
				ds[i].Noisy.Every = Duration(time.Second)
			}
		}
	}
}
