package routetest_test

import (
	"math"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/tpsroute/tpsroute/route"
	"github.com/tpsroute/tpsroute/route/routetest"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestBuiltinPolicies(t *testing.T) {
	t.Run("throughput", func(t *testing.T) { routetest.TestScorer(t, route.Throughput, routetest.PrefersTPS) })
	t.Run("latency", func(t *testing.T) {
		routetest.TestScorer(t, route.Latency, routetest.PrefersLowTTFT, routetest.PrefersTPS)
	})
	t.Run("cost", func(t *testing.T) { routetest.TestScorer(t, route.Cost, routetest.PrefersLowPrice) })
}

// Broken scorers: each must be caught by the named check.

type nanScorer struct{}

func (nanScorer) Score(_ route.Deployment, e route.Expected, _ *route.Request) float64 {
	return e.TTFT / e.TPS // 0/0 for a cold deployment
}

type statefulScorer struct{ n atomic.Int64 }

func (s *statefulScorer) Score(route.Deployment, route.Expected, *route.Request) float64 {
	return float64(s.n.Add(1))
}

type mutatingScorer struct{}

func (mutatingScorer) Score(_ route.Deployment, e route.Expected, r *route.Request) float64 {
	r.ExpectedOutputTokens = 7
	return e.TPS
}

type panickingScorer struct{}

func (panickingScorer) Score(d route.Deployment, _ route.Expected, _ *route.Request) float64 {
	if d.Revision != "" {
		panic("unexpected revision")
	}
	return 1
}

type coldIsFast struct{}

func (coldIsFast) Score(_ route.Deployment, e route.Expected, _ *route.Request) float64 {
	return -e.TTFT // an unknown TTFT (0) looks fastest
}

type slowIsGood struct{}

func (slowIsGood) Score(_ route.Deployment, e route.Expected, _ *route.Request) float64 {
	if !e.TPSOK {
		return -math.MaxFloat64
	}
	return -e.TPS
}

type pricey struct{}

func (pricey) Score(d route.Deployment, _ route.Expected, _ *route.Request) float64 {
	return d.Price.Output
}

func TestCheckCatchesBrokenScorers(t *testing.T) {
	tests := []struct {
		name  string
		s     route.Scorer
		props []routetest.Property
		want  string
	}{
		{"NaN", nanScorer{}, nil, "NoNaN"},
		{"stateful", &statefulScorer{}, nil, "Deterministic"},
		{"mutates request", mutatingScorer{}, nil, "RequestUnmodified"},
		{"panics", panickingScorer{}, nil, "scorer panicked"},
		{"cold scored as fast", coldIsFast{}, []routetest.Property{routetest.PrefersLowTTFT}, "unknown TTFT"},
		{"not monotone in TPS", slowIsGood{}, []routetest.Property{routetest.PrefersTPS}, "not monotone in TPS"},
		{"not monotone in price", pricey{}, []routetest.Property{routetest.PrefersLowPrice}, "not monotone in Price.Output"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := routetest.Check(tt.s, tt.props...)
			if err == nil {
				t.Fatal("Check() = nil, want an error")
			}
			if !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "routetest: ") {
				t.Errorf("Check() = %v, want it to mention %q", err, tt.want)
			}
		})
	}
	t.Run("properties not declared are not checked", func(t *testing.T) {
		if err := routetest.Check(pricey{}); err != nil {
			t.Errorf("Check(pricey) = %v, want nil", err)
		}
	})
}
