package executor_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
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

func TestExecutor(t *testing.T) {
	a, b := dep("a", "a-m"), dep("b", "b-m")

	t.Run("empty_plan", func(t *testing.T) {
		_, err := executor.New(fallback.Options{}, executor.Hooks{}).Do(context.Background(), route.Plan{}, executor.Call{Body: []byte(reqBody)})
		assert.ErrorIs(t, err, route.ErrNoDeployment)
	})

	t.Run("auth_trips_breaker_and_cools_down", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := newEnv(map[string]replay.Script{"a-m": replay.WithFaults(prof(8), replay.Unauthorized()), "b-m": prof(8)}, fallback.Options{})
			start := time.Now()
			res, err := e.do(t, planOf(a, b), executor.Call{Stream: true})
			require.NoError(t, err)
			assert.Equal(t, "b", res.Deployment().Provider)
			drain(t, res.Body)
			st := e.ex.Status(a.Key(), time.Now())
			assert.Equal(t, route.BreakerOpen, st.Breaker)
			assert.Equal(t, start.Add(executor.DefaultPenaltyCooldown), st.CoolingUntil)
			// Well after the breaker's timeout, the cooldown still keeps a away.
			time.Sleep(time.Minute)
			res, err = e.do(t, planOf(a, b), executor.Call{Stream: true})
			require.NoError(t, err)
			drain(t, res.Body)
			assert.Len(t, attemptsFor(e.h, "a-m"), 1)
			atts := res.Attempts()
			require.Len(t, atts, 2)
			assert.Equal(t, fallback.ClassSkipped, atts[0].Class)
			assert.ErrorIs(t, atts[0].Err, fallback.ErrCoolingDown)
		})
	})

	t.Run("error_message_has_no_secrets", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := newEnv(map[string]replay.Script{"a-m": replay.WithFaults(prof(8), replay.Unauthorized()), "b-m": replay.WithFaults(prof(8), replay.Status(500, "", nil))}, fallback.Options{})
			_, err := e.do(t, planOf(a, b), executor.Call{Stream: true})
			require.Error(t, err)
			assert.NotContains(t, err.Error(), "secret")
			assert.NotContains(t, err.Error(), "\n")
			assert.Contains(t, err.Error(), "auth 401")
		})
	})

	t.Run("caller_cancellation_not_a_breaker_failure", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := newEnv(map[string]replay.Script{"a-m": replay.WithFaults(prof(8), replay.SlowFirstToken(10*time.Second))}, fallback.Options{})
			for range 8 {
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				_, err := e.ex.Do(ctx, planOf(a), executor.Call{Body: []byte(reqBody), Stream: true})
				cancel()
				assert.ErrorIs(t, err, context.DeadlineExceeded)
				var fe *fallback.Error
				require.ErrorAs(t, err, &fe)
				last, _ := fe.Last()
				assert.Equal(t, fallback.ClassCanceled, last.Class)
			}
			assert.Equal(t, route.BreakerClosed, e.ex.Status(a.Key(), time.Now()).Breaker)
		})
	})

	t.Run("close_cancels_upstream_at_once", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := newEnv(map[string]replay.Script{"a-m": replay.WithFaults(prof(60), replay.StallAfter(5, time.Hour))}, fallback.Options{Deadlines: fallback.Deadlines{Stall: -1}})
			res, err := e.do(t, planOf(a), executor.Call{Stream: true})
			require.NoError(t, err)
			readErr := make(chan error, 1)
			go func() {
				_, err := io.Copy(io.Discard, res.Body)
				readErr <- err
			}()
			time.Sleep(time.Second)
			synctest.Wait()
			start := time.Now()
			require.NoError(t, res.Body.Close())
			err = <-readErr
			assert.Error(t, err, "a closed stream is not a clean end")
			assert.Equal(t, time.Duration(0), time.Since(start))
			require.NoError(t, res.Body.Close(), "idempotent")
			synctest.Wait()
			at := attemptsFor(e.h, "a-m")
			require.Len(t, at, 1)
			assert.False(t, at[0].End.IsZero(), "the provider saw the request end")
			assert.Equal(t, route.BreakerClosed, e.ex.Status(a.Key(), time.Now()).Breaker)
		})
	})

	t.Run("in_stream_error_before_output_fails_over", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := newEnv(map[string]replay.Script{"a-m": replay.WithFaults(prof(8), replay.ErrorEventAt(1, replay.VLLM)), "b-m": prof(8)}, fallback.Options{})
			res, err := e.do(t, planOf(a, b), executor.Call{Stream: true})
			require.NoError(t, err)
			assert.Equal(t, "b", res.Deployment().Provider)
			assert.Equal(t, replay.Text(8), drain(t, res.Body).text)
			assert.ErrorIs(t, res.Attempts()[0].Err, fallback.ErrStreamError)
		})
	})

	t.Run("in_stream_error_after_output", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := newEnv(map[string]replay.Script{"a-m": replay.WithFaults(prof(30), replay.ErrorEventAt(10, replay.OpenAI))}, fallback.Options{})
			res, err := e.do(t, planOf(a), executor.Call{Stream: true})
			require.NoError(t, err)
			d := drain(t, res.Body)
			assert.ErrorIs(t, d.err, fallback.ErrMidStream)
			assert.ErrorIs(t, d.err, fallback.ErrStreamError)
		})
	})

	t.Run("non_streaming_stall_fails_over", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := newEnv(map[string]replay.Script{"a-m": replay.WithFaults(prof(30), replay.StallAfter(10, time.Hour)), "b-m": prof(30)}, fallback.Options{})
			start := time.Now()
			res, err := e.do(t, planOf(a, b), executor.Call{})
			require.NoError(t, err)
			assert.Equal(t, "b", res.Deployment().Provider)
			assert.Equal(t, replay.Text(30), drain(t, res.Body).text)
			el := time.Since(start)
			assert.GreaterOrEqual(t, el, executor.DefaultStallTimeout)
			assert.Less(t, el, executor.DefaultStallTimeout+2*time.Second)
			assert.ErrorIs(t, res.Attempts()[0].Err, fallback.ErrStall)
		})
	})

	t.Run("open_breaker_skips", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := newEnv(map[string]replay.Script{"a-m": replay.WithFaults(prof(4), replay.Status(503, "", nil)), "b-m": prof(4)}, fallback.Options{})
			for range 5 {
				res, err := e.do(t, planOf(a, b), executor.Call{Stream: true})
				require.NoError(t, err)
				drain(t, res.Body)
			}
			require.Equal(t, route.BreakerOpen, e.ex.Status(a.Key(), time.Now()).Breaker)
			res, err := e.do(t, planOf(a, b), executor.Call{Stream: true})
			require.NoError(t, err)
			drain(t, res.Body)
			assert.ErrorIs(t, res.Attempts()[0].Err, fallback.ErrOpen)
			assert.Len(t, attemptsFor(e.h, "a-m"), 5)
			_, err = e.do(t, planOf(a), executor.Call{Stream: true})
			assert.ErrorIs(t, err, fallback.ErrOpen)
			assert.ErrorIs(t, err, route.ErrNoDeployment)
			assert.Len(t, attemptsFor(e.h, "a-m"), 5)
		})
	})

	t.Run("cancelled_while_waiting_for_retry_after", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := newEnv(map[string]replay.Script{"a-m": replay.WithFaults(prof(4), replay.RateLimited("5"))}, fallback.Options{})
			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(time.Second, cancel)
			start := time.Now()
			_, err := e.ex.Do(ctx, planOf(a), executor.Call{Body: []byte(reqBody), Stream: true})
			assert.ErrorIs(t, err, context.Canceled)
			var api *openai.Error
			assert.ErrorAs(t, err, &api, "the 429 is still there")
			assert.Equal(t, time.Second, time.Since(start))
		})
	})

	t.Run("no_fallback", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := newEnv(map[string]replay.Script{"a-m": replay.WithFaults(prof(8), replay.Status(503, "", nil)), "b-m": prof(8)}, fallback.Options{})
			_, err := e.do(t, planOf(a, b), executor.Call{Stream: true, NoFallback: true})
			require.Error(t, err)
			assert.Empty(t, attemptsFor(e.h, "b-m"))
		})
	})

	t.Run("rpm_limit_puts_deployment_behind", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			al := a
			al.Limits.RPM = 60 // one per second, burst 60
			instant := &replay.Profile{OutputTokens: 4}
			e := newEnv(map[string]replay.Script{"a-m": instant, "b-m": instant}, fallback.Options{})
			served := map[string]int{}
			for range 61 {
				res, err := e.do(t, planOf(al, b), executor.Call{Stream: true})
				require.NoError(t, err)
				drain(t, res.Body)
				served[res.Deployment().Provider]++
			}
			assert.Equal(t, map[string]int{"a": 60, "b": 1}, served)
			assert.True(t, e.ex.Status(al.Key(), time.Now()).NoHeadroom)
			assert.False(t, e.ex.Status(b.Key(), time.Now()).NoHeadroom)
			// Alone, the call waits for budget when it fits MaxWait.
			start := time.Now()
			res, err := e.do(t, planOf(al), executor.Call{Stream: true})
			require.NoError(t, err)
			drain(t, res.Body)
			assert.LessOrEqual(t, time.Since(start), 2*time.Second)
		})
	})

	t.Run("tpm_charged_and_corrected", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			al := a
			al.Limits.TPM = 30
			e := newEnv(map[string]replay.Script{"a-m": prof(30)}, fallback.Options{})
			assert.False(t, e.ex.Status(al.Key(), time.Now()).NoHeadroom)
			res, err := e.do(t, planOf(al), executor.Call{Stream: true, EstimatedInputTokens: 5})
			require.NoError(t, err)
			drain(t, res.Body)
			// 5 charged up front, corrected to prompt+30 output tokens: over budget.
			assert.True(t, e.ex.Status(al.Key(), time.Now()).NoHeadroom)
		})
	})

	t.Run("max_in_flight", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			al := a
			al.Limits.MaxInFlight = 1
			e := newEnv(map[string]replay.Script{"a-m": prof(40), "b-m": prof(8)}, fallback.Options{})
			first, err := e.do(t, planOf(al, b), executor.Call{Stream: true})
			require.NoError(t, err)
			assert.Equal(t, "a", first.Deployment().Provider)
			second, err := e.do(t, planOf(al, b), executor.Call{Stream: true})
			require.NoError(t, err)
			assert.Equal(t, "b", second.Deployment().Provider)
			drain(t, second.Body)
			drain(t, first.Body)
			third, err := e.do(t, planOf(al, b), executor.Call{Stream: true})
			require.NoError(t, err)
			assert.Equal(t, "a", third.Deployment().Provider)
			drain(t, third.Body)
		})
	})

	t.Run("retry_after_on_503_cools_down", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := newEnv(map[string]replay.Script{"a-m": replay.WithFaults(prof(8), replay.Status(503, "", map[string][]string{"Retry-After": {"30"}}).OnAttempts(1)), "b-m": prof(8)}, fallback.Options{})
			start := time.Now()
			res, err := e.do(t, planOf(a, b), executor.Call{Stream: true})
			require.NoError(t, err)
			drain(t, res.Body)
			assert.Equal(t, start.Add(30*time.Second), e.ex.Status(a.Key(), time.Now()).CoolingUntil)
			res, err = e.do(t, planOf(a, b), executor.Call{Stream: true})
			require.NoError(t, err)
			drain(t, res.Body)
			assert.Equal(t, "b", res.Deployment().Provider, "a still cooling")
		})
	})
}

func TestCallOverrides(t *testing.T) {
	a, b := dep("a", "a-m"), dep("b", "b-m")
	tests := []struct {
		name     string
		call     executor.Call
		provider string
		min, max time.Duration
	}{
		{"ttft_override_fails_over_early", executor.Call{Stream: true, Deadlines: fallback.Deadlines{TTFT: time.Second}}, "b", time.Second, 1500 * time.Millisecond},
		{"ttft_disabled_waits", executor.Call{Stream: true, Deadlines: fallback.Deadlines{TTFT: -1}}, "a", 5 * time.Second, 6 * time.Second},
		{"default_waits_under_15s", executor.Call{Stream: true}, "a", 5 * time.Second, 6 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := newEnv(map[string]replay.Script{"a-m": replay.WithFaults(prof(8), replay.SlowFirstToken(5*time.Second)), "b-m": prof(8)}, fallback.Options{})
				start := time.Now()
				res, err := e.do(t, planOf(a, b), tt.call)
				require.NoError(t, err)
				assert.Equal(t, tt.provider, res.Deployment().Provider)
				assert.Equal(t, replay.Text(8), drain(t, res.Body).text)
				el := time.Since(start)
				assert.GreaterOrEqual(t, el, tt.min)
				assert.Less(t, el, tt.max)
			})
		})
	}
}

func TestContinueLimits(t *testing.T) {
	a, b := dep("a", "a-m"), dep("b", "b-m")
	b.Capabilities.AssistantPrefill = true
	t.Run("reasoning_stream_not_continued", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			p := prof(40)
			p.Style = replay.ReasoningFirst
			e := newEnv(map[string]replay.Script{"a-m": replay.WithFaults(p, replay.CutAfter(30)), "b-m": prof(40)}, fallback.Options{MidStream: fallback.MidStreamContinue})
			res, err := e.do(t, planOf(a, b), executor.Call{Stream: true})
			require.NoError(t, err)
			d := drain(t, res.Body)
			assert.ErrorIs(t, d.err, fallback.ErrMidStream)
			assert.Empty(t, attemptsFor(e.h, "b-m"))
		})
	})
	t.Run("n_greater_than_one_not_continued", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := newEnv(map[string]replay.Script{"a-m": replay.WithFaults(prof(40), replay.CutAfter(20)), "b-m": prof(40)}, fallback.Options{MidStream: fallback.MidStreamContinue})
			res, err := e.do(t, planOf(a, b), executor.Call{Stream: true, Body: []byte(`{"model":"m","n":2,"messages":[{"role":"user","content":"hi"}]}`)})
			require.NoError(t, err)
			assert.ErrorIs(t, drain(t, res.Body).err, fallback.ErrMidStream)
			assert.Empty(t, attemptsFor(e.h, "b-m"))
		})
	})
	t.Run("per_call_policy_error", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := newEnv(map[string]replay.Script{"a-m": replay.WithFaults(prof(40), replay.CutAfter(20)), "b-m": prof(40)}, fallback.Options{MidStream: fallback.MidStreamContinue})
			res, err := e.do(t, planOf(a, b), executor.Call{Stream: true, MidStream: fallback.MidStreamError})
			require.NoError(t, err)
			assert.ErrorIs(t, drain(t, res.Body).err, fallback.ErrMidStream)
			assert.Empty(t, attemptsFor(e.h, "b-m"))
		})
	})
	t.Run("no_prefill_capable_deployment", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := newEnv(map[string]replay.Script{"a-m": replay.WithFaults(prof(40), replay.CutAfter(20)), "b-m": prof(40)}, fallback.Options{MidStream: fallback.MidStreamContinue})
			res, err := e.do(t, planOf(a, dep("b", "b-m")), executor.Call{Stream: true})
			require.NoError(t, err)
			assert.ErrorIs(t, drain(t, res.Body).err, fallback.ErrMidStream)
			assert.Empty(t, attemptsFor(e.h, "b-m"))
		})
	})
}

func TestHedge(t *testing.T) {
	a, b := dep("a", "a-m"), dep("b", "b-m")
	t.Run("second_wins_first_cancelled", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			var canceled atomic.Int32
			e := newEnv(map[string]replay.Script{"a-m": replay.WithFaults(prof(8), replay.SlowFirstToken(5*time.Second)), "b-m": prof(8)},
				fallback.Options{Hedge: fallback.HedgeOptions{Delay: time.Second, Budget: 1}}, executor.Hooks{OnAttempt: func(at fallback.Attempt) {
					if errors.Is(at.Err, fallback.ErrHedgeLost) {
						canceled.Add(1)
					}
				}})
			start := time.Now()
			res, err := e.do(t, planOf(a, b), executor.Call{Stream: true})
			require.NoError(t, err)
			assert.Equal(t, "b", res.Deployment().Provider)
			assert.Less(t, time.Since(start), 2*time.Second)
			assert.Equal(t, replay.Text(8), drain(t, res.Body).text)
			assert.EqualValues(t, 1, canceled.Load())
			assert.Equal(t, route.BreakerClosed, e.ex.Status(a.Key(), time.Now()).Breaker)
		})
	})
	t.Run("first_wins_second_cancelled", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := newEnv(map[string]replay.Script{"a-m": replay.WithFaults(prof(8), replay.SlowFirstToken(1500*time.Millisecond)), "b-m": replay.WithFaults(prof(8), replay.SlowFirstToken(5*time.Second))},
				fallback.Options{Hedge: fallback.HedgeOptions{Delay: time.Second, Budget: 1}})
			res, err := e.do(t, planOf(a, b), executor.Call{Stream: true})
			require.NoError(t, err)
			assert.Equal(t, "a", res.Deployment().Provider)
			assert.Equal(t, replay.Text(8), drain(t, res.Body).text)
			require.Len(t, attemptsFor(e.h, "b-m"), 1)
		})
	})
	t.Run("delay_func_per_deployment", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := newEnv(map[string]replay.Script{"a-m": replay.WithFaults(prof(8), replay.SlowFirstToken(5*time.Second)), "b-m": prof(8)},
				fallback.Options{Hedge: fallback.HedgeOptions{Budget: 1, DelayFunc: func(d route.Deployment) (time.Duration, bool) {
					return 300 * time.Millisecond, d.Provider == "a"
				}}})
			start := time.Now()
			res, err := e.do(t, planOf(a, b), executor.Call{Stream: true})
			require.NoError(t, err)
			assert.Equal(t, "b", res.Deployment().Provider)
			drain(t, res.Body)
			at := attemptsFor(e.h, "b-m")
			require.Len(t, at, 1)
			assert.Equal(t, 300*time.Millisecond, at[0].Time.Sub(start))
		})
	})
	t.Run("no_hedge_per_call", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := newEnv(map[string]replay.Script{"a-m": replay.WithFaults(prof(8), replay.SlowFirstToken(5*time.Second)), "b-m": prof(8)},
				fallback.Options{Hedge: fallback.HedgeOptions{Delay: time.Second, Budget: 1}})
			res, err := e.do(t, planOf(a, b), executor.Call{Stream: true, NoHedge: true})
			require.NoError(t, err)
			assert.Equal(t, "a", res.Deployment().Provider)
			drain(t, res.Body)
			assert.Empty(t, attemptsFor(e.h, "b-m"))
		})
	})
	t.Run("budget_caps_hedges", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := newEnv(map[string]replay.Script{"a-m": replay.WithFaults(prof(8), replay.SlowFirstToken(2*time.Second)), "b-m": prof(8)},
				fallback.Options{Hedge: fallback.HedgeOptions{Delay: time.Second, Budget: 0.1}})
			for range 20 {
				res, err := e.do(t, planOf(a, b), executor.Call{Stream: true})
				require.NoError(t, err)
				drain(t, res.Body)
			}
			assert.Len(t, attemptsFor(e.h, "b-m"), 2, "10% of 20 calls")
		})
	})
	t.Run("cancelled_hedged_call_leaks_nothing", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := newEnv(map[string]replay.Script{"a-m": replay.WithFaults(prof(8), replay.Hang()), "b-m": replay.WithFaults(prof(8), replay.Hang())},
				fallback.Options{Hedge: fallback.HedgeOptions{Delay: time.Second, Budget: 1}})
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			defer cancel()
			_, err := e.ex.Do(ctx, planOf(a, b), executor.Call{Body: []byte(reqBody), Stream: true})
			assert.ErrorIs(t, err, context.DeadlineExceeded)
			assert.Len(t, attemptsFor(e.h, "b-m"), 1)
		})
	})
}

// TestLoopbackCancel runs over a real 127.0.0.1 server and http.Transport:
// a caller that cancels mid-stream gets an error at once, and no goroutine
// outlives the call (goleak in TestMain).
func TestLoopbackCancel(t *testing.T) {
	srv := replay.NewServer(map[string]replay.Script{"a-m": replay.WithFaults(prof(60), replay.StallAfter(10, time.Hour))})
	defer srv.Close()
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	d := dep("a", "a-m")
	d.BaseURL = srv.URL()
	ex := executor.New(fallback.Options{}, executor.Hooks{Transport: tr})
	ctx, cancel := context.WithCancel(context.Background())
	res, err := ex.Do(ctx, planOf(d), executor.Call{Body: []byte(reqBody), Stream: true})
	require.NoError(t, err)
	buf := make([]byte, 64)
	_, err = res.Body.Read(buf)
	require.NoError(t, err)
	cancel()
	_, err = io.Copy(io.Discard, res.Body)
	assert.ErrorIs(t, err, context.Canceled)
	var fe *fallback.Error
	require.ErrorAs(t, err, &fe)
	last, _ := fe.Last()
	assert.Equal(t, fallback.ClassCanceled, last.Class)
	require.NoError(t, res.Body.Close())
	assert.Equal(t, route.BreakerClosed, ex.Status(d.Key(), time.Now()).Breaker)
}

func TestHooks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var logs bytes.Buffer
		var attempts []fallback.Attempt
		var observed []string
		e := newEnv(map[string]replay.Script{"a-m": replay.WithFaults(prof(8), replay.Status(502, "", nil)), "b-m": prof(8)}, fallback.Options{}, executor.Hooks{
			Logger:    slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
			OnAttempt: func(a fallback.Attempt) { attempts = append(attempts, a) },
		})
		e.fb = observing(func(d route.Deployment, s tps.Sample) {
			observed = append(observed, d.Provider+":"+fmt.Sprint(s.Err != nil))
		})
		res, err := e.do(t, planOf(dep("a", "a-m"), dep("b", "b-m")), executor.Call{Stream: true})
		require.NoError(t, err)
		drain(t, res.Body)
		require.Len(t, attempts, 3)
		assert.Equal(t, []fallback.Class{fallback.ClassRetry, fallback.ClassRetry, fallback.ClassNone}, []fallback.Class{attempts[0].Class, attempts[1].Class, attempts[2].Class})
		assert.Equal(t, []string{"a:true", "a:true", "b:false"}, observed)
		assert.Equal(t, 2, strings.Count(logs.String(), "attempt failed"))
		assert.NotContains(t, logs.String(), "secret")
	})
}

// TestEarlyCloseIsCancellation: a caller that closes a committed stream
// early ends the upstream request; the attempt is ClassCanceled, its error
// (seen by Feedback and returned by later Reads) is ErrClosed and matches
// context.Canceled, so statistics count it as the caller's, and the breaker
// does not count it as a failure.
func TestEarlyCloseIsCancellation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := dep("a", "a-m")
		var observed []error
		e := newEnv(map[string]replay.Script{"a-m": &replay.Profile{TPS: 10, OutputTokens: 100}}, fallback.Options{
			Breaker:               fallback.BreakerSettings{ConsecutiveFailures: 1},
			AttemptsPerDeployment: 1,
		})
		e.fb = observing(func(_ route.Deployment, s tps.Sample) { observed = append(observed, s.Err) })
		res, err := e.do(t, planOf(a), executor.Call{Stream: true})
		require.NoError(t, err)
		buf := make([]byte, 64)
		_, err = res.Body.Read(buf)
		require.NoError(t, err)
		require.NoError(t, res.Body.Close())
		require.NoError(t, res.Body.Close(), "idempotent")
		_, err = res.Body.Read(buf)
		assert.ErrorIs(t, err, fallback.ErrClosed)
		assert.ErrorIs(t, err, context.Canceled)

		require.Len(t, observed, 1)
		assert.ErrorIs(t, observed[0], fallback.ErrClosed)
		assert.ErrorIs(t, observed[0], context.Canceled)
		assert.ErrorIs(t, res.Sample().Err, context.Canceled)
		atts := res.Attempts()
		require.Len(t, atts, 1)
		assert.Equal(t, fallback.ClassCanceled, atts[0].Class)
		assert.ErrorIs(t, atts[0].Err, context.Canceled)
		assert.Equal(t, route.BreakerClosed, e.ex.Status(a.Key(), time.Now()).Breaker, "not a provider failure")
		synctest.Wait()
		up := attemptsFor(e.h, "a-m")
		require.Len(t, up, 1)
		assert.False(t, up[0].End.IsZero(), "the upstream request ended")
	})
}

// feedbackLog records a call's Feedback: "begin", "done" and "skip" events
// with the plan index, the provider and, for done, the outcome.
type feedbackLog struct {
	mu     sync.Mutex
	events []string
}

func (f *feedbackLog) add(e string) {
	f.mu.Lock()
	f.events = append(f.events, e)
	f.mu.Unlock()
}

func (f *feedbackLog) Begin(i int, d *route.Deployment) executor.Done {
	f.add(fmt.Sprintf("begin %d %s", i, d.Provider))
	return func(a fallback.Attempt, s *tps.Sample) {
		f.add(fmt.Sprintf("done %d %s err=%v tokens=%d", i, a.Key.Provider, a.Err != nil, s.OutputTokens))
	}
}

func (f *feedbackLog) Skip(i int, a fallback.Attempt) {
	f.add(fmt.Sprintf("skip %d %s %s", i, a.Key.Provider, a.Class))
}

func (*feedbackLog) OutputGap(int, time.Duration) {}

// TestFeedbackHandles checks the one completion handle per attempt: every
// attempt that starts gets one Begin and exactly one Done with its outcome
// and sample, in that order; an attempt that never starts (open breaker)
// gets one Skip and no Begin.
func TestFeedbackHandles(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(map[string]replay.Script{"a-m": replay.WithFaults(prof(8), replay.Status(502, "", nil)), "b-m": prof(8)}, fallback.Options{
			Breaker:               fallback.BreakerSettings{ConsecutiveFailures: 1},
			AttemptsPerDeployment: 1,
		})
		p := planOf(dep("a", "a-m"), dep("b", "b-m"))
		var logs []*feedbackLog
		for range 2 {
			fb := &feedbackLog{}
			res, err := e.do(t, p, executor.Call{Stream: true, Feedback: fb})
			require.NoError(t, err)
			require.NoError(t, drain(t, res.Body).err)
			require.NoError(t, res.Body.Close())
			logs = append(logs, fb)
		}
		assert.Equal(t, []string{"begin 0 a", "done 0 a err=true tokens=0", "begin 1 b", "done 1 b err=false tokens=8"}, logs[0].events)
		assert.Equal(t, []string{"skip 0 a skipped", "begin 1 b", "done 1 b err=false tokens=8"}, logs[1].events, "a's breaker opened")
	})
}
