package executor_test

import (
	"context"
	"io"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/tpsroute/tpsroute/fallback"
	"github.com/tpsroute/tpsroute/internal/executor"
	"github.com/tpsroute/tpsroute/measure"
	"github.com/tpsroute/tpsroute/replay"
	"github.com/tpsroute/tpsroute/route"
	"github.com/tpsroute/tpsroute/tps"
)

// TestEachAttemptEndsOnce: on every path (retry, failover, TTFT deadline,
// hedge lost, mid-stream cut with and without continuation, early Close,
// caller cancellation, policy stop) each attempt that was started is ended
// exactly once: one OnAttempt record and one Feedback completion per attempt, and
// its in-flight slot is released (MaxInFlight 1 leaves headroom afterwards,
// for a second run of the same call too).
func TestEachAttemptEndsOnce(t *testing.T) {
	type call func(e env, p route.Plan) // runs one call to its end
	readAll := func(e env, p route.Plan, c executor.Call) {
		res, err := e.ex.Do(context.Background(), p, e.call(c))
		if err == nil {
			_, _ = io.Copy(io.Discard, res.Body)
			_ = res.Body.Close()
		}
	}
	tests := []struct {
		name    string
		scripts map[string]replay.Script
		opts    fallback.Options
		run     call
	}{
		{"retry_then_answer", map[string]replay.Script{"a-m": replay.WithFaults(prof(8), replay.ResetBeforeHeaders().OnAttempts(1, 3))}, fallback.Options{},
			func(e env, p route.Plan) { readAll(e, p, executor.Call{Stream: true}) }},
		{"502_fails_over", map[string]replay.Script{"a-m": replay.WithFaults(prof(8), replay.Status(502, "", nil)), "b-m": prof(8)}, fallback.Options{},
			func(e env, p route.Plan) { readAll(e, p, executor.Call{Stream: true}) }},
		{"ttft_deadline_fails_over", map[string]replay.Script{"a-m": replay.WithFaults(prof(8), replay.SlowFirstToken(time.Minute)), "b-m": prof(8)}, fallback.Options{},
			func(e env, p route.Plan) { readAll(e, p, executor.Call{Stream: true}) }},
		{"hedge_lost", map[string]replay.Script{"a-m": replay.WithFaults(prof(8), replay.SlowFirstToken(5*time.Second)), "b-m": prof(8)},
			fallback.Options{Hedge: fallback.HedgeOptions{Delay: time.Second, Budget: 1}},
			func(e env, p route.Plan) { readAll(e, p, executor.Call{Stream: true}) }},
		{"cut_mid_stream", map[string]replay.Script{"a-m": replay.WithFaults(prof(30), replay.CutAfter(10)), "b-m": prof(30)}, fallback.Options{},
			func(e env, p route.Plan) { readAll(e, p, executor.Call{Stream: true}) }},
		{"cut_non_streaming", map[string]replay.Script{"a-m": replay.WithFaults(prof(30), replay.CutAfter(10)), "b-m": prof(30)}, fallback.Options{},
			func(e env, p route.Plan) { readAll(e, p, executor.Call{}) }},
		{"cut_continued", map[string]replay.Script{"a-m": replay.WithFaults(prof(30), replay.CutAfter(10)), "b-m": prof(30)},
			fallback.Options{MidStream: fallback.MidStreamContinue},
			func(e env, p route.Plan) { readAll(e, p, executor.Call{Stream: true}) }},
		{"continuation_rejected", map[string]replay.Script{"a-m": replay.WithFaults(prof(30), replay.CutAfter(10)), "b-m": replay.WithFaults(prof(30), replay.RejectPrefill())},
			fallback.Options{MidStream: fallback.MidStreamContinue},
			func(e env, p route.Plan) { readAll(e, p, executor.Call{Stream: true}) }},
		{"early_close", map[string]replay.Script{"a-m": &replay.Profile{TPS: 10, OutputTokens: 100}}, fallback.Options{},
			func(e env, p route.Plan) {
				res, err := e.ex.Do(context.Background(), p, e.call(executor.Call{Stream: true}))
				if err == nil {
					_, _ = res.Body.Read(make([]byte, 16))
					_ = res.Body.Close()
					_ = res.Body.Close()
				}
			}},
		{"caller_cancels_mid_stream", map[string]replay.Script{"a-m": &replay.Profile{TPS: 10, OutputTokens: 100}}, fallback.Options{},
			func(e env, p route.Plan) {
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				defer cancel()
				res, err := e.ex.Do(ctx, p, e.call(executor.Call{Stream: true}))
				if err == nil {
					_, _ = io.Copy(io.Discard, res.Body)
					_ = res.Body.Close()
				}
			}},
		{"caller_cancels_before_headers", map[string]replay.Script{"a-m": replay.WithFaults(prof(8), replay.Hang()), "b-m": prof(8)}, fallback.Options{},
			func(e env, p route.Plan) {
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				defer cancel()
				_, _ = e.ex.Do(ctx, p, e.call(executor.Call{Stream: true}))
			}},
		{"policy_stop", map[string]replay.Script{"a-m": replay.WithFaults(prof(8), replay.ContentPolicy()), "b-m": prof(8)}, fallback.Options{},
			func(e env, p route.Plan) { readAll(e, p, executor.Call{Stream: true}) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var mu sync.Mutex
				attempts, observed := map[string]int{}, map[string]int{}
				opts := tt.opts
				var hooks executor.Hooks
				hooks.OnAttempt = func(a fallback.Attempt) {
					if a.Class != fallback.ClassSkipped {
						mu.Lock()
						attempts[a.Key.Provider]++
						mu.Unlock()
					}
				}
				e := newEnv(tt.scripts, opts, hooks)
				e.fb = observing(func(d route.Deployment, _ tps.Sample) {
					mu.Lock()
					observed[d.Provider]++
					mu.Unlock()
				})
				a, b := dep("a", "a-m"), dep("b", "b-m")
				a.Limits.MaxInFlight, b.Limits.MaxInFlight = 1, 1
				b.Capabilities.AssistantPrefill = true
				p := planOf(a, b)
				if _, ok := tt.scripts["b-m"]; !ok {
					p = planOf(a)
				}
				for round := range 2 {
					tt.run(e, p)
					synctest.Wait()
					mu.Lock()
					assert.Equal(t, attempts, observed, "round %d: one Feedback completion per attempt", round)
					for _, k := range []measure.Key{a.Key(), b.Key()} {
						assert.False(t, e.ex.Status(k, time.Now()).NoHeadroom, "round %d: %s released its in-flight slot", round, k)
					}
					mu.Unlock()
					time.Sleep(10 * time.Minute) // past every cooldown
				}
				mu.Lock()
				defer mu.Unlock()
				total := 0
				for _, n := range attempts {
					total += n
				}
				assert.Equal(t, len(e.h.Attempts()), total, "every request sent is one recorded attempt")
			})
		})
	}
}
