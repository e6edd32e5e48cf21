package measure

import "time"

// Options configures the statistics a Client keeps (tpsroute.Config.Measure;
// internal/registry's Registry, which does the measuring, reads it). A zero
// Options consists entirely of default values; zero or negative fields mean
// their default. The Registry copies it; it is a plain value, safe for
// concurrent reads.
type Options struct {
	// Window configures every window (TTFT, TPS, TPOT, E2E, chunk gaps) and
	// the windowed error rate. Zero means 5 minutes in 10 sub-windows at 1%
	// relative accuracy (see WindowOptions).
	Window WindowOptions
	// HalfLife is the half-life of every time-decayed average (EWMA).
	// Default 30 s: after a step change at a steady sample rate, the average
	// has moved half-way within 30 s, 75% within a minute and 90% within
	// 100 s, fast against the five-minute window yet smoothing the
	// call-to-call noise of LLM latencies at a few calls per minute.
	HalfLife time.Duration
	// MinSamples is the number of successful samples inside the window for a
	// key to be warm (routing treats it as cold until then). Default 10: ten calls make the median meaningful and
	// put the p95 between the two slowest, enough to rank deployments; fewer
	// would let one lucky call win all the traffic.
	MinSamples int
	// TTL drops keys idle (no Record, no Begin, nothing in flight) for longer.
	// Default 15 minutes: three default windows, after which a key's windows
	// are long empty and only its totals would be kept.
	TTL time.Duration
	// Refresh bounds how stale the figures routing reads are while samples
	// arrive: the longest interval, in sample time, between two publications
	// of a key's summary. Default 100 ms.
	Refresh time.Duration
	// Prices gives each key's price; a key not in the map costs nothing.
	// The map is copied. Nil means no costs.
	Prices map[Key]Price
}

// WindowOptions configures the sliding windows the statistics are kept in
// (Options.Window): a ring of Buckets sub-windows over Length, each a
// DDSketch. A zero WindowOptions consists entirely of default values; zero
// or negative fields mean their default. It is a plain value, safe for
// concurrent reads.
type WindowOptions struct {
	// Length is the window length; values older than Length (at sub-window
	// granularity) no longer count. Default 5 minutes: long enough for a p99
	// to rest on a few hundred calls of a busy deployment, and short enough
	// that a degradation fully replaces the old percentiles within minutes
	// (the EWMAs react within seconds).
	Length time.Duration
	// Buckets is the number of sub-windows the window is split into and
	// rotates by. Default 10: ten 30 s sub-windows let the window slide in
	// steps of a tenth of its length, so a query covers between 90% and
	// 100% of the window, while keeping memory per window at ten small
	// sketches.
	Buckets int
	// RelativeAccuracy is the DDSketch relative accuracy, in (0, 1).
	// Default 0.01: every quantile is within 1% of a value of the true
	// distribution's rank.
	RelativeAccuracy float64
	// MaxBins bounds the bins of each sub-window sketch. Default 2048
	// (8 KiB): at 1% accuracy that spans a ratio of 4e17 between smallest
	// and largest value, so it only ever collapses absurd inputs; when it
	// does, the lowest bins are folded together and the upper quantiles (the
	// tail) stay exact.
	MaxBins int
}

// Error classes of a failed sample, the keys of Stats.ErrorsByClass. The
// class travels with the sample: the Client records each attempt with the
// class the fallback Executor gave it (fallback.Attempt.ErrorClass). A
// sample recorded without one is classified from its Err: ClassCanceled
// when it matches context.Canceled, ClassTimeout for
// context.DeadlineExceeded or a net.Error timeout, ClassOther otherwise.
const (
	ClassTimeout  = "timeout"  // a deadline ended the call: the caller's, the transport's or the Executor's
	ClassCanceled = "canceled" // the caller gave up: not the provider's failure
	ClassCaller   = "caller"   // the caller's input was refused (invalid, too long, against a content policy): not the provider's failure
	ClassOther    = "other"    // anything else
)
