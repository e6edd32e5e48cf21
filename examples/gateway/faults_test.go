package main

import (
	"bufio"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"

	"github.com/tpsroute/tpsroute/fallback"
	"github.com/tpsroute/tpsroute/replay"
	"github.com/tpsroute/tpsroute/route"
)

const answer = 20 // tokens in every healthy answer of these tests

// pair is a gateway over a (faulted by faults) then b (healthy); b may
// continue a prefill.
func pair(t *testing.T, mid fallback.MidStreamPolicy, faults ...replay.Fault) *env {
	return pairMalformed(t, mid, fallback.MalformedSkip, faults...)
}

// pairMalformed is pair with a malformed-event policy.
func pairMalformed(t *testing.T, mid fallback.MidStreamPolicy, mal fallback.MalformedPolicy, faults ...replay.Fault) *env {
	a, b := dep("a", "us", "m"), dep("b", "us", "m")
	b.Capabilities.AssistantPrefill = true
	cfg := testConfig(a, b)
	cfg.Fallback.MidStream = mid
	cfg.Fallback.Malformed = mal
	return newEnv(t, map[string]replay.Script{
		"a-m": replay.WithFaults(prof(answer), faults...),
		"b-m": prof(answer),
	}, cfg, options{})
}

// orderAB names a then b as the providers' order.
const orderAB = `"provider":{"order":["a","b"]}`

// TestPreCommitFaultsInvisible: every fault before the first output chunk
// fails over, and the client sees one clean stream from b.
func TestPreCommitFaultsInvisible(t *testing.T) {
	tests := []struct {
		name      string
		fault     replay.Fault
		malformed fallback.MalformedPolicy
	}{
		{name: "503", fault: replay.Status(503, "", nil)},
		{name: "500_twice", fault: replay.Status(500, "", nil)},
		{name: "429_retry_after", fault: replay.RateLimited("30")},
		{name: "429_insufficient_quota", fault: replay.InsufficientQuota()},
		{name: "401", fault: replay.Unauthorized()},
		{name: "404_model", fault: replay.Status(404, "", nil)},
		{name: "reset_before_headers", fault: replay.ResetBeforeHeaders()},
		{name: "error_event_before_output", fault: replay.ErrorEventAt(1, replay.OpenAI)},
		{name: "cut_before_output", fault: replay.CutAfter(1)},
		{name: "malformed_before_output", fault: replay.MalformedAt(1), malformed: fallback.MalformedFail},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := pairMalformed(t, fallback.MidStreamError, tt.malformed, tt.fault)
			s := stream(t, e.serve(t), req("m", true, orderAB))
			require.Equal(t, http.StatusOK, s.status, s.rawBody)
			assert.Equal(t, "b/us/m", s.header.Get("X-Tpsroute-Deployment"))
			assert.Equal(t, replay.Text(answer), s.text)
			assert.True(t, s.done, "ends with [DONE]")
			assert.Empty(t, s.errEv)
			assert.Equal(t, "a", e.cap.hosts()[0])
			assert.NotContains(t, s.rawBody, "secret")
		})
	}
}

// midStall pauses a's stream after its fifth chunk, so the chunks before it
// reach the gateway in their own read (see TestMidStreamFaults).
func midStall() replay.Fault { return replay.StallAfter(5, 100*time.Millisecond) }

// TestMidStreamFaults: after the first output chunk a failure is an SSE
// error event and never a [DONE]; with continuation the stream goes on.
func TestMidStreamFaults(t *testing.T) {
	tests := []struct {
		name  string
		mid   fallback.MidStreamPolicy
		fault replay.Fault
	}{
		{name: "cut", mid: fallback.MidStreamError, fault: replay.CutAfter(6)},
		{name: "error_event_openai", mid: fallback.MidStreamError, fault: replay.ErrorEventAt(6, replay.OpenAI)},
		{name: "error_event_vllm_then_done", mid: fallback.MidStreamError, fault: replay.ErrorEventAt(6, replay.VLLM)},
		{name: "malformed", mid: fallback.MidStreamError, fault: replay.MalformedAt(6)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// replay writes events already due in one write, so with no
			// pause the fault would arrive in the gateway's first read with
			// the first output chunks, before the stream commits, and fail
			// over invisibly. The stall after chunk 5 (the role chunk and
			// four content chunks) delivers those first, so the fault at
			// chunk 6 comes after the commit.
			mal := fallback.MalformedSkip
			if tt.name == "malformed" {
				mal = fallback.MalformedFail
			}
			e := pairMalformed(t, tt.mid, mal, midStall(), tt.fault)
			s := stream(t, e.serve(t), req("m", true, orderAB))
			require.Equal(t, http.StatusOK, s.status)
			assert.Equal(t, "a/us/m", s.header.Get("X-Tpsroute-Deployment"))
			assert.False(t, s.done, "no [DONE] after a failure")
			assert.NotContains(t, s.rawBody, "[DONE]")
			require.NotEmpty(t, s.errEv, "an SSE error event: %s", s.rawBody)
			ev := gjson.Get(s.errEv, "error")
			assert.Equal(t, "stream_interrupted", ev.Get("code").Str)
			assert.NotEmpty(t, ev.Get("message").Str)
			assert.Equal(t, s.events[len(s.events)-1], s.errEv, "the error event is the last")
			assert.True(t, strings.HasPrefix(replay.Text(answer), s.text))
			assert.NotEmpty(t, s.text)
			assert.Less(t, len(s.text), len(replay.Text(answer)))
			assert.NotContains(t, s.rawBody, "secret")
		})
	}
	t.Run("default_continues_on_the_same_model", func(t *testing.T) {
		// No mid_stream setting: b serves the same model and declares
		// assistant prefill, so the stream goes on there (issue 13 point 8).
		e := pair(t, fallback.MidStreamDefault, midStall(), replay.CutAfter(6))
		s := stream(t, e.serve(t), req("m", true, orderAB))
		require.Equal(t, http.StatusOK, s.status)
		assert.Equal(t, replay.Text(answer), s.text)
		assert.True(t, s.done)
		assert.Empty(t, s.errEv)
		require.Equal(t, []string{"a", "b"}, e.cap.hosts())
	})
	t.Run("default_skips_one_malformed_event", func(t *testing.T) {
		e := pair(t, fallback.MidStreamDefault, midStall(), replay.MalformedAt(6))
		s := stream(t, e.serve(t), req("m", true, orderAB))
		require.Equal(t, http.StatusOK, s.status)
		assert.Equal(t, "a/us/m", s.header.Get("X-Tpsroute-Deployment"))
		// MalformedAt replaces chunk 6 (the fifth word) with garbage: that
		// word never existed as far as any client can tell.
		assert.Equal(t, strings.Replace(replay.Text(answer), "w4 ", "", 1), s.text)
		assert.True(t, s.done)
		assert.Empty(t, s.errEv)
		for _, ev := range s.events {
			assert.True(t, ev == "[DONE]" || gjson.Valid(ev), "the malformed event never reaches the client: %q", ev)
		}
		assert.Equal(t, []string{"a"}, e.cap.hosts())
	})
	t.Run("continuation_is_seamless", func(t *testing.T) {
		e := pair(t, fallback.MidStreamContinue, replay.CutAfter(6))
		s := stream(t, e.serve(t), req("m", true, orderAB))
		require.Equal(t, http.StatusOK, s.status)
		assert.Equal(t, replay.Text(answer), s.text, "the continuation picks up where a stopped")
		assert.True(t, s.done)
		assert.Empty(t, s.errEv)
		require.Equal(t, []string{"a", "b"}, e.cap.hosts())
		last := e.cap.all()[1]
		assert.Equal(t, "assistant", gjson.GetBytes(last.body, "messages.@reverse.0.role").Str)
	})
	t.Run("non_streaming_restarts_invisibly", func(t *testing.T) {
		e := pair(t, fallback.MidStreamError, replay.CutAfter(6))
		resp := post(t, e.serve(t), req("m", false, orderAB))
		defer resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode)
		assert.Equal(t, "b/us/m", resp.Header.Get("X-Tpsroute-Deployment"))
		var body strings.Builder
		_, err := bufio.NewReader(resp.Body).WriteTo(&body)
		require.NoError(t, err)
		assert.Equal(t, replay.Text(answer), gjson.Get(body.String(), "choices.0.message.content").Str)
		assert.Equal(t, "chat.completion", gjson.Get(body.String(), "object").Str)
		assert.Equal(t, "stop", gjson.Get(body.String(), "choices.0.finish_reason").Str)
		assert.Equal(t, int64(answer), gjson.Get(body.String(), "usage.completion_tokens").Int())
	})
	t.Run("missing_done_is_added", func(t *testing.T) {
		e := pair(t, fallback.MidStreamError, replay.NoDone())
		s := stream(t, e.serve(t), req("m", true, `"provider":{"order":["a"]}`))
		require.Equal(t, http.StatusOK, s.status)
		assert.Equal(t, replay.Text(answer), s.text)
		assert.True(t, s.done)
		assert.Equal(t, 1, strings.Count(s.rawBody, "[DONE]"))
	})
}

// TestErrorStatuses: when nothing answers, the client gets the last
// attempt's status, or 503, in an OpenAI-shaped body without secrets.
func TestErrorStatuses(t *testing.T) {
	leaky := `{"error":{"message":"Incorrect API key provided: sk-a-secret-key","type":"invalid_request_error","code":"invalid_api_key"}}`
	tests := []struct {
		name   string
		faults []replay.Fault
		stream bool
		status int
		code   string
		retry  string // Retry-After passed on
	}{
		{name: "429", faults: []replay.Fault{replay.RateLimited("30")}, stream: true, status: 429, retry: "30"},
		{name: "503", faults: []replay.Fault{replay.Status(503, "", nil)}, stream: true, status: 503},
		{name: "500", faults: []replay.Fault{replay.Status(500, "", nil)}, stream: false, status: 500},
		{name: "401_key_not_echoed", faults: []replay.Fault{replay.Status(401, leaky, nil)}, stream: true, status: 401},
		{name: "content_policy_400", faults: []replay.Fault{replay.ContentPolicy()}, stream: true, status: 400},
		{name: "context_length_400", faults: []replay.Fault{replay.ContextLengthExceeded()}, stream: false, status: 400},
		{name: "no_status_reset", faults: []replay.Fault{replay.ResetBeforeHeaders()}, stream: true, status: 503, code: "no_deployment_available"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := dep("a", "us", "m")
			e := newEnv(t, map[string]replay.Script{"a-m": replay.WithFaults(prof(answer), tt.faults...)}, testConfig(a), options{})
			s := stream(t, e.serve(t), req("m", tt.stream, ""))
			require.Equal(t, tt.status, s.status, s.rawBody)
			assert.Equal(t, "application/json", s.header.Get("Content-Type"))
			er := errorOf(t, []byte(s.rawBody))
			if tt.code != "" {
				assert.Equal(t, tt.code, er.Get("code").Str)
			}
			assert.Equal(t, tt.retry, s.header.Get("Retry-After"))
			assert.NotContains(t, s.rawBody, "sk-a-secret-key")
			assert.Empty(t, s.header.Get("X-Tpsroute-Deployment"))
		})
	}
	t.Run("breaker_open_503", func(t *testing.T) {
		a := dep("a", "us", "m")
		cfg := testConfig(a)
		cfg.Fallback.Breaker.ConsecutiveFailures = 1
		cfg.Fallback.AttemptsPerDeployment = 1
		e := newEnv(t, map[string]replay.Script{"a-m": replay.WithFaults(prof(answer), replay.Status(500, "", nil))}, cfg, options{})
		base := e.serve(t)
		first := stream(t, base, req("m", true, ""))
		require.Equal(t, 500, first.status)
		second := stream(t, base, req("m", true, ""))
		require.Equal(t, 503, second.status, second.rawBody)
		assert.Len(t, e.cap.all(), 1, "the open breaker kept the second call away from a")
		assert.Equal(t, route.BreakerOpen, e.c.Status(a.Key()).Breaker)
	})
}

// TestDeadlines runs the timing faults in virtual time, through the handler
// in memory.
func TestDeadlines(t *testing.T) {
	t.Run("ttft_deadline_fails_over_invisibly", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			a, b := dep("a", "us", "m"), dep("b", "us", "m")
			cfg := testConfig(a, b)
			cfg.Fallback.Deadlines.TTFT = 2 * time.Second
			e := newEnv(t, map[string]replay.Script{
				"a-m": replay.WithFaults(prof(answer), replay.SlowFirstToken(time.Minute)),
				"b-m": prof(answer),
			}, cfg, options{})
			start := time.Now()
			w := serveRecorded(e.g, req("m", true, orderAB))
			s := readSSE(t, w.Code, w.Header(), w.Body)
			require.Equal(t, 200, s.status)
			assert.Equal(t, "b/us/m", s.header.Get("X-Tpsroute-Deployment"))
			assert.Equal(t, "2", s.header.Get("X-Tpsroute-Attempts"))
			assert.Equal(t, replay.Text(answer), s.text)
			assert.True(t, s.done)
			assert.Equal(t, 2*time.Second, time.Since(start))
		})
	})
	t.Run("headers_deadline_fails_over", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			a, b := dep("a", "us", "m"), dep("b", "us", "m")
			cfg := testConfig(a, b)
			cfg.Fallback.Deadlines.Headers = time.Second
			cfg.Fallback.AttemptsPerDeployment = 1
			e := newEnv(t, map[string]replay.Script{"a-m": replay.WithFaults(prof(answer), replay.Hang()), "b-m": prof(answer)}, cfg, options{})
			w := serveRecorded(e.g, req("m", true, orderAB))
			s := readSSE(t, w.Code, w.Header(), w.Body)
			require.Equal(t, 200, s.status)
			assert.Equal(t, "b/us/m", s.header.Get("X-Tpsroute-Deployment"))
			assert.True(t, s.done)
		})
	})
	t.Run("stall_is_a_mid_stream_error", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			a := dep("a", "us", "m")
			cfg := testConfig(a)
			cfg.Fallback.Deadlines.Stall = 5 * time.Second
			e := newEnv(t, map[string]replay.Script{"a-m": replay.WithFaults(prof(answer), replay.StallAfter(6, time.Hour))}, cfg, options{})
			start := time.Now()
			w := serveRecorded(e.g, req("m", true, ""))
			s := readSSE(t, w.Code, w.Header(), w.Body)
			require.Equal(t, 200, s.status)
			assert.False(t, s.done)
			require.NotEmpty(t, s.errEv)
			assert.Contains(t, gjson.Get(s.errEv, "error.message").Str, "stall")
			assert.Equal(t, 5*time.Second, time.Since(start))
		})
	})
}

// TestClientDisconnectCancelsUpstream: a client that goes away mid-stream
// ends the provider's request.
func TestClientDisconnectCancelsUpstream(t *testing.T) {
	a := dep("a", "us", "m")
	e := newEnv(t, map[string]replay.Script{"a-m": &replay.Profile{TPS: 50, OutputTokens: 10000}}, testConfig(a), options{})
	resp := post(t, e.serve(t), req("m", true, ""))
	require.Equal(t, 200, resp.StatusCode)
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(line, "data: "))
	require.NoError(t, resp.Body.Close())
	require.Eventually(t, func() bool {
		at := e.h.Attempts()
		return len(at) == 1 && !at[0].End.IsZero()
	}, 5*time.Second, 5*time.Millisecond, "the upstream request ended")
	at := e.h.Attempts()[0]
	assert.Contains(t, []string{"canceled", "closed"}, at.Outcome)
	assert.Less(t, at.Chunks, 1000)
}
