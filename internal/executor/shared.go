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
		o := fallback.OutcomeSuccess
		switch {
		case err == nil:
		case !ok || breakerFailure(ce.class) || ce.class == fallback.ClassSkipped:
			o = fallback.OutcomeFailure
		default:
			o = fallback.OutcomeExcluded
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
