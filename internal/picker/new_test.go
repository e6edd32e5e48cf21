package picker

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/tpsroute/tpsroute/route"
)

func TestNewErrors(t *testing.T) {
	good := dep("groq", "us", "llama")
	bad := good
	bad.BaseURL = ""
	negPrice := dep("openai", "us", "gpt")
	negPrice.Price.Output = -3
	rev := good
	rev.Revision = "v2"
	tests := []struct {
		name string
		ds   []route.Deployment
		opts route.Options
		want []string // substrings of the error; nil means no error
	}{
		{"ok", []route.Deployment{good}, route.Options{}, nil},
		{"revisions are distinct keys", []route.Deployment{good, rev}, route.Options{}, nil},
		{"no deployments", nil, route.Options{}, []string{"no deployments"}},
		{"empty base url", []route.Deployment{good, bad}, route.Options{}, []string{"deployment 1", "BaseURL", "empty"}},
		{"negative price", []route.Deployment{good, negPrice}, route.Options{}, []string{"deployment 1", "Price.Output", "negative"}},
		{"duplicate key", []route.Deployment{good, dep("x", "", "m"), good}, route.Options{}, []string{"deployment 2", "Key", "duplicate of deployment 0"}},
		{"exploration above one", []route.Deployment{good}, route.Options{Exploration: 1.5}, []string{"Options.Exploration"}},
		{"band NaN", []route.Deployment{good}, route.Options{Band: math.NaN()}, []string{"Options.Band"}},
		{"cold share NaN", []route.Deployment{good}, route.Options{ColdShare: math.NaN()}, []string{"Options.ColdShare"}},
		{"cold share above one", []route.Deployment{good}, route.Options{ColdShare: 1.2}, []string{"Options.ColdShare", "not in [0,1]"}},
		{"cold share negative: no cap", []route.Deployment{good}, route.Options{ColdShare: -1}, nil},
		{"unknown policy", []route.Deployment{good}, route.Options{Policy: 9}, []string{"Options.Policy"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := New(tt.ds, nil, nil, tt.opts)
			if tt.want == nil {
				if err != nil || p == nil {
					t.Fatalf("New() = %v, %v", p, err)
				}
				return
			}
			if err == nil {
				t.Fatalf("New() error = nil, want %v", tt.want)
			}
			containsAll(t, err.Error(), tt.want...)
			if strings.Contains(tt.name, "key") || strings.Contains(tt.name, "price") || strings.Contains(tt.name, "url") {
				if !errors.Is(err, route.ErrInvalidDeployment) {
					t.Errorf("errors.Is(%v, route.ErrInvalidDeployment) = false", err)
				}
			}
		})
	}
}

// TestWildcardPlanCapabilities: a wildcard deployment's per-model
// capabilities are those of the concrete deployments in its plans (issue 13
// point 7).
func TestWildcardPlanCapabilities(t *testing.T) {
	w := dep("router", "", route.Wildcard)
	w.Capabilities = route.Capabilities{CacheControl: true, AssistantPrefill: true}
	w.ModelCapabilities = map[string]route.Capabilities{"r1": {CacheControl: true}}
	p := newPicker(t, []route.Deployment{w}, nil, route.Options{Seed: 1})
	for model, prefill := range map[string]bool{"r1": false, "llama": true} {
		plan := mustPick(t, p, route.Request{Model: model}, time.Unix(0, 0))
		if len(plan.Deployments) != 1 {
			t.Fatalf("%s: plan has %d deployments", model, len(plan.Deployments))
		}
		equal(t, plan.Deployments[0].Deployment.Capabilities.AssistantPrefill, prefill, model+": AssistantPrefill in the plan")
	}
}

// TestPickAllocatesOnce: a pick allocates the Plan and nothing else, with
// exploration, an SLO, health and a cache key, through a Source with
// handles or without. route's kernel is an interface (kernel.go), so a
// pointer to a local passed to it would move the local to the heap on
// every pick; this holds the engine to its budget (docs/PERFORMANCE.md).
func TestPickAllocatesOnce(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector makes sync.Pool drop the scratch at random")
	}
	ds, src := spread(16)
	_, reg := spreadRegistry(16, false)
	for _, tc := range []struct {
		name string
		src  Source
		req  route.Request
	}{
		{"registry", reg, route.Request{Model: "m"}},
		{"estimate only", estimateOnly{src}, route.Request{Model: "m"}},
		{"slo and cache key", src, route.Request{Model: "m", CacheKey: "session-1", SLO: route.SLO{MinTPS: 100, MaxTTFT: time.Second}}},
		{"latency", src, route.Request{Model: "m", Policy: route.Latency}},
		{"cost", src, route.Request{Model: "m", Policy: route.Cost}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newPicker(t, ds, tc.src, route.Options{Seed: 1}, fakeHealth{})
			mustPick(t, p, tc.req, t0)
			allocs := testing.AllocsPerRun(200, func() { mustPick(t, p, tc.req, t0) })
			if allocs > 1 {
				t.Errorf("Pick allocates %.1f times, want 1 (the Plan)", allocs)
			}
		})
	}
}
