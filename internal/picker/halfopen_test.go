package picker

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tpsroute/tpsroute/route"
)

// halfOpenOptions are strictOrder with half-open probes every interval.
func halfOpenOptions(interval time.Duration) route.Options {
	o := strictOrder()
	o.HalfOpenProbeInterval = interval
	return o
}

// TestHalfOpenProbe checks that a half-open deployment, ranked behind every
// closed one, is put first at most once per Options.HalfOpenProbeInterval,
// per deployment, and stays behind the closed ones otherwise.
func TestHalfOpenProbe(t *testing.T) {
	ds, src := fleet()
	fast, snappy, cheap := ds[0].Key(), ds[1].Key(), ds[2].Key()
	type pick struct {
		at     time.Duration // after t0
		first  string
		reason string
	}
	tests := []struct {
		name     string
		health   fakeHealth
		interval time.Duration
		picks    []pick
		probes   uint64
	}{
		{"once per interval", fakeHealth{fast: {Breaker: route.BreakerHalfOpen}}, time.Second, []pick{
			{0, "fast/us/llama", route.ReasonHalfOpenProbe},
			{0, "cheap/eu/llama", route.ReasonBest},
			{500 * time.Millisecond, "cheap/eu/llama", route.ReasonBest},
			{999 * time.Millisecond, "cheap/eu/llama", route.ReasonBest},
			{time.Second, "fast/us/llama", route.ReasonHalfOpenProbe},
			{1500 * time.Millisecond, "cheap/eu/llama", route.ReasonBest},
			{2 * time.Second, "fast/us/llama", route.ReasonHalfOpenProbe},
			{2 * time.Second, "cheap/eu/llama", route.ReasonBest},
		}, 3},
		{"default interval is 1 s", fakeHealth{fast: {Breaker: route.BreakerHalfOpen}}, 0, []pick{
			{0, "fast/us/llama", route.ReasonHalfOpenProbe},
			{999 * time.Millisecond, "cheap/eu/llama", route.ReasonBest},
			{time.Second, "fast/us/llama", route.ReasonHalfOpenProbe},
		}, 2},
		{"longer interval", fakeHealth{fast: {Breaker: route.BreakerHalfOpen}}, 5 * time.Second, []pick{
			{0, "fast/us/llama", route.ReasonHalfOpenProbe},
			{4 * time.Second, "cheap/eu/llama", route.ReasonBest},
			{5 * time.Second, "fast/us/llama", route.ReasonHalfOpenProbe},
		}, 2},
		{"a budget per deployment", fakeHealth{fast: {Breaker: route.BreakerHalfOpen}, cheap: {Breaker: route.BreakerHalfOpen}}, time.Second, []pick{
			{0, "fast/us/llama", route.ReasonHalfOpenProbe},
			{0, "cheap/eu/llama", route.ReasonHalfOpenProbe},
			{0, "snappy/us/llama", route.ReasonBest},
			{time.Second, "fast/us/llama", route.ReasonHalfOpenProbe},
		}, 3},
		{"small step back gives no second probe", fakeHealth{fast: {Breaker: route.BreakerHalfOpen}}, time.Second, []pick{
			{time.Second, "fast/us/llama", route.ReasonHalfOpenProbe},
			{500 * time.Millisecond, "cheap/eu/llama", route.ReasonBest},
		}, 1},
		{"large step back starts afresh", fakeHealth{fast: {Breaker: route.BreakerHalfOpen}}, time.Second, []pick{
			{time.Hour, "fast/us/llama", route.ReasonHalfOpenProbe},
			{0, "fast/us/llama", route.ReasonHalfOpenProbe},
		}, 2},
		{"disabled", fakeHealth{fast: {Breaker: route.BreakerHalfOpen}}, -1, []pick{
			{0, "cheap/eu/llama", route.ReasonBest},
			{time.Hour, "cheap/eu/llama", route.ReasonBest},
		}, 0},
		{"not while the leader is unhealthy", fakeHealth{fast: {Breaker: route.BreakerHalfOpen},
			snappy: {NoHeadroom: true}, cheap: {CoolingUntil: t0.Add(time.Hour)}}, time.Second, []pick{
			// fast leads as the only half-open one: it keeps its demotion reason.
			{0, "fast/us/llama", route.ReasonHalfOpen},
		}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newPicker(t, ds, src, halfOpenOptions(tt.interval), tt.health)
			for i, pk := range tt.picks {
				plan, err := p.PickAt(route.Request{Model: "llama"}, t0.Add(pk.at))
				require.NoError(t, err)
				assert.Equal(t, pk.first, plan.Deployments[0].Key().String(), "pick %d at +%s: first", i, pk.at)
				assert.Equal(t, pk.reason, plan.Deployments[0].Reason, "pick %d at +%s: reason", i, pk.at)
				assert.Len(t, plan.Deployments, 3, "pick %d: every deployment is in the plan", i)
			}
			assert.Equal(t, tt.probes, p.Stats().HalfOpenProbes, "Stats.HalfOpenProbes")
		})
	}
}

// TestHalfOpenProbeNotTaken lists the picks that must not put a half-open
// deployment first, with its budget untouched.
func TestHalfOpenProbeNotTaken(t *testing.T) {
	ds, src := pinFleet()
	ds[3].Price.Output = 1 // groq: over the MaxPrice below
	groq := key("groq", "us", "llama")
	tests := []struct {
		name   string
		health fakeHealth
		req    route.Request
		served bool // together served "session-1" at t0
		first  string
		reason string
	}{
		{"no fallbacks", fakeHealth{groq: {Breaker: route.BreakerHalfOpen}},
			route.Request{Model: "llama", NoFallbacks: true}, false, "together/us/llama", route.ReasonBest},
		{"violates the slo", fakeHealth{groq: {Breaker: route.BreakerHalfOpen}},
			route.Request{Model: "llama", SLO: route.SLO{MaxPrice: 0.5}}, false, "together/us/llama", route.ReasonBest},
		{"another model of the fallback list", fakeHealth{key("openai", "us", "gpt"): {Breaker: route.BreakerHalfOpen}},
			route.Request{Models: []string{"llama", "gpt"}}, false, "groq/us/llama", route.ReasonBest},
		{"cache affinity first", fakeHealth{groq: {Breaker: route.BreakerHalfOpen}},
			route.Request{Model: "llama", CacheKey: "session-1"}, true, "together/us/llama", route.ReasonAffinity},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newPicker(t, ds, src, halfOpenOptions(time.Second), tt.health)
			if tt.served {
				p.Served("session-1", key("together", "us", "llama"), t0)
			}
			plan, err := p.PickAt(tt.req, t0)
			require.NoError(t, err)
			assert.Equal(t, tt.first, plan.Deployments[0].Key().String(), "first")
			assert.Equal(t, tt.reason, plan.Deployments[0].Reason, "reason")
			assert.Zero(t, p.Stats().HalfOpenProbes)
		})
	}
}

// TestHalfOpenRecovery follows a provider through its breaker's cycle: best
// by throughput while closed; open (excluded); half-open (probed once per
// interval while the closed ones take the bulk of the traffic); closed again,
// when it wins its traffic back by the policy.
func TestHalfOpenRecovery(t *testing.T) {
	ds, src := fleet()
	fast := ds[0].Key()
	h := fakeHealth{}
	p := newPicker(t, ds, src, route.Options{Exploration: -1, Seed: 1}, h) // default interval and band
	const step = 10 * time.Millisecond
	phases := []struct {
		name      string
		state     route.BreakerState
		picks     int     // at 10 ms intervals: 100 per second
		wantFirst int     // picks with fast first
		wantShare float64 // of fast first, for the message
	}{
		{"closed", route.BreakerClosed, 200, 200, 1},
		{"open", route.BreakerOpen, 200, 0, 0},
		{"half-open", route.BreakerHalfOpen, 1000, 10, 0.01}, // 10 s: one probe per second
		{"closed again", route.BreakerClosed, 200, 200, 1},
	}
	now := t0
	for _, ph := range phases {
		t.Run(ph.name, func(t *testing.T) {
			h[fast] = route.Status{Breaker: ph.state}
			first := 0
			for range ph.picks {
				plan, err := p.PickAt(route.Request{Model: "llama"}, now)
				require.NoError(t, err)
				c := plan.Deployments[0]
				if c.Key() == fast {
					first++
					want := route.ReasonBest
					if ph.state == route.BreakerHalfOpen {
						want = route.ReasonHalfOpenProbe
					}
					assert.Equal(t, want, c.Reason)
				} else {
					assert.Equal(t, "cheap/eu/llama", c.Key().String(), "next best by throughput")
				}
				now = now.Add(step)
			}
			assert.Equal(t, ph.wantFirst, first, "picks with fast first (share %.2f)", ph.wantShare)
		})
	}
	assert.Equal(t, uint64(10), p.Stats().HalfOpenProbes)
}
