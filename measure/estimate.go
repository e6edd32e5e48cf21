package measure

import "time"

// Estimate is the cheap per-key summary that route reads on every pick,
// aggregated over cache states. Times are in seconds, rates in tokens per
// second. Quantiles and counts cover the Registry's window; the EWMAs decay
// with its half-life. An Estimate is a value, safe for concurrent use once returned.
//
// OK is false until the window holds Options.MinSamples successful samples;
// a not-OK estimate must not be read as "fast". Fields with no data are 0,
// never NaN or Inf.
type Estimate struct {
	TTFTP50, TTFTP95 float64   // seconds
	TPSP50, TPSP95   float64   // tokens/s (generation phase); 0 when TPSSamples is 0
	TTFTEWMA         float64   // seconds, peak-sensitive (PeakEWMA)
	TPSEWMA          float64   // tokens/s
	ErrorRate        float64   // failures / (successes + failures) over the window, in [0,1]; canceled calls excluded
	Samples          int64     // successful samples in the window
	TPSSamples       int64     // samples in the TPS window (successful, TPSOK)
	Newest           time.Time // time of the newest sample; zero if none
	InFlight         int64     // calls begun and not ended, read live
	OK               bool      // Samples >= Options.MinSamples
}

func (e *Estimate) sanitize() {
	for _, p := range []*float64{&e.TTFTP50, &e.TTFTP95, &e.TPSP50, &e.TPSP95, &e.TTFTEWMA, &e.TPSEWMA, &e.ErrorRate} {
		*p = finite(*p)
	}
}
