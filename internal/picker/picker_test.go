package picker

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/tpsroute/tpsroute/internal/registry"
	"github.com/tpsroute/tpsroute/measure"
	"github.com/tpsroute/tpsroute/route"
)

// fleet: three warm deployments of "llama" with distinct profiles.
//
//	fast:  ttft 0.80s, tps 300, $0.90/M out  -> best throughput, worst TTFT
//	snappy: ttft 0.10s, tps 50,  $0.60/M out -> best TTFT, slow generation
//	cheap: ttft 0.40s, tps 120, $0.20/M out  -> cheapest
func fleet() ([]route.Deployment, *fakeSource) {
	fast, snappy, cheap := dep("fast", "us", "llama"), dep("snappy", "us", "llama"), dep("cheap", "eu", "llama")
	fast.Price = measure.Price{Input: 0.5, Output: 0.9}
	snappy.Price = measure.Price{Input: 0.5, Output: 0.6}
	cheap.Price = measure.Price{Input: 0.1, Output: 0.2}
	src := newSource()
	src.set(fast.Key(), warm(0.8, 300))
	src.set(snappy.Key(), warm(0.1, 50))
	src.set(cheap.Key(), warm(0.4, 120))
	return []route.Deployment{fast, snappy, cheap}, src
}

func TestPolicyOrder(t *testing.T) {
	tests := []struct {
		name string
		opts route.Options
		req  route.Request
		want []string
	}{
		{"throughput default", route.Options{}, route.Request{Model: "llama"},
			[]string{"fast/us/llama", "cheap/eu/llama", "snappy/us/llama"}},
		{"latency ttft", route.Options{Policy: route.Latency}, route.Request{Model: "llama"},
			[]string{"snappy/us/llama", "cheap/eu/llama", "fast/us/llama"}},
		// completion with 1000 tokens: fast 0.8+3.33=4.1s, cheap 0.4+8.3=8.7s, snappy 0.1+20=20.1s
		{"latency completion", route.Options{Policy: route.Latency, LatencyMetric: route.LatencyCompletion}, route.Request{Model: "llama", ExpectedOutputTokens: 1000},
			[]string{"fast/us/llama", "cheap/eu/llama", "snappy/us/llama"}},
		{"latency completion per request", route.Options{Policy: route.Latency}, route.Request{Model: "llama", LatencyMetric: route.LatencyCompletion, ExpectedOutputTokens: 1000},
			[]string{"fast/us/llama", "cheap/eu/llama", "snappy/us/llama"}},
		// completion with 1 token: TTFT dominates
		{"latency completion short", route.Options{Policy: route.Latency, LatencyMetric: route.LatencyCompletion}, route.Request{Model: "llama", ExpectedOutputTokens: 1},
			[]string{"snappy/us/llama", "cheap/eu/llama", "fast/us/llama"}},
		{"cost", route.Options{Policy: route.Cost}, route.Request{Model: "llama"},
			[]string{"cheap/eu/llama", "snappy/us/llama", "fast/us/llama"}},
		{"request overrides policy", route.Options{Policy: route.Cost}, route.Request{Model: "llama", Policy: route.Latency},
			[]string{"snappy/us/llama", "cheap/eu/llama", "fast/us/llama"}},
		{"cost among slo-compliant", route.Options{Policy: route.Cost}, route.Request{Model: "llama", SLO: route.SLO{MinTPS: 200}},
			[]string{"fast/us/llama", "cheap/eu/llama", "snappy/us/llama"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ds, src := fleet()
			o := tt.opts
			o.Exploration, o.Band, o.Seed = -1, -1, 1
			p := newPicker(t, ds, src, o)
			plan := mustPick(t, p, tt.req, t0)
			equal(t, order(plan), tt.want, "order")
			equal(t, plan.Deployments[0].Reason, route.ReasonBest, "first reason")
			for _, c := range plan.Deployments[1:] {
				if c.Reason != route.ReasonRanked && c.Reason != route.ReasonSLO {
					t.Errorf("%s reason = %q", c.Key(), c.Reason)
				}
			}
		})
	}
}

func TestCostTiesGoToThroughput(t *testing.T) {
	a, b, c := dep("a", "", "m"), dep("b", "", "m"), dep("c", "", "m")
	for _, d := range []*route.Deployment{&a, &b, &c} {
		d.Price = measure.Price{Input: 1, Output: 2}
	}
	c.Price.Output = 3
	src := newSource()
	src.set(a.Key(), warm(0.2, 80))
	src.set(b.Key(), warm(0.2, 160))
	src.set(c.Key(), warm(0.2, 900))
	o := strictOrder()
	o.Policy = route.Cost
	p := newPicker(t, []route.Deployment{a, b, c}, src, o)
	plan := mustPick(t, p, route.Request{Model: "m"}, t0)
	equal(t, order(plan), []string{"b//m", "a//m", "c//m"}, "order")
	equal(t, plan.Deployments[0].Cost, (1000*1.0+250*2.0)/1e6, "expected cost")

	// With the default band, equal costs with different TPS still go to throughput.
	o.Band = 0
	p = newPicker(t, []route.Deployment{a, b, c}, src, o)
	for range 50 {
		equal(t, mustPick(t, p, route.Request{Model: "m"}, t0).Deployments[0].Key().Provider, "b", "first")
	}
}

func TestBlendIsPessimistic(t *testing.T) {
	tests := []struct {
		name       string
		e          registry.Estimate
		ok         bool
		ttftAt     route.Percentile
		tpsAt      route.Percentile
		ttft, tps  float64
		warm, tOK  bool
		tpsOK      bool
		errorRate  float64
		wantSample int64
	}{
		{"ewma shows degradation", registry.Estimate{TTFTP95: 0.5, TTFTEWMA: 2, TPSP50: 100, TPSEWMA: 20, Samples: 9, OK: true}, true, 0, 0, 2, 20, true, true, true, 0, 9},
		{"percentile more pessimistic", registry.Estimate{TTFTP95: 3, TTFTEWMA: 1, TPSP50: 10, TPSEWMA: 50, OK: true}, true, 0, 0, 3, 10, true, true, true, 0, 0},
		{"p50 ttft", registry.Estimate{TTFTP50: 0.3, TTFTP95: 3, TTFTEWMA: 0.2, TPSP50: 10, OK: true}, true, route.P50, 0, 0.3, 10, true, true, true, 0, 0},
		{"p95 tps", registry.Estimate{TTFTP95: 1, TPSP50: 10, TPSP95: 30, OK: true}, true, 0, route.P95, 1, 30, true, true, true, 0, 0},
		{"not ok", registry.Estimate{TTFTP95: 1, TPSP50: 10}, true, 0, 0, 1, 10, false, true, true, 0, 0},
		{"not found", registry.Estimate{}, false, 0, 0, 0, 0, false, false, false, 0, 0},
		{"NaN and Inf ignored", registry.Estimate{TTFTP95: nan(), TTFTEWMA: inf(), TPSP50: -1, TPSEWMA: nan(), ErrorRate: nan(), OK: true}, true, 0, 0, 0, 0, false, false, false, 0, 0},
		{"error rate clamped", registry.Estimate{TTFTP95: 1, ErrorRate: 7, Samples: -3, OK: true}, true, 0, 0, 1, 0, true, true, false, 1, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var x route.Expected
			rk.Blend(&x, &tt.e, tt.ok, tt.ttftAt, tt.tpsAt)
			equal(t, x.TTFT, tt.ttft, "TTFT")
			equal(t, x.TPS, tt.tps, "TPS")
			equal(t, x.OK, tt.warm, "OK")
			equal(t, x.TTFTOK, tt.tOK, "TTFTOK")
			equal(t, x.TPSOK, tt.tpsOK, "TPSOK")
			equal(t, x.ErrorRate, tt.errorRate, "ErrorRate")
			equal(t, x.Samples, tt.wantSample, "Samples")
		})
	}
}

func TestSLO(t *testing.T) {
	tests := []struct {
		name     string
		opts     route.SLO
		req      route.SLO
		want     []string
		excluded []string
		viol     map[string]route.Violation
		err      bool
	}{
		{"ttft demotes the fastest", route.SLO{}, route.SLO{MaxTTFT: 500 * time.Millisecond},
			[]string{"cheap/eu/llama", "snappy/us/llama", "fast/us/llama"}, nil,
			map[string]route.Violation{"fast/us/llama": route.ViolatesTTFT}, false},
		{"min tps", route.SLO{}, route.SLO{MinTPS: 100},
			[]string{"fast/us/llama", "cheap/eu/llama", "snappy/us/llama"}, nil,
			map[string]route.Violation{"snappy/us/llama": route.ViolatesTPS}, false},
		{"max price from options", route.SLO{MaxPrice: 0.7}, route.SLO{},
			[]string{"cheap/eu/llama", "snappy/us/llama", "fast/us/llama"}, nil,
			map[string]route.Violation{"fast/us/llama": route.ViolatesPrice}, false},
		{"request field overrides options", route.SLO{MaxPrice: 0.1}, route.SLO{MaxPrice: 0.7},
			[]string{"cheap/eu/llama", "snappy/us/llama", "fast/us/llama"}, nil,
			map[string]route.Violation{"fast/us/llama": route.ViolatesPrice}, false},
		{"strict drops", route.SLO{}, route.SLO{MaxTTFT: 500 * time.Millisecond, MinTPS: 100, Strict: true},
			[]string{"cheap/eu/llama"}, []string{"fast/us/llama", "snappy/us/llama"},
			map[string]route.Violation{"fast/us/llama": route.ViolatesTTFT, "snappy/us/llama": route.ViolatesTPS}, false},
		{"strict from options", route.SLO{Strict: true}, route.SLO{MinTPS: 100},
			[]string{"fast/us/llama", "cheap/eu/llama"}, []string{"snappy/us/llama"}, nil, false},
		{"strict drops everything", route.SLO{}, route.SLO{MinTPS: 1000, Strict: true},
			nil, []string{"fast/us/llama", "snappy/us/llama", "cheap/eu/llama"}, nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ds, src := fleet()
			o := strictOrder()
			o.SLO = tt.opts
			p := newPicker(t, ds, src, o)
			plan, err := p.PickAt(route.Request{Model: "llama", SLO: tt.req}, t0)
			if tt.err {
				if !errors.Is(err, route.ErrNoDeployment) {
					t.Fatalf("err = %v, want ErrNoDeployment", err)
				}
				containsAll(t, err.Error(), "excluded", route.ReasonStrictSLO)
			} else if err != nil {
				t.Fatal(err)
			}
			if tt.want != nil {
				equal(t, order(plan), tt.want, "order")
			}
			var ex []string
			for _, c := range plan.Excluded {
				ex = append(ex, c.Key().String())
				equal(t, c.Reason, route.ReasonStrictSLO, "excluded reason")
			}
			equal(t, ex, tt.excluded, "excluded")
			for _, c := range append(plan.Deployments, plan.Excluded...) {
				if v, ok := tt.viol[c.Key().String()]; ok {
					equal(t, c.Violations, v, c.Key().String()+" violations")
					if c.Reason != route.ReasonStrictSLO {
						equal(t, c.Reason, route.ReasonSLO, "reason")
					}
					equal(t, c.Demoted, true, "Demoted")
				}
			}
		})
	}
}

func TestSLOErrorRate(t *testing.T) {
	ds, src := fleet()
	e := warm(0.8, 300)
	e.ErrorRate = 0.3
	src.set(ds[0].Key(), e)
	p := newPicker(t, ds, src, strictOrder())
	plan := mustPick(t, p, route.Request{Model: "llama", SLO: route.SLO{MaxErrorRate: 0.1}}, t0)
	equal(t, order(plan), []string{"cheap/eu/llama", "snappy/us/llama", "fast/us/llama"}, "order")
	equal(t, plan.Deployments[2].Violations, route.ViolatesErrorRate, "violations")
	equal(t, plan.Deployments[2].Violations.String(), "error-rate", "violation string")
}

func pinFleet() ([]route.Deployment, *fakeSource) {
	ds := []route.Deployment{
		dep("openai", "us", "gpt"),
		dep("azure", "eu", "gpt"),
		dep("azure", "us", "gpt"),
		dep("groq", "us", "llama"),
		dep("together", "us", "llama"),
	}
	old := dep("openai", "us", "gpt")
	old.Revision = "2024"
	ds = append(ds, old)
	src := newSource()
	tps := []float64{100, 90, 80, 500, 200, 400}
	for i, d := range ds {
		src.set(d.Key(), warm(0.3, tps[i]))
	}
	return ds, src
}

func TestPins(t *testing.T) {
	tests := []struct {
		name string
		req  route.Request
		want []string
		err  []string // substrings; non-nil means ErrNoDeployment
	}{
		{"all unversioned gpt", route.Request{Model: "gpt"}, []string{"openai/us/gpt", "azure/eu/gpt", "azure/us/gpt"}, nil},
		{"only", route.Request{Model: "gpt", Only: []string{"azure"}}, []string{"azure/eu/gpt", "azure/us/gpt"}, nil},
		{"ignore", route.Request{Model: "gpt", Ignore: []string{"openai", "nobody"}}, []string{"azure/eu/gpt", "azure/us/gpt"}, nil},
		{"region set", route.Request{Model: "gpt", Regions: []string{"eu"}}, []string{"azure/eu/gpt"}, nil},
		{"region set of two", route.Request{Model: "gpt", Regions: []string{"eu", "us"}}, []string{"openai/us/gpt", "azure/eu/gpt", "azure/us/gpt"}, nil},
		{"provider order", route.Request{Model: "gpt", Providers: []string{"azure"}}, []string{"azure/eu/gpt", "azure/us/gpt", "openai/us/gpt"}, nil},
		{"provider order two", route.Request{Model: "llama", Providers: []string{"together", "groq"}}, []string{"together/us/llama", "groq/us/llama"}, nil},
		{"revision in model", route.Request{Model: "gpt@2024"}, []string{"openai/us/gpt@2024"}, nil},
		{"revision field", route.Request{Model: "gpt", Revision: "2024"}, []string{"openai/us/gpt@2024"}, nil},
		{"no fallbacks", route.Request{Model: "gpt", NoFallbacks: true}, []string{"openai/us/gpt"}, nil},
		{"unknown model", route.Request{Model: "claude"}, nil, []string{`unknown model "claude"`, "gpt, gpt@2024, llama"}},
		{"no model", route.Request{}, nil, []string{"names no model", "gpt, gpt@2024, llama"}},
		{"unknown provider", route.Request{Model: "gpt", Only: []string{"anthropic"}}, nil, []string{`unknown provider "anthropic"`, `"azure", "groq", "openai", "together"`}},
		{"unknown provider in order", route.Request{Model: "gpt", Providers: []string{"x"}}, nil, []string{`unknown provider "x"`}},
		{"unknown region", route.Request{Model: "gpt", Regions: []string{"ap"}}, nil, []string{`unknown region "ap"`, `"eu", "us"`}},
		{"unknown revision", route.Request{Model: "gpt@1999"}, nil, []string{`unknown model "gpt@1999"`, "gpt@2024"}},
		{"pins leave nothing", route.Request{Model: "llama", Only: []string{"azure"}}, nil, []string{`no deployment of "llama" only [azure]`, "groq/us/llama"}},
		{"region leaves nothing", route.Request{Model: "llama", Regions: []string{"eu"}}, nil, []string{"in regions [eu]", "together/us/llama"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ds, src := pinFleet()
			p := newPicker(t, ds, src, strictOrder())
			plan, err := p.PickAt(tt.req, t0)
			if tt.err != nil {
				if !errors.Is(err, route.ErrNoDeployment) {
					t.Fatalf("err = %v, want ErrNoDeployment", err)
				}
				containsAll(t, err.Error(), append([]string{"route: no deployment"}, tt.err...)...)
				equal(t, p.Stats().NoDeployment, uint64(1), "NoDeployment counter")
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			equal(t, order(plan), tt.want, "order")
		})
	}
}

func TestModelFallbacks(t *testing.T) {
	ds, src := pinFleet()
	wild := dep("router", "us", route.Wildcard)
	wild.Price.Output = 5
	ds = append(ds, wild)
	src.set(key("router", "us", "llama"), warm(0.1, 50))
	src.set(key("router", "us", "gpt"), warm(0.1, 1000))
	p := newPicker(t, ds, src, strictOrder())

	tests := []struct {
		name string
		req  route.Request
		want []string
	}{
		{"models in order", route.Request{Models: []string{"llama", "gpt"}},
			[]string{"groq/us/llama", "together/us/llama", "router/us/llama", "router/us/gpt", "openai/us/gpt", "azure/eu/gpt", "azure/us/gpt"}},
		{"model then models, duplicates dropped", route.Request{Model: "gpt@2024", Models: []string{"llama", "gpt@2024"}, Only: []string{"openai", "groq"}},
			[]string{"openai/us/gpt@2024", "groq/us/llama"}},
		{"wildcard serves unknown model", route.Request{Model: "mistral"}, []string{"router/us/mistral"}},
		{"wildcard with revision", route.Request{Model: "mistral@7"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			plan, err := p.PickAt(tt.req, t0)
			if tt.want == nil {
				if !errors.Is(err, route.ErrNoDeployment) {
					t.Fatalf("err = %v, want ErrNoDeployment", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			equal(t, order(plan), tt.want, "order")
		})
	}
	plan := mustPick(t, p, route.Request{Model: "mistral"}, t0)
	c := plan.Deployments[0]
	equal(t, c.Deployment.Model, "mistral", "concrete Model")
	equal(t, c.Deployment.WireModel(), "mistral", "WireModel")
	equal(t, c.Deployment.Key(), c.Key(), "Key matches Deployment.Key()")
	equal(t, c.Reason, route.ReasonColdProbe, "reason for the only, cold candidate")
}

func TestAffinity(t *testing.T) {
	ds, src := fleet()
	slow := ds[1].Key() // snappy: last by throughput
	tests := []struct {
		name     string
		served   bool
		at       time.Duration // pick time after Served
		health   route.Status
		slo      route.SLO
		first    string
		reason   string
		hits     uint64
		misses   uint64
		broken   uint64
		cacheKey string
	}{
		{"hit", true, time.Minute, route.Status{}, route.SLO{}, "snappy/us/llama", route.ReasonAffinity, 1, 0, 0, "session-1"},
		{"miss", false, time.Minute, route.Status{}, route.SLO{}, "fast/us/llama", route.ReasonBest, 0, 1, 0, "session-1"},
		{"no cache key", true, time.Minute, route.Status{}, route.SLO{}, "fast/us/llama", route.ReasonBest, 0, 0, 0, ""},
		{"expired", true, 6 * time.Minute, route.Status{}, route.SLO{}, "fast/us/llama", route.ReasonBest, 0, 0, 1, "session-1"},
		{"half-open breaks it", true, time.Minute, route.Status{Breaker: route.BreakerHalfOpen}, route.SLO{}, "fast/us/llama", route.ReasonBest, 0, 0, 1, "session-1"},
		{"open breaks it", true, time.Minute, route.Status{Breaker: route.BreakerOpen}, route.SLO{}, "fast/us/llama", route.ReasonBest, 0, 0, 1, "session-1"},
		{"cooling breaks it", true, time.Minute, route.Status{CoolingUntil: t0.Add(time.Hour)}, route.SLO{}, "fast/us/llama", route.ReasonBest, 0, 0, 1, "session-1"},
		{"slo breaks it", true, time.Minute, route.Status{}, route.SLO{MinTPS: 100}, "fast/us/llama", route.ReasonBest, 0, 0, 1, "session-1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := strictOrder()
			p := newPicker(t, ds, src, o, fakeHealth{slow: tt.health})
			if tt.served {
				p.Served("session-1", slow, t0)
			}
			plan := mustPick(t, p, route.Request{Model: "llama", CacheKey: tt.cacheKey, SLO: tt.slo}, t0.Add(tt.at))
			equal(t, plan.Deployments[0].Key().String(), tt.first, "first")
			equal(t, plan.Deployments[0].Reason, tt.reason, "reason")
			st := p.Stats()
			equal(t, [3]uint64{st.AffinityHits, st.AffinityMisses, st.AffinityBroken}, [3]uint64{tt.hits, tt.misses, tt.broken}, "hits, misses, broken")
		})
	}
}

func TestAffinityDisabledAndBounded(t *testing.T) {
	ds, src := fleet()
	o := strictOrder()
	o.AffinityTTL = -1
	p := newPicker(t, ds, src, o)
	p.Served("k", ds[1].Key(), t0)
	equal(t, mustPick(t, p, route.Request{Model: "llama", CacheKey: "k"}, t0).Deployments[0].Reason, route.ReasonBest, "disabled affinity")

	o = strictOrder()
	o.AffinityEntries = 64
	p = newPicker(t, ds, src, o)
	for i := range 10000 {
		p.Served(string(rune('a'+i%26))+string(rune(i)), ds[1].Key(), t0)
	}
	if n := p.aff.len(); n > 64 || n < 32 {
		t.Errorf("affinity entries = %d, want in [32, 64]", n)
	}
	// The newest key is kept and still hits.
	p.Served("newest", ds[1].Key(), t0)
	equal(t, mustPick(t, p, route.Request{Model: "llama", CacheKey: "newest"}, t0).Deployments[0].Reason, route.ReasonAffinity, "newest key")
	// Re-serving refreshes the TTL.
	p.Served("newest", ds[2].Key(), t0.Add(4*time.Minute))
	equal(t, mustPick(t, p, route.Request{Model: "llama", CacheKey: "newest"}, t0.Add(8*time.Minute)).Deployments[0].Key(), ds[2].Key(), "refreshed key")
}

func TestHealth(t *testing.T) {
	ds, src := fleet()
	fast, snappy, cheap := ds[0].Key(), ds[1].Key(), ds[2].Key()
	tests := []struct {
		name     string
		health   fakeHealth
		want     []string
		reasons  []string
		excluded []string
	}{
		{"open excluded", fakeHealth{fast: {Breaker: route.BreakerOpen}},
			[]string{"cheap/eu/llama", "snappy/us/llama"}, []string{route.ReasonBest, route.ReasonRanked}, []string{"fast/us/llama"}},
		{"half-open behind closed", fakeHealth{fast: {Breaker: route.BreakerHalfOpen}},
			[]string{"cheap/eu/llama", "snappy/us/llama", "fast/us/llama"}, []string{route.ReasonBest, route.ReasonRanked, route.ReasonHalfOpen}, nil},
		{"busy behind half-open", fakeHealth{fast: {NoHeadroom: true}, cheap: {Breaker: route.BreakerHalfOpen}},
			[]string{"snappy/us/llama", "cheap/eu/llama", "fast/us/llama"}, []string{route.ReasonBest, route.ReasonHalfOpen, route.ReasonNoHeadroom}, nil},
		{"rate limited", fakeHealth{fast: {RateLimited: true}},
			[]string{"cheap/eu/llama", "snappy/us/llama", "fast/us/llama"}, []string{route.ReasonBest, route.ReasonRanked, route.ReasonLimited}, nil},
		{"cooling", fakeHealth{fast: {CoolingUntil: t0.Add(time.Second)}},
			[]string{"cheap/eu/llama", "snappy/us/llama", "fast/us/llama"}, []string{route.ReasonBest, route.ReasonRanked, route.ReasonCooling}, nil},
		{"cooldown over", fakeHealth{fast: {CoolingUntil: t0}},
			[]string{"fast/us/llama", "cheap/eu/llama", "snappy/us/llama"}, []string{route.ReasonBest, route.ReasonRanked, route.ReasonRanked}, nil},
		{"all open fail open by score", fakeHealth{fast: {Breaker: route.BreakerOpen}, snappy: {Breaker: route.BreakerOpen}, cheap: {Breaker: route.BreakerOpen}},
			[]string{"fast/us/llama", "cheap/eu/llama", "snappy/us/llama"}, []string{route.ReasonFailOpen, route.ReasonFailOpen, route.ReasonFailOpen}, nil},
		{"open behind busy never", fakeHealth{fast: {Breaker: route.BreakerOpen}, snappy: {NoHeadroom: true}, cheap: {CoolingUntil: t0.Add(time.Minute)}},
			[]string{"cheap/eu/llama", "snappy/us/llama"}, []string{route.ReasonCooling, route.ReasonNoHeadroom}, []string{"fast/us/llama"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := strictOrder()
			p := newPicker(t, ds, src, o, tt.health)
			plan := mustPick(t, p, route.Request{Model: "llama"}, t0)
			equal(t, order(plan), tt.want, "order")
			equal(t, reasons(plan), tt.reasons, "reasons")
			var ex []string
			for _, c := range plan.Excluded {
				ex = append(ex, c.Key().String())
				equal(t, c.Reason, route.ReasonOpen, "excluded reason")
			}
			equal(t, ex, tt.excluded, "excluded")
		})
	}
}

// TestTierOrder checks that tier.order ranks tiers by model, then health,
// then SLO compliance, then provider order, then warm before cold, over
// every combination (including the largest model index and provider
// position), against the same precedence written as a comparison of
// tuples.
func TestTierOrder(t *testing.T) {
	var tiers []tier
	for _, model := range []int32{0, 1, 7, math.MaxInt32} {
		for health := range healthOpen + 1 {
			for _, violating := range []bool{false, true} {
				for _, prov := range []int32{0, 1, 3, 1 << 20} {
					for _, cold := range []bool{false, true} {
						tiers = append(tiers, tier{model: model, prov: prov, health: health, violating: violating, cold: cold})
					}
				}
			}
		}
	}
	b := func(v bool) int {
		if v {
			return 1
		}
		return 0
	}
	want := func(x, y tier) int {
		return cmp.Or(cmp.Compare(x.model, y.model), cmp.Compare(x.health, y.health),
			cmp.Compare(b(x.violating), b(y.violating)), cmp.Compare(x.prov, y.prov), cmp.Compare(b(x.cold), b(y.cold)))
	}
	for _, x := range tiers {
		for _, y := range tiers {
			if got := cmp.Compare(x.order(), y.order()); got != want(x, y) {
				t.Fatalf("order(%+v) vs order(%+v): %d, want %d", x, y, got, want(x, y))
			}
		}
	}
}

// TestPresortMatchesSort checks that presort, which starts each sort from
// the scratch's last order, finds the order a plain sort finds, over picks
// whose candidates change (some leave, some are new, a wildcard deployment
// ranks twice) and whose figures move a little or a lot.
func TestPresortMatchesSort(t *testing.T) {
	const n = 64
	rng := rand.New(rand.NewPCG(3, 4))
	var s scratch
	score := make([]float64, n)
	for i := range score {
		score[i] = float64(rng.IntN(1000))
	}
	for pick := range 300 {
		s.ranks = s.ranks[:0]
		for idx := range int32(n) {
			if rng.IntN(10) == 0 { // not a candidate this time
				continue
			}
			if rng.IntN(3) == 0 {
				score[idx] += float64(rng.IntN(21) - 10) // a small move
			}
			if pick%50 == 0 {
				score[idx] = float64(rng.IntN(1000)) // every figure changes
			}
			for model := range int32(1 + rng.IntN(2)) { // sometimes for two models, as a wildcard
				s.ranks = append(s.ranks, rank{tier: tier{model: model, cold: rng.IntN(8) == 0}.order(), score: score[idx],
					tie: float64(rng.IntN(2)), idx: idx, item: int32(len(s.ranks))})
			}
		}
		want := slices.Clone(s.ranks)
		slices.SortFunc(want, func(x, y rank) int { return compareRanks(&x, &y) })
		s.presort(n)
		if !slices.Equal(s.ranks, want) {
			t.Fatalf("pick %d: presort order differs from the sort's", pick)
		}
	}
}

// TestSortRanks checks the insertion-sort path against pdqsort on random
// ranks with many ties, on both sides of the size cut-over.
func TestSortRanks(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{0, 1, 2, 3, 16, 24, 25, 64} {
		t.Run(fmt.Sprintf("n=%d", n), func(t *testing.T) {
			for range 50 {
				r := make([]rank, n)
				for i := range r {
					r[i] = rank{tier: tier{model: int32(rng.IntN(2)), cold: rng.IntN(2) == 0}.order(), score: float64(rng.IntN(4)), tie: float64(rng.IntN(2)),
						idx: int32(i), item: int32(i)}
				}
				rng.Shuffle(n, func(i, j int) { r[i], r[j] = r[j], r[i] })
				want := slices.Clone(r)
				slices.SortFunc(want, func(x, y rank) int { return compareRanks(&x, &y) })
				sortRanks(r)
				equal(t, r, want, "order")
			}
		})
	}
}
