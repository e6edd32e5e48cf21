package executor_test

import (
	"context"
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

// longStream answers for 20 s: a call to it holds its deployment's slot.
var longStream = &replay.Profile{OutputTokens: 200, TPS: 10, TTFT: 10 * time.Millisecond}

// oneSlot returns deployment a (wire model a-m), which admits one call in
// flight (Limits.MaxInFlight 1).
func oneSlot() route.Deployment {
	a := dep("a", "a-m")
	a.Limits.MaxInFlight = 1
	return a
}

// hold makes a streaming call to d on e and returns it: it holds a slot of
// d until its Body is closed, at the latest when the test ends.
func hold(t *testing.T, e env, d route.Deployment) *executor.Result {
	t.Helper()
	res, err := e.do(t, planOf(d), executor.Call{Stream: true})
	require.NoError(t, err)
	t.Cleanup(func() { _ = res.Body.Close() })
	return res
}

// TestWaitsForFreedSlot: a call whose only deployment is full of calls in
// flight, at its MaxInFlight or at a concurrency limit learnt from a 429,
// waits for one of them to end and is served as soon as it does: not at
// the end of the 429's Retry-After, and not failed at once. With no call
// ending it fails after MaxWait.
func TestWaitsForFreedSlot(t *testing.T) {
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
				a := oneSlot()
				e := newEnv(map[string]replay.Script{"a-m": longStream}, fallback.Options{MaxWait: 3 * time.Second})
				if tt.learnt {
					var limit atomic.Int64
					limit.Store(1)
					a = dep("a", "a-m")
					e = limitedEnv(&limit, "5", fallback.Options{MaxWait: 3 * time.Second})
				}
				held := hold(t, e, a)
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
		a := oneSlot()
		e := newEnv(map[string]replay.Script{"a-m": longStream}, fallback.Options{MaxWait: 5 * time.Second})
		held := hold(t, e, a)
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

// TestWaitsForSlotOnlyWhenFull: only a deployment full of calls in flight
// is waited for until a call ends. One out of RPM or TPM budget until past
// MaxWait fails the call at once, and does not hide a full deployment
// further up the plan that frees within MaxWait.
func TestWaitsForSlotOnlyWhenFull(t *testing.T) {
	fast := &replay.Profile{OutputTokens: 40, TPS: 1000, TTFT: 10 * time.Millisecond}
	tests := []struct {
		name   string
		limits route.Limits // b's: spent by one call, back after more than MaxWait
		full   bool         // the plan is a (MaxInFlight 1, held for 1 s), then b
		served time.Duration
	}{
		{name: "rpm_spent", limits: route.Limits{RPM: 1}},
		{name: "tpm_spent", limits: route.Limits{TPM: 30}},
		{name: "full_then_rpm_spent", limits: route.Limits{RPM: 1}, full: true, served: time.Second},
		{name: "full_then_tpm_spent", limits: route.Limits{TPM: 30}, full: true, served: time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				a, b := oneSlot(), dep("b", "b-m")
				b.Limits = tt.limits
				e := newEnv(map[string]replay.Script{"a-m": longStream, "b-m": fast}, fallback.Options{MaxWait: 3 * time.Second})
				c := executor.Call{Stream: true, EstimatedInputTokens: 10}
				spend, err := e.do(t, planOf(b), c)
				require.NoError(t, err)
				drain(t, spend.Body)
				plan := planOf(b)
				if tt.full {
					held := hold(t, e, a)
					time.AfterFunc(time.Second, func() { _ = held.Body.Close() })
					plan = planOf(a, b)
				}
				start := time.Now()
				res, err := e.do(t, plan, c)
				if tt.served == 0 {
					assert.ErrorIs(t, err, fallback.ErrNoBudget)
					assert.Zero(t, time.Since(start), "failed at once")
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

// waiterTokens marks the waiting call of TestOutrunWaiter for its thief.
const waiterTokens = 7

// thief is a Shared that answers the waiting call's Admit (EstimatedInputTokens
// waiterTokens) on deployment a, while steals remain, only after another
// call took a's one slot, which that call holds for hold: the waiting call's
// pass finds a full, as when another waiting call took the freed slot first.
type thief struct {
	ex     *executor.Executor
	steals atomic.Int32 // left
	hold   time.Duration
	wg     sync.WaitGroup
}

func (th *thief) Admit(_ measure.Key, _ time.Time, tokens int64) error {
	if tokens != waiterTokens || th.steals.Add(-1) < 0 {
		return nil
	}
	took := make(chan struct{})
	th.wg.Go(func() {
		a := oneSlot()
		res, err := th.ex.Do(context.Background(), planOf(a), executor.Call{Body: []byte(reqBody), Stream: true})
		close(took)
		if err == nil {
			time.Sleep(th.hold)
			_ = res.Body.Close()
		}
	})
	<-took
	return nil
}

func (*thief) Done(measure.Key, time.Time, executor.Outcome)     {}
func (*thief) Opened(measure.Key, time.Time, time.Time)          {}
func (*thief) Breaker(measure.Key, time.Time) route.BreakerState { return route.BreakerClosed }

// TestOutrunWaiter: a call waiting for a deployment of MaxInFlight 1 is
// woken by every end there, and each time another call takes the slot
// first. Those passes, which try nothing, do not count against its
// attempts, so it is served once the slot is left to it; but they do not
// extend its wait either: it fails MaxWait after its start, its latest
// attempt.
func TestOutrunWaiter(t *testing.T) {
	tests := []struct {
		name   string
		steals int32
		hold   time.Duration
		served time.Duration // 0: it fails
		failed time.Duration
	}{
		// Freed at 1 s, then taken 4 times: more than the 2+2 passes a
		// plan of one deployment has.
		{name: "served_after_outrun", steals: 4, hold: 90 * time.Millisecond, served: 1400 * time.Millisecond},
		// Taken at 1 s, 1.9 s and 2.8 s: MaxWait (3 s) is over at 3 s.
		{name: "fails_after_max_wait", steals: 10, hold: 900 * time.Millisecond, failed: 3 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				a := oneSlot()
				th := &thief{hold: tt.hold}
				th.steals.Store(tt.steals)
				e := newEnv(map[string]replay.Script{"a-m": longStream}, fallback.Options{MaxWait: 3 * time.Second}, executor.Hooks{Shared: th})
				th.ex = e.ex
				defer th.wg.Wait()
				held := hold(t, e, a)
				time.AfterFunc(time.Second, func() { _ = held.Body.Close() })
				start := time.Now()
				res, err := e.do(t, planOf(a), executor.Call{Stream: true, EstimatedInputTokens: waiterTokens})
				if tt.served == 0 {
					assert.ErrorIs(t, err, fallback.ErrNoBudget)
					assert.Equal(t, tt.failed, time.Since(start).Round(100*time.Millisecond), "failed after MaxWait")
					return
				}
				require.NoError(t, err)
				assert.Equal(t, tt.served, time.Since(start).Round(100*time.Millisecond), "served when left the slot")
				assert.Len(t, attemptsFor(e.h, "a-m"), 1+int(tt.steals)+1, "the held call, the thieves', the waiter's")
				require.NoError(t, res.Body.Close())
			})
		})
	}
}

// TestWaitCountsFromLatestAttempt: MaxWait counts from the call's latest
// attempt. The call tries b (429, Retry-After 2 s), waits for it, tries it
// again at 2 s (503), and then waits for a, full until 4 s: past MaxWait
// (3 s) after its start, within it after its latest attempt.
func TestWaitCountsFromLatestAttempt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b := oneSlot(), dep("b", "b-m")
		e := newEnv(map[string]replay.Script{
			"a-m": longStream,
			"b-m": replay.WithFaults(longStream, replay.RateLimited("2").OnAttempts(1), replay.Status(503, "", nil).OnAttempts(2)),
		}, fallback.Options{MaxWait: 3 * time.Second})
		held := hold(t, e, a)
		time.AfterFunc(4*time.Second, func() { _ = held.Body.Close() })
		start := time.Now()
		res, err := e.do(t, planOf(a, b), executor.Call{Stream: true})
		require.NoError(t, err)
		assert.Equal(t, "a", res.Deployment().Provider)
		assert.Equal(t, 4*time.Second, time.Since(start).Round(100*time.Millisecond), "served when the held call ended")
		assert.Len(t, attemptsFor(e.h, "b-m"), 2)
		atts := res.Attempts()
		assert.Equal(t, 2*time.Second, atts[len(atts)-1].Waited.Round(100*time.Millisecond), "waited for a from 2 s")
		require.NoError(t, res.Body.Close())
	})
}

// TestWaitersServedWhenCallsEndTogether: two calls wait for a deployment of
// MaxInFlight 2, and both calls in flight there end at once, one right
// after the other: the second end finds the first one's wake-up taken and
// the waiters not yet back, and both waiters are served at once.
func TestWaitersServedWhenCallsEndTogether(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := dep("a", "a-m")
		a.Limits.MaxInFlight = 2
		e := newEnv(map[string]replay.Script{"a-m": longStream}, fallback.Options{MaxWait: 3 * time.Second})
		var held [2]*executor.Result
		for i := range held {
			res, err := e.do(t, planOf(a), executor.Call{Stream: true})
			require.NoError(t, err)
			defer res.Body.Close()
			held[i] = res
		}
		start := time.Now()
		var wg sync.WaitGroup
		took := make(chan time.Duration, 2)
		for range 2 {
			wg.Go(func() {
				res, err := e.do(t, planOf(a), executor.Call{Stream: true})
				if assert.NoError(t, err) {
					took <- time.Since(start)
					_ = res.Body.Close()
				}
			})
		}
		synctest.Wait() // both wait
		time.Sleep(time.Second)
		require.NoError(t, held[0].Body.Close())
		require.NoError(t, held[1].Body.Close())
		wg.Wait()
		close(took)
		for d := range took {
			assert.Equal(t, time.Second, d.Round(100*time.Millisecond))
		}
	})
}

// TestSlotWaitEnds: a call waiting for a full deployment (MaxInFlight 1,
// never freed) ends when its caller cancels, with the cause, and after
// MaxWait (3 s) when the caller's deadline is later.
func TestSlotWaitEnds(t *testing.T) {
	tests := []struct {
		name     string
		cancel   time.Duration // the caller cancels then; 0: never
		deadline time.Duration // the caller's deadline; 0: none
		failed   time.Duration
		err      error
	}{
		{name: "canceled", cancel: time.Second, failed: time.Second, err: context.Canceled},
		{name: "deadline_after_max_wait", deadline: 10 * time.Second, failed: 3 * time.Second, err: fallback.ErrNoBudget},
		// The deadline, not MaxWait, ends the wait: the call fails with it.
		{name: "deadline_before_max_wait", deadline: 2 * time.Second, failed: 2 * time.Second, err: context.DeadlineExceeded},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				a := oneSlot()
				e := newEnv(map[string]replay.Script{"a-m": longStream}, fallback.Options{MaxWait: 3 * time.Second})
				hold(t, e, a)
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				if tt.cancel > 0 {
					time.AfterFunc(tt.cancel, cancel)
				}
				if tt.deadline > 0 {
					ctx, cancel = context.WithTimeout(ctx, tt.deadline)
					defer cancel()
				}
				start := time.Now()
				_, err := e.ex.Do(ctx, planOf(a), e.call(executor.Call{Stream: true}))
				assert.ErrorIs(t, err, tt.err)
				assert.Equal(t, tt.failed, time.Since(start).Round(100*time.Millisecond))
			})
		})
	}
}

// TestWaitsMaxWaitExactly: a cooldown that ends exactly MaxWait after the
// call's attempt is waited for.
func TestWaitsMaxWaitExactly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := dep("a", "a-m")
		fast := &replay.Profile{OutputTokens: 4, TPS: 1000, TTFT: 10 * time.Millisecond}
		e := newEnv(map[string]replay.Script{"a-m": replay.WithFaults(fast, replay.RateLimited("3").OnAttempts(1))}, fallback.Options{MaxWait: 3 * time.Second})
		start := time.Now()
		res, err := e.do(t, planOf(a), executor.Call{Stream: true})
		require.NoError(t, err)
		assert.Equal(t, 3*time.Second, time.Since(start).Round(100*time.Millisecond))
		require.NoError(t, res.Body.Close())
	})
}
