package measure

import "time"

// Estimate is the cheap per-key summary that route reads on every pick.
// Times are in seconds, rates in tokens per second. An Estimate is a value.
// OK is false until enough samples have been recorded; a not-OK estimate must
// not be read as "fast".
type Estimate struct {
	TTFTP50, TTFTP95 float64 // seconds
	TPSP50, TPSP95   float64 // tokens/s (generation phase)
	TTFTEWMA         float64 // seconds, peak-sensitive
	TPSEWMA          float64 // tokens/s
	ErrorRate        float64 // failures / requests over the window, in [0,1]
	Samples          int64   // successful samples in the window
	Newest           time.Time
	InFlight         int64
	OK               bool
}
