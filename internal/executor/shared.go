package executor

import (
	"time"

	"github.com/tpsroute/tpsroute/fallback"
	"github.com/tpsroute/tpsroute/measure"
	"github.com/tpsroute/tpsroute/route"
)

// admitShared asks o.Shared, if set, to admit an attempt on k, and wraps the
// breaker's done so that the outcome reaches Shared too.
func (e *Executor) admitShared(k measure.Key, tokens int64, done func(error)) (func(error), error) {
	sh := e.hooks.Shared
	if sh == nil {
		return done, nil
	}
	if err := sh.Admit(k, time.Now(), tokens); err != nil {
		return done, err
	}
	return func(err error) {
		done(err)
		ce, ok := err.(*classified)
		// An admitted attempt the local limiter then refused (ClassSkipped)
		// was never sent: it reports a failure, so that a half-open probe
		// that could not go out reopens the breaker rather than closing it.
		o := OutcomeSuccess
		switch {
		case err == nil:
		case !ok || breakerFailure(ce.class) || ce.class == fallback.ClassSkipped:
			o = OutcomeFailure
		default:
			o = OutcomeExcluded
		}
		sh.Done(k, time.Now(), o)
	}, nil
}

// sharedBreaker raises s.Breaker to the fleet's view of k's breaker.
func (e *Executor) sharedBreaker(k measure.Key, now time.Time, s *route.Status) {
	if sh := e.hooks.Shared; sh != nil {
		if b := sh.Breaker(k, now); b > s.Breaker {
			s.Breaker = b
		}
	}
}

// Shared is breaker and rate-limit state the Client's executor shares with the
// executors of other processes (fleet mode, see the fleet package): a breaker
// opened by one replica keeps the others off the deployment, one replica at a
// time probes a half-open deployment, and RPM/TPM limits hold across the
// fleet. The executor keeps its own breakers and limiters as they are and
// consults Shared in addition: Shared can only hold attempts back, never
// admit what the local breaker or limiter refuses.
//
// Every method is called on the call path and from concurrent calls:
// implementations must be safe for concurrent use, answer from memory and
// never wait on a network (synchronise in the background instead).
type Shared interface {
	// Admit reports whether the fleet lets an attempt on k start at now
	// (asked after the local breaker allowed it, before the local limiters),
	// charging tokens (an estimate, 0 for none) to the fleet-wide TPM
	// budget: nil, ErrOpen (open on another replica, or another replica
	// holds the half-open probe) or ErrNoBudget (the fleet-wide limit is
	// spent). An admitted attempt is always followed by one Done.
	Admit(k measure.Key, now time.Time, tokens int64) error
	// Done reports the end of an admitted attempt with the breaker's
	// verdict: OutcomeFailure (an attempt the local limiters then refused
	// is one), OutcomeSuccess, or OutcomeExcluded for an attempt that says
	// nothing of the deployment's health (the caller's fault, a
	// cancellation).
	Done(k measure.Key, now time.Time, o Outcome)
	// Opened reports that k's breaker opened in this executor at now and
	// goes half-open at until.
	Opened(k measure.Key, now, until time.Time)
	// Breaker returns the fleet's view of k's breaker at now (closed when
	// the fleet knows nothing), which the executor's health reports when it is worse than
	// the local breaker.
	Breaker(k measure.Key, now time.Time) route.BreakerState
}

// Outcome is the breaker's verdict on an admitted attempt, as Shared.Done
// receives it. It is a constant and safe for concurrent use.
type Outcome uint8

const (
	// OutcomeSuccess: the attempt succeeded; a half-open probe closes the
	// breaker.
	OutcomeSuccess Outcome = iota
	// OutcomeFailure: the attempt failed by the deployment's fault (or was
	// refused after admission and never sent); a half-open probe reopens it.
	OutcomeFailure
	// OutcomeExcluded: the attempt ended for a reason that says nothing of
	// the deployment (Class.CallerFault, a cancellation): a half-open probe
	// learned nothing, and the next attempt probes again.
	OutcomeExcluded
)
