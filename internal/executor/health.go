package executor

import (
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tpsroute/tpsroute/fallback"

	"github.com/sony/gobreaker/v2"
	"golang.org/x/time/rate"

	"github.com/tpsroute/tpsroute/measure"
	"github.com/tpsroute/tpsroute/route"
)

// keyState is everything the executor keeps about one deployment key. It is
// safe for concurrent use: the breaker and limiters lock themselves, the rest
// is guarded by mu or atomic.
type keyState struct {
	scrub atomic.Pointer[scrubber] // the deployment's credentials, for all it relays (relay.go)

	breaker   *gobreaker.TwoStepCircuitBreaker[struct{}]
	forceTrip atomic.Bool // the next failure trips the breaker (401/403)

	rpm, tpm    *rate.Limiter // nil when unlimited
	maxInFlight int64
	inFlight    atomic.Int64
	freed       *slotSignal // the Executor's (newState sets it): release wakes the calls waiting for a slot

	mu        sync.Mutex
	coolUntil time.Time
	rlUntil   time.Time   // x-ratelimit-remaining-* said 0, until its reset
	limited   int         // consecutive 429s without Retry-After, for the backoff exponent
	conc      concurrency // the concurrency limit learnt from 429s (concurrency.go)
	learnt    atomic.Bool // conc holds a limit not yet forgotten: headroom takes mu only then; set and cleared under mu
	trips     int         // consecutive trips since the breaker last closed
	firstTrip time.Time   // the first of them
	openUntil time.Time   // no probe before: the current (growing) open interval
	kept      int64       // the keptOff count at the first trip

	// keptOff counts the calls its open breaker kept off the deployment
	// (see Executor.keepOff), for BreakerSettings.ProbeShare.
	keptOff atomic.Int64
}

func (e *Executor) state(d *route.Deployment) *keyState {
	k := d.Key()
	e.statesMu.RLock()
	st, ok := e.states[k]
	e.statesMu.RUnlock()
	if ok {
		return st
	}
	return e.newState(k, d)
}

// existing returns the state of k, or nil if k was never used.
func (e *Executor) existing(k measure.Key) *keyState {
	e.statesMu.RLock()
	defer e.statesMu.RUnlock()
	return e.states[k]
}

func (e *Executor) newState(k measure.Key, d *route.Deployment) *keyState {
	st := &keyState{maxInFlight: int64(d.Limits.MaxInFlight), freed: &e.freed}
	if d.Limits.RPM > 0 {
		st.rpm = rate.NewLimiter(rate.Limit(float64(d.Limits.RPM)/60), d.Limits.RPM)
	}
	if d.Limits.TPM > 0 {
		st.tpm = rate.NewLimiter(rate.Limit(float64(d.Limits.TPM)/60), d.Limits.TPM)
	}
	bs := e.opts.Breaker
	st.breaker = gobreaker.NewTwoStepCircuitBreaker[struct{}](gobreaker.Settings{
		Name:         k.String(),
		MaxRequests:  bs.MaxRequests,
		Interval:     bs.Window,
		BucketPeriod: bs.BucketPeriod,
		Timeout:      bs.Timeout,
		ReadyToTrip: func(c gobreaker.Counts) bool {
			if st.forceTrip.Load() {
				return true
			}
			if c.ConsecutiveFailures >= bs.ConsecutiveFailures {
				return true
			}
			// Excluded outcomes (a CallerFault, a 429, a cancellation) are
			// neither failures nor requests: they must not dilute the ratio.
			n := c.Requests - min(c.TotalExclusions, c.Requests)
			return n >= bs.MinRequests && float64(c.TotalFailures) >= bs.FailureRatio*float64(n)
		},
		OnStateChange: func(_ string, from, to gobreaker.State) {
			now := time.Now()
			until := st.onBreaker(to, now, bs)
			if e.hooks.OnStateChange != nil {
				e.hooks.OnStateChange(k, breakerState(from), breakerState(to))
			}
			if sh := e.hooks.Shared; sh != nil && to == gobreaker.StateOpen {
				sh.Opened(k, now, until) // the grown interval, not Timeout
			}
		},
		IsExcluded: func(err error) bool {
			ce, ok := err.(*classified)
			return ok && !breakerFailure(ce.class)
		},
	})
	e.statesMu.Lock()
	defer e.statesMu.Unlock()
	if old, ok := e.states[k]; ok {
		return old
	}
	e.states[k] = st
	return st
}

// onBreaker keeps the growing open interval: each trip without a close in
// between holds the breaker open Multiplier times longer than the last, from
// Timeout up to MaxTimeout, up to a quarter of the time since the first of
// these trips and up to the time 1/ProbeShare calls for the deployment took
// (openInterval); a close starts again from Timeout.
// gobreaker's own open interval is Timeout, so once it has passed the
// breaker is half-open underneath, and allow holds the probe back until
// openUntil. It returns openUntil. It runs under the breaker's lock and takes
// only st.mu.
func (st *keyState) onBreaker(to gobreaker.State, now time.Time, bs fallback.BreakerSettings) time.Time {
	st.mu.Lock()
	defer st.mu.Unlock()
	switch to {
	case gobreaker.StateOpen:
		st.trips++
		kept := st.keptOff.Load()
		if st.trips == 1 {
			st.firstTrip, st.kept = now, kept
		}
		// Each trip after the first follows a failed probe.
		calls := kept - st.kept + int64(st.trips-1)
		st.openUntil = now.Add(openInterval(bs, st.trips, now.Sub(st.firstTrip), calls))
	case gobreaker.StateClosed:
		st.trips = 0
		st.openUntil = time.Time{}
	}
	return st.openUntil
}

// allow asks the breaker for an attempt at now: refused (gobreaker's
// ErrOpenState) while the current open interval lasts, else the breaker's
// own Allow, which lets MaxRequests probes through when half-open.
func (st *keyState) allow(now time.Time) (done func(error), err error) {
	if st.held(now) {
		return nil, gobreaker.ErrOpenState
	}
	return st.breaker.Allow()
}

// held reports whether the breaker is within its current open interval.
func (st *keyState) held(now time.Time) bool {
	st.mu.Lock()
	u := st.openUntil
	st.mu.Unlock()
	return now.Before(u)
}

// breakerAt is the breaker's state at now as the executor applies it: open
// for the whole of the current open interval.
func (st *keyState) breakerAt(now time.Time) route.BreakerState {
	if st.held(now) {
		return route.BreakerOpen
	}
	return breakerState(st.breaker.State())
}

// classified carries a Class to the breaker's IsExcluded.
type classified struct{ class fallback.Class }

func (c *classified) Error() string { return "fallback: " + c.class.String() }

func breakerState(s gobreaker.State) route.BreakerState {
	switch s {
	case gobreaker.StateOpen:
		return route.BreakerOpen
	case gobreaker.StateHalfOpen:
		return route.BreakerHalfOpen
	}
	return route.BreakerClosed
}

// coolDown extends the cooldown to now+d; it never shortens it.
func (st *keyState) coolDown(until time.Time) {
	st.mu.Lock()
	if until.After(st.coolUntil) {
		st.coolUntil = until
	}
	st.mu.Unlock()
}

func (st *keyState) cooling(now time.Time) (time.Time, bool) {
	st.mu.Lock()
	u := st.coolUntil
	st.mu.Unlock()
	return u, u.After(now)
}

// noteRateLimit reads the provider's x-ratelimit-remaining-requests/tokens
// headers; when one is 0 the deployment is reported RateLimited until the
// matching x-ratelimit-reset-* (a Go duration such as Groq's "2m59.56s", or
// seconds), or for one second when that is absent.
func (st *keyState) noteRateLimit(h http.Header, now func() time.Time) {
	// Canonical header names, so that lookups do not allocate.
	pairs := [...][2]string{
		{"X-Ratelimit-Remaining-Requests", "X-Ratelimit-Reset-Requests"},
		{"X-Ratelimit-Remaining-Tokens", "X-Ratelimit-Reset-Tokens"},
	}
	for _, k := range pairs {
		if v := h[k[0]]; len(v) == 0 || v[0] != "0" {
			continue
		}
		d := time.Second
		if v := h.Get(k[1]); v != "" {
			if p, err := time.ParseDuration(v); err == nil && p >= 0 {
				d = p
			} else if f, err := strconv.ParseFloat(v, 64); err == nil && f >= 0 && f < 1e6 {
				d = time.Duration(f * float64(time.Second))
			}
		}
		st.mu.Lock()
		if u := now().Add(d); u.After(st.rlUntil) {
			st.rlUntil = u
		}
		st.mu.Unlock()
	}
}

// headroom reports whether the limiters, the in-flight cap and the learnt
// concurrency limit have room for a request of n estimated tokens at now,
// and if not when they might (zero: not known) and whether the deployment
// is full of calls in flight (its MaxInFlight or learnt limit), so that it
// may have room sooner, when one of them ends.
func (st *keyState) headroom(now time.Time, n int64) (ok bool, readyAt time.Time, full bool) {
	f := st.inFlight.Load()
	if st.maxInFlight > 0 && f >= st.maxInFlight {
		return false, time.Time{}, true
	}
	if st.learnt.Load() {
		st.mu.Lock()
		full, at, gone := st.conc.full(now, f)
		if gone {
			st.learnt.Store(false) // forgotten: no lock on later checks
		}
		st.mu.Unlock()
		if full {
			return false, at, true
		}
	}
	if st.rpm != nil {
		if t := st.rpm.TokensAt(now); t < 1 {
			return false, now.Add(time.Duration((1 - t) / float64(st.rpm.Limit()) * float64(time.Second))), false
		}
	}
	if st.tpm != nil && n > 0 {
		need := float64(min(n, int64(st.tpm.Burst())))
		if t := st.tpm.TokensAt(now); t < need {
			return false, now.Add(time.Duration((need - t) / float64(st.tpm.Limit()) * float64(time.Second))), false
		}
	}
	return true, time.Time{}, false
}

// acquire takes an in-flight slot and charges the limiters; false means no
// room (nothing is charged then).
func (st *keyState) acquire(now time.Time, n int64) bool {
	if ok, _, _ := st.headroom(now, n); !ok {
		return false
	}
	// Counted for every deployment: the learnt limit reads it too.
	if st.inFlight.Add(1) > st.maxInFlight && st.maxInFlight > 0 {
		st.inFlight.Add(-1)
		return false
	}
	if st.rpm != nil && !st.rpm.AllowN(now, 1) {
		st.release()
		return false
	}
	if st.tpm != nil && n > 0 {
		st.tpm.AllowN(now, int(min(n, int64(st.tpm.Burst()))))
	}
	return true
}

// release gives back the in-flight slot acquire took, and wakes the calls
// waiting for one.
func (st *keyState) release() {
	st.inFlight.Add(-1)
	st.freed.broadcast()
}

// others is the number of our calls in flight to the deployment besides the
// one that asks (which holds a slot).
func (st *keyState) others() int64 { return st.inFlight.Load() - 1 }

// correct charges the TPM limiter the difference between the tokens used and
// the estimate charged at the start. Over-estimates are not refunded
// (x/time/rate cannot add tokens), so the limiter errs on the safe side.
func (st *keyState) correct(now time.Time, estimated, used int64) {
	if st.tpm == nil || used <= estimated {
		return
	}
	extra := min(used-estimated, int64(st.tpm.Burst()))
	st.tpm.ReserveN(now, int(extra)) // may put the limiter in debt; later calls wait it out
}

// Status reports the breaker state, cooldown and headroom of the deployment
// with key k at now. A key the Executor has never seen is healthy. It
// implements internal/picker's Health: it is safe for concurrent use and never blocks
// beyond the breaker's short lock.
func (e *Executor) Status(k measure.Key, now time.Time) route.Status {
	st := e.existing(k)
	if st == nil {
		var s route.Status
		e.sharedBreaker(k, now, &s)
		return s
	}
	var s route.Status
	s.Breaker = st.breakerAt(now)
	e.sharedBreaker(k, now, &s)
	if u, ok := st.cooling(now); ok {
		s.CoolingUntil = u
	}
	if ok, _, _ := st.headroom(now, 1); !ok {
		s.NoHeadroom = true
	}
	st.mu.Lock()
	s.RateLimited = st.rlUntil.After(now)
	st.mu.Unlock()
	return s
}
