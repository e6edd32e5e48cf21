package executor_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tpsroute/tpsroute/fallback"
	"github.com/tpsroute/tpsroute/internal/executor"
	"github.com/tpsroute/tpsroute/replay"
	"github.com/tpsroute/tpsroute/route"
)

// TestTTFTDeadlineFollowsMeasured is issue 13 point 5: once a deployment's
// TTFT is measured, its TTFT deadline is 3× its p95, at least 3 s, plus time
// for a long prompt, capped by the configured deadline; a cold deployment
// gets the configured one, less room for the next deployment's answer
// (TestTTFTLeavesRoom). Both directions: a fast deployment that hangs is
// left early, and a slow deployment's normal answer is never cut.
func TestTTFTDeadlineFollowsMeasured(t *testing.T) {
	a, b := dep("a", "a-m"), dep("b", "b-m")
	tests := []struct {
		name     string
		measured time.Duration // a's measured p95; 0 means cold
		ttft     time.Duration // a's TTFT in this call
		est      int64         // Call.EstimatedInputTokens
		served   string
		after    time.Duration // when a's attempt ended: answered or cut
	}{
		{"fast_that_hangs_is_left_at_the_floor", 300 * time.Millisecond, time.Minute, 0, "b", 3 * time.Second},
		{"measured_multiple", 2 * time.Second, time.Minute, 0, "b", 6 * time.Second},
		{"cold_leaves_the_fallback_room", 0, time.Minute, 0, "b", coldTTFTCut},
		{"capped_by_the_configured_deadline", 8 * time.Second, time.Minute, 0, "b", 15 * time.Second},
		{"slow_normal_answer_not_cut", 8 * time.Second, 9 * time.Second, 0, "a", 9 * time.Second},
		{"outlier_under_the_floor_not_cut", 100 * time.Millisecond, 2500 * time.Millisecond, 0, "a", 2500 * time.Millisecond},
		{"long_prompt_not_cut", 300 * time.Millisecond, 10 * time.Second, 20_000, "a", 10 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var asked []string
				e := newEnv(map[string]replay.Script{
					"a-m": &replay.Profile{OutputTokens: 4, TPS: 100, TTFT: tt.ttft},
					"b-m": &replay.Profile{OutputTokens: 4, TPS: 100, TTFT: 100 * time.Millisecond},
				}, fallback.Options{}, executor.Hooks{MeasuredTTFT: func(d route.Deployment) (time.Duration, bool) {
					asked = append(asked, d.Provider)
					return tt.measured, tt.measured > 0 && d.Provider == "a"
				}})
				res, err := e.do(t, planOf(a, b), executor.Call{Stream: true, EstimatedInputTokens: tt.est})
				require.NoError(t, err)
				assert.Equal(t, tt.served, res.Deployment().Provider)
				require.NoError(t, drain(t, res.Body).err)
				atts := res.Attempts()
				require.NotEmpty(t, atts)
				assert.InDelta(t, tt.after, atts[0].Duration, float64(100*time.Millisecond), "a's attempt")
				if tt.served == "b" {
					assert.ErrorIs(t, atts[0].Err, fallback.ErrTTFTTimeout)
				}
				assert.Contains(t, asked, "a")
			})
		})
	}
}

// TestTTFTLeavesRoom is issue 29 item 3: an attempt that may fail over gets
// a TTFT deadline that leaves the next deployment time for its expected TTFT
// and answer before the caller's deadline (or, for a cold deployment, within
// the configured TTFT deadline of the call's start), and never one below
// twice its own expected TTFT: a slow but normal answer is not cut.
func TestTTFTLeavesRoom(t *testing.T) {
	// b's figures as the plan gives them: 1 s TTFT, 25 tokens/s, so its
	// reserve is 1 s + 250 tokens / 25 = 11 s.
	known := route.Expected{TTFT: 1, TTFTOK: true, TPS: 25, TPSOK: true, OK: true}
	tests := []struct {
		name     string
		timeout  time.Duration  // the caller's deadline; 0: none
		measured time.Duration  // a's measured TTFT p95; 0: cold
		prior    float64        // a's expected TTFT in the plan, seconds; 0: none
		ttft     time.Duration  // a's TTFT in this call
		bx       route.Expected // b's figures in the plan
		served   string
		after    time.Duration // when a's attempt ended
	}{
		{"caller_deadline_cold_fallback", 12 * time.Second, 0, 0, time.Minute, route.Expected{}, "b", 6 * time.Second},
		{"caller_deadline_known_fallback", 20 * time.Second, 0, 0, time.Minute, known, "b", 9 * time.Second},
		{"caller_deadline_warm_hang", 12 * time.Second, 300 * time.Millisecond, 0, time.Minute, known, "b", 3 * time.Second},
		{"no_deadline_cold_default", 0, 0, 0, 20 * time.Second, known, "b", 4 * time.Second},
		{"no_deadline_warm_keeps_its_own", 0, 8 * time.Second, 0, 20 * time.Second, known, "b", 15 * time.Second},
		{"slow_normal_not_cut_tight_deadline", 12 * time.Second, 8 * time.Second, 0, 9 * time.Second, known, "a", 9 * time.Second},
		{"slow_normal_not_cut_loose_deadline", 30 * time.Second, 8 * time.Second, 0, 9 * time.Second, known, "a", 9 * time.Second},
		{"slow_normal_not_cut_cold_default", 0, 8 * time.Second, 0, 9 * time.Second, known, "a", 9 * time.Second},
		{"prior_not_cut", 12 * time.Second, 0, 4, 7 * time.Second, known, "a", 7 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := newEnv(map[string]replay.Script{
					"a-m": &replay.Profile{OutputTokens: 4, TPS: 100, TTFT: tt.ttft},
					"b-m": &replay.Profile{OutputTokens: 100, TPS: 25, TTFT: time.Second}, // 5 s, within either reserve
				}, fallback.Options{}, executor.Hooks{MeasuredTTFT: func(d route.Deployment) (time.Duration, bool) {
					return tt.measured, tt.measured > 0 && d.Provider == "a"
				}})
				a, b := dep("a", "a-m"), dep("b", "b-m")
				plan := route.Plan{Deployments: []route.Candidate{
					{Deployment: &a, Expected: route.Expected{TTFT: tt.prior, TTFTOK: tt.prior > 0}},
					{Deployment: &b, Expected: tt.bx},
				}}
				ctx := context.Background()
				if tt.timeout > 0 {
					var cancel context.CancelFunc
					ctx, cancel = context.WithTimeout(ctx, tt.timeout)
					defer cancel()
				}
				start := time.Now()
				res, err := e.ex.Do(ctx, plan, e.call(executor.Call{Stream: true}))
				require.NoError(t, err)
				require.NoError(t, drain(t, res.Body).err)
				assert.Equal(t, tt.served, res.Deployment().Provider)
				atts := res.Attempts()
				require.NotEmpty(t, atts)
				assert.InDelta(t, tt.after, atts[0].Duration, float64(100*time.Millisecond), "a's attempt")
				if tt.served == "b" {
					assert.ErrorIs(t, atts[0].Err, fallback.ErrTTFTTimeout)
				}
				if tt.timeout == 0 && tt.measured == 0 {
					assert.LessOrEqual(t, time.Since(start), executor.DefaultTTFTTimeout, "the fallback's answer within the cold default")
				}
			})
		})
	}
}

// TestContinuationKeepsItsTTFT: a continuation that starts after the call's
// first answer would have been due (here 20 s into the stream) keeps the
// configured TTFT deadline; the room for the fallback is the first answer's
// only. Without it, b's 5 s first token was cut at the 3 s floor.
func TestContinuationKeepsItsTTFT(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(map[string]replay.Script{
			"a-m": replay.WithFaults(&replay.Profile{OutputTokens: 120, TPS: 5, TTFT: 100 * time.Millisecond}, replay.CutAfter(100)),
			"b-m": &replay.Profile{OutputTokens: 120, TPS: 100, TTFT: 5 * time.Second},
		}, fallback.Options{})
		res, err := e.do(t, planOf(dep("a", "a-m"), prefillDep("b", "b-m")), executor.Call{Stream: true})
		require.NoError(t, err)
		d := drain(t, res.Body)
		require.NoError(t, d.err)
		assert.Equal(t, replay.Text(120), d.text)
		assert.Equal(t, "b", res.Deployment().Provider)
	})
}
