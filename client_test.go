package tpsroute

import (
	"context"
	"log/slog"
	"net/http"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tpsroute/tpsroute/fallback"
	"github.com/tpsroute/tpsroute/measure"
	"github.com/tpsroute/tpsroute/replay"
	"github.com/tpsroute/tpsroute/route"
)

func TestSmoke(t *testing.T) {
	f := newTCPFleet(t)
	a := f.add("a", map[string]replay.Script{"m-a": &replay.Profile{OutputTokens: 20}})
	c := mustNew(t, Config{HTTPClient: f.client, Deployments: []route.Deployment{
		{Provider: "a", Model: "m", ProviderModel: "m-a", BaseURL: a, APIKey: "ka", Capabilities: route.Capabilities{IncludeUsage: true}},
	}})
	s, text, err := streamOnce(t, c, "m")
	require.NoError(t, err)
	assert.Equal(t, replay.Text(20), text)
	assert.Equal(t, "a", s.Deployment().Provider)
	assert.EqualValues(t, 20, s.Sample().OutputTokens)
	got, err := c.Chat.Completions.New(context.Background(), userParams("m", "hi"))
	require.NoError(t, err)
	assert.Equal(t, replay.Text(20), got.Choices[0].Message.Content)
	assert.EqualValues(t, 20, got.Usage.CompletionTokens)
}

func TestHooksAndProviderErrors(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newMemFleet()
		policy := map[string]replay.Script{"m": replay.WithFaults(&replay.Profile{}, replay.ContentPolicy())}
		ok := map[string]replay.Script{"m": &replay.Profile{OutputTokens: 3}}
		var plans []route.Plan
		var attempts []fallback.Attempt
		var mu sync.Mutex
		c := mustNew(t, Config{
			HTTPClient:  &http.Client{Transport: f},
			Deployments: []route.Deployment{dep("p", "", "m", f.add("p", policy)), dep("q", "", "m", f.add("q", ok))},
			OnDecision:  func(_ route.Request, p route.Plan) { mu.Lock(); plans = append(plans, p); mu.Unlock() },
			OnAttempt:   func(a fallback.Attempt) { mu.Lock(); attempts = append(attempts, a); mu.Unlock() },
			Logger:      slog.New(slog.DiscardHandler),
		})

		// A content-policy rejection stops the call: no failover, the
		// provider's error is reachable.
		s, _, err := streamOnce(t, c, "m", WithPin("p", ""),
			WithRequestOptions(option.WithMaxRetries(5), option.WithBaseURL("http://elsewhere.invalid/")))
		require.Error(t, err)
		var oe *openai.Error
		require.ErrorAs(t, err, &oe)
		assert.Equal(t, http.StatusBadRequest, oe.StatusCode)
		require.Len(t, s.Attempts(), 1, "a policy rejection is not retried and the caller's retry option is overridden")
		assert.Zero(t, f.providers["q"].count())

		var rep Report
		_, err = c.Chat.Completions.New(context.Background(), userParams("m", "hi"), WithPin("q", ""), WithReport(&rep))
		require.NoError(t, err)
		assert.Equal(t, "q", rep.Deployment.Provider)
		assert.Empty(t, rep.Deployment.APIKey, "a report never carries a key")
		assert.EqualValues(t, 3, rep.Sample.OutputTokens)

		mu.Lock()
		defer mu.Unlock()
		require.Len(t, plans, 2)
		assert.Equal(t, "p", plans[0].Deployments[0].Deployment.Provider)
		require.Len(t, attempts, 2)
		assert.Equal(t, fallback.ClassPolicy, attempts[0].Class)
		assert.Equal(t, fallback.ClassNone, attempts[1].Class)
	})
}

func TestHedge(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newMemFleet()
		slowLater := &replay.Profile{TTFT: 100 * time.Millisecond, OutputTokens: 3,
			Phases: []replay.Phase{{After: time.Minute, TTFT: 10 * time.Second}}}
		c := mustNew(t, Config{
			HTTPClient: &http.Client{Transport: f},
			Deployments: []route.Deployment{
				dep("a", "", "m", f.add("a", map[string]replay.Script{"m": slowLater})),
				dep("b", "", "m", f.add("b", map[string]replay.Script{"m": &replay.Profile{TTFT: 100 * time.Millisecond, OutputTokens: 3}})),
			},
			Measure: measure.Options{MinSamples: 3}, // a 5-minute window
		})
		for range 20 { // measure a's TTFT p95 (~100 ms)
			_, _, err := streamOnce(t, c, "m", WithPin("a", ""))
			require.NoError(t, err)
			_, _, err = streamOnce(t, c, "m", WithPin("b", ""))
			require.NoError(t, err)
		}
		time.Sleep(time.Minute) // a now takes 10 s to its first token

		t0 := time.Now()
		s, text, err := streamOnce(t, c, "m", WithPin("a", ""), WithHedge())
		require.NoError(t, err)
		assert.Equal(t, replay.Text(3), text)
		assert.Equal(t, "b", s.Deployment().Provider, "the hedge on b wins")
		assert.Less(t, time.Since(t0), time.Second)

		t0 = time.Now()
		s, _, err = streamOnce(t, c, "m", WithPin("a", ""))
		require.NoError(t, err)
		assert.Equal(t, "a", s.Deployment().Provider, "without WithHedge the call waits for a")
		assert.GreaterOrEqual(t, time.Since(t0), 10*time.Second)
	})
}

func TestModels(t *testing.T) {
	const u = "http://127.0.0.1:1/v1"
	rev := func(d route.Deployment, r string) route.Deployment { d.Revision = r; return d }
	tests := []struct {
		name string
		deps []route.Deployment
		want []string
	}{
		{"one model", []route.Deployment{dep("a", "us", "m", u), dep("b", "eu", "m", u)}, []string{"m"}},
		{"config order", []route.Deployment{dep("a", "", "z", u), dep("a", "", "b", u)}, []string{"z", "b"}},
		{"revisions after the names", []route.Deployment{rev(dep("a", "", "m", u), "r1"), rev(dep("b", "", "m", u), "r2"), dep("c", "", "n", u)},
			[]string{"m", "n", "m@r1", "m@r2"}},
		{"wildcard adds nothing", []route.Deployment{dep("gw", "", "*", u), dep("a", "", "m", u)}, []string{"m"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := mustNew(t, Config{Deployments: tt.deps})
			assert.Equal(t, tt.want, c.Models())
		})
	}
}
