package fallback_test

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tpsroute/tpsroute/fallback"
	"github.com/tpsroute/tpsroute/replay"
	"github.com/tpsroute/tpsroute/route"
)

// TestTTFTDeadlineFollowsMeasured is issue 13 point 5: once a deployment's
// TTFT is measured, its TTFT deadline is 3× its p95, at least 3 s, plus time
// for a long prompt, capped by the configured deadline; a cold deployment
// gets the configured one. Both directions: a fast deployment that hangs is
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
		{"cold_waits_the_configured_deadline", 0, time.Minute, 0, "b", 15 * time.Second},
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
				}, fallback.Options{}, fallback.Hooks{MeasuredTTFT: func(d route.Deployment) (time.Duration, bool) {
					asked = append(asked, d.Provider)
					return tt.measured, tt.measured > 0 && d.Provider == "a"
				}})
				res, err := e.do(t, planOf(a, b), fallback.Call{Stream: true, EstimatedInputTokens: tt.est})
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
