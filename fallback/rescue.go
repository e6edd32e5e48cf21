package fallback

import (
	"errors"
	"time"
)

// ErrRescued marks the attempt whose stream was too slow and was left for a
// continuation on a faster deployment (RescueOptions): its class is
// ClassCanceled, so it counts in no breaker and in no error rate, and
// Attempt.Rescued is true. The caller never sees it.
var ErrRescued = errors.New("fallback: stream too slow, continued on a faster deployment")

// RescueOptions configures the slow-stream rescue. A committed stream whose
// generation rate stays under Ratio times its deployment's expected TPS (the
// plan's figure: route.Candidate.Expected, its p50 by default), and under
// the call's SLO MinTPS (route.SLO.MinTPS) when that is set, for Window is continued, from exactly the
// text the caller has read, on a deployment of the same model and revision
// that declares assistant prefill and is expected to be at least Speedup
// times faster than the stream's rate. The slow stream is held, not closed,
// while the target opens: if the target fails before its first output, the
// slow stream goes on and the caller loses nothing. A rate is judged at the
// stream's output chunks, in tokens counted as the larger of its output
// chunks and its text bytes / 4. Only streaming calls whose mid-stream
// policy continues are rescued, at most once per attempt. The zero value is
// on with the defaults (a quarter of the expected TPS for 3 s, a target
// twice as fast); a negative Ratio turns it off. It is a value, safe to
// share.
type RescueOptions struct {
	// Ratio is the share of the deployment's expected TPS under which the
	// stream is slow. Zero means 0.25: a stream at a quarter of its usual
	// rate takes four times as long to finish, while the normal variation
	// of a provider's rate within one answer (batching, long contexts)
	// stays well above it. Negative turns the rescue off.
	Ratio float64
	// Window is how long the stream must stay slow. Zero means 3 s, long
	// enough that a pause behind a content filter or a burst of long tokens
	// does not count.
	Window time.Duration
	// Speedup is how many times the slow stream's rate a target must be
	// expected to generate. Zero means 2, so that the TTFT the target costs
	// is paid back on any answer with more than a few seconds to go.
	Speedup float64
}
