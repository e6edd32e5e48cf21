package fallback

import (
	"time"

	"github.com/tpsroute/tpsroute/tps"
)

// CallObserver sees one call's attempts as they happen; the root implements
// it for telemetry. Its methods are called synchronously on the goroutine that
// reads or ends the attempt (concurrently for hedged attempts), so an
// implementation must be safe for concurrent use, must not block, and
// OutputGap, which runs once per output chunk, must not allocate.
type CallObserver interface {
	// OutputGap is called for every output chunk of an attempt after its
	// first, with the time since the attempt's previous output chunk. i is
	// the attempt's index in the plan.
	OutputGap(i int, gap time.Duration)
	// AttemptEnd is called once per attempt when it is recorded, after
	// Hooks.Observe and before Hooks.OnAttempt, with the plan index of
	// its deployment, the record and the attempt's sample; s is nil for a
	// deployment that was skipped or an attempt that never started.
	AttemptEnd(i int, a Attempt, s *tps.Sample)
}
