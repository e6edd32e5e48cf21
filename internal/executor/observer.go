package executor

import (
	"time"

	"github.com/tpsroute/tpsroute/fallback"

	"github.com/tpsroute/tpsroute/route"
	"github.com/tpsroute/tpsroute/tps"
)

// Feedback learns from one call's attempts, in the manner of gobreaker's
// Allow and grpc's PickResult.Done: each attempt that starts gets a
// completion handle from Begin, and the Executor calls that handle exactly
// once, where the attempt ends, with everything there is to learn from it.
// The root implements Feedback to carry every outcome to measure (the sample
// and the in-flight gauge), route's cache affinity, the fleet and telemetry
// in one place; the breakers, limiters and Hooks.Shared are fed at the
// same point, inside the Executor, just before the handle.
//
// Its methods are called synchronously on the goroutine that starts, reads
// or ends the attempt (concurrently for hedged attempts), so an
// implementation must be safe for concurrent use and must not block;
// OutputGap, which runs once per output chunk, must not allocate.
type Feedback interface {
	// Begin is called when attempt i (the index of its deployment d in the
	// plan) is about to be sent, after the breakers and limiters admitted
	// it. It returns the attempt's completion handle; nil means nothing to
	// report.
	Begin(i int, d *route.Deployment) Done
	// Skip is called for an attempt that never started: a deployment the
	// breakers or limiters refused (a.Class is ClassSkipped) or a call
	// canceled before its next attempt. It gets no Begin.
	Skip(i int, a fallback.Attempt)
	// OutputGap is called for every output chunk of attempt i after its
	// first, with the time since the attempt's previous output chunk.
	OutputGap(i int, gap time.Duration)
}

// Done is one attempt's completion handle (see Feedback.Begin). The Executor
// calls it exactly once, when the attempt is recorded: after its breaker,
// limiter and Hooks.Shared outcome, before Hooks.OnAttempt. a is the
// attempt's record (a.Err is nil on success) and s its sample, which Done
// must not keep.
type Done func(a fallback.Attempt, s *tps.Sample)
