package routetest

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"sync"
	"testing"

	"github.com/tpsroute/tpsroute/measure"

	"github.com/tpsroute/tpsroute/route"
)

// Property is a monotonicity a Scorer declares. Properties combine with |.
// A Property is a constant and safe for concurrent use.
type Property uint8

const (
	// PrefersTPS: a higher Expected.TPS never lowers the score, and an unknown
	// TPS (TPSOK false) never scores above a known one.
	PrefersTPS Property = 1 << iota
	// PrefersLowTTFT: a higher Expected.TTFT never raises the score, and an
	// unknown TTFT never scores above a known one.
	PrefersLowTTFT
	// PrefersLowPrice: a higher Price.Input or Price.Output never raises the score.
	PrefersLowPrice
)

// TestScorer runs every check of Check as a named subtest of t.
func TestScorer(t *testing.T, s route.Scorer, props ...Property) {
	t.Helper()
	var all Property
	for _, p := range props {
		all |= p
	}
	for _, c := range allChecks() {
		if c.prop != 0 && all&c.prop == 0 {
			continue
		}
		t.Run(c.name, func(t *testing.T) {
			if err := c.run(s); err != nil {
				t.Error(err)
			}
		})
	}
}

// Check runs every check against s and returns the violations joined with
// errors.Join, or nil. Checks for properties not in props are skipped.
func Check(s route.Scorer, props ...Property) error {
	var all Property
	for _, p := range props {
		all |= p
	}
	var errs []error
	for _, c := range allChecks() {
		if c.prop != 0 && all&c.prop == 0 {
			continue
		}
		if err := c.run(s); err != nil {
			errs = append(errs, fmt.Errorf("routetest: %s: %w", c.name, err))
		}
	}
	return errors.Join(errs...)
}

type check struct {
	name string
	prop Property
	run  func(route.Scorer) error
}

func allChecks() []check {
	return []check{
		{"NoNaN", 0, checkNoNaN},
		{"Deterministic", 0, checkDeterministic},
		{"RequestUnmodified", 0, checkUnmodified},
		{"Concurrent", 0, checkConcurrent},
		{"PrefersTPS", PrefersTPS, checkTPS},
		{"PrefersLowTTFT", PrefersLowTTFT, checkTTFT},
		{"PrefersLowPrice", PrefersLowPrice, checkPrice},
	}
}

// magnitudes spans what the picker's blend can produce: tiny to huge, all finite and positive.
func magnitudes() []float64 {
	return []float64{1e-300, 1e-9, 0.001, 0.05, 0.3, 1, 2.5, 40, 250, 1e4, 1e9, 1e300, math.MaxFloat64}
}

func expectations() []route.Expected {
	out := []route.Expected{
		{},                         // no statistics at all
		{Samples: 1},               // one sample, not enough
		{Samples: 3, ErrorRate: 1}, // only failures
	}
	for _, v := range magnitudes() {
		out = append(out,
			route.Expected{TTFT: v, TTFTOK: true, Samples: 1},
			route.Expected{TPS: v, TPSOK: true, Samples: 1},
			route.Expected{TTFT: v, TTFTOK: true, TPS: 100, TPSOK: true, Samples: 50, OK: true},
			route.Expected{TTFT: 0.5, TTFTOK: true, TPS: v, TPSOK: true, Samples: 50, OK: true, ErrorRate: 0.5},
			route.Expected{TTFT: v, TTFTOK: true, TPS: v, TPSOK: true, Samples: math.MaxInt64, OK: true},
		)
	}
	return out
}

func deployments() []route.Deployment {
	base := route.Deployment{Provider: "p", Region: "r", Model: "m", BaseURL: "http://127.0.0.1:1/v1"}
	out := []route.Deployment{base}
	for _, v := range magnitudes() {
		d := base
		d.Price = measure.Price{Input: v, CachedInput: v / 2, Output: v}
		d.Weight = v
		out = append(out, d)
	}
	w := base
	w.Model, w.Revision = "wild", "v1"
	return append(out, w)
}

func requests() []route.Request {
	var out []route.Request
	for _, p := range route.Policies() {
		for _, m := range []route.LatencyMetric{route.LatencyTTFT, route.LatencyCompletion} {
			for _, n := range []int64{1, 250, 1e9} {
				out = append(out, route.Request{Model: "m", Policy: p, LatencyMetric: m,
					ExpectedInputTokens: n, ExpectedOutputTokens: n, CacheKey: "k",
					Models: []string{"m", "n"}, Regions: []string{"r"}})
			}
		}
	}
	return out
}

// score calls s, turning a panic into an error.
func score(s route.Scorer, d route.Deployment, e route.Expected, r *route.Request) (v float64, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("the scorer panicked: %v (deployment %+v, expected %+v)", p, d, e)
		}
	}()
	return s.Score(d, e, r), nil
}

// each calls f for every combination of deployment, expectation and request,
// stopping at the first error.
func each(f func(d route.Deployment, e route.Expected, r route.Request) error) error {
	ds, es, rs := deployments(), expectations(), requests()
	for _, r := range rs {
		for _, d := range ds {
			for _, e := range es {
				if err := f(d, e, r); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

func checkNoNaN(s route.Scorer) error {
	return each(func(d route.Deployment, e route.Expected, r route.Request) error {
		v, err := score(s, d, e, &r)
		if err != nil {
			return err
		}
		if math.IsNaN(v) {
			return fmt.Errorf("NaN score for expected %+v, price %+v, request policy %v", e, d.Price, r.Policy)
		}
		return nil
	})
}

func checkDeterministic(s route.Scorer) error {
	ds, es, rs := deployments(), expectations(), requests()
	return each(func(d route.Deployment, e route.Expected, r route.Request) error {
		a, err := score(s, d, e, &r)
		if err != nil {
			return err
		}
		// Score something else in between, then the same input again.
		if _, err := score(s, ds[len(ds)/2], es[len(es)/2], &rs[0]); err != nil {
			return err
		}
		b, err := score(s, d, e, &r)
		if err != nil {
			return err
		}
		if !same(a, b) {
			return fmt.Errorf("same input scored %v then %v (expected %+v)", a, b, e)
		}
		return nil
	})
}

func checkUnmodified(s route.Scorer) error {
	return each(func(d route.Deployment, e route.Expected, r route.Request) error {
		orig := r
		orig.Models = append([]string(nil), r.Models...)
		orig.Regions = append([]string(nil), r.Regions...)
		if _, err := score(s, d, e, &r); err != nil {
			return err
		}
		if !reflect.DeepEqual(orig, r) {
			return fmt.Errorf("the scorer modified the request: %+v became %+v", orig, r)
		}
		return nil
	})
}

func checkConcurrent(s route.Scorer) error {
	ds, es := deployments(), expectations()
	r := requests()[4]
	want := make([]float64, len(es))
	for i, e := range es {
		v, err := score(s, ds[1], e, &r)
		if err != nil {
			return err
		}
		want[i] = v
	}
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for g := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := requests()[4]
			for range 20 {
				for i, e := range es {
					v, err := score(s, ds[1], e, &r)
					if err == nil && !same(v, want[i]) {
						err = fmt.Errorf("concurrent call scored %v, sequential %v (expected %+v)", v, want[i], e)
					}
					if err != nil {
						errs[g] = err
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// monotone checks that score(vary(x)) moves in direction dir (+1 non-decreasing,
// -1 non-increasing) as x grows over magnitudes, and that unknown scores no
// higher than the worst known value.
func monotone(s route.Scorer, what string, dir float64, vary func(d *route.Deployment, e *route.Expected, x float64), unknown func(d *route.Deployment, e *route.Expected)) error {
	base := route.Expected{TTFT: 0.5, TTFTOK: true, TPS: 100, TPSOK: true, Samples: 50, OK: true}
	for _, r := range requests() {
		for _, d0 := range deployments()[:3] {
			prev, first := 0.0, true
			worst := math.Inf(1)
			for _, x := range magnitudes() {
				d, e := d0, base
				vary(&d, &e, x)
				v, err := score(s, d, e, &r)
				if err != nil {
					return err
				}
				if !first && (v-prev)*dir < 0 {
					return fmt.Errorf("score is not monotone in %s: %v at %g after %v (policy %v, metric %v, tokens %d)",
						what, v, x, prev, r.Policy, r.LatencyMetric, r.ExpectedOutputTokens)
				}
				prev, first = v, false
				worst = min(worst, v)
			}
			if unknown == nil {
				continue
			}
			d, e := d0, base
			unknown(&d, &e)
			v, err := score(s, d, e, &r)
			if err != nil {
				return err
			}
			if v > worst {
				return fmt.Errorf("an unknown %s scored %v, above the worst known %v (policy %v)", what, v, worst, r.Policy)
			}
		}
	}
	return nil
}

func checkTPS(s route.Scorer) error {
	return monotone(s, "TPS", +1,
		func(_ *route.Deployment, e *route.Expected, x float64) { e.TPS = x },
		func(_ *route.Deployment, e *route.Expected) { e.TPS, e.TPSOK = 0, false })
}

func checkTTFT(s route.Scorer) error {
	return monotone(s, "TTFT", -1,
		func(_ *route.Deployment, e *route.Expected, x float64) { e.TTFT = x },
		func(_ *route.Deployment, e *route.Expected) { e.TTFT, e.TTFTOK = 0, false })
}

func checkPrice(s route.Scorer) error {
	if err := monotone(s, "Price.Output", -1,
		func(d *route.Deployment, _ *route.Expected, x float64) { d.Price.Output = x }, nil); err != nil {
		return err
	}
	return monotone(s, "Price.Input", -1,
		func(d *route.Deployment, _ *route.Expected, x float64) { d.Price.Input = x }, nil)
}

func same(a, b float64) bool { return a == b || (math.IsNaN(a) && math.IsNaN(b)) }
