package tpsroute

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/openai/openai-go/v3"

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
		{Provider: "a", Model: "m", ProviderModel: "m-a", BaseURL: a, APIKey: "ka"},
	}})
	s, text, err := streamOnce(t, c, "m")
	require.NoError(t, err)
	assert.Equal(t, replay.Text(20), text)
	assert.Equal(t, "a", s.Outcome().Deployment.Provider)
	assert.EqualValues(t, 20, s.Outcome().Sample.OutputTokens)
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
		s, _, err := streamOnce(t, c, "m", WithPin("p", ""))
		require.Error(t, err)
		var oe *openai.Error
		require.ErrorAs(t, err, &oe)
		assert.Equal(t, http.StatusBadRequest, oe.StatusCode)
		require.Len(t, s.Outcome().Attempts, 1, "a policy rejection is not retried")
		assert.Zero(t, f.providers["q"].count())

		var rep Outcome
		_, err = c.Chat.Completions.New(context.Background(), userParams("m", "hi"), WithPin("q", ""), WithOutcome(&rep))
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
		assert.Equal(t, "b", s.Outcome().Deployment.Provider, "the hedge on b wins")
		assert.Less(t, time.Since(t0), time.Second)

		t0 = time.Now()
		s, _, err = streamOnce(t, c, "m", WithPin("a", ""))
		require.NoError(t, err)
		// Without WithHedge, no hedge: a is left only at its measured TTFT
		// deadline (3× a p95 of ~100 ms, at least 3 s), not at the 15 s default.
		assert.Equal(t, "b", s.Outcome().Deployment.Provider, "without WithHedge the call fails over at a's TTFT deadline")
		assert.GreaterOrEqual(t, time.Since(t0), 3*time.Second)
		assert.Less(t, time.Since(t0), 4*time.Second)
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
		{"revisions after the names", []route.Deployment{rev(dep("a", "", "m", u), "r1"), dep("b", "", "m", u), dep("c", "", "n", u)},
			[]string{"m", "n", "m@r1"}},
		// A call for "m" is served by no deployment here (see
		// TestRevisionOnlyModel), so "m" is not listed.
		{"a model configured only with revisions is listed with them only", []route.Deployment{rev(dep("a", "", "m", u), "r1"), rev(dep("b", "", "m", u), "r2"), dep("c", "", "n", u)},
			[]string{"n", "m@r1", "m@r2"}},
		{"wildcard adds nothing", []route.Deployment{dep("gw", "", "*", u), dep("a", "", "m", u)}, []string{"m"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := mustNew(t, Config{Deployments: tt.deps})
			assert.Equal(t, tt.want, c.ModelIDs())
		})
	}
}

// TestWithDeadlines: per-call deadline overrides reach fallback through every
// door (NewStreaming, Do, the Transport), and a negative field turns a
// deadline off for that call only.
func TestWithDeadlines(t *testing.T) {
	type door func(c *Client, opts ...CallOption) (provider string, err error)
	viaStream := func(c *Client, opts ...CallOption) (string, error) {
		s := c.Chat.Completions.NewStreaming(context.Background(), userParams("m", "hi"), opts...)
		defer s.Close()
		_, err := drain(t, s)
		return s.Outcome().Deployment.Provider, err
	}
	viaDo := func(c *Client, opts ...CallOption) (string, error) {
		r, err := c.Do(context.Background(), []byte(`{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`), opts...)
		if err != nil {
			return "", err
		}
		defer r.Body.Close()
		_, err = io.Copy(io.Discard, r.Body)
		return r.Outcome().Deployment.Provider, err
	}
	viaTransport := func(c *Client, opts ...CallOption) (string, error) {
		var rep Outcome
		ctx := ContextWithOptions(context.Background(), append(opts, WithOutcome(&rep))...)
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://x.invalid/v1/chat/completions",
			strings.NewReader(`{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`))
		require.NoError(t, err)
		resp, err := c.Transport().RoundTrip(req)
		require.NoError(t, err)
		_, err = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return "", rep.Err
		}
		return rep.Deployment.Provider, err
	}
	doors := map[string]door{"NewStreaming": viaStream, "Do": viaDo, "Transport": viaTransport}
	tests := []struct {
		name     string
		opts     []CallOption
		provider string        // "" means the call fails
		wantErr  error         // with this error
		elapsed  time.Duration // virtual time the call takes
	}{
		{"config_ttft_waits_for_the_slow_answer", nil, "a", nil, 5 * time.Second},
		{"ttft_override_fails_over", []CallOption{WithDeadlines(fallback.Deadlines{TTFT: time.Second})}, "b", nil, time.Second},
		{"later_option_replaces", []CallOption{WithDeadlines(fallback.Deadlines{TTFT: time.Second}), WithDeadlines(fallback.Deadlines{})}, "a", nil, 5 * time.Second},
		{"max_duration_override_ends_the_attempt", []CallOption{WithoutFallback(), WithDeadlines(fallback.Deadlines{MaxDuration: 2 * time.Second})},
			"", fallback.ErrMaxDuration, 2 * time.Second},
		{"headers_off_ttft_tight", []CallOption{WithDeadlines(fallback.Deadlines{Headers: -1, TTFT: 3 * time.Second})}, "b", nil, 3 * time.Second},
	}
	for name, call := range doors {
		for _, tt := range tests {
			t.Run(name+"/"+tt.name, func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					f := newMemFleet()
					slow := &replay.Profile{TTFT: 5 * time.Second, OutputTokens: 3}
					fast := &replay.Profile{TTFT: 100 * time.Millisecond, OutputTokens: 3}
					c := mustNew(t, Config{
						HTTPClient: &http.Client{Transport: f},
						Deployments: []route.Deployment{
							dep("a", "", "m", f.add("a", map[string]replay.Script{"m": slow})),
							dep("b", "", "m", f.add("b", map[string]replay.Script{"m": fast})),
						},
					})
					start := time.Now()
					got, err := call(c, append([]CallOption{WithPin("a", "")}, tt.opts...)...)
					el := time.Since(start)
					if tt.wantErr != nil {
						require.ErrorIs(t, err, tt.wantErr)
					} else {
						require.NoError(t, err)
					}
					assert.Equal(t, tt.provider, got)
					assert.GreaterOrEqual(t, el, tt.elapsed)
					assert.Less(t, el, tt.elapsed+500*time.Millisecond)
				})
			})
		}
	}
}

// TestMeteringByDefault is the README's example with prices: a deployment
// that declares no capabilities is asked for usage, so input tokens and
// their cost are metered on every path (New, NewStreaming, Transport);
// NoStreamOptions is the explicit opt-out.
func TestMeteringByDefault(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newMemFleet()
		prof := map[string]replay.Script{"llama": &replay.Profile{OutputTokens: 10}}
		priced := measure.Price{Input: 1, Output: 2}
		c := mustNew(t, Config{HTTPClient: &http.Client{Transport: f}, Deployments: []route.Deployment{
			{Provider: "usage", Model: "llama", BaseURL: f.add("usage", prof), Price: priced},
			{Provider: "nousage", Model: "other", ProviderModel: "llama", BaseURL: f.add("nousage", prof), Price: priced,
				Capabilities: route.Capabilities{NoStreamOptions: true}},
		}})
		ctx := context.Background()
		for _, model := range []string{"llama", "other"} {
			_, err := c.Chat.Completions.New(ctx, userParams(model, "Hi there"))
			require.NoError(t, err)
			_, _, err = streamOnce(t, c, model)
			require.NoError(t, err)
			req, err := http.NewRequest(http.MethodPost, "http://x.invalid/v1/chat/completions",
				strings.NewReader(`{"model":"`+model+`","stream":true,"messages":[{"role":"user","content":"Hi there"}]}`))
			require.NoError(t, err)
			resp, err := c.Transport().RoundTrip(req)
			require.NoError(t, err)
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		snap := c.Stats()
		st, ok := snap.Lookup(measure.Key{Provider: "usage", Model: "llama"})
		require.True(t, ok)
		assert.EqualValues(t, 3, st.Requests)
		assert.Positive(t, st.InputTokens, "input tokens are metered without any capability declared")
		assert.EqualValues(t, 30, st.OutputTokens)
		assert.InDelta(t, (float64(st.InputTokens)*1+30*2)/1e6, st.Cost, 1e-12, "input cost included")
		for _, r := range f.providers["usage"].requests() {
			assert.Contains(t, r.Body, `"include_usage":true`)
		}

		st, ok = snap.Lookup(measure.Key{Provider: "nousage", Model: "other"})
		require.True(t, ok)
		assert.Zero(t, st.InputTokens, "the opt-out asks for no usage")
		for _, r := range f.providers["nousage"].requests() {
			assert.NotContains(t, r.Body, "stream_options")
		}
	})
}

// TestOwnUpstreamTransport: a Config without a transport gets one of the
// Client's own with a 64 KiB read buffer per connection, whose idle
// connections Close closes; a caller's transport is used as given and Close
// leaves it alone.
func TestOwnUpstreamTransport(t *testing.T) {
	closed := make(chan struct{}, 1)
	h := replay.NewHandler(map[string]replay.Script{"m": &replay.Profile{OutputTokens: 20}})
	s := httptest.NewUnstartedServer(h)
	s.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateClosed {
			select {
			case closed <- struct{}{}:
			default:
			}
		}
	}
	s.Start()
	t.Cleanup(s.Close)
	deps := []route.Deployment{{Provider: "a", Model: "m", BaseURL: s.URL + "/v1", APIKey: "k"}}

	for _, cfg := range []Config{{}, {HTTPClient: &http.Client{}}} {
		cfg.Deployments = deps
		c := mustNew(t, cfg)
		require.NotNil(t, c.own)
		assert.Equal(t, 64<<10, c.own.ReadBufferSize)
	}

	c := mustNew(t, Config{Deployments: deps})
	out, err := c.Chat.Completions.New(context.Background(), userParams("m", "hi"))
	require.NoError(t, err)
	assert.Equal(t, int64(20), out.Usage.CompletionTokens)
	require.NoError(t, c.Close())
	<-closed // Close closed the idle connection (or the test times out)

	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	mine := mustNew(t, Config{HTTPClient: &http.Client{Transport: tr}, Deployments: deps})
	assert.Nil(t, mine.own)

	// A program's http.DefaultTransport that is not an *http.Transport is
	// used as it is, not cloned.
	assert.Nil(t, upstreamTransport(rtFunc(func(*http.Request) (*http.Response, error) { return nil, nil })))
	def := &http.Transport{MaxConnsPerHost: 3}
	own := upstreamTransport(def)
	require.NotNil(t, own)
	assert.NotSame(t, def, own)
	assert.Equal(t, 3, own.MaxConnsPerHost, "the default's settings are kept")
	assert.Equal(t, 64<<10, own.ReadBufferSize)
	assert.Zero(t, def.ReadBufferSize, "the default itself is not changed")
}
