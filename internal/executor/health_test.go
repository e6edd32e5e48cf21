package executor

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tpsroute/tpsroute/fallback"
	"github.com/tpsroute/tpsroute/measure"
	"github.com/tpsroute/tpsroute/route"
)

func TestBreaker(t *testing.T) {
	d := route.Deployment{Provider: "p", Model: "m"}
	outcome := func(c fallback.Class) error {
		if c == fallback.ClassNone {
			return nil
		}
		return &classified{c}
	}
	tests := []struct {
		name     string
		outcomes []fallback.Class
		want     route.BreakerState
	}{
		{"consecutive_failures_trip", []fallback.Class{fallback.ClassRetry, fallback.ClassNext, fallback.ClassMidStream, fallback.ClassRetry, fallback.ClassNext}, route.BreakerOpen},
		{"four_failures_do_not", []fallback.Class{fallback.ClassRetry, fallback.ClassNext, fallback.ClassMidStream, fallback.ClassRetry}, route.BreakerClosed},
		{"ratio_trips", []fallback.Class{fallback.ClassNone, fallback.ClassRetry, fallback.ClassNone, fallback.ClassRetry, fallback.ClassNone, fallback.ClassRetry, fallback.ClassNone, fallback.ClassRetry, fallback.ClassNone, fallback.ClassRetry}, route.BreakerOpen},
		{"ratio_needs_min_requests", []fallback.Class{fallback.ClassNone, fallback.ClassRetry, fallback.ClassNone, fallback.ClassRetry, fallback.ClassNone, fallback.ClassRetry, fallback.ClassNone, fallback.ClassRetry}, route.BreakerClosed},
		{"caller_and_request_faults_excluded", []fallback.Class{fallback.ClassCanceled, fallback.ClassInvalid, fallback.ClassPolicy, fallback.ClassContextLength, fallback.ClassRateLimited, fallback.ClassSkipped, fallback.ClassCanceled, fallback.ClassInvalid, fallback.ClassPolicy, fallback.ClassContextLength, fallback.ClassRateLimited, fallback.ClassSkipped}, route.BreakerClosed},
		{"success_resets_consecutive", []fallback.Class{fallback.ClassRetry, fallback.ClassRetry, fallback.ClassRetry, fallback.ClassRetry, fallback.ClassNone, fallback.ClassRetry, fallback.ClassRetry, fallback.ClassRetry, fallback.ClassRetry}, route.BreakerClosed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var changes []route.BreakerState
			e := New(fallback.Options{}, Hooks{OnStateChange: func(_ measure.Key, _, to route.BreakerState) { changes = append(changes, to) }})
			st := e.state(&d)
			for _, c := range tt.outcomes {
				done, err := st.breaker.Allow()
				require.NoError(t, err)
				done(outcome(c))
			}
			assert.Equal(t, tt.want, e.Status(d.Key(), time.Now()).Breaker)
			if tt.want == route.BreakerOpen {
				assert.Equal(t, []route.BreakerState{route.BreakerOpen}, changes)
			}
		})
	}
	t.Run("auth_trips_at_once", func(t *testing.T) {
		e := New(fallback.Options{}, Hooks{})
		st := e.state(&d)
		done, err := st.breaker.Allow()
		require.NoError(t, err)
		st.forceTrip.Store(true)
		done(&classified{fallback.ClassAuth})
		st.forceTrip.Store(false)
		assert.Equal(t, route.BreakerOpen, e.Status(d.Key(), time.Now()).Breaker)
	})
	t.Run("unknown_key_is_healthy", func(t *testing.T) {
		assert.Equal(t, route.Status{}, New(fallback.Options{}, Hooks{}).Status(measure.Key{Provider: "x"}, time.Now()))
	})
}

func TestCooldownExtendsNeverShortens(t *testing.T) {
	e := New(fallback.Options{}, Hooks{})
	st := e.state(&route.Deployment{Provider: "p"})
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	st.coolDown(now.Add(10 * time.Second))
	st.coolDown(now.Add(2 * time.Second))
	u, ok := st.cooling(now)
	assert.True(t, ok)
	assert.Equal(t, now.Add(10*time.Second), u)
	st.coolDown(now.Add(30 * time.Second))
	u, _ = st.cooling(now)
	assert.Equal(t, now.Add(30*time.Second), u)
	_, ok = st.cooling(now.Add(31 * time.Second))
	assert.False(t, ok)
}

func TestNoteRateLimit(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name   string
		header http.Header
		until  time.Duration
	}{
		{"groq_duration", http.Header{"X-Ratelimit-Remaining-Requests": {"0"}, "X-Ratelimit-Reset-Requests": {"2m59.56s"}}, 2*time.Minute + 59560*time.Millisecond},
		{"seconds", http.Header{"X-Ratelimit-Remaining-Tokens": {"0"}, "X-Ratelimit-Reset-Tokens": {"7"}}, 7 * time.Second},
		{"no_reset", http.Header{"X-Ratelimit-Remaining-Requests": {"0"}}, time.Second},
		{"remaining", http.Header{"X-Ratelimit-Remaining-Requests": {"12"}}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := New(fallback.Options{}, Hooks{}).state(&route.Deployment{Provider: "p"})
			st.noteRateLimit(tt.header, func() time.Time { return now })
			if tt.until == 0 {
				assert.True(t, st.rlUntil.IsZero())
				return
			}
			assert.Equal(t, now.Add(tt.until), st.rlUntil)
		})
	}
}

// TestOpenInterval checks the open interval after a failed probe: the
// doubling, held to a quarter of the outage and MaxTimeout, and to the time
// that 1/ProbeShare calls took (issue 16 item 2), never below Timeout.
func TestOpenInterval(t *testing.T) {
	def := breakerDefaults(fallback.BreakerSettings{})
	off := breakerDefaults(fallback.BreakerSettings{ProbeShare: -1})
	tests := []struct {
		name   string
		bs     fallback.BreakerSettings
		trips  int
		outage time.Duration
		calls  int64
		want   time.Duration
	}{
		{"first_trip", def, 1, 0, 0, time.Second},
		{"doubling", def, 3, time.Minute, 0, 4 * time.Second},
		{"quarter_of_outage", def, 8, 40 * time.Second, 0, 10 * time.Second},
		{"max_timeout", def, 20, time.Hour, 0, time.Minute},
		{"1_call_per_s", def, 10, 60 * time.Second, 60, 15 * time.Second},   // 50 calls take 50 s: the quarter decides
		{"10_calls_per_s", def, 10, 60 * time.Second, 600, 5 * time.Second}, // 50 calls take 5 s
		{"10_calls_per_s_hour", def, 30, time.Hour, 36000, 5 * time.Second},
		{"1000_calls_per_s", def, 30, time.Hour, 3600000, time.Second}, // never below Timeout
		{"share_off", off, 10, 60 * time.Second, 600, 15 * time.Second},
		{"share_above_1", breakerDefaults(fallback.BreakerSettings{ProbeShare: 7}), 10, 60 * time.Second, 30, 2 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, openInterval(tt.bs, tt.trips, tt.outage, tt.calls))
		})
	}
	assert.Equal(t, defaultBreakerProbeShare, def.ProbeShare)
}
