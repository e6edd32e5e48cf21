package routekit

import "math"

// ExpectedInputTokens is the prompt size assumed for cost when a
// route.Request leaves ExpectedInputTokens at zero.
const ExpectedInputTokens = 1000

// ExpectedOutputTokens is the output size assumed for cost, for
// LatencyCompletion and for the room an attempt leaves its fallback, when a
// route.Request leaves ExpectedOutputTokens at zero.
const ExpectedOutputTokens = 250

// Kernel is route's implementation of the engine's needs: the only value
// ever stored is route's, set by route's init before any package that
// imports route is initialised, and never changed after. Its dynamic type
// is unexported; internal/picker asserts it to its own interface. It is
// safe for concurrent use.
var Kernel any

// Clamp maps NaN to -math.MaxFloat64 and ±Inf to ±math.MaxFloat64: a score
// is never NaN, and NaN is the worst (route.Scorer's contract).
func Clamp(v float64) float64 {
	switch {
	case math.IsNaN(v):
		return -math.MaxFloat64
	case v > math.MaxFloat64:
		return math.MaxFloat64
	case v < -math.MaxFloat64:
		return -math.MaxFloat64
	}
	return v
}

// Valid reports whether v is finite and positive (NaN compares false).
func Valid(v float64) bool { return v > 0 && v <= math.MaxFloat64 }

// One returns f, or 1 for 0 (unset): how an Expected's call factors read.
func One(f float32) float64 {
	if f > 0 {
		return float64(f)
	}
	return 1
}
