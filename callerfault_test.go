package tpsroute

import (
	"cmp"
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tpsroute/tpsroute/fallback"
	"github.com/tpsroute/tpsroute/replay"
	"github.com/tpsroute/tpsroute/route"
)

// Bodies for the caller-fault tests. The fake providers of
// callerFaultScripts answer by max_tokens: 7 is an invalid request, 8 a
// prompt over the context window, 9 a content-policy rejection, anything
// else a normal answer.
const (
	goodBody          = `{"model":"m","messages":[{"role":"user","content":"hi"}],"stream":true}`
	invalidBody       = `{"model":"m","messages":[{"role":"user","content":"hi"}],"stream":true,"max_tokens":7}`
	contextLengthBody = `{"model":"m","messages":[{"role":"user","content":"hi"}],"stream":true,"max_tokens":8}`
	policyBody        = `{"model":"m","messages":[{"role":"user","content":"hi"}],"stream":true,"max_tokens":9}`
	// unbuildableBody is issue 33's: include_usage cannot be set inside an array.
	unbuildableBody = `{"model":"m","messages":[{"role":"user","content":"hi"}],"stream":true,"stream_options":["x"]}`
)

// callerFaultScripts is one fake provider of model "m" at tps tokens/s that
// refuses the caller-fault bodies above as real providers do.
func callerFaultScripts(tps float64) map[string]replay.Script {
	ok := &replay.Profile{TTFT: 100 * time.Millisecond, TPS: tps, OutputTokens: 50}
	return map[string]replay.Script{"m": replay.Func(func(c replay.Call) replay.Script {
		switch c.MaxTokens {
		case 7:
			return replay.WithFaults(ok, replay.Status(http.StatusBadRequest,
				`{"error":{"message":"temperature must be at most 2","type":"invalid_request_error","param":"temperature","code":null}}`, nil))
		case 8:
			return replay.WithFaults(ok, replay.ContextLengthExceeded())
		case 9:
			return replay.WithFaults(ok, replay.ContentPolicy())
		}
		return ok
	})}
}

// sendBody sends body through Client.Do and returns who answered ("" for an
// error) and the HTTP status the caller gets.
func sendBody(t *testing.T, c *Client, body string) (provider string, status int) {
	t.Helper()
	resp, err := c.Do(context.Background(), []byte(body))
	if err != nil {
		return "", c.HTTPError(err).Status
	}
	_, err = io.Copy(io.Discard, resp.Body)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	return resp.Outcome().Deployment.Provider, http.StatusOK
}

// TestCallerFaultsKeepTraffic is issue 33's SLO scenario: with
// slo.max_error_rate set, a stream of requests that fail on the caller's
// input (built by nobody, or refused upstream as invalid, too long or
// against a content policy) is answered 400 and charged to no deployment, so
// the faster deployment keeps its share of the good calls that follow.
// Before, each was counted as the error of the deployment that got it (a's
// error rate went to about 0.56) and the good calls went to b (5 of 40 to a).
func TestCallerFaultsKeepTraffic(t *testing.T) {
	tests := []struct {
		name, body string
	}{
		{"unbuildable_stream_options", unbuildableBody},
		{"upstream_invalid_request", invalidBody},
		{"upstream_context_length", contextLengthBody},
		{"upstream_content_policy", policyBody},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := newMemFleet()
				a, b := f.add("a", callerFaultScripts(200)), f.add("b", callerFaultScripts(100))
				c := mustNew(t, Config{
					HTTPClient:  &http.Client{Transport: f},
					Deployments: []route.Deployment{dep("a", "", "m", a), dep("b", "", "m", b)},
					Route:       route.Options{Seed: 7, SLO: route.SLO{MaxErrorRate: 0.2}},
					Measure:     testMeasure(),
				})
				good := func(n int) []string {
					var seq []string
					for range n {
						p, status := sendBody(t, c, goodBody)
						require.Equal(t, http.StatusOK, status)
						seq = append(seq, p)
						time.Sleep(time.Second)
					}
					return seq
				}
				warm := good(30)
				require.Greater(t, share(warm[15:], "a"), 0.8, "a, the faster, takes the traffic: %s", strings.Join(warm, ""))
				statuses := map[int]int{}
				for range 40 {
					_, status := sendBody(t, c, tt.body)
					statuses[status]++
					time.Sleep(100 * time.Millisecond)
				}
				assert.Equal(t, map[int]int{http.StatusBadRequest: 40}, statuses, "the caller's fault is the caller's answer")
				for _, p := range []string{"a", "b"} {
					st, ok := c.Stats().Lookup(dep(p, "", "m", "").Key())
					require.True(t, ok)
					assert.Zero(t, st.Errors, "%s: no error charged", p)
					assert.Zero(t, st.ErrorRate, "%s", p)
				}
				after := good(40)
				t.Logf("after: %s", strings.Join(after, ""))
				assert.GreaterOrEqual(t, share(after, "a"), 0.8, "a keeps its traffic")
			})
		})
	}
}

// sseResponse is a round trip that answers HTTP 200 with the SSE text sse.
func sseResponse(sse string) rtFunc {
	return func(r *http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: http.StatusOK, Header: http.Header{"Content-Type": {"text/event-stream"}},
			Body: io.NopCloser(strings.NewReader(sse)), Request: r}, nil
	}
}

// TestClassificationTable has one case per row of docs/STREAM_QUIRKS.md's
// "Who is charged" table: what deployment a answers (b is healthy and
// second in the plan), the class of a's attempt, whether the call fails over
// to b, whether a's error rate and breaker (tripped by one failure here)
// count it, and the status the caller gets.
func TestClassificationTable(t *testing.T) {
	const role = `data: {"id":"x","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}` + "\n\n"
	const hello = `data: {"id":"x","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"hello"}}]}` + "\n\n"
	status := func(code int, body string) replay.Fault { return replay.Status(code, body, nil) }
	tests := []struct {
		name      string
		body      string         // the request; "" means goodBody
		fault     replay.Fault   // a's answer, unless sse is set
		sse       string         // a's HTTP 200 stream, raw
		class     fallback.Class // a's attempt; ClassSkipped means a was not sent anything
		failsOver bool           // b answered
		errorRate bool           // counts in a's error rate
		breaker   bool           // opens a's breaker
		status    int            // what the caller gets
		cancel    bool           // the caller cancels after 1 s
		deadline  bool           // the caller's deadline is 1 s
	}{
		{name: "body that cannot be built", body: unbuildableBody, class: fallback.ClassSkipped, status: 400},
		{name: "400 invalid request", fault: status(400, `{"error":{"message":"bad temperature","type":"invalid_request_error"}}`), class: fallback.ClassInvalid, status: 400},
		{name: "422 invalid request", fault: status(422, `{"detail":"messages: field required"}`), class: fallback.ClassInvalid, status: 422},
		{name: "431 caller's headers", fault: status(431, ""), class: fallback.ClassInvalid, status: 431},
		{name: "400 context_length_exceeded", fault: replay.ContextLengthExceeded(), class: fallback.ClassContextLength, status: 400},
		{name: "413", fault: status(413, ""), class: fallback.ClassContextLength, status: 413},
		{name: "in-stream context length", sse: role + `data: {"error":{"message":"This model's maximum context length is 8192 tokens","type":"BadRequestError","code":400}}` + "\n\n",
			class: fallback.ClassContextLength, status: 400},
		{name: "400 content policy", fault: replay.ContentPolicy(), class: fallback.ClassPolicy, status: 400},
		{name: "403 content policy", fault: status(403, `{"error":{"message":"flagged by moderation"}}`), class: fallback.ClassPolicy, status: 403},
		{name: "401", fault: replay.Unauthorized(), class: fallback.ClassAuth, failsOver: true, errorRate: true, breaker: true, status: 200},
		{name: "400 invalid api key", fault: status(400, `[{"error":{"code":400,"message":"API key not valid. Please pass a valid API key.","status":"INVALID_ARGUMENT"}}]`),
			class: fallback.ClassAuth, failsOver: true, errorRate: true, breaker: true, status: 200},
		{name: "404", fault: status(404, `{"error":{"code":"model_not_found"}}`), class: fallback.ClassUnavailable, failsOver: true, errorRate: true, breaker: true, status: 200},
		{name: "402", fault: status(402, ""), class: fallback.ClassUnavailable, failsOver: true, errorRate: true, breaker: true, status: 200},
		{name: "429 insufficient_quota", fault: replay.InsufficientQuota(), class: fallback.ClassUnavailable, failsOver: true, errorRate: true, breaker: true, status: 200},
		{name: "429 rate limit", fault: replay.RateLimited("1"), class: fallback.ClassRateLimited, failsOver: true, errorRate: true, status: 200},
		{name: "500", fault: status(500, ""), class: fallback.ClassRetry, failsOver: true, errorRate: true, breaker: true, status: 200},
		{name: "connection reset", fault: replay.ResetBeforeHeaders(), class: fallback.ClassRetry, failsOver: true, errorRate: true, breaker: true, status: 200},
		{name: "503", fault: status(503, ""), class: fallback.ClassNext, failsOver: true, errorRate: true, breaker: true, status: 200},
		{name: "405", fault: status(405, ""), class: fallback.ClassNext, failsOver: true, errorRate: true, breaker: true, status: 200},
		{name: "in-stream error before output", fault: replay.ErrorEventAt(1, replay.OpenAI), class: fallback.ClassNext, failsOver: true, errorRate: true, breaker: true, status: 200},
		{name: "empty stream", sse: role + "data: [DONE]\n\n", class: fallback.ClassNext, failsOver: true, errorRate: true, breaker: true, status: 200},
		{name: "cut after output", sse: role + hello, class: fallback.ClassMidStream, errorRate: true, breaker: true, status: 200},
		{name: "caller cancels", fault: replay.Hang(), cancel: true, class: fallback.ClassCanceled, status: StatusClientClosedRequest},
		{name: "caller's deadline", fault: replay.Hang(), deadline: true, class: fallback.ClassCanceled, errorRate: true, status: 503},
	}
	for _, tt := range tests {
		t.Run(strings.ReplaceAll(tt.name, " ", "_"), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := newMemFleet()
				var a string
				ok := &replay.Profile{TTFT: 100 * time.Millisecond, TPS: 100, OutputTokens: 20}
				if tt.sse != "" {
					a = f.add("a", callerFaultScripts(100))
					f.rts["a"] = sseResponse(tt.sse)
				} else if tt.fault.String() != "" {
					a = f.add("a", map[string]replay.Script{"m": replay.WithFaults(ok, tt.fault)})
				} else {
					a = f.add("a", map[string]replay.Script{"m": ok})
				}
				b := f.add("b", map[string]replay.Script{"m": ok})
				da, db := dep("a", "", "m", a), dep("b", "", "m", b)
				c := mustNew(t, Config{
					HTTPClient:  &http.Client{Transport: f},
					Deployments: []route.Deployment{da, db},
					Route:       route.Options{Seed: 1},
					Fallback:    fallback.Options{Breaker: fallback.BreakerSettings{ConsecutiveFailures: 1}},
				})
				body := cmp.Or(tt.body, goodBody)
				var (
					atts   []fallback.Attempt
					got    int
					answer string
				)
				ctx := context.Background()
				switch {
				case tt.cancel:
					var cancel context.CancelFunc
					ctx, cancel = context.WithCancel(ctx)
					defer time.AfterFunc(time.Second, cancel).Stop()
				case tt.deadline:
					var cancel context.CancelFunc
					ctx, cancel = context.WithTimeout(ctx, time.Second)
					defer cancel()
				}
				resp, err := c.Do(ctx, []byte(body), WithPin("a", ""))
				if err != nil {
					got = c.HTTPError(err).Status
					if fe := (*fallback.Error)(nil); errors.As(err, &fe) {
						atts = fe.Attempts
					}
				} else {
					got, answer = resp.StatusCode, resp.Outcome().Deployment.Provider
					_, _ = io.Copy(io.Discard, resp.Body)
					require.NoError(t, resp.Body.Close())
					atts = resp.Outcome().Attempts
				}
				assert.Equal(t, tt.status, got, "the caller's status")
				if tt.class == fallback.ClassSkipped {
					assert.Zero(t, f.providers["a"].count()+f.providers["b"].count(), "nothing sent")
				} else {
					require.NotEmpty(t, atts)
					assert.Equal(t, da.Key(), atts[0].Key)
					assert.Equal(t, tt.class, atts[0].Class, "a's class")
				}
				assert.Equal(t, tt.failsOver, answer == "b", "fails over to b")
				st, _ := c.Stats().Lookup(da.Key())
				assert.Equal(t, tt.errorRate, st.Errors > 0, "counts in a's error rate (errors %d, by class %v)", st.Errors, st.ErrorsByClass)
				assert.Equal(t, tt.breaker, c.Status(da.Key()).Breaker != route.BreakerClosed, "moves a's breaker")
			})
		})
	}
}

// TestBuildErrorIsRequestError checks the Client's BuildFunc: a body it
// cannot edit (here one readRequest would have refused) is the caller's
// *RequestError, which Client.HTTPError answers with 400, not a failure
// of the deployment.
func TestBuildErrorIsRequestError(t *testing.T) {
	d := route.Deployment{Provider: "a", Model: "m", BaseURL: "http://a.invalid/v1"}
	cl := &call{info: requestInfo{Model: "m"}}
	_, err := cl.build(context.Background(), d, []byte(unbuildableBody))
	var re *RequestError
	require.ErrorAs(t, err, &re)
	assert.Contains(t, err.Error(), "cannot be sent")
	assert.Equal(t, http.StatusBadRequest, (&Client{}).HTTPError(err).Status)
}

// FuzzReadRequestBuilds holds readRequest and the Client's BuildFunc to one
// rule: every body readRequest accepts can be built for every kind of
// deployment, so no accepted request fails as an attempt for want of a body.
func FuzzReadRequestBuilds(f *testing.F) {
	for _, s := range []string{
		goodBody, invalidBody, unbuildableBody,
		`{"model":"m","messages":[],"stream_options":{"include_usage":false}}`,
		`{"model":"m","messages":[],"stream_options":null,"prompt_cache_key":"k"}`,
		`{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"x","cache_control":{"type":"ephemeral"}}]}],"tools":[{"cache_control":1}]}`,
		`{"model":"m","messages":[],"stream_options":{},"stream_options":[1]}`,
		`{"model":"m","messages":[],"stream\u005foptions":[1]}`,
		`{"model":"m","messages":{"0":1}}`,
	} {
		f.Add([]byte(s))
	}
	plain := route.Deployment{Provider: "a", Model: "m", BaseURL: "http://a.invalid/v1"}
	caching, noOpts, wild := plain, plain, plain
	caching.Capabilities.CacheControl = true
	noOpts.Capabilities.NoStreamOptions = true
	wild.Model = route.Wildcard
	f.Fuzz(func(t *testing.T, body []byte) {
		info, err := readRequest(body)
		if err != nil {
			return
		}
		cl := &call{info: info}
		cl.cfg.req.CacheKey = "k"
		for _, d := range []route.Deployment{plain, caching, noOpts, wild} {
			if _, err := cl.build(context.Background(), d, body); err != nil {
				t.Fatalf("readRequest accepted %q, but it cannot be built for %+v: %v", body, d.Capabilities, err)
			}
		}
	})
}
