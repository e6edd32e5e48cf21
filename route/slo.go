package route

import (
	"cmp"
	"math"
	"strings"
	"time"
)

// SLO holds the constraints a deployment should meet. A deployment that
// violates one goes behind those that comply; with Strict it is dropped.
// Zero fields mean "no limit". Cold deployments (too few samples) are judged
// only on what is known: MaxPrice always, MaxErrorRate once samples exist.
// An SLO is a value, safe to copy and for concurrent reads.
type SLO struct {
	MaxTTFT      time.Duration // upper bound on the TTFT read at Options.TTFTPercentile over the window (after a detected change, at the new level); the peak-sensitive EWMA is left out, so one slow first token does not demote a deployment
	MinTPS       float64       // lower bound on the expected generation tokens/s (read at Options.TPSPercentile)
	MaxPrice     float64       // upper bound on Price.Output, in USD per million output tokens: the soft price control (Request.PriceCap is the hard one)
	MaxErrorRate float64       // upper bound on the windowed error rate, in (0,1]
	Strict       bool          // drop violators instead of demoting them
}

// SLOError says which field of an SLO is out of range. It is an immutable
// value and safe for concurrent use.
type SLOError struct {
	Field  string // "MaxTTFT", "MinTPS", "MaxPrice" or "MaxErrorRate"
	Reason string // e.g. "negative", "must be in [0, 1]"
}

// Error returns "route: invalid SLO: MaxErrorRate: must be in [0, 1]".
func (e *SLOError) Error() string { return "route: invalid SLO: " + e.Field + ": " + e.Reason }

// Validate reports the first field of s out of range as a *SLOError, or
// nil: MaxTTFT must not be negative, MinTPS and MaxPrice must be finite and
// not negative, and MaxErrorRate must be in [0, 1].
func (s SLO) Validate() error {
	finiteNonNeg := func(f float64) bool { return f >= 0 && !math.IsInf(f, 1) && !math.IsNaN(f) }
	switch {
	case s.MaxTTFT < 0:
		return &SLOError{Field: "MaxTTFT", Reason: "negative"}
	case !finiteNonNeg(s.MinTPS):
		return &SLOError{Field: "MinTPS", Reason: "must be finite and not negative"}
	case !finiteNonNeg(s.MaxPrice):
		return &SLOError{Field: "MaxPrice", Reason: "must be finite and not negative"}
	case !finiteNonNeg(s.MaxErrorRate) || s.MaxErrorRate > 1:
		return &SLOError{Field: "MaxErrorRate", Reason: "must be in [0, 1]"}
	}
	return nil
}

// merge returns s with the zero fields of s taken from def; Strict is set if
// either sets it.
func (s SLO) merge(def SLO) SLO {
	s.MaxTTFT = cmp.Or(s.MaxTTFT, def.MaxTTFT)
	s.MinTPS = cmp.Or(s.MinTPS, def.MinTPS)
	s.MaxPrice = cmp.Or(s.MaxPrice, def.MaxPrice)
	s.MaxErrorRate = cmp.Or(s.MaxErrorRate, def.MaxErrorRate)
	s.Strict = s.Strict || def.Strict
	return s
}

// Violation is a set of SLO constraints a deployment violates. The zero
// Violation means it complies. It is a value and safe for concurrent use.
type Violation uint8

const (
	// ViolatesTTFT means the expected TTFT exceeds SLO.MaxTTFT.
	ViolatesTTFT Violation = 1 << iota
	// ViolatesTPS means the expected TPS is below SLO.MinTPS, or unknown on a warm deployment.
	ViolatesTPS
	// ViolatesPrice means Price.Output exceeds SLO.MaxPrice.
	ViolatesPrice
	// ViolatesErrorRate means the error rate exceeds SLO.MaxErrorRate.
	ViolatesErrorRate
)

// String lists the violated constraints, e.g. "ttft,price"; "" for none.
func (v Violation) String() string {
	var parts []string
	for _, f := range []struct {
		bit  Violation
		name string
	}{{ViolatesTTFT, "ttft"}, {ViolatesTPS, "tps"}, {ViolatesPrice, "price"}, {ViolatesErrorRate, "error-rate"}} {
		if v&f.bit != 0 {
			parts = append(parts, f.name)
		}
	}
	return strings.Join(parts, ",")
}

// check returns what a deployment with output price priceOut (USD per
// million tokens) and statistics e violates.
func (s SLO) check(priceOut float64, e *Expected) Violation {
	var v Violation
	if s.MaxPrice > 0 && priceOut > s.MaxPrice {
		v |= ViolatesPrice
	}
	if e.Samples > 0 && s.MaxErrorRate > 0 && e.ErrorRate > s.MaxErrorRate {
		v |= ViolatesErrorRate
	}
	if !e.OK {
		return v
	}
	if s.MaxTTFT > 0 && e.TTFTOK && e.sloTTFT() > s.MaxTTFT.Seconds() {
		v |= ViolatesTTFT
	}
	if s.MinTPS > 0 && (!e.TPSOK || e.TPS < s.MinTPS) {
		v |= ViolatesTPS
	}
	return v
}

// sloTTFT is the TTFT the SLO judges: the window's percentile, which one
// outlier does not move (the blended TTFT follows the peak-sensitive EWMA,
// which jumps to any slow sample), else the blended value.
func (e *Expected) sloTTFT() float64 {
	if e.ttftQ > 0 {
		return e.ttftQ
	}
	return e.TTFT
}

// distance is how far a deployment with violations v is from meeting s, in
// natural-log units summed over the violated limits (0.1 is about 10% over
// a limit): violators are ranked by it, closest first, and exploration
// weighs their chance of complying by it. A violation with nothing to
// measure it by (a warm deployment without TPS) counts 1.
func (s SLO) distance(priceOut float64, e *Expected, v Violation) float64 {
	d := 0.0
	if v&ViolatesPrice != 0 {
		d += logOver(priceOut, s.MaxPrice)
	}
	if v&ViolatesErrorRate != 0 {
		d += logOver(e.ErrorRate, s.MaxErrorRate)
	}
	if v&ViolatesTTFT != 0 {
		d += logOver(e.sloTTFT(), s.MaxTTFT.Seconds())
	}
	if v&ViolatesTPS != 0 {
		if e.TPSOK {
			d += logOver(s.MinTPS, e.TPS)
		} else {
			d++
		}
	}
	return d
}

// margin is how far a deployment with statistics e is inside the measured
// limits of s, MaxTTFT and MinTPS, in natural-log units, the least of them
// (negative when it violates one); +Inf when neither applies.
func (s SLO) margin(e *Expected) float64 {
	m := math.Inf(1)
	if s.MaxTTFT > 0 && e.TTFTOK {
		m = math.Log(s.MaxTTFT.Seconds() / e.sloTTFT())
	}
	if s.MinTPS > 0 && e.TPSOK {
		m = min(m, math.Log(e.TPS/s.MinTPS))
	}
	return m
}

// logOver returns ln(x/limit) for x over a positive limit, else 0.
func logOver(x, limit float64) float64 {
	if !(x > limit) || !(limit > 0) {
		return 0
	}
	return clamp(math.Log(x / limit))
}
