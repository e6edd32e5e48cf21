package executor_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tpsroute/tpsroute/fallback"
	"github.com/tpsroute/tpsroute/internal/executor"
	"github.com/tpsroute/tpsroute/measure"
	"github.com/tpsroute/tpsroute/replay"
	"github.com/tpsroute/tpsroute/route"
	"github.com/tpsroute/tpsroute/tps"
)

// env is one scenario's world: a replay handler serving wire models "a-m",
// "b-m", "c-m" and an Executor over its in-memory transport.
type env struct {
	h     *replay.Handler
	ex    *executor.Executor
	start time.Time
	fb    executor.Feedback // given to every call made through do or call
}

// within asserts that the scenario took less than d of (virtual) time.
func (e env) within(t *testing.T, d time.Duration) {
	t.Helper()
	assert.Less(t, time.Since(e.start), d, "bounded time")
}

// newEnv returns an Executor over scripts, tuned by opts, with the hooks
// given (at most one) and the handler's in-memory transport.
func newEnv(scripts map[string]replay.Script, opts fallback.Options, hooks ...executor.Hooks) env {
	h := replay.NewHandler(scripts)
	var hk executor.Hooks
	if len(hooks) > 0 {
		hk = hooks[0]
	}
	hk.Transport = h.Transport()
	return env{h: h, ex: executor.New(opts, hk), start: time.Now()}
}

func (e env) do(t *testing.T, p route.Plan, c executor.Call) (*executor.Result, error) {
	t.Helper()
	return e.ex.Do(context.Background(), p, e.call(c))
}

// call completes c with the request body and the env's Feedback.
func (e env) call(c executor.Call) executor.Call {
	if c.Body == nil {
		c.Body = []byte(reqBody)
	}
	if c.Feedback == nil && e.fb != nil {
		c.Feedback = e.fb
	}
	return c
}

// observing is a Feedback that calls f with the deployment and sample of
// every attempt that started, when it ends.
type observing func(d route.Deployment, s tps.Sample)

func (f observing) Begin(_ int, d *route.Deployment) executor.Done {
	return func(_ fallback.Attempt, s *tps.Sample) { f(*d, *s) }
}
func (observing) Skip(int, fallback.Attempt)   {}
func (observing) OutputGap(int, time.Duration) {}

// coldTTFTCut is where a cold deployment's TTFT deadline falls when a cold
// deployment follows it and the caller set no deadline: DefaultTTFTTimeout
// less the next one's reserve, 1 s of TTFT and 250 tokens at 50 tokens/s
// (docs/CONFIG.md, "Room for the fallback").
const coldTTFTCut = executor.DefaultTTFTTimeout - 6*time.Second

func prof(tokens int) *replay.Profile {
	return &replay.Profile{OutputTokens: tokens, TPS: 100, TTFT: 200 * time.Millisecond}
}

func TestScenarios(t *testing.T) {
	a, b, c := dep("a", "a-m"), dep("b", "b-m"), dep("c", "c-m")

	t.Run("01_429_retry_after_once", func(t *testing.T) {
		t.Run("waits_when_alone", func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := newEnv(map[string]replay.Script{"a-m": replay.WithFaults(prof(16), replay.RateLimited("2").OnAttempts(1))}, fallback.Options{})
				start := time.Now()
				res, err := e.do(t, planOf(a), executor.Call{Stream: true})
				require.NoError(t, err)
				d := drain(t, res.Body)
				require.NoError(t, d.err)
				assert.Equal(t, replay.Text(16), d.text)
				at := attemptsFor(e.h, "a-m")
				require.Len(t, at, 2)
				assert.GreaterOrEqual(t, at[1].Time.Sub(at[0].Time), 2*time.Second, "no second attempt inside Retry-After")
				assert.Less(t, time.Since(start), 3*time.Second)
			})
		})
		t.Run("fails_over", func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := newEnv(map[string]replay.Script{
					"a-m": replay.WithFaults(prof(16), replay.RateLimited("2").OnAttempts(1)),
					"b-m": prof(16),
				}, fallback.Options{})
				start := time.Now()
				res, err := e.do(t, planOf(a, b), executor.Call{Stream: true})
				require.NoError(t, err)
				assert.Equal(t, "b", res.Deployment().Provider)
				assert.Equal(t, replay.Text(16), drain(t, res.Body).text)
				assert.Len(t, attemptsFor(e.h, "a-m"), 1)
				assert.Less(t, time.Since(start), time.Second)
				st := e.ex.Status(a.Key(), time.Now())
				assert.True(t, st.CoolingUntil.After(time.Now()), "a cools down until its Retry-After")
				assert.True(t, st.RateLimited, "x-ratelimit-remaining-requests: 0")
			})
		})
	})

	t.Run("01b_retry_after_forms", func(t *testing.T) {
		tests := []struct {
			name     string
			fault    replay.Fault
			min, max time.Duration
		}{
			{"retry_after_ms_preferred", replay.RetryAfterMS(1200), 1200 * time.Millisecond, 2 * time.Second},
			{"http_date", replay.RetryAfterDate(3 * time.Second), 3 * time.Second, 4 * time.Second},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					e := newEnv(map[string]replay.Script{"a-m": replay.WithFaults(prof(8), tt.fault.OnAttempts(1))}, fallback.Options{})
					res, err := e.do(t, planOf(a), executor.Call{Stream: true})
					require.NoError(t, err)
					assert.Equal(t, replay.Text(8), drain(t, res.Body).text)
					at := attemptsFor(e.h, "a-m")
					require.Len(t, at, 2)
					gap := at[1].Time.Sub(at[0].Time)
					assert.GreaterOrEqual(t, gap, tt.min)
					assert.Less(t, gap, tt.max)
					atts := res.Attempts()
					assert.Equal(t, gap, atts[len(atts)-1].Waited+atts[0].Duration)
				})
			})
		}
	})

	t.Run("02_429_persistent_no_retry_after", func(t *testing.T) {
		t.Run("alone_clean_error", func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := newEnv(map[string]replay.Script{"a-m": replay.WithFaults(prof(16), replay.RateLimited(""))}, fallback.Options{Seed: 7})
				start := time.Now()
				_, err := e.do(t, planOf(a), executor.Call{Stream: true})
				var fe *fallback.Error
				require.ErrorAs(t, err, &fe)
				var api *openai.Error
				require.ErrorAs(t, err, &api)
				assert.Equal(t, http.StatusTooManyRequests, api.StatusCode)
				at := attemptsFor(e.h, "a-m")
				n := 0
				for _, x := range at {
					if x.Time.Sub(start) < 3*time.Second {
						n++
					}
				}
				assert.LessOrEqual(t, n, 4)
				assert.GreaterOrEqual(t, len(at), 2, "backed off and retried")
				assert.Less(t, time.Since(start), 3*time.Second)
			})
		})
		t.Run("fails_over", func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := newEnv(map[string]replay.Script{"a-m": replay.WithFaults(prof(16), replay.RateLimited("")), "b-m": prof(16)}, fallback.Options{})
				res, err := e.do(t, planOf(a, b), executor.Call{Stream: true})
				require.NoError(t, err)
				assert.Equal(t, "b", res.Deployment().Provider)
				assert.Equal(t, replay.Text(16), drain(t, res.Body).text)
				assert.Len(t, attemptsFor(e.h, "a-m"), 1)
				e.within(t, time.Second)
			})
		})
	})

	t.Run("03_500_once_then_healthy", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := newEnv(map[string]replay.Script{"a-m": replay.WithFaults(prof(16), replay.Status(500, "", nil).OnAttempts(1)), "b-m": prof(16)}, fallback.Options{})
			start := time.Now()
			res, err := e.do(t, planOf(a, b), executor.Call{Stream: true})
			require.NoError(t, err)
			assert.Equal(t, "a", res.Deployment().Provider, "retried on the same deployment")
			assert.Equal(t, replay.Text(16), drain(t, res.Body).text)
			assert.Len(t, attemptsFor(e.h, "a-m"), 2)
			assert.Empty(t, attemptsFor(e.h, "b-m"))
			assert.Less(t, time.Since(start), time.Second, "backoff under the 250ms base plus the answer")
			atts := res.Attempts()
			require.Len(t, atts, 2)
			assert.Equal(t, fallback.ClassRetry, atts[0].Class)
			assert.Equal(t, fallback.ClassNone, atts[1].Class)
		})
	})

	t.Run("04_503_persistent", func(t *testing.T) {
		t.Run("fails_over", func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := newEnv(map[string]replay.Script{"a-m": replay.WithFaults(prof(16), replay.Status(503, "", nil)), "b-m": prof(16)}, fallback.Options{})
				res, err := e.do(t, planOf(a, b), executor.Call{Stream: true})
				require.NoError(t, err)
				assert.Equal(t, "b", res.Deployment().Provider)
				assert.Equal(t, replay.Text(16), drain(t, res.Body).text)
				e.within(t, time.Second)
				assert.Len(t, attemptsFor(e.h, "a-m"), 1)
			})
		})
		t.Run("nowhere_to_go", func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := newEnv(map[string]replay.Script{"a-m": replay.WithFaults(prof(16), replay.Status(503, "", nil))}, fallback.Options{})
				start := time.Now()
				_, err := e.do(t, planOf(a), executor.Call{Stream: true})
				var api *openai.Error
				require.ErrorAs(t, err, &api)
				assert.Equal(t, http.StatusServiceUnavailable, api.StatusCode)
				assert.Len(t, attemptsFor(e.h, "a-m"), 1)
				assert.Less(t, time.Since(start), time.Second)
				assert.NotContains(t, err.Error(), "secret")
			})
		})
	})

	t.Run("05_reset_before_headers_once", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := newEnv(map[string]replay.Script{"a-m": replay.WithFaults(prof(16), replay.ResetBeforeHeaders().OnAttempts(1))}, fallback.Options{})
			res, err := e.do(t, planOf(a), executor.Call{Stream: true})
			require.NoError(t, err)
			assert.Equal(t, replay.Text(16), drain(t, res.Body).text)
			assert.Len(t, attemptsFor(e.h, "a-m"), 2)
			e.within(t, time.Second)
		})
	})

	t.Run("06_no_response_headers_deadline", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := newEnv(map[string]replay.Script{"a-m": replay.WithFaults(prof(16), replay.Hang()), "b-m": prof(16)}, fallback.Options{})
			start := time.Now()
			// The TTFT deadline off: the headers deadline alone (with it,
			// the silent deployment is left at coldTTFTCut, still as a
			// headers timeout).
			res, err := e.do(t, planOf(a, b), executor.Call{Stream: true, Deadlines: fallback.Deadlines{TTFT: -1}})
			require.NoError(t, err)
			assert.Equal(t, "b", res.Deployment().Provider)
			assert.Equal(t, replay.Text(16), drain(t, res.Body).text)
			el := time.Since(start)
			assert.GreaterOrEqual(t, el, executor.DefaultHeadersTimeout)
			assert.Less(t, el, executor.DefaultHeadersTimeout+time.Second)
			assert.Len(t, attemptsFor(e.h, "a-m"), 1, "the silent deployment is not retried")
			atts := res.Attempts()
			require.NotEmpty(t, atts)
			assert.ErrorIs(t, atts[0].Err, fallback.ErrHeadersTimeout)
		})
	})

	t.Run("07_first_token_after_20s", func(t *testing.T) {
		t.Run("fails_over_at_ttft_deadline", func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := newEnv(map[string]replay.Script{"a-m": replay.WithFaults(prof(16), replay.SlowFirstToken(20*time.Second)), "b-m": prof(16)}, fallback.Options{})
				start := time.Now()
				res, err := e.do(t, planOf(a, b), executor.Call{Stream: true})
				require.NoError(t, err)
				assert.Equal(t, "b", res.Deployment().Provider)
				assert.Equal(t, replay.Text(16), drain(t, res.Body).text)
				// The cold TTFT deadline leaves b room to answer within
				// DefaultTTFTTimeout of the call's start (issue 29 item 3).
				el := time.Since(start)
				assert.Less(t, el, executor.DefaultTTFTTimeout)
				assert.Equal(t, coldTTFTCut, res.Attempts()[0].Duration)
				assert.ErrorIs(t, res.Attempts()[0].Err, fallback.ErrTTFTTimeout)
			})
		})
		t.Run("alone_slow_answer_arrives", func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := newEnv(map[string]replay.Script{"a-m": replay.WithFaults(prof(16), replay.SlowFirstToken(20*time.Second))}, fallback.Options{})
				start := time.Now()
				res, err := e.do(t, planOf(a), executor.Call{Stream: true})
				require.NoError(t, err)
				assert.Equal(t, replay.Text(16), drain(t, res.Body).text)
				el := time.Since(start)
				assert.GreaterOrEqual(t, el, 20*time.Second)
				assert.Less(t, el, 22*time.Second)
				assert.Len(t, attemptsFor(e.h, "a-m"), 1)
			})
		})
	})

	t.Run("08_cut_after_40_of_60", func(t *testing.T) {
		cut := func() map[string]replay.Script {
			return map[string]replay.Script{"a-m": replay.WithFaults(prof(60), replay.CutAfter(40)), "b-m": prof(60)}
		}
		t.Run("streaming_gets_mid_stream_error", func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := newEnv(cut(), fallback.Options{})
				res, err := e.do(t, planOf(a, b), executor.Call{Stream: true})
				require.NoError(t, err)
				assert.Equal(t, "a", res.Deployment().Provider)
				d := drain(t, res.Body)
				require.Error(t, d.err, "never a clean end of stream")
				assert.ErrorIs(t, d.err, fallback.ErrMidStream)
				var fe *fallback.Error
				require.ErrorAs(t, d.err, &fe)
				assert.Equal(t, tps.PhaseMidStream, fe.Phase())
				last, _ := fe.Last()
				assert.Equal(t, a.Key(), last.Key)
				assert.Positive(t, last.Tokens)
				assert.True(t, strings.HasPrefix(replay.Text(60), d.text))
				assert.Less(t, len(d.text), len(replay.Text(60)))
				assert.Empty(t, attemptsFor(e.h, "b-m"), "no continuation by default")
				e.within(t, time.Second)
			})
		})
		t.Run("non_streaming_restarts_on_next", func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := newEnv(cut(), fallback.Options{})
				res, err := e.do(t, planOf(a, b), executor.Call{Stream: false})
				require.NoError(t, err)
				assert.Equal(t, "b", res.Deployment().Provider)
				d := drain(t, res.Body)
				require.NoError(t, d.err)
				assert.Equal(t, replay.Text(60), d.text)
				assert.True(t, d.done)
				e.within(t, 2*time.Second)
			})
		})
		t.Run("continue_stitches_full_text", func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := newEnv(cut(), fallback.Options{MidStream: fallback.MidStreamContinue})
				bp := b
				bp.Capabilities.AssistantPrefill = true
				res, err := e.do(t, planOf(a, bp), executor.Call{Stream: true})
				require.NoError(t, err)
				d := drain(t, res.Body)
				require.NoError(t, d.err)
				assert.Equal(t, replay.Text(60), d.text)
				assert.Equal(t, "b", res.Deployment().Provider)
				bat := attemptsFor(e.h, "b-m")
				require.Len(t, bat, 1)
				assert.Equal(t, "assistant", bat[0].LastRole)
				e.within(t, 2*time.Second)
			})
		})
	})

	t.Run("09_stall_30s_after_20_chunks", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := newEnv(map[string]replay.Script{"a-m": replay.WithFaults(prof(60), replay.StallAfter(20, 30*time.Second).OnAttempts(1))}, fallback.Options{})
			start := time.Now()
			res, err := e.do(t, planOf(a), executor.Call{Stream: true})
			require.NoError(t, err)
			d := drain(t, res.Body)
			assert.ErrorIs(t, d.err, fallback.ErrStall)
			assert.ErrorIs(t, d.err, fallback.ErrMidStream)
			el := time.Since(start)
			assert.GreaterOrEqual(t, el, executor.DefaultStallTimeout)
			assert.Less(t, el, executor.DefaultStallTimeout+2*time.Second)
			assert.Equal(t, route.BreakerClosed, e.ex.Status(a.Key(), time.Now()).Breaker)
			res, err = e.do(t, planOf(a), executor.Call{Stream: true})
			require.NoError(t, err)
			d = drain(t, res.Body)
			require.NoError(t, d.err)
			assert.Equal(t, replay.Text(60), d.text)
		})
	})

	t.Run("10_malformed_chunk", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			// The default skips a malformed event (TestMalformedEvent); under
			// MalformedFail it ends the stream.
			e := newEnv(map[string]replay.Script{"a-m": replay.WithFaults(prof(30), replay.MalformedAt(10).OnAttempts(1, 2)), "b-m": prof(30)}, fallback.Options{Malformed: fallback.MalformedFail})
			res, err := e.do(t, planOf(a), executor.Call{Stream: true})
			require.NoError(t, err)
			d := drain(t, res.Body)
			assert.ErrorIs(t, d.err, fallback.ErrMalformed)
			assert.ErrorIs(t, d.err, fallback.ErrMidStream)
			// A non-streaming caller never sees the broken stream.
			res, err = e.do(t, planOf(a, b), executor.Call{})
			require.NoError(t, err)
			d = drain(t, res.Body)
			require.NoError(t, d.err)
			assert.Equal(t, replay.Text(30), d.text)
			assert.Equal(t, "b", res.Deployment().Provider)
			// The next call is fine.
			res, err = e.do(t, planOf(a), executor.Call{Stream: true})
			require.NoError(t, err)
			d = drain(t, res.Body)
			require.NoError(t, d.err)
			assert.Equal(t, replay.Text(30), d.text)
			e.within(t, 3*time.Second)
		})
	})

	t.Run("11_no_done", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := newEnv(map[string]replay.Script{"a-m": replay.WithFaults(prof(16), replay.NoDone())}, fallback.Options{})
			start := time.Now()
			res, err := e.do(t, planOf(a), executor.Call{Stream: true})
			require.NoError(t, err)
			d := drain(t, res.Body)
			require.NoError(t, d.err)
			assert.False(t, d.done)
			assert.Equal(t, replay.Text(16), d.text)
			assert.Less(t, time.Since(start), time.Second)
			s := res.Sample()
			assert.Equal(t, tps.TokenSourceUsage, s.TokenSource)
			assert.EqualValues(t, 16, s.OutputTokens)
			assert.NoError(t, s.Err)
		})
	})

	t.Run("12_context_length_exceeded", func(t *testing.T) {
		small, small2, large := a, b, c
		small.ContextWindow, small2.ContextWindow, large.ContextWindow = 8000, 8000, 128000
		t.Run("larger_window_used", func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := newEnv(map[string]replay.Script{
					"a-m": replay.WithFaults(prof(16), replay.ContextLengthExceeded()),
					"b-m": replay.WithFaults(prof(16), replay.ContextLengthExceeded()),
					"c-m": prof(16),
				}, fallback.Options{})
				res, err := e.do(t, planOf(small, small2, large), executor.Call{Stream: true})
				require.NoError(t, err)
				assert.Equal(t, "c", res.Deployment().Provider)
				assert.Equal(t, replay.Text(16), drain(t, res.Body).text)
				assert.Len(t, attemptsFor(e.h, "a-m"), 1)
				assert.Empty(t, attemptsFor(e.h, "b-m"), "no larger window, not tried")
				e.within(t, time.Second)
			})
		})
		t.Run("clean_error", func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := newEnv(map[string]replay.Script{
					"a-m": replay.WithFaults(prof(16), replay.ContextLengthExceeded()),
					"b-m": prof(16),
				}, fallback.Options{})
				_, err := e.do(t, planOf(small, small2), executor.Call{Stream: true})
				var fe *fallback.Error
				require.ErrorAs(t, err, &fe)
				last, _ := fe.Last()
				assert.Equal(t, fallback.ClassContextLength, last.Class)
				var api *openai.Error
				require.ErrorAs(t, err, &api)
				assert.Equal(t, "context_length_exceeded", api.Code)
				assert.Len(t, attemptsFor(e.h, "a-m"), 1)
				assert.Empty(t, attemptsFor(e.h, "b-m"))
				assert.Equal(t, route.BreakerClosed, e.ex.Status(small.Key(), time.Now()).Breaker)
				e.within(t, time.Second)
			})
		})
	})

	t.Run("13_content_policy", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := newEnv(map[string]replay.Script{"a-m": replay.WithFaults(prof(16), replay.ContentPolicy()), "b-m": prof(16)}, fallback.Options{})
			_, err := e.do(t, planOf(a, b), executor.Call{Stream: true})
			require.Error(t, err)
			assert.Contains(t, err.Error(), "content policy")
			var api *openai.Error
			require.ErrorAs(t, err, &api)
			assert.Equal(t, "content_policy_violation", api.Code)
			assert.Len(t, attemptsFor(e.h, "a-m"), 1)
			assert.Empty(t, attemptsFor(e.h, "b-m"))
			e.within(t, time.Second)
		})
	})

	t.Run("14_continuation_rejects_prefill", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := newEnv(map[string]replay.Script{
				"a-m": replay.WithFaults(prof(60), replay.CutAfter(40)),
				"b-m": replay.WithFaults(prof(60), replay.RejectPrefill()),
			}, fallback.Options{MidStream: fallback.MidStreamContinue})
			bp := b
			bp.Capabilities.AssistantPrefill = true
			res, err := e.do(t, planOf(a, bp), executor.Call{Stream: true})
			require.NoError(t, err)
			d := drain(t, res.Body)
			require.Error(t, d.err)
			assert.ErrorIs(t, d.err, fallback.ErrMidStream)
			var api *openai.Error
			assert.False(t, errors.As(d.err, &api), "never the prefill 400")
			var fe *fallback.Error
			require.ErrorAs(t, d.err, &fe)
			last, _ := fe.Last()
			assert.Equal(t, a.Key(), last.Key)
			assert.Len(t, attemptsFor(e.h, "b-m"), 1)
			assert.Equal(t, "a", res.Deployment().Provider)
			e.within(t, time.Second)
		})
	})

	t.Run("15_primary_down_60s_breaker", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			var mu sync.Mutex
			var changes []route.BreakerState
			var opened time.Time
			e := newEnv(map[string]replay.Script{
				"a-m": replay.WithFaults(prof(16), replay.DownFor(60*time.Second)),
				"b-m": prof(16),
			}, fallback.Options{}, executor.Hooks{OnStateChange: func(k measure.Key, _, to route.BreakerState) {
				if k.Provider != "a" {
					return
				}
				mu.Lock()
				changes = append(changes, to)
				if to == route.BreakerOpen && opened.IsZero() {
					opened = time.Now()
				}
				mu.Unlock()
			}})
			start := time.Now()
			var back time.Duration = -1
			for i := range 20 {
				at := start.Add(time.Duration(i) * 4 * time.Second)
				time.Sleep(time.Until(at))
				res, err := e.do(t, planOf(a, b), executor.Call{Stream: true})
				require.NoError(t, err, "call %d", i)
				assert.Less(t, time.Since(at), time.Second, "call %d answered promptly", i)
				d := drain(t, res.Body)
				require.NoError(t, d.err)
				require.Equal(t, replay.Text(16), d.text)
				el := time.Since(start)
				p := res.Deployment().Provider
				if el < 60*time.Second {
					assert.Equal(t, "b", p, "call %d during the outage", i)
				}
				if p == "a" && back < 0 {
					back = at.Sub(start)
				}
			}
			mu.Lock()
			defer mu.Unlock()
			require.Contains(t, changes, route.BreakerOpen)
			require.Contains(t, changes, route.BreakerHalfOpen)
			assert.Equal(t, route.BreakerClosed, changes[len(changes)-1])
			assert.Less(t, opened.Sub(start), 60*time.Second)
			require.GreaterOrEqual(t, back, 60*time.Second)
			assert.LessOrEqual(t, back, 60*time.Second+15*time.Second+4*time.Second, "back within one open timeout")
			// Fewer primary attempts than calls during the outage: the open breaker spared it.
			n := 0
			for _, x := range attemptsFor(e.h, "a-m") {
				if x.Time.Sub(start) < 60*time.Second {
					n++
				}
			}
			assert.Less(t, n, 15)
		})
	})

	t.Run("16_accounting", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			var mu sync.Mutex
			observed := map[string]tps.Sample{}
			e := newEnv(map[string]replay.Script{
				"a-m": replay.WithFaults(prof(60), replay.CutAfter(20)),
				"b-m": prof(24),
			}, fallback.Options{})
			e.fb = observing(func(d route.Deployment, s tps.Sample) {
				mu.Lock()
				observed[d.Provider] = s
				mu.Unlock()
			})
			res, err := e.do(t, planOf(a, b), executor.Call{})
			require.NoError(t, err)
			d := drain(t, res.Body)
			require.NoError(t, d.err)
			got := res.Deployment()
			assert.Equal(t, "b", got.Provider)
			assert.Equal(t, "b-m", got.WireModel())
			s := res.Sample()
			assert.EqualValues(t, 24, s.OutputTokens)
			assert.Equal(t, "b-m", s.Model)
			mu.Lock()
			defer mu.Unlock()
			require.Contains(t, observed, "a")
			assert.Error(t, observed["a"].Err, "the failed attempt is observed as failed")
			assert.NoError(t, observed["b"].Err)
			atts := res.Attempts()
			require.Len(t, atts, 2)
			assert.Equal(t, fallback.ClassMidStream, atts[0].Class)
			assert.EqualValues(t, 24, atts[1].Tokens)
			e.within(t, 2*time.Second)
		})
	})

	t.Run("17_credential_isolation", func(t *testing.T) {
		start := time.Now()
		defer func() { assert.Less(t, time.Since(start), 10*time.Second, "bounded (wall) time on loopback") }()
		sa := replay.NewServer(map[string]replay.Script{"a-m": replay.WithFaults(prof(8), replay.Status(503, "", nil))})
		defer sa.Close()
		sb := replay.NewServer(map[string]replay.Script{"b-m": prof(8)})
		defer sb.Close()
		da, db := a, b
		da.BaseURL, db.BaseURL = sa.URL(), sb.URL()
		da.Headers = map[string]string{"X-Route-Region": "a-only-region", "api-key": "a-azure-key"}
		db.APIKey = "sk-b-key"
		tr := &recorder{next: &http.Transport{}}
		defer tr.next.(*http.Transport).CloseIdleConnections()
		ex := executor.New(fallback.Options{}, executor.Hooks{Transport: tr})
		res, err := ex.Do(context.Background(), planOf(da, db), executor.Call{Body: []byte(reqBody), Stream: true})
		require.NoError(t, err)
		assert.Equal(t, replay.Text(8), drain(t, res.Body).text)
		hostB := strings.TrimPrefix(strings.TrimSuffix(sb.URL(), "/v1"), "http://")
		hostA := strings.TrimPrefix(strings.TrimSuffix(sa.URL(), "/v1"), "http://")
		tr.mu.Lock()
		defer tr.mu.Unlock()
		require.NotEmpty(t, tr.seen[hostA])
		require.NotEmpty(t, tr.seen[hostB])
		for _, s := range tr.seen[hostB] {
			for _, secret := range []string{da.APIKey, "a-only-region", "a-azure-key", "a-m"} {
				assert.NotContains(t, s, secret)
			}
			assert.Contains(t, s, "Bearer sk-b-key")
		}
		for _, s := range tr.seen[hostA] {
			assert.NotContains(t, s, "sk-b-key")
		}
	})
}
