package measure

import "math"

// Counters and meters saturate: each holds at most maxCount, the largest
// value a state file's loader accepts for one (docs/STATE.md), so that no
// sample, merge or sum wraps a counter round to a negative value, and the
// process never saves a state it would refuse. Saturation loses nothing a
// real deployment reaches: 2^62 tokens is thousands of years of a busy
// deployment's output.

// maxCount is the largest value of a counter or meter (requests, tokens,
// cost dollars, error classes) and of one sample's count.
const maxCount = math.MaxInt64 / 2

// maxOutcomes is the largest count of successes or of failures in one
// sub-window of the error rate, so that the two add up within maxCount.
const maxOutcomes = maxCount / 2

// addCapped returns a + b, with b counted as 0 when negative, capped at
// limit. a must lie in [0, limit] and limit be at most maxCount, so that
// the sum cannot overflow.
func addCapped(a, b, limit int64) int64 {
	return min(a+min(max(b, 0), limit), limit)
}

// addCount adds b (a sample's count, 0 when negative) to the counter *p,
// saturating at maxCount.
func addCount(p *int64, b int64) { *p = addCapped(*p, b, maxCount) }

// mulCapped returns n × p, both non-negative, or maxCount when the product
// is larger.
func mulCapped(n, p int64) int64 {
	if n == 0 || p == 0 {
		return 0
	}
	if n > maxCount/p {
		return maxCount
	}
	return n * p
}
