package executor_test

import (
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tpsroute/tpsroute/fallback"
	"github.com/tpsroute/tpsroute/internal/executor"
	"github.com/tpsroute/tpsroute/replay"
)

// TestWaitsForFreedSlot: a call whose only deployment is full of calls in
// flight, at its MaxInFlight or at a concurrency limit learnt from a 429,
// waits for one of them to end and is served as soon as it does: not at
// the end of the 429's Retry-After, and not failed at once. With no call
// ending it fails after MaxWait.
func TestWaitsForFreedSlot(t *testing.T) {
	long := &replay.Profile{OutputTokens: 200, TPS: 10, TTFT: 10 * time.Millisecond} // 20 s
	tests := []struct {
		name    string
		learnt  bool          // a learnt limit of 1 (429, Retry-After 5 s); else MaxInFlight 1
		release time.Duration // when the held call ends; 0: never
		served  time.Duration // when the waiting call is served; 0: it fails
		failed  time.Duration // when it fails
	}{
		{name: "max_in_flight", release: time.Second, served: time.Second},
		{name: "learnt_limit", learnt: true, release: time.Second, served: time.Second},
		{name: "max_in_flight_never_freed", failed: 3 * time.Second},
		{name: "learnt_limit_never_freed", learnt: true, failed: 3 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				a := dep("a", "a-m")
				var e env
				if tt.learnt {
					var limit atomic.Int64
					limit.Store(1)
					e = limitedEnv(&limit, "5", fallback.Options{MaxWait: 3 * time.Second})
				} else {
					a.Limits.MaxInFlight = 1
					e = newEnv(map[string]replay.Script{"a-m": long}, fallback.Options{MaxWait: 3 * time.Second})
				}
				held, err := e.do(t, planOf(a), executor.Call{Stream: true})
				require.NoError(t, err)
				defer held.Body.Close()
				if tt.release > 0 {
					time.AfterFunc(tt.release, func() { _ = held.Body.Close() })
				}
				start := time.Now()
				res, err := e.do(t, planOf(a), executor.Call{Stream: true})
				if tt.served == 0 {
					var fe *fallback.Error
					require.ErrorAs(t, err, &fe)
					if tt.learnt {
						assert.Equal(t, 429, fe.Attempts[len(fe.Attempts)-1].Status, "the 429 that taught the limit")
					} else {
						assert.ErrorIs(t, err, fallback.ErrNoBudget)
					}
					assert.Equal(t, tt.failed, time.Since(start).Round(100*time.Millisecond), "failed after MaxWait")
					return
				}
				require.NoError(t, err)
				assert.Equal(t, "a", res.Deployment().Provider)
				assert.Equal(t, tt.served, time.Since(start).Round(100*time.Millisecond), "served when the held call ended")
				require.NoError(t, res.Body.Close())
			})
		})
	}
}

// TestWaitersTakeFreedSlotsInTurn: six calls wait for a deployment of
// MaxInFlight 1. Every end wakes all six and one takes the slot; the
// others' passes that find it taken again do not count against their
// attempts, so every call is served, one after another.
func TestWaitersTakeFreedSlotsInTurn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := dep("a", "a-m")
		a.Limits.MaxInFlight = 1
		long := &replay.Profile{OutputTokens: 200, TPS: 10, TTFT: 10 * time.Millisecond}
		e := newEnv(map[string]replay.Script{"a-m": long}, fallback.Options{MaxWait: 5 * time.Second})
		held, err := e.do(t, planOf(a), executor.Call{Stream: true})
		require.NoError(t, err)
		defer held.Body.Close()
		const waiters = 6
		var wg sync.WaitGroup
		errs := make(chan error, waiters)
		for range waiters {
			wg.Go(func() {
				res, err := e.do(t, planOf(a), executor.Call{Stream: true})
				if err != nil {
					errs <- err
					return
				}
				time.Sleep(100 * time.Millisecond)
				errs <- res.Body.Close()
			})
		}
		synctest.Wait() // all six wait
		time.Sleep(time.Second)
		require.NoError(t, held.Body.Close())
		wg.Wait()
		close(errs)
		for err := range errs {
			assert.NoError(t, err)
		}
		assert.Len(t, attemptsFor(e.h, "a-m"), waiters+1, "one attempt each, none refused")
		e.within(t, 2*time.Second)
	})
}
