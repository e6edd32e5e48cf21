package registry

import (
	"time"
)

// Estimate is the cheap per-key summary that route reads on every pick,
// aggregated over cache states. Times are in seconds, rates in tokens per
// second. Quantiles and counts cover the window (Options.Window); the EWMAs
// decay with its half-life. After a change of level of TPS or TTFT
// (internal/registry/shift.go: a CUSUM on log values, typically two samples
// after a 3× change), and until the window holds only later samples, the p50
// and the EWMA of that metric are the new level (the geometric mean of the
// samples since the change, up to 16, corrected for its lag behind a drift)
// and its p95 keeps the window's ratio to the p50: the Estimate describes
// the deployment as it is now. An Estimate is a
// value, safe for concurrent use once returned.
//
// OK is false until the window holds Options.MinSamples successful samples;
// a not-OK estimate must not be read as "fast". Fields with no data are 0,
// never NaN or Inf.
type Estimate struct {
	TTFTP50, TTFTP95 float64   // seconds
	TPSP50, TPSP95   float64   // tokens/s (generation phase); 0 when TPSSamples is 0
	TTFTEWMA         float64   // seconds, peak-sensitive: jumps up at once, decays like an EWMA
	TPSEWMA          float64   // tokens/s; while the change detector sees a drift or once it has seen a change, at most its per-call level (shift.go), when no other Registry's samples are merged in
	ErrorRate        float64   // failures / (successes + failures) over the window, in [0,1]; canceled and caller (ClassCaller) calls excluded
	Samples          int64     // successful samples in the window
	TPSSamples       int64     // samples in the TPS window (successful, TPSOK)
	Newest           time.Time // time of the newest sample; zero if none
	InFlight         int64     // calls begun and not ended, read live
	OK               bool      // Samples >= Options.MinSamples
	// LoadUntested is true while no load dependence is measured (LoadK is
	// 0) and the samples cannot rule out one as strong as K 8 either: the
	// load the key's streams ran at has not varied enough to tell, as when
	// every caller's call goes to it at one steady load. route then holds
	// a call back from it now and then, so that the load varies and the
	// slope within its streams shows (internal/picker, explore.go).
	LoadUntested bool
	// LoadK is the number of other calls in flight at which a stream's TPS
	// halves, fitted online from the load each sample started at or its mean
	// over the sample's generation, whichever explains more
	// (internal/registry/load.go); 0 when no load dependence is measured. See
	// LoadFactor.
	LoadK float64
	// LoadRef is the mean number of other calls in flight during the recent
	// TPS samples: the load the TPS figures describe.
	LoadRef float64
	// TPSPending and TTFTPending are where a change of level of TPS and
	// TTFT points that the change detector has begun to see and not yet
	// confirmed: its statistic toward the change holds more than one
	// allowance (one sample about twice the allowance from the level, or
	// several nearer), while the fields above still show the old level.
	// The value is the geometric mean of the samples since that statistic
	// last left 0 (of up to 8), in tokens/s and seconds; 0 when none.
	// route re-measures a former leader whose pending change points back
	// toward its best level, so that the change is confirmed or refuted at
	// once.
	TPSPending, TTFTPending float64

	inputs *inputTable // warm prompt-size classes (input.go); nil: none
}

// EstimateHandle reads one key's published Estimate without looking the key
// up, for callers that read the same keys on every request (internal/picker's Picker).
// internal/registry's Registry.Handle returns one (internal/picker's HandleSource
// names it). Implementations are safe for concurrent use and never block.
type EstimateHandle interface {
	// Estimate returns the key's latest published Estimate, with InFlight
	// read live, and whether it is OK: what the Registry's Estimate returns for
	// the key while Live is true. It takes no lock and allocates nothing.
	Estimate() (Estimate, bool)
	// Live reports whether the key is still kept. Once the key is pruned it
	// returns false for good: the handle then keeps returning the last
	// Estimate published before the prune, and the holder should ask
	// for a new handle (a key recorded again after a prune starts afresh
	// under a new handle).
	Live() bool
}
