package fallback

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tpsroute/tpsroute/measure"
	"github.com/tpsroute/tpsroute/route"
)

func TestBreaker(t *testing.T) {
	d := route.Deployment{Provider: "p", Model: "m"}
	outcome := func(c Class) error {
		if c == ClassNone {
			return nil
		}
		return &classified{c}
	}
	tests := []struct {
		name     string
		outcomes []Class
		want     route.BreakerState
	}{
		{"consecutive_failures_trip", []Class{ClassRetry, ClassNext, ClassMidStream, ClassRetry, ClassNext}, route.BreakerOpen},
		{"four_failures_do_not", []Class{ClassRetry, ClassNext, ClassMidStream, ClassRetry}, route.BreakerClosed},
		{"ratio_trips", []Class{ClassNone, ClassRetry, ClassNone, ClassRetry, ClassNone, ClassRetry, ClassNone, ClassRetry, ClassNone, ClassRetry}, route.BreakerOpen},
		{"ratio_needs_min_requests", []Class{ClassNone, ClassRetry, ClassNone, ClassRetry, ClassNone, ClassRetry, ClassNone, ClassRetry}, route.BreakerClosed},
		{"caller_and_request_faults_excluded", []Class{ClassCanceled, ClassInvalid, ClassPolicy, ClassContextLength, ClassRateLimited, ClassSkipped, ClassCanceled, ClassInvalid, ClassPolicy, ClassContextLength, ClassRateLimited, ClassSkipped}, route.BreakerClosed},
		{"success_resets_consecutive", []Class{ClassRetry, ClassRetry, ClassRetry, ClassRetry, ClassNone, ClassRetry, ClassRetry, ClassRetry, ClassRetry}, route.BreakerClosed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var changes []route.BreakerState
			e := New(Options{}, Hooks{OnStateChange: func(_ measure.Key, _, to route.BreakerState) { changes = append(changes, to) }})
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
		e := New(Options{}, Hooks{})
		st := e.state(&d)
		done, err := st.breaker.Allow()
		require.NoError(t, err)
		st.forceTrip.Store(true)
		done(&classified{ClassAuth})
		st.forceTrip.Store(false)
		assert.Equal(t, route.BreakerOpen, e.Status(d.Key(), time.Now()).Breaker)
	})
	t.Run("unknown_key_is_healthy", func(t *testing.T) {
		assert.Equal(t, route.Status{}, New(Options{}, Hooks{}).Status(measure.Key{Provider: "x"}, time.Now()))
	})
}

func TestCooldownExtendsNeverShortens(t *testing.T) {
	e := New(Options{}, Hooks{})
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
			st := New(Options{}, Hooks{}).state(&route.Deployment{Provider: "p"})
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
	def := BreakerSettings{}.withDefaults()
	off := BreakerSettings{ProbeShare: -1}.withDefaults()
	tests := []struct {
		name   string
		bs     BreakerSettings
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
		{"share_above_1", BreakerSettings{ProbeShare: 7}.withDefaults(), 10, 60 * time.Second, 30, 2 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, tt.bs.openInterval(tt.trips, tt.outage, tt.calls))
		})
	}
	assert.Equal(t, DefaultBreakerProbeShare, def.ProbeShare)
}
