package picker

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tpsroute/tpsroute/internal/registry"
	"github.com/tpsroute/tpsroute/measure"
	"github.com/tpsroute/tpsroute/route"
	"github.com/tpsroute/tpsroute/tps"
)

// shapePickers returns two deployments on a real Registry and a Picker
// without exploration or band, so that the first deployment is who leads.
func shapePickers(t *testing.T) (*registry.Registry, []route.Deployment, *Picker) {
	t.Helper()
	reg := registry.New(measure.Options{})
	ds := []route.Deployment{
		{Provider: "a", Region: "us", Model: "m", BaseURL: "http://a"},
		{Provider: "b", Region: "us", Model: "m", BaseURL: "http://b"},
	}
	p, err := New(ds, reg, nil, route.Options{Exploration: route.Off, Band: route.Off})
	require.NoError(t, err)
	return reg, ds, p
}

func leader(t *testing.T, p *Picker, req route.Request, now time.Time) string {
	t.Helper()
	plan, err := p.PickAt(req, now)
	require.NoError(t, err)
	return plan.Deployments[0].Deployment.Provider
}

// TestLoadAwareLead: a deployment at 2000 tok/s alone whose streams halve
// with two more in flight, next to a flat 700 tok/s one. Its expected TPS
// follows its calls in flight (2000/(1+n/2)), and it leads only while it is
// idle: a second call there would run at 1333 and slow the first from 2000
// to 1333, adding 667 to its total against the flat one's 700.
func TestLoadAwareLead(t *testing.T) {
	// In a bubble: the Registry times a call's end by the clock.
	synctest.Test(t, func(t *testing.T) {
		reg, ds, p := shapePickers(t)
		ka, kb := ds[0].Key(), ds[1].Key()
		// Streams of 400 tokens on a in groups of 1 to 8, back to back; b flat.
		for i := range 120 {
			g := 1 + i%8
			rate := 2000 / (1 + float64(g-1)/2)
			gen := time.Duration(400 / rate * float64(time.Second))
			start := time.Now()
			ends := make([]func(), g)
			for j := range ends {
				ends[j] = reg.Begin(ka)
			}
			time.Sleep(100*time.Millisecond + gen)
			for j := range ends {
				ends[j]()
				reg.Record(ka, tps.Sample{Start: start, TTFT: 100 * time.Millisecond, Last: 100*time.Millisecond + gen,
					Total: 100*time.Millisecond + gen, TPS: rate, TPSOK: true, OutputTokens: 400, InputTokens: 256})
			}
			reg.Record(kb, tps.Sample{Start: start, TTFT: 100 * time.Millisecond, Last: time.Second, Total: time.Second,
				TPS: 700, TPSOK: true, OutputTokens: 400, InputTokens: 256})
		}
		est, _ := reg.Estimate(ka)
		require.InDelta(t, 2, est.LoadK, 0.1, "a load model")
		now := time.Now()
		var ends []func()
		for n := range 7 {
			want := "a"
			if n >= 1 {
				want = "b"
			}
			plan, err := p.PickAt(route.Request{Model: "m"}, now)
			require.NoError(t, err)
			assert.Equal(t, want, plan.Deployments[0].Deployment.Provider, "%d calls in flight on a", n)
			for _, pd := range plan.Deployments {
				if pd.Deployment.Provider == "a" {
					x := pd.Expected
					assert.InDelta(t, 2000/(1+float64(n)/2), x.CallTPS(), 2000*0.05, "%d in flight: the call's own TPS", n)
					own := 2000 / (1 + float64(n)/2)
					prev := 2000 / (1 + float64(n-1)/2)
					assert.InDelta(t, float64(n+1)*own-float64(n)*prev, x.MarginalTPS(), 2000*0.05, "%d in flight: what it adds", n)
				}
			}
			ends = append(ends, reg.Begin(ka))
		}
		for _, end := range ends {
			end()
		}
		assert.Equal(t, "a", leader(t, p, route.Request{Model: "m"}, now), "idle again")
	})
}

// TestPromptSizeAwareLead: a is faster on short prompts, b on long ones; with
// both classes warm each prompt size goes to its own leader, while a prompt
// of unknown size, or of a size never seen, goes to the aggregate's.
func TestPromptSizeAwareLead(t *testing.T) {
	reg, ds, p := shapePickers(t)
	now := time.Unix(1_700_000_000, 0)
	rate := map[string][2]float64{"a": {900, 200}, "b": {600, 500}} // short, long
	for i := range 60 {
		now = now.Add(500 * time.Millisecond)
		long := i%4 == 1 || i%4 == 2
		in := int64(150)
		if long {
			in = 6000
		}
		for _, d := range ds {
			r := rate[d.Provider][0]
			if long {
				r = rate[d.Provider][1]
			}
			reg.RecordAt(now, d.Key(), tps.Sample{Start: now.Add(-time.Second), TTFT: 200 * time.Millisecond, Last: time.Second,
				TPS: r, TPSOK: true, OutputTokens: 200, InputTokens: in})
		}
	}
	assert.Equal(t, "a", leader(t, p, route.Request{Model: "m", ExpectedInputTokens: 150}, now))
	assert.Equal(t, "b", leader(t, p, route.Request{Model: "m", ExpectedInputTokens: 6000}, now))
	// The aggregates: a's mean 550 (p50 between 200 and 900), b's 550 too;
	// b is less spread, so its p50 decides: whoever the aggregate prefers,
	// the unknown and the unseen size get the same.
	agg := leader(t, p, route.Request{Model: "m"}, now)
	assert.Equal(t, agg, leader(t, p, route.Request{Model: "m", ExpectedInputTokens: 1 << 17}, now))
}
