package picker

import (
	"maps"
	"math"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tpsroute/tpsroute/internal/registry"
	"github.com/tpsroute/tpsroute/measure"
	"github.com/tpsroute/tpsroute/route"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeSource is an in-memory HandleSource with synthetic estimates. Like
// registry.Registry it publishes an immutable map of per-key entries through
// an atomic pointer, so Estimate and Handle are lock-free, and an entry's
// estimate is an atomic pointer, so a handle sees later set calls; set
// copies the map when it adds a key (tests only).
type fakeSource struct {
	mu   sync.Mutex
	snap atomic.Pointer[map[measure.Key]*fakeEntry]
}

type fakeEntry struct {
	est atomic.Pointer[registry.Estimate]
}

func (e *fakeEntry) Estimate() (registry.Estimate, bool) { return *e.est.Load(), true }
func (e *fakeEntry) Live() bool                          { return true }

func newSource() *fakeSource {
	f := &fakeSource{}
	m := map[measure.Key]*fakeEntry{}
	f.snap.Store(&m)
	return f
}

func (f *fakeSource) Estimate(k measure.Key) (registry.Estimate, bool) {
	e := (*f.snap.Load())[k]
	if e == nil {
		return registry.Estimate{}, false
	}
	return e.Estimate()
}

func (f *fakeSource) Handle(k measure.Key) registry.EstimateHandle {
	e := (*f.snap.Load())[k]
	if e == nil {
		return nil
	}
	return e
}

func (f *fakeSource) set(k measure.Key, e registry.Estimate) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if old := (*f.snap.Load())[k]; old != nil {
		old.est.Store(&e)
		return
	}
	m := maps.Clone(*f.snap.Load())
	fe := &fakeEntry{}
	fe.est.Store(&e)
	m[k] = fe
	f.snap.Store(&m)
}

// estimateOnly hides a source's Handle method, so the Picker reads it
// through Source.Estimate alone.
type estimateOnly struct{ s Source }

func (e estimateOnly) Estimate(k measure.Key) (registry.Estimate, bool) { return e.s.Estimate(k) }

// fakeHealth is an in-memory Health.
type fakeHealth map[measure.Key]route.Status

func (f fakeHealth) Status(k measure.Key, _ time.Time) route.Status { return f[k] }

// warm returns an OK estimate whose pessimistic blend is ttft seconds and tps tokens/s.
func warm(ttft, tps float64) registry.Estimate {
	return registry.Estimate{
		TTFTP50: ttft * 0.8, TTFTP95: ttft, TTFTEWMA: ttft * 0.9,
		TPSP50: tps, TPSP95: tps * 1.3, TPSEWMA: tps * 1.1,
		Samples: 50, OK: true,
	}
}

func dep(provider, region, model string) route.Deployment {
	return route.Deployment{Provider: provider, Region: region, Model: model, BaseURL: "http://127.0.0.1:9/v1"}
}

func key(provider, region, model string) measure.Key {
	return measure.Key{Provider: provider, Region: region, Model: model}
}

// deterministic options: no exploration, no band draw, no half-open probe.
func strictOrder() route.Options {
	return route.Options{Exploration: -1, Band: -1, HalfOpenProbeInterval: -1, Seed: 1}
}

func order(p route.Plan) []string {
	out := make([]string, len(p.Deployments))
	for i, c := range p.Deployments {
		out[i] = c.Key().String()
	}
	return out
}

func reasons(p route.Plan) []string {
	out := make([]string, len(p.Deployments))
	for i, c := range p.Deployments {
		out[i] = c.Reason
	}
	return out
}

// newPicker is New for tests, with the health given (at most one; none
// means every deployment healthy).
func newPicker(t testing.TB, ds []route.Deployment, src Source, o route.Options, health ...Health) *Picker {
	t.Helper()
	var h Health
	if len(health) > 0 {
		h = health[0]
	}
	p, err := New(ds, src, h, o)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return p
}

func mustPick(t testing.TB, p *Picker, r route.Request, now time.Time) route.Plan {
	t.Helper()
	plan, err := p.PickAt(r, now)
	if err != nil {
		t.Fatalf("Pick(%+v): %v", r, err)
	}
	return plan
}

func equal(t testing.TB, got, want any, what string) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s = %v, want %v", what, got, want)
	}
}

func containsAll(t testing.TB, s string, subs ...string) {
	t.Helper()
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			t.Errorf("%q does not contain %q", s, sub)
		}
	}
}

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func nan() float64 { return math.NaN() }
func inf() float64 { return math.Inf(1) }
