package tpsroute

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"

	"github.com/tpsroute/tpsroute/fallback"
	"github.com/tpsroute/tpsroute/internal/sse"
	"github.com/tpsroute/tpsroute/measure"
	"github.com/tpsroute/tpsroute/replay"
	"github.com/tpsroute/tpsroute/route"
)

// doFleet is a Client over model "m" on a (us, cheap, down when aDown) and
// b (eu, dear, cache_control), in memory.
func doFleet(aDown bool) (*Client, *memFleet) {
	f := newMemFleet()
	var sa replay.Script = &replay.Profile{OutputTokens: 8}
	if aDown {
		sa = replay.WithFaults(&replay.Profile{OutputTokens: 8}, replay.Status(503, "", nil))
	}
	ua := f.add("a", map[string]replay.Script{"m": sa})
	ub := f.add("b", map[string]replay.Script{"m": &replay.Profile{OutputTokens: 8}})
	a, b := dep("a", "us", "m", ua), dep("b", "eu", "m", ub)
	a.Price, b.Price = measure.Price{Input: 0.1, Output: 0.2}, measure.Price{Input: 1, Output: 4}
	b.Capabilities.CacheControl = true
	cfg := Config{HTTPClient: &http.Client{Transport: f}, Deployments: []route.Deployment{a, b}}
	cfg.Route.Exploration, cfg.Route.Band, cfg.Route.ColdProbes = -1, -1, -1
	c, err := New(cfg)
	if err != nil {
		panic(err)
	}
	return c, f
}

const doBody = `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}],"x_vendor":{"keep":[1,{"deep":true}]},"seed":12345678901234567890,"prompt_cache_key":"s1"}`

func TestDo(t *testing.T) {
	t.Run("stream_relays_sse_with_deployment_and_attempts", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			c, f := doFleet(true)
			var rep Outcome
			r, err := c.Do(context.Background(), []byte(doBody), WithProviders("a", "b"), WithOutcome(&rep))
			require.NoError(t, err)
			assert.True(t, r.Stream)
			assert.Equal(t, 200, r.StatusCode)
			assert.Equal(t, "text/event-stream", r.Header.Get("Content-Type"))
			assert.Equal(t, "b", r.Outcome().Deployment.Provider)
			assert.Empty(t, r.Outcome().Deployment.APIKey, "no credential handed back")
			raw, err := io.ReadAll(r.Body)
			require.NoError(t, err)
			require.NoError(t, r.Body.Close())
			assert.True(t, strings.HasSuffix(string(raw), "data: [DONE]\n\n"), "the provider's bytes, [DONE] included")
			assert.Equal(t, replay.Text(8), sseText(raw))
			atts := r.Outcome().Attempts
			require.Len(t, atts, 2)
			assert.Equal(t, 503, atts[0].Status)
			assert.Equal(t, fallback.ClassNone, atts[1].Class)
			assert.EqualValues(t, 8, r.Outcome().Sample.OutputTokens)
			assert.Equal(t, "b", rep.Deployment.Provider, "WithOutcome is filled at EOF")

			sent := f.providers["b"].requests()
			require.Len(t, sent, 1)
			body := sent[0].Body
			assert.JSONEq(t, `{"keep":[1,{"deep":true}]}`, gjson.Get(body, "x_vendor").Raw, "unknown fields pass through")
			assert.Equal(t, "12345678901234567890", gjson.Get(body, "seed").Raw)
			assert.Equal(t, "s1", gjson.Get(body, "prompt_cache_key").Str, "b declares cache_control")
			assert.False(t, gjson.Get(f.providers["a"].requests()[0].Body, "prompt_cache_key").Exists(), "a does not")
		})
	})
	t.Run("non_stream_is_a_completion", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			c, _ := doFleet(false)
			r, err := c.Do(context.Background(), []byte(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`), WithOnly("a"))
			require.NoError(t, err)
			defer r.Body.Close()
			assert.False(t, r.Stream)
			assert.Equal(t, "application/json", r.Header.Get("Content-Type"))
			raw, err := io.ReadAll(r.Body)
			require.NoError(t, err)
			assert.Equal(t, "chat.completion", gjson.GetBytes(raw, "object").Str)
			assert.Equal(t, replay.Text(8), gjson.GetBytes(raw, "choices.0.message.content").Str)
			assert.Equal(t, "stop", gjson.GetBytes(raw, "choices.0.finish_reason").Str)
			assert.EqualValues(t, 8, gjson.GetBytes(raw, "usage.completion_tokens").Int())
		})
	})
	t.Run("early_close_is_the_callers_cancellation", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			f := newMemFleet()
			url := f.add("a", map[string]replay.Script{"m": &replay.Profile{TPS: 10, OutputTokens: 100}})
			c := mustNew(t, Config{HTTPClient: &http.Client{Transport: f}, Deployments: []route.Deployment{dep("a", "", "m", url)}})
			r, err := c.Do(context.Background(), []byte(`{"model":"m","stream":true,"messages":[]}`))
			require.NoError(t, err)
			_, err = r.Body.Read(make([]byte, 64))
			require.NoError(t, err)
			require.NoError(t, r.Body.Close())
			require.NoError(t, r.Body.Close(), "idempotent")
			synctest.Wait()
			st, ok := c.Stats().Lookup(measure.Key{Provider: "a", Model: "m"})
			require.True(t, ok)
			assert.EqualValues(t, 1, st.Canceled)
			assert.Zero(t, st.Errors, "not a provider failure")
			att := f.providers["a"].h.Attempts()
			require.Len(t, att, 1)
			assert.False(t, att[0].End.IsZero(), "the upstream request ended")
		})
	})
	t.Run("price_cap_drops", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			c, _ := doFleet(false)
			r, err := c.Do(context.Background(), []byte(doBody), WithProviders("b", "a"), WithPriceCap(0, 1))
			require.NoError(t, err)
			_, _ = io.Copy(io.Discard, r.Body)
			r.Body.Close()
			assert.Equal(t, "a", r.Outcome().Deployment.Provider, "b's output price 4 is above the cap")
			_, err = c.Do(context.Background(), []byte(doBody), WithPriceCap(0.05, 0))
			require.ErrorIs(t, err, route.ErrNoDeployment)
			assert.Equal(t, 503, c.HTTPError(err).Status)
		})
	})
	t.Run("pin_honours_an_open_breaker", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			c, _ := doFleet(true)
			// a is down: trip its breaker with calls restricted to it.
			for range 6 {
				_, err := c.Do(context.Background(), []byte(doBody), WithOnly("a"))
				require.Error(t, err)
			}
			require.Equal(t, route.BreakerOpen, c.Status(measure.Key{Provider: "a", Region: "us", Model: "m"}).Breaker)
			_, err := c.Do(context.Background(), []byte(doBody), WithPin("a", ""), WithOnly("a"), WithoutFallback())
			var fe *fallback.Error
			require.ErrorAs(t, err, &fe, "the pinned deployment is tried (or skipped), not refused as unknown")
		})
	})
}

func TestDoErrors(t *testing.T) {
	tests := []struct {
		name   string
		body   string
		opts   []CallOption
		status int
		param  string
		code   string
	}{
		{name: "not_json", body: `{"model":`, status: 400},
		{name: "no_model", body: `{"messages":[]}`, status: 400, param: "model"},
		{name: "no_messages", body: `{"model":"m"}`, status: 400, param: "messages"},
		{name: "stream_not_bool", body: `{"model":"m","messages":[],"stream":1}`, status: 400, param: "stream"},
		{name: "unknown_region", body: doBody, opts: []CallOption{WithRegion("mars")}, status: 400, param: "region"},
		{name: "unknown_provider_order", body: doBody, opts: []CallOption{WithProviders("zz")}, status: 400, param: "providers"},
		{name: "unknown_provider_only", body: doBody, opts: []CallOption{WithOnly("zz")}, status: 400, param: "only"},
		{name: "unknown_pin", body: doBody, opts: []CallOption{WithPin("zz", "")}, status: 400, param: "pin"},
		{name: "unknown_model", body: `{"model":"gpt-9","messages":[]}`, status: 404, param: "model", code: "model_not_found"},
		{name: "unknown_fallback_model", body: doBody, opts: []CallOption{WithModels("gpt-9")}, status: 404, param: "models", code: "model_not_found"},
		{name: "options_leave_nothing", body: doBody, opts: []CallOption{WithOnly("a"), WithIgnore("a")}, status: 503, code: "no_deployment_available"},
		{name: "last_attempts_status", body: doBody, opts: []CallOption{WithOnly("a")}, status: 503},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c, _ := doFleet(true)
				_, err := c.Do(context.Background(), []byte(tt.body), tt.opts...)
				require.Error(t, err)
				he := c.HTTPError(err)
				assert.Equal(t, tt.status, he.Status, he.Message)
				assert.Equal(t, tt.param, he.Param)
				if tt.code != "" {
					assert.Equal(t, tt.code, he.Code)
				}
				if tt.param != "" {
					assert.Contains(t, he.Message, tt.param, "the message names the field")
				}
			})
		})
	}
}

func TestHTTPError(t *testing.T) {
	c := mustNew(t, Config{Deployments: []route.Deployment{dep("a", "us", "m", "http://a.test/v1")}})
	fe := func(statuses ...int) error {
		e := &fallback.Error{}
		for _, s := range statuses {
			e.Attempts = append(e.Attempts, fallback.Attempt{Status: s, Err: errors.New("provider said key-a-us is wrong")})
		}
		return e
	}
	tests := []struct {
		name   string
		err    error
		status int
		typ    string
		code   string
	}{
		{name: "request", err: &RequestError{Param: "model", Reason: "x"}, status: 400, typ: "invalid_request_error"},
		{name: "pin", err: &route.PinError{Provider: "zz"}, status: 400, typ: "invalid_request_error"},
		{name: "model", err: &ModelError{Param: "model", Model: "x"}, status: 404, typ: "invalid_request_error", code: "model_not_found"},
		{name: "last_status", err: fe(500, 0, 429), status: 429, typ: "upstream_error"},
		{name: "last_status_before_a_statusless_attempt", err: fe(502, 0), status: 502, typ: "upstream_error"},
		{name: "no_status_503", err: fe(0, 0), status: 503, typ: "service_unavailable", code: "no_deployment_available"},
		{name: "no_deployment_503", err: route.ErrNoDeployment, status: 503, typ: "service_unavailable", code: "no_deployment_available"},
		{name: "canceled", err: context.Canceled, status: StatusClientClosedRequest, code: "client_closed_request"},
		{name: "closed_is_canceled", err: fallback.ErrClosed, status: StatusClientClosedRequest, code: "client_closed_request"},
		{name: "other_500", err: errors.New("boom"), status: 500, typ: "server_error"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			he := c.HTTPError(tt.err)
			require.NotNil(t, he)
			assert.Equal(t, tt.status, he.Status)
			if tt.typ != "" {
				assert.Equal(t, tt.typ, he.Type)
			}
			assert.Equal(t, tt.code, he.Code)
			assert.NotContains(t, he.Message, "key-a-us", "keys are redacted")
			w := httptest.NewRecorder()
			he.Write(w)
			assert.Equal(t, tt.status, w.Code)
			assert.Equal(t, "application/json", w.Header().Get("Content-Type"))
			assert.Equal(t, "false", w.Header().Get("X-Should-Retry"))
			assert.Equal(t, he.Message, gjson.Get(w.Body.String(), "error.message").Str)
			assert.True(t, gjson.Get(w.Body.String(), "error.param").Exists(), "param is always present (null when empty)")
		})
	}
	assert.Nil(t, c.HTTPError(nil))
}

// TestHTTPErrorForAPI: the one mapping from an error to a status and a class
// is answered in the call's API's shape: Anthropic's on Messages, with the
// type Anthropic gives the status, 529 overloaded_error for "nothing could
// serve it", and a provider's own Anthropic type kept; OpenAI's on every
// other API.
func TestHTTPErrorForAPI(t *testing.T) {
	c := mustNew(t, Config{Deployments: []route.Deployment{dep("a", "us", "m", "http://a.test/v1")}})
	tests := []struct {
		name   string
		he     *HTTPError
		status int
		typ    string
	}{
		{"request", c.HTTPError(&RequestError{Param: "max_tokens", Reason: "x"}), 400, "invalid_request_error"},
		{"unknown model", c.HTTPError(&ModelError{Param: "model", Model: "x"}), 404, "not_found_error"},
		{"not served on messages", c.HTTPError(&route.APIError{API: route.APIMessages, Model: "x"}), 404, "not_found_error"},
		{"no deployment", c.HTTPError(route.ErrNoDeployment), StatusOverloaded, "overloaded_error"},
		{"canceled", c.HTTPError(context.Canceled), StatusClientClosedRequest, "api_error"},
		{"other", c.HTTPError(errors.New("boom")), 500, "api_error"},
		{"unauthorized", &HTTPError{Status: 401, Type: "upstream_error", Message: "m"}, 401, "authentication_error"},
		{"rate limited", &HTTPError{Status: 429, Type: "upstream_error", Message: "m"}, 429, "rate_limit_error"},
		{"too large", &HTTPError{Status: 413, Type: "invalid_request_error", Message: "m"}, 413, "request_too_large"},
		{"gateway timeout", &HTTPError{Status: 504, Type: "upstream_error", Message: "m"}, 504, "timeout_error"},
		{"provider's 529", &HTTPError{Status: 529, Type: "overloaded_error", Message: "m"}, 529, "overloaded_error"},
		{"provider's own type", &HTTPError{Status: 400, Type: "billing_error", Message: "m"}, 400, "billing_error"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			he := tt.he.ForAPI(route.APIMessages)
			assert.Equal(t, tt.status, he.Status)
			assert.Equal(t, tt.typ, he.Type)
			w := httptest.NewRecorder()
			he.Write(w)
			assert.Equal(t, tt.status, w.Code)
			assert.Equal(t, "false", w.Header().Get("X-Should-Retry"))
			assert.JSONEq(t, `{"type":"error","error":{"type":`+strconv.Quote(tt.typ)+`,"message":`+strconv.Quote(he.Message)+`}}`, w.Body.String())
			for _, api := range []route.API{route.APIChat, route.APIResponses, route.APIEmbeddings, ""} {
				assert.Same(t, tt.he, tt.he.ForAPI(api), "OpenAI's shape: e itself")
			}
			assert.NotEqual(t, route.APIMessages, tt.he.API, "ForAPI copies")
		})
	}
	assert.Nil(t, (*HTTPError)(nil).ForAPI(route.APIMessages))
}

// sseText concatenates the delta.content of an SSE body.
func sseText(raw []byte) string {
	var b strings.Builder
	sse.ForEachData(raw, func(d []byte) {
		b.WriteString(gjson.GetBytes(d, "choices.0.delta.content").Str)
	})
	return b.String()
}
