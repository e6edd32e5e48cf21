package measurekit

import "math"

// Counters and meters saturate: each holds at most MaxCount, the largest
// value a state file's loader accepts for one (docs/STATE.md), so that no
// sample, merge or sum wraps a counter round to a negative value, and the
// process never saves a state it would refuse. Saturation loses nothing a
// real deployment reaches: 2^62 tokens is thousands of years of a busy
// deployment's output.

// MaxCount is the largest value of a counter or meter (requests, tokens,
// cost dollars, error classes) and of one sample's count.
const MaxCount = math.MaxInt64 / 2

// AddCapped returns a + b, with b counted as 0 when negative, capped at
// limit. a must lie in [0, limit] and limit be at most MaxCount, so that
// the sum cannot overflow.
func AddCapped(a, b, limit int64) int64 {
	return min(a+min(max(b, 0), limit), limit)
}

// MulCapped returns n × p, both non-negative, or MaxCount when the product
// is larger.
func MulCapped(n, p int64) int64 {
	if n == 0 || p == 0 {
		return 0
	}
	if n > MaxCount/p {
		return MaxCount
	}
	return n * p
}

// PicoPerDollar is the number of picodollars (1e-12 $) in a dollar.
const PicoPerDollar = 1_000_000_000_000

// TokenPrice is a price in picodollars per token, so that costs add up
// exactly. A price in dollars per million tokens with up to six decimals
// converts without rounding.
type TokenPrice struct {
	input, cached, output int64
}

func picoPerToken(perMillion float64) int64 {
	if !(perMillion > 0) || math.IsInf(perMillion, 0) {
		return 0
	}
	return int64(math.Round(min(perMillion, 1e9) * 1e6))
}

// PerToken returns the TokenPrice of a price in US dollars per million
// tokens (measure.Price's fields). A zero cached price is the input price.
func PerToken(input, cached, output float64) TokenPrice {
	tp := TokenPrice{input: picoPerToken(input), cached: picoPerToken(cached), output: picoPerToken(output)}
	if tp.cached == 0 {
		tp.cached = tp.input
	}
	return tp
}

// maxTokensPerSample bounds the token counts a single sample may contribute
// to cost.
const maxTokensPerSample = 1 << 32

// Cost returns the picodollars of one call, saturating at MaxCount.
// input includes cached.
func (p TokenPrice) Cost(input, cached, output int64) int64 {
	input = min(max(input, 0), maxTokensPerSample)
	cached = min(max(cached, 0), input)
	output = min(max(output, 0), maxTokensPerSample)
	c := AddCapped(MulCapped(input-cached, p.input), MulCapped(cached, p.cached), MaxCount)
	return AddCapped(c, MulCapped(output, p.output), MaxCount)
}

// NewSnapshot is the hook that package measure sets at its initialisation,
// before any package importing it runs, and internal/registry asserts to its
// typed form once:
//
//	func(at time.Time, keys []measure.Key, stats map[measure.Key]measure.Stats) measure.Snapshot
//
// It is typed any because this package cannot name measure's types.
var NewSnapshot any
