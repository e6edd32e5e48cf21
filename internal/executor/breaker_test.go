package executor_test

import (
	"io"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tpsroute/tpsroute/fallback"
	"github.com/tpsroute/tpsroute/internal/executor"
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
				o := newOutage(tt.down)
				e, a, b := o.env, o.a, o.b
				start := time.Now()
				var backAt time.Time
				for k := 0; time.Since(start) < tt.run; k++ {
					time.Sleep(time.Until(start.Add(time.Duration(k) * 200 * time.Millisecond)))
					res, err := e.do(t, planOf(a, b), executor.Call{Stream: true})
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
				opened, probes := o.probes(t, backAt)
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

// TestBreakerProbesWithTraffic is issue 16 item 2 for an open breaker: its
// probes are traffic-proportional (BreakerSettings.ProbeShare), so after a
// one-minute outage a deployment serves again within about 50 calls of its
// recovery at 10 calls/s and within about a second (Timeout) at 100 calls/s,
// while at 1 call/s the time rule (a quarter of the outage) decides. Under
// heavy traffic a dead deployment gets about one probe per Timeout, never a
// storm, and no call is lost. Plans are built as route builds them: the
// deployment goes to Plan.Excluded while its breaker is open.
func TestBreakerProbesWithTraffic(t *testing.T) {
	const down = 60 * time.Second
	tests := []struct {
		name string
		rate int           // calls per second, started on a fixed schedule
		back time.Duration // bound on serving again after the recovery
		// most probes in the outage's second half: about one per 50 calls
		// kept off it, or one per Timeout when that is fewer
		probes int
	}{
		{"1_call_per_s", 1, 16 * time.Second, 4}, // the time rule: one per quarter of the outage
		{"10_calls_per_s", 10, 6 * time.Second, 7},
		{"100_calls_per_s", 100, 2 * time.Second, 31},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				o := newOutage(down)
				e, a, b := o.env, o.a, o.b
				plan := func() route.Plan {
					if e.ex.Status(a.Key(), time.Now()).Breaker == route.BreakerOpen {
						p := planOf(b)
						p.Excluded = []route.Candidate{{Deployment: &a, Reason: route.ReasonOpen}}
						return p
					}
					return planOf(a, b)
				}
				start := time.Now()
				var (
					wg     sync.WaitGroup
					lost   atomic.Int64
					backMu sync.Mutex
					backAt time.Time
				)
				n := int(down/time.Second+20) * tt.rate
				for k := range n {
					time.Sleep(time.Until(start.Add(time.Duration(k) * time.Second / time.Duration(tt.rate))))
					wg.Add(1)
					go func() {
						defer wg.Done()
						res, err := e.do(t, plan(), executor.Call{Stream: true})
						if err != nil {
							lost.Add(1)
							return
						}
						// Not drain: require must not run off the test's goroutine.
						_, err = io.Copy(io.Discard, res.Body)
						if res.Body.Close() != nil || err != nil {
							lost.Add(1)
						}
						if res.Deployment().Provider == "a" {
							backMu.Lock()
							if backAt.IsZero() {
								backAt = time.Now()
							}
							backMu.Unlock()
						}
					}()
				}
				wg.Wait()
				assert.Zero(t, lost.Load(), "no call lost during the outage")
				require.False(t, backAt.IsZero(), "the primary serves again")
				t.Logf("served again %v after its recovery", backAt.Sub(start.Add(down)))
				assert.LessOrEqual(t, backAt.Sub(start.Add(down)), tt.back)

				// Probes: the requests a received after its first trip
				// and up to its recovery, all failed.
				_, probes := o.probes(t, start.Add(down))
				late := 0
				for _, p := range probes {
					if p.After(start.Add(down / 2)) {
						late++
					}
				}
				for i := 1; i < len(probes); i++ {
					assert.GreaterOrEqual(t, probes[i].Sub(probes[i-1]), time.Second, "probe %d: at most one per Timeout", i)
				}
				t.Logf("%d probes in the outage, %d in its second half (%d calls)", len(probes), late, int(down/2/time.Second)*tt.rate)
				assert.LessOrEqual(t, late, tt.probes, "probes in the outage's second half")
			})
		})
	}
}

// outage is an env in which deployment a answers 503 to every request in
// the first down and b always serves, both fast, with the times a's breaker
// opened.
type outage struct {
	env
	a, b route.Deployment

	mu     sync.Mutex
	opened []time.Time
}

func newOutage(down time.Duration) *outage {
	fast := &replay.Profile{OutputTokens: 4, TPS: 1000, TTFT: 20 * time.Millisecond}
	o := &outage{a: dep("a", "a-m"), b: dep("b", "b-m")}
	o.env = newEnv(map[string]replay.Script{
		"a-m": replay.WithFaults(fast, replay.DownFor(down)),
		"b-m": fast,
	}, fallback.Options{}, executor.Hooks{OnStateChange: func(k measure.Key, _, to route.BreakerState) {
		if k.Provider == "a" && to == route.BreakerOpen {
			o.mu.Lock()
			o.opened = append(o.opened, time.Now())
			o.mu.Unlock()
		}
	}})
	return o
}

// probes returns the times a's breaker opened and the requests a received
// after the first of them and up to until.
func (o *outage) probes(t *testing.T, until time.Time) (opened, probes []time.Time) {
	t.Helper()
	o.mu.Lock()
	opened = slices.Clone(o.opened)
	o.mu.Unlock()
	require.NotEmpty(t, opened)
	for _, at := range attemptsFor(o.h, "a-m") {
		if at.Time.After(opened[0]) && !at.Time.After(until) {
			probes = append(probes, at.Time)
		}
	}
	return opened, probes
}

// TestBreakerRatioIgnoresCallerFaults checks that outcomes the breaker
// excludes (here 20 invalid requests, a CallerFault) neither count as
// failures nor dilute FailureRatio: 5 failures in the next 9 attempts trip the
// breaker as they would have without the 400s before them.
func TestBreakerRatioIgnoresCallerFaults(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		invalid := make([]int, 20)
		for i := range invalid {
			invalid[i] = i + 1
		}
		fast := &replay.Profile{OutputTokens: 4, TPS: 1000, TTFT: 20 * time.Millisecond}
		a := dep("a", "a-m")
		e := newEnv(map[string]replay.Script{"a-m": replay.WithFaults(fast,
			replay.Status(400, `{"error":{"message":"temperature must be <= 2","type":"invalid_request_error"}}`, nil).OnAttempts(invalid...),
			replay.Status(503, "", nil).OnAttempts(21, 23, 25, 27, 29),
		)}, fallback.Options{Breaker: fallback.BreakerSettings{ConsecutiveFailures: 100, FailureRatio: 0.5, MinRequests: 9}})
		for i := 1; i <= 29; i++ {
			res, err := e.do(t, planOf(a), executor.Call{Stream: true})
			if err != nil {
				var fe *fallback.Error
				require.ErrorAs(t, err, &fe)
				last, _ := fe.Last()
				want := fallback.ClassNext
				if i <= 20 {
					want = fallback.ClassInvalid
				}
				require.Equal(t, want, last.Class, "attempt %d", i)
				continue
			}
			require.NoError(t, drain(t, res.Body).err)
			require.Equal(t, route.BreakerClosed, e.ex.Status(a.Key(), time.Now()).Breaker, "attempt %d", i)
		}
		assert.Equal(t, route.BreakerOpen, e.ex.Status(a.Key(), time.Now()).Breaker,
			"5 failures of the 9 counted attempts reach FailureRatio 0.5")
	})
}
