package fallback_test

import (
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tpsroute/tpsroute/fallback"
	"github.com/tpsroute/tpsroute/measure"
	"github.com/tpsroute/tpsroute/replay"
	"github.com/tpsroute/tpsroute/route"
)

// TestBreakerRecoversInSeconds is issue 13 point 4: the open interval starts
// at about a second and doubles on consecutive trips, so a primary back from
// an outage serves again soon after, with at most one probe per open
// interval and no call lost meanwhile. Traffic is sequential, 5 calls/s.
func TestBreakerRecoversInSeconds(t *testing.T) {
	tests := []struct {
		name       string
		down, back time.Duration // the outage, and the bound on serving again after it
		run        time.Duration
	}{
		{"down_3s", 3 * time.Second, 5 * time.Second, 12 * time.Second},
		{"down_60s", 60 * time.Second, 15 * time.Second, 90 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				fast := &replay.Profile{OutputTokens: 4, TPS: 1000, TTFT: 20 * time.Millisecond}
				var mu sync.Mutex
				var opened []time.Time
				a, b := dep("a", "a-m"), dep("b", "b-m")
				e := newEnv(map[string]replay.Script{
					"a-m": replay.WithFaults(fast, replay.DownFor(tt.down)),
					"b-m": fast,
				}, fallback.Options{}, fallback.Hooks{OnStateChange: func(k measure.Key, _, to route.BreakerState) {
					if k.Provider == "a" && to == route.BreakerOpen {
						mu.Lock()
						opened = append(opened, time.Now())
						mu.Unlock()
					}
				}})
				start := time.Now()
				var backAt time.Time
				for k := 0; time.Since(start) < tt.run; k++ {
					time.Sleep(time.Until(start.Add(time.Duration(k) * 200 * time.Millisecond)))
					res, err := e.do(t, planOf(a, b), fallback.Call{Stream: true})
					require.NoError(t, err, "no call lost during the outage")
					require.NoError(t, drain(t, res.Body).err)
					if res.Deployment().Provider == "a" && backAt.IsZero() {
						backAt = time.Now()
					}
				}
				require.False(t, backAt.IsZero(), "the primary serves again")
				assert.LessOrEqual(t, backAt.Sub(start.Add(tt.down)), tt.back, "back within %v of recovery", tt.back)

				// Probes: the requests a received after its first trip and up
				// to its recovery (the last probe succeeded), each one open
				// interval after the trip before it, the intervals growing
				// from 1 s.
				mu.Lock()
				defer mu.Unlock()
				require.NotEmpty(t, opened)
				var probes []time.Time
				for _, at := range attemptsFor(e.h, "a-m") {
					if at.Time.After(opened[0]) && !at.Time.After(backAt) {
						probes = append(probes, at.Time)
					}
				}
				require.Len(t, probes, len(opened), "one probe per open interval: %v", probes)
				prev := time.Second
				for i, p := range probes {
					gap := p.Sub(opened[i])
					assert.GreaterOrEqual(t, gap, prev-200*time.Millisecond, "probe %d: intervals never shrink", i)
					assert.GreaterOrEqual(t, gap, time.Second, "probe %d", i)
					prev = gap
				}
				if tt.down > 30*time.Second {
					// The interval reaches a quarter of the outage so far:
					// about one probe per 25% more outage, 16 in 60 s.
					assert.Less(t, len(probes), 20, "a long outage costs few probes: %v", probes)
				}
			})
		})
	}
}
