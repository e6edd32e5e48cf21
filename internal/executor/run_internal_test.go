package executor

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/tpsroute/tpsroute/fallback"
)

// TestFirstArm: the timer's first arm is no later than FinishGrace after the
// start, so that a call finishing within it never resets the timer for its
// grace deadline; an earlier deadline, a grace that is off, or a first arm
// after that time keep the deadline's own wait.
func TestFirstArm(t *testing.T) {
	const g = 2 * time.Second
	for _, tc := range []struct {
		name     string
		grace    time.Duration
		el, wait time.Duration
		want     time.Duration
	}{
		{"at_start_capped_at_grace", g, 0, 30 * time.Second, g},
		{"later_start_capped_at_grace", g, 500 * time.Millisecond, 30 * time.Second, 1500 * time.Millisecond},
		{"earlier_deadline_kept", g, 0, time.Second, time.Second},
		{"deadline_at_grace_kept", g, 0, g, g},
		{"grace_off", -1, 0, 30 * time.Second, 30 * time.Second},
		{"grace_time_passed", g, 3 * time.Second, 30 * time.Second, 30 * time.Second},
		{"grace_time_now", g, g, 30 * time.Second, 30 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := &run{cl: &call{dl: fallback.Deadlines{FinishGrace: tc.grace}}}
			assert.Equal(t, tc.want, a.firstArm(tc.el, tc.wait))
		})
	}
}
