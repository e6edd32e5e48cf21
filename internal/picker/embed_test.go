package picker

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tpsroute/tpsroute/internal/registry"
	"github.com/tpsroute/tpsroute/measure"
	"github.com/tpsroute/tpsroute/route"
	"github.com/tpsroute/tpsroute/tps"
)

// embedLatency is an embeddings deployment's answer time: a start plus a
// time per input token.
type embedLatency struct{ start, perToken time.Duration }

func (l embedLatency) at(tokens int64) time.Duration {
	return l.start + time.Duration(tokens)*l.perToken
}

// embedFleet: "slow-start" answers after 300 ms plus 10 µs per input token,
// "fast-start" after 20 ms plus 100 µs a token: fast-start is the sooner up
// to 3,111 tokens, slow-start beyond.
var embedFleet = map[string]embedLatency{
	"slow-start": {300 * time.Millisecond, 10 * time.Microsecond},
	"fast-start": {20 * time.Millisecond, 100 * time.Microsecond},
}

// embedPicker returns a Registry and a Picker, without exploration or band,
// over the embeddings deployments named, priced per input token as given.
func embedPicker(t *testing.T, opts route.Options, prices map[string]measure.Price) (*registry.Registry, []route.Deployment, *Picker) {
	t.Helper()
	reg := registry.New(measure.Options{})
	var ds []route.Deployment
	for _, name := range []string{"slow-start", "fast-start"} {
		ds = append(ds, route.Deployment{Provider: name, Region: "us", Model: "e", BaseURL: "http://" + name,
			APIs: []route.API{route.APIEmbeddings}, Price: prices[name]})
	}
	opts.Exploration, opts.Band = route.Off, route.Off
	p, err := New(ds, reg, nil, opts)
	require.NoError(t, err)
	require.True(t, p.answered, "a Picker of embeddings deployments")
	return reg, ds, p
}

// recordEmbeddings records n answers on d, at the sizes given in turn, with
// ±5% seeded noise, one every 500 ms from *now.
func recordEmbeddings(reg *registry.Registry, d route.Deployment, now *time.Time, n int, sizes ...int64) {
	rng := rand.New(rand.NewPCG(1, uint64(len(d.Provider))))
	for i := range n {
		*now = now.Add(500 * time.Millisecond)
		in := sizes[i%len(sizes)]
		lat := time.Duration(float64(embedFleet[d.Provider].at(in)) * (0.95 + 0.1*rng.Float64()))
		reg.RecordAt(*now, d.Key(), tps.Sample{Start: now.Add(-lat), TTFT: lat, Last: lat, Total: lat, InputTokens: in})
	}
}

// callTTFT returns each deployment's expected latency for the call, and the
// leader.
func callTTFT(t *testing.T, p *Picker, req route.Request, now time.Time) (map[string]time.Duration, string) {
	t.Helper()
	plan, err := p.PickAt(req, now)
	require.NoError(t, err)
	out := map[string]time.Duration{}
	for _, c := range plan.Deployments {
		out[c.Deployment.Provider] = time.Duration(c.Expected.CallTTFT() * float64(time.Second))
	}
	return out, plan.Deployments[0].Deployment.Provider
}

// TestEmbeddingsLatencyPerInputToken: both deployments measured on small
// calls (100 tokens) and big batches (8,000), interleaved: each call goes
// to the deployment that answers its size soonest, measured sizes on their
// class's latency and sizes in between on the line through them, although
// both keys' own TTFT figures mix the two sizes.
func TestEmbeddingsLatencyPerInputToken(t *testing.T) {
	reg, ds, p := embedPicker(t, route.Options{}, nil)
	now := time.Unix(1_700_000_000, 0)
	for _, d := range ds {
		at := now
		recordEmbeddings(reg, d, &at, 60, 100, 8000)
	}
	now = now.Add(30 * time.Second)
	for _, tc := range []struct {
		name   string
		tokens int64
		want   string
	}{
		{"a small call (measured size)", 100, "fast-start"},
		{"a big batch (measured size)", 8000, "slow-start"},
		{"a size between, small side", 1000, "fast-start"},
		{"a size between, big side", 5000, "slow-start"},
		{"a batch above every measured size", 60000, "slow-start"},
		{"a call below every measured size", 20, "fast-start"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, lead := callTTFT(t, p, route.Request{Model: "e", ExpectedInputTokens: tc.tokens}, now)
			assert.Equal(t, tc.want, lead, "expected latencies %v", got)
			t.Logf("%d tokens: %v (true: slow-start %v, fast-start %v)", tc.tokens, got,
				embedFleet["slow-start"].at(tc.tokens), embedFleet["fast-start"].at(tc.tokens))
		})
	}
	// The measured sizes: each class's latency, within its noise.
	for _, in := range []int64{100, 8000} {
		got, _ := callTTFT(t, p, route.Request{Model: "e", ExpectedInputTokens: in}, now)
		for name, l := range embedFleet {
			assert.InEpsilon(t, l.at(in).Seconds(), got[name].Seconds(), 0.1, "%s at %d tokens", name, in)
		}
	}
	plan, err := p.PickAt(route.Request{Model: "e", ExpectedInputTokens: 100}, now)
	require.NoError(t, err)
	assert.Equal(t, "latency", plan.Policy, "Throughput, the default, ranks embeddings by latency")
}

// TestEmbeddingsMeasuredOnlySmall: fast-start has answered only small calls
// (100 tokens, 30 ms), slow-start both sizes. For a big batch fast-start's
// small-call latency is no estimate: at its time per input token it is
// expected to take longer than slow-start, which answers 8,000 tokens in
// 380 ms (fast-start would take 820 ms); small calls still go to it.
func TestEmbeddingsMeasuredOnlySmall(t *testing.T) {
	reg, ds, p := embedPicker(t, route.Options{}, nil)
	now := time.Unix(1_700_000_000, 0)
	at := now
	recordEmbeddings(reg, ds[0], &at, 60, 100, 8000)
	at = now
	recordEmbeddings(reg, ds[1], &at, 30, 100)
	now = now.Add(30 * time.Second)

	got, lead := callTTFT(t, p, route.Request{Model: "e", ExpectedInputTokens: 8000}, now)
	assert.Equal(t, "slow-start", lead, "expected latencies %v", got)
	assert.Greater(t, got["fast-start"], embedFleet["fast-start"].at(8000), "an upper bound, never its small-call latency")
	t.Logf("8000 tokens: %v", got)
	got, lead = callTTFT(t, p, route.Request{Model: "e", ExpectedInputTokens: 100}, now)
	assert.Equal(t, "fast-start", lead, "expected latencies %v", got)
	t.Logf("100 tokens: %v", got)
}

// TestEmbeddingsCost: the Cost policy ranks embeddings by input price ×
// input tokens; an output price (which no embeddings call pays) is left
// out, and equal costs go to the sooner answer.
func TestEmbeddingsCost(t *testing.T) {
	prices := map[string]measure.Price{
		"slow-start": {Input: 0.02, Output: 10}, // cheaper per input token
		"fast-start": {Input: 0.13},
	}
	reg, ds, p := embedPicker(t, route.Options{Policy: route.Cost}, prices)
	now := time.Unix(1_700_000_000, 0)
	for _, d := range ds {
		at := now
		recordEmbeddings(reg, d, &at, 60, 100, 8000)
	}
	now = now.Add(30 * time.Second)
	for _, in := range []int64{100, 8000} {
		plan, err := p.PickAt(route.Request{Model: "e", ExpectedInputTokens: in}, now)
		require.NoError(t, err)
		assert.Equal(t, "slow-start", plan.Deployments[0].Deployment.Provider, "%d tokens", in)
		assert.InDelta(t, float64(in)*0.02/1e6, plan.Deployments[0].Cost, 1e-15, "input price × input tokens")
		assert.InDelta(t, float64(in)*0.13/1e6, plan.Deployments[1].Cost, 1e-15)
	}

	// Equal prices: the sooner answer for the call's size.
	same := map[string]measure.Price{"slow-start": {Input: 0.02}, "fast-start": {Input: 0.02}}
	reg, ds, p = embedPicker(t, route.Options{Policy: route.Cost}, same)
	for _, d := range ds {
		at := now
		recordEmbeddings(reg, d, &at, 60, 100, 8000)
	}
	now = now.Add(30 * time.Second)
	_, lead := callTTFT(t, p, route.Request{Model: "e", ExpectedInputTokens: 100}, now)
	assert.Equal(t, "fast-start", lead)
	_, lead = callTTFT(t, p, route.Request{Model: "e", ExpectedInputTokens: 8000}, now)
	assert.Equal(t, "slow-start", lead)
}

// BenchmarkPickEmbeddings: a pick among embeddings deployments whose calls
// fall between warm classes (the interpolation's path).
func BenchmarkPickEmbeddings(b *testing.B) {
	reg := registry.New(measure.Options{})
	var ds []route.Deployment
	for i := range 16 {
		name := []string{"slow-start", "fast-start"}[i%2]
		ds = append(ds, route.Deployment{Provider: name, Region: fmt.Sprint("r", i), Model: "e", BaseURL: "http://" + name,
			APIs: []route.API{route.APIEmbeddings}})
	}
	p, err := New(ds, reg, nil, route.Options{})
	require.NoError(b, err)
	now := time.Unix(1_700_000_000, 0)
	for _, d := range ds {
		at := now
		recordEmbeddings(reg, d, &at, 60, 100, 8000)
	}
	now = now.Add(30 * time.Second)
	req := route.Request{Model: "e", ExpectedInputTokens: 1000}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := p.PickAt(req, now); err != nil {
			b.Fatal(err)
		}
	}
}

// TestEmbeddingsDefaults: with the Picker's defaults (exploration and band
// on), 1,000 picks of each size go where their expected latency says.
func TestEmbeddingsDefaults(t *testing.T) {
	reg := registry.New(measure.Options{})
	var ds []route.Deployment
	for _, name := range []string{"slow-start", "fast-start"} {
		ds = append(ds, route.Deployment{Provider: name, Region: "us", Model: "e", BaseURL: "http://" + name,
			APIs: []route.API{route.APIEmbeddings}})
	}
	p, err := New(ds, reg, nil, route.Options{Seed: 7})
	require.NoError(t, err)
	now := time.Unix(1_700_000_000, 0)
	for _, d := range ds {
		at := now
		recordEmbeddings(reg, d, &at, 60, 100, 8000)
	}
	now = now.Add(30 * time.Second)
	for in, want := range map[int64]string{100: "fast-start", 1000: "fast-start", 8000: "slow-start"} {
		n := 0
		for i := range 1000 {
			plan, err := p.PickAt(route.Request{Model: "e", ExpectedInputTokens: in}, now.Add(time.Duration(i)*time.Millisecond))
			require.NoError(t, err)
			if plan.Deployments[0].Deployment.Provider == want {
				n++
			}
		}
		assert.GreaterOrEqual(t, n, 950, "%d tokens: %d of 1000 to %s", in, n, want)
	}
}
