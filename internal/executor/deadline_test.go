package executor_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tpsroute/tpsroute/fallback"
	"github.com/tpsroute/tpsroute/internal/executor"
	"github.com/tpsroute/tpsroute/replay"
	"github.com/tpsroute/tpsroute/route"
	"github.com/tpsroute/tpsroute/tps"
)

// tape builds a replay.Cassette event by event, for streams the replay faults
// do not shape: keep-alives for ever after the finish chunk (docs/STREAM_QUIRKS.md Q2),
// a usage chunk long after it (Q10), n>1 choices (Q21).
type tape struct {
	at     time.Duration
	events []replay.Event
}

func (t *tape) after(d time.Duration) *tape { t.at += d; return t }

func (t *tape) data(s string) *tape {
	t.events = append(t.events, replay.Event{AtMS: ms(t.at), Data: &s})
	return t
}

func (t *tape) word(choice int, w string) *tape {
	return t.data(fmt.Sprintf(`{"id":"x","object":"chat.completion.chunk","choices":[{"index":%d,"delta":{"content":%q},"finish_reason":null}]}`, choice, w))
}

func (t *tape) role() *tape {
	return t.data(`{"id":"x","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}`)
}

func (t *tape) finish(choice int) *tape {
	return t.data(fmt.Sprintf(`{"id":"x","object":"chat.completion.chunk","choices":[{"index":%d,"delta":{},"finish_reason":"stop"}]}`, choice))
}

func (t *tape) usage(completion int) *tape {
	return t.data(fmt.Sprintf(`{"id":"x","object":"chat.completion.chunk","choices":[],"usage":{"prompt_tokens":5,"completion_tokens":%d,"total_tokens":%d}}`, completion, completion+5))
}

// keepAlives adds ": keep-alive" comments every interval for d.
func (t *tape) keepAlives(interval, d time.Duration) *tape {
	for end := t.at + d; t.at+interval <= end; {
		t.after(interval)
		c := "keep-alive"
		t.events = append(t.events, replay.Event{AtMS: ms(t.at), Comment: &c})
	}
	return t
}

// cassette ends the tape with end ("eof", or "hang": the connection stays
// open, silent, until the client gives up).
func (t *tape) cassette(end string) *replay.Cassette {
	return &replay.Cassette{Version: replay.CassetteVersion, Response: replay.CassetteResponse{
		Status: http.StatusOK, Headers: http.Header{"Content-Type": {"text/event-stream"}},
		Events: t.events, End: end,
	}}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// words adds n output chunks "w1 ".."wn " 50 ms apart and returns their text.
func (t *tape) words(n int) string {
	var b strings.Builder
	for i := 1; i <= n; i++ {
		w := fmt.Sprintf("w%d ", i)
		t.after(50*time.Millisecond).word(0, w)
		b.WriteString(w)
	}
	return b.String()
}

// TestKeepAlivesAreNotProgress: SSE comments (docs/STREAM_QUIRKS.md Q1, Q2, Q27) neither satisfy
// the TTFT deadline before the commit point nor reset the stall deadline
// after it.
func TestKeepAlivesAreNotProgress(t *testing.T) {
	a, b := dep("a", "a-m"), dep("b", "b-m")
	t.Run("before_first_token_ttft_fails_over", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			tp := (&tape{}).after(100*time.Millisecond).role().keepAlives(time.Second, time.Hour)
			e := newEnv(map[string]replay.Script{"a-m": tp.cassette("hang"), "b-m": prof(8)}, fallback.Options{})
			start := time.Now()
			res, err := e.do(t, planOf(a, b), executor.Call{Stream: true})
			require.NoError(t, err)
			assert.Equal(t, "b", res.Deployment().Provider)
			assert.Equal(t, replay.Text(8), drain(t, res.Body).text)
			at := attemptsFor(e.h, "b-m")
			require.Len(t, at, 1)
			assert.Equal(t, coldTTFTCut, at[0].Time.Sub(start), "8 keep-alives did not count as the first token")
			atts := res.Attempts()
			require.Len(t, atts, 2)
			assert.ErrorIs(t, atts[0].Err, fallback.ErrTTFTTimeout)
		})
	})
	t.Run("after_first_token_stall_not_reset", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			tp := (&tape{}).role()
			text := tp.words(5)
			lastOut := tp.at
			tp.keepAlives(time.Second, time.Hour)
			e := newEnv(map[string]replay.Script{"a-m": tp.cassette("hang")}, fallback.Options{})
			start := time.Now()
			res, err := e.do(t, planOf(a), executor.Call{Stream: true})
			require.NoError(t, err)
			d := drain(t, res.Body)
			assert.ErrorIs(t, d.err, fallback.ErrStall)
			assert.ErrorIs(t, d.err, fallback.ErrMidStream)
			assert.Equal(t, text, d.text)
			assert.Equal(t, lastOut+executor.DefaultStallTimeout, time.Since(start), "19 keep-alives did not reset the stall deadline")
		})
	})
}

// TestStallAfterHeadersDeadline: the stall deadline that starts at the first
// output chunk ends a silent stream at its last output plus Stall, whether
// it falls before the headers deadline the timer was armed for (the timer is
// reset) or after it (the timer fires at the headers deadline and onTimer
// rearms it), for a streaming and an assembled call.
func TestStallAfterHeadersDeadline(t *testing.T) {
	a := dep("a", "a-m")
	for _, tc := range []struct {
		name  string
		stall time.Duration
	}{
		{"before_headers_deadline", 2 * time.Second},
		{"after_headers_deadline", executor.DefaultHeadersTimeout + 5*time.Second},
	} {
		for _, stream := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/stream=%v", tc.name, stream), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					tp := (&tape{}).role()
					tp.words(5)
					lastOut := tp.at
					e := newEnv(map[string]replay.Script{"a-m": tp.cassette("hang")}, fallback.Options{})
					start := time.Now()
					res, err := e.do(t, planOf(a), executor.Call{Stream: stream, Assemble: !stream, Deadlines: fallback.Deadlines{Stall: tc.stall}})
					if stream {
						require.NoError(t, err)
						err = drain(t, res.Body).err
					}
					assert.ErrorIs(t, err, fallback.ErrStall)
					assert.Equal(t, lastOut+tc.stall, time.Since(start))
				})
			})
		}
	}
}

// TestFinishGrace: a stream that has finished but never ends (no [DONE], no
// EOF, keep-alives for ever: docs/STREAM_QUIRKS.md Q2, Q5) ends promptly as a success with its
// usage (the never-ending variant of TestScenarios/11_no_done), including a usage chunk that trails the finish
// chunk (Q10).
func TestFinishGrace(t *testing.T) {
	a := dep("a", "a-m")
	for _, tt := range []struct {
		name       string
		usageAfter time.Duration // from the finish chunk to the usage chunk
		stream     bool
	}{
		{"streaming_usage_at_once", 10 * time.Millisecond, true},
		{"streaming_usage_late_within_grace", 1500 * time.Millisecond, true},
		{"non_streaming", 10 * time.Millisecond, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				tp := (&tape{}).role()
				text := tp.words(4)
				tp.after(50 * time.Millisecond).finish(0).after(tt.usageAfter).usage(7)
				lastData := tp.at
				tp.keepAlives(500*time.Millisecond, time.Hour)
				var observed []tps.Sample
				e := newEnv(map[string]replay.Script{"a-m": tp.cassette("hang")}, fallback.Options{})
				e.fb = observing(func(_ route.Deployment, s tps.Sample) { observed = append(observed, s) })
				start := time.Now()
				res, err := e.do(t, planOf(a), executor.Call{Stream: tt.stream})
				require.NoError(t, err)
				d := drain(t, res.Body)
				require.NoError(t, d.err, "a finished stream is a success")
				assert.False(t, d.done)
				assert.Equal(t, text, d.text)
				assert.Equal(t, lastData+executor.DefaultFinishGrace, time.Since(start), "ended one grace after the last data event")
				s := res.Sample()
				assert.NoError(t, s.Err)
				assert.Equal(t, tps.TokenSourceUsage, s.TokenSource)
				assert.EqualValues(t, 7, s.OutputTokens, "usage reported")
				assert.Equal(t, tps.EndEOF, s.End)
				assert.Equal(t, lastData, s.Total, "the stream ended with its last data event")
				require.Len(t, observed, 1)
				assert.NoError(t, observed[0].Err, "statistics see a success")
				atts := res.Attempts()
				require.Len(t, atts, 1)
				assert.Equal(t, fallback.ClassNone, atts[0].Class)
				assert.NoError(t, atts[0].Err)
				assert.Equal(t, route.BreakerClosed, e.ex.Status(a.Key(), time.Now()).Breaker)
			})
		})
	}
	t.Run("disabled_ends_at_stall_deadline", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			tp := (&tape{}).role()
			tp.words(4)
			tp.after(50 * time.Millisecond).finish(0)
			lastOut := tp.at - 50*time.Millisecond
			tp.keepAlives(time.Second, time.Hour)
			e := newEnv(map[string]replay.Script{"a-m": tp.cassette("hang")}, fallback.Options{Deadlines: fallback.Deadlines{FinishGrace: -1}})
			start := time.Now()
			res, err := e.do(t, planOf(a), executor.Call{Stream: true})
			require.NoError(t, err)
			require.NoError(t, drain(t, res.Body).err)
			assert.Equal(t, lastOut+executor.DefaultStallTimeout, time.Since(start))
		})
	})
	t.Run("after_done_without_eof", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			tp := (&tape{}).role()
			text := tp.words(3)
			tp.after(10 * time.Millisecond).data("[DONE]")
			done := tp.at
			tp.keepAlives(time.Second, time.Hour)
			e := newEnv(map[string]replay.Script{"a-m": tp.cassette("hang")}, fallback.Options{})
			start := time.Now()
			res, err := e.do(t, planOf(a), executor.Call{Stream: true})
			require.NoError(t, err)
			d := drain(t, res.Body)
			require.NoError(t, d.err)
			assert.True(t, d.done)
			assert.Equal(t, text, d.text)
			assert.Equal(t, done+executor.DefaultFinishGrace, time.Since(start))
		})
	})
	t.Run("call_override", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			tp := (&tape{}).role()
			tp.words(3)
			tp.after(50 * time.Millisecond).finish(0)
			lastData := tp.at
			tp.keepAlives(100*time.Millisecond, time.Hour)
			e := newEnv(map[string]replay.Script{"a-m": tp.cassette("hang")}, fallback.Options{})
			start := time.Now()
			res, err := e.do(t, planOf(a), executor.Call{Stream: true, Deadlines: fallback.Deadlines{FinishGrace: 300 * time.Millisecond}})
			require.NoError(t, err)
			require.NoError(t, drain(t, res.Body).err)
			assert.Equal(t, lastData+300*time.Millisecond, time.Since(start))
		})
	})
}

// TestChoicesFinish: with n>1 (docs/STREAM_QUIRKS.md Q21) the stream has finished only when every
// choice has a finish_reason; a cut after the first choice's is not a success.
func TestChoicesFinish(t *testing.T) {
	a := dep("a", "a-m")
	body := []byte(`{"model":"m","n":2,"messages":[{"role":"user","content":"hi"}]}`)
	for _, tt := range []struct {
		name     string
		finishes int
		wantErr  error
	}{
		{"cut_after_one_of_two_finishes", 1, fallback.ErrTruncated},
		{"both_finished_eof_is_clean", 2, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				tp := (&tape{}).role()
				tp.after(50*time.Millisecond).word(0, "a ").after(50*time.Millisecond).word(1, "b ")
				tp.after(50*time.Millisecond).word(0, "c").after(50 * time.Millisecond).finish(0)
				if tt.finishes == 2 {
					tp.after(50*time.Millisecond).word(1, "d").after(50 * time.Millisecond).finish(1)
				}
				e := newEnv(map[string]replay.Script{"a-m": tp.cassette("eof")}, fallback.Options{})
				res, err := e.do(t, planOf(a), executor.Call{Stream: true, Body: body})
				require.NoError(t, err)
				d := drain(t, res.Body)
				if tt.wantErr == nil {
					require.NoError(t, d.err)
					return
				}
				assert.ErrorIs(t, d.err, tt.wantErr)
				assert.ErrorIs(t, d.err, fallback.ErrMidStream)
			})
		})
	}
}

// TestMaxDuration: the ceiling ends a stream that would never end (docs/STREAM_QUIRKS.md Q2, Q27)
// with ErrMaxDuration, whatever keeps arriving; a finished stream it ends as
// a success.
func TestMaxDuration(t *testing.T) {
	a := dep("a", "a-m")
	t.Run("keepalives_before_first_token_default_ceiling", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			// Alone in the plan, the TTFT deadline waits for the slow
			// answer; only the ceiling ends the wait.
			tp := (&tape{}).after(100*time.Millisecond).role().keepAlives(10*time.Second, 2*time.Hour)
			e := newEnv(map[string]replay.Script{"a-m": tp.cassette("hang")}, fallback.Options{})
			start := time.Now()
			_, err := e.do(t, planOf(a), executor.Call{Stream: true})
			require.ErrorIs(t, err, fallback.ErrMaxDuration)
			assert.Equal(t, executor.DefaultMaxDuration, time.Since(start))
			var fe *fallback.Error
			require.ErrorAs(t, err, &fe)
			last, _ := fe.Last()
			assert.Equal(t, tps.PhaseFirstToken, last.Phase)
			assert.Equal(t, fallback.ClassNext, last.Class)
		})
	})
	t.Run("silent_before_first_token_alone_ends_at_silence", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			// Alone in the plan, a silent upstream (a role chunk, then
			// nothing at all) is not awaited for the ceiling.
			tp := (&tape{}).after(100 * time.Millisecond).role()
			e := newEnv(map[string]replay.Script{"a-m": tp.cassette("hang")}, fallback.Options{})
			start := time.Now()
			_, err := e.do(t, planOf(a), executor.Call{Stream: true})
			require.ErrorIs(t, err, fallback.ErrSilent)
			assert.Equal(t, 100*time.Millisecond+executor.DefaultSilence, time.Since(start))
			var fe *fallback.Error
			require.ErrorAs(t, err, &fe)
			last, _ := fe.Last()
			assert.Equal(t, tps.PhaseFirstToken, last.Phase)
		})
	})
	t.Run("slow_but_alive_alone_is_awaited", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			tp := (&tape{}).after(100*time.Millisecond).role().keepAlives(30*time.Second, 10*time.Minute)
			text := tp.words(3)
			tp.finish(0)
			e := newEnv(map[string]replay.Script{"a-m": tp.cassette("eof")}, fallback.Options{})
			res, err := e.do(t, planOf(a), executor.Call{Stream: true})
			require.NoError(t, err)
			assert.Equal(t, text, drain(t, res.Body).text)
		})
	})
	t.Run("keepalives_after_output_call_override", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			tp := (&tape{}).role()
			text := tp.words(3)
			tp.keepAlives(time.Second, time.Hour)
			e := newEnv(map[string]replay.Script{"a-m": tp.cassette("hang")}, fallback.Options{Deadlines: fallback.Deadlines{Stall: -1}})
			start := time.Now()
			res, err := e.do(t, planOf(a), executor.Call{Stream: true, Deadlines: fallback.Deadlines{MaxDuration: 2 * time.Minute}})
			require.NoError(t, err)
			d := drain(t, res.Body)
			assert.ErrorIs(t, d.err, fallback.ErrMaxDuration)
			assert.ErrorIs(t, d.err, fallback.ErrMidStream)
			assert.Equal(t, text, d.text)
			assert.Equal(t, 2*time.Minute, time.Since(start))
		})
	})
	t.Run("endless_data_after_finish_is_success", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			// Usage chunks every second keep restarting the finish grace.
			tp := (&tape{}).role()
			text := tp.words(3)
			tp.after(50 * time.Millisecond).finish(0)
			for range 200 {
				tp.after(time.Second).usage(3)
			}
			e := newEnv(map[string]replay.Script{"a-m": tp.cassette("hang")}, fallback.Options{Deadlines: fallback.Deadlines{MaxDuration: time.Minute}})
			start := time.Now()
			res, err := e.do(t, planOf(a), executor.Call{Stream: true})
			require.NoError(t, err)
			d := drain(t, res.Body)
			require.NoError(t, d.err)
			assert.Equal(t, text, d.text)
			assert.Equal(t, time.Minute, time.Since(start))
			assert.EqualValues(t, 3, res.Sample().OutputTokens)
		})
	})
	t.Run("disabled", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			tp := (&tape{}).role().keepAlives(time.Minute, 45*time.Minute)
			tp.words(2)
			tp.after(10 * time.Millisecond).finish(0)
			e := newEnv(map[string]replay.Script{"a-m": tp.cassette("eof")}, fallback.Options{Deadlines: fallback.Deadlines{MaxDuration: -1}})
			res, err := e.do(t, planOf(a), executor.Call{Stream: true})
			require.NoError(t, err)
			require.NoError(t, drain(t, res.Body).err)
		})
	})
}

// TestErrorsCarryNoCredentials: everything reachable from a returned error
// (its message, the provider's *openai.Error with its Request and Response,
// their dumps) is free of the deployment's key, even when the provider
// echoes the key in its message.
func TestErrorsCarryNoCredentials(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := dep("a", "a-m")
		a.Headers = map[string]string{"X-Goog-Api-Key": "goog-secret-value", "X-Route-Region": "eu"}
		body := `{"error":{"message":"Invalid 'messages' for key sk-a-secret","type":"invalid_request_error"}}`
		e := newEnv(map[string]replay.Script{"a-m": replay.WithFaults(prof(8), replay.Status(400, body, nil))}, fallback.Options{})
		_, err := e.do(t, planOf(a), executor.Call{Stream: true})
		require.Error(t, err)
		assert.Contains(t, err.Error(), "Invalid 'messages'", "the provider's reason is kept")
		var api *openai.Error
		require.ErrorAs(t, err, &api)
		require.NotNil(t, api.Request)
		require.NotNil(t, api.Response)
		require.NotNil(t, api.Response.Request)
		for name, s := range map[string]string{
			"message":          err.Error(),
			"request":          fmt.Sprint(api.Request.Header, api.Request.URL),
			"response.request": fmt.Sprint(api.Response.Request.Header, api.Response.Request.URL),
			"dump":             string(api.DumpRequest(true)),
			"api.Message":      api.Message,
			"api.RawJSON":      api.RawJSON(),
		} {
			assert.NotContains(t, s, "sk-a-secret", name)
			assert.NotContains(t, s, "goog-secret-value", name)
		}
		assert.Equal(t, "eu", api.Request.Header.Get("X-Route-Region"), "routing headers are not secrets")
	})
}

// TestMidStreamPolicyNotABreakerFailure: a content filter that cuts a stream
// after output (an in-stream error) is the caller's content, not the
// provider's failure: ClassPolicy, with the provider's reason, and the
// breaker stays closed.
func TestMidStreamPolicyNotABreakerFailure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := dep("a", "a-m")
		tp := (&tape{}).role()
		tp.words(3)
		tp.after(50 * time.Millisecond).data(`{"error":{"message":"Output blocked by the content filtering policy","type":"invalid_request_error","code":"content_filter"}}`)
		e := newEnv(map[string]replay.Script{"a-m": tp.cassette("eof")}, fallback.Options{Breaker: fallback.BreakerSettings{ConsecutiveFailures: 1}})
		res, err := e.do(t, planOf(a), executor.Call{Stream: true})
		require.NoError(t, err)
		d := drain(t, res.Body)
		assert.ErrorIs(t, d.err, fallback.ErrMidStream)
		assert.ErrorIs(t, d.err, fallback.ErrStreamError)
		assert.Contains(t, d.err.Error(), "content filtering policy")
		atts := res.Attempts()
		require.Len(t, atts, 1)
		assert.Equal(t, fallback.ClassPolicy, atts[0].Class)
		assert.Equal(t, route.BreakerClosed, e.ex.Status(a.Key(), time.Now()).Breaker)
	})
}

// TestInStreamPolicyBeforeOutputStops: an in-stream content-policy error
// without a status (the common shape) is recognised as a policy stop before
// the commit point too: no other deployment is asked.
func TestInStreamPolicyBeforeOutputStops(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b := dep("a", "a-m"), dep("b", "b-m")
		tp := (&tape{}).role().after(50 * time.Millisecond).data(`{"error":{"message":"Prompt flagged by moderation","type":"invalid_request_error"}}`)
		e := newEnv(map[string]replay.Script{"a-m": tp.cassette("eof"), "b-m": prof(8)}, fallback.Options{})
		_, err := e.do(t, planOf(a, b), executor.Call{Stream: true})
		require.ErrorIs(t, err, fallback.ErrStreamError)
		assert.Contains(t, err.Error(), "Prompt flagged by moderation")
		var fe *fallback.Error
		require.ErrorAs(t, err, &fe)
		last, _ := fe.Last()
		assert.Equal(t, fallback.ClassPolicy, last.Class)
		assert.Empty(t, attemptsFor(e.h, "b-m"))
	})
}

// TestFinishGraceAfterRearm: the finish grace, the one deadline that moves
// earlier, ends a finished stream at its last data event plus the grace
// whatever the timer was last armed for: a stall deadline onTimer set at the
// headers deadline, or one the first output reset it to. Without any
// deadline the run arms no timer at all and the stream ends at its EOF.
func TestFinishGraceAfterRearm(t *testing.T) {
	a := dep("a", "a-m")
	grace := 300 * time.Millisecond
	for _, tc := range []struct {
		name      string
		firstOut  time.Duration // from the role chunk
		finishAt  time.Duration // from the first output
		deadlines fallback.Deadlines
		end       string
		ends      time.Duration // from the finish chunk
	}{
		// The stall deadline (0.05 s + 20 s) is past the headers deadline
		// (15 s) the timer was armed for: it fires there and onTimer rearms it.
		{"stall_set_by_onTimer", 50 * time.Millisecond, 17 * time.Second, fallback.Deadlines{FinishGrace: grace}, "hang", grace},
		// The stall deadline (3 s + 2 s) is before the headers deadline:
		// the first output resets the timer.
		{"stall_set_by_reset", 3 * time.Second, time.Second, fallback.Deadlines{Stall: 2 * time.Second, FinishGrace: grace}, "hang", grace},
		{"no_deadline", 50 * time.Millisecond, time.Second, fallback.Deadlines{Headers: -1, Stall: -1, MaxDuration: -1, FinishGrace: -1, Silence: -1}, "eof", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				tp := (&tape{}).role()
				tp.after(tc.firstOut).word(0, "w1 ")
				tp.after(tc.finishAt).finish(0)
				finished := tp.at
				e := newEnv(map[string]replay.Script{"a-m": tp.cassette(tc.end)}, fallback.Options{})
				start := time.Now()
				res, err := e.do(t, planOf(a), executor.Call{Stream: true, Deadlines: tc.deadlines})
				require.NoError(t, err)
				d := drain(t, res.Body)
				require.NoError(t, d.err, "a finished stream is a success")
				assert.Equal(t, "w1 ", d.text)
				assert.Equal(t, finished+tc.ends, time.Since(start))
			})
		})
	}
}
