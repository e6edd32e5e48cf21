package measure

import "math"

// Price is what one Key costs, in US dollars per million tokens. A zero
// field means free or unknown, except CachedInput: zero means cached prompt
// tokens cost the Input price (no known cache discount).
// A Price is a plain value, safe for concurrent reads. Its JSON form is
// the config file's and the simulator's price object:
// {"input": 0.4, "cached_input": 0.1, "output": 1.6}.
type Price struct {
	Input       float64 `json:"input"`        // per million prompt tokens that were not cached
	CachedInput float64 `json:"cached_input"` // per million prompt tokens served from the prefix cache
	Output      float64 `json:"output"`       // per million completion tokens, reasoning included
}

// tokenPrice is a Price in picodollars (1e-12 $) per token, so that costs
// add up exactly. A price in dollars per million tokens with up to six
// decimals converts without rounding.
type tokenPrice struct {
	input, cached, output int64
}

func picoPerToken(perMillion float64) int64 {
	if !(perMillion > 0) || math.IsInf(perMillion, 0) {
		return 0
	}
	return int64(math.Round(min(perMillion, 1e9) * 1e6))
}

func (p Price) perToken() tokenPrice {
	tp := tokenPrice{input: picoPerToken(p.Input), cached: picoPerToken(p.CachedInput), output: picoPerToken(p.Output)}
	if tp.cached == 0 {
		tp.cached = tp.input
	}
	return tp
}

// maxTokensPerSample bounds the token counts a single sample may contribute
// to cost.
const maxTokensPerSample = 1 << 32

// cost returns the picodollars of one call, saturating at maxCount (count.go).
// input includes cached.
func (p tokenPrice) cost(input, cached, output int64) int64 {
	input = min(max(input, 0), maxTokensPerSample)
	cached = min(max(cached, 0), input)
	output = min(max(output, 0), maxTokensPerSample)
	c := addCapped(mulCapped(input-cached, p.input), mulCapped(cached, p.cached), maxCount)
	return addCapped(c, mulCapped(output, p.output), maxCount)
}

// Money is an exact amount of US dollars: Dollars plus Picodollars
// (1e-12 dollars), with 0 <= Picodollars < 1e12. Sums of Money do not drift.
// The Registry's cost meters saturate at 2^62-1 dollars rather than wrap.
// A Money is a plain value, safe for concurrent reads.
type Money struct {
	Dollars     int64 `json:"dollars"`
	Picodollars int64 `json:"picodollars"`
}

const picoPerDollar = 1_000_000_000_000

// add adds p picodollars (p in [0, maxCount]); Dollars saturates at
// maxCount.
func (m *Money) add(p int64) {
	m.Picodollars += max(p, 0)
	if m.Picodollars >= picoPerDollar {
		m.Dollars = addCapped(m.Dollars, m.Picodollars/picoPerDollar, maxCount)
		m.Picodollars %= picoPerDollar
	}
}

// addMoney adds o (its Dollars in [0, maxCount]); Dollars saturates at
// maxCount.
func (m *Money) addMoney(o Money) {
	m.Dollars = addCapped(m.Dollars, o.Dollars, maxCount)
	m.add(o.Picodollars)
}

// Float returns the amount in dollars as a float64, rounded to the nearest
// representable value.
func (m Money) Float() float64 {
	return float64(m.Dollars) + float64(m.Picodollars)/picoPerDollar
}

// Dollars returns what a call with input prompt tokens (cached included),
// cached of them served from the prefix cache, and output completion tokens
// costs at p, in US dollars: the rule Registry's cost meters use, as a float
// for exporters. Negative counts count as zero.
func (p Price) Dollars(input, cached, output int64) float64 {
	return float64(p.perToken().cost(input, cached, output)) / picoPerDollar
}
