package executor

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/tpsroute/tpsroute/fallback"
)

// TestDueWithoutDeadline: due reports no deadline as a negative wait, so
// that rearm stops the timer instead of arming it; with one deadline the
// wait is the time left until it.
func TestDueWithoutDeadline(t *testing.T) {
	for _, c := range []struct {
		name string
		dl   fallback.Deadlines
		el   time.Duration
		want time.Duration
	}{
		{"none", fallback.Deadlines{}, time.Second, -1},
		{"max duration", fallback.Deadlines{MaxDuration: time.Minute}, time.Second, 59 * time.Second},
		{"headers", fallback.Deadlines{Headers: 15 * time.Second}, time.Second, 14 * time.Second},
	} {
		t.Run(c.name, func(t *testing.T) {
			a := &run{cl: &call{dl: c.dl}}
			wait, cause := a.due(c.el)
			assert.NoError(t, cause)
			assert.Equal(t, c.want, wait)
		})
	}
}
