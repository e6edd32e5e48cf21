package measure

import "github.com/tpsroute/tpsroute/internal/measurekit"

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

// Money is an exact amount of US dollars: Dollars plus Picodollars
// (1e-12 dollars), with 0 <= Picodollars < 1e12. Sums of Money do not drift.
// The Client's cost meters saturate at 2^62-1 dollars rather than wrap.
// A Money is a plain value, safe for concurrent reads.
type Money struct {
	Dollars     int64 `json:"dollars"`
	Picodollars int64 `json:"picodollars"`
}

// Float returns the amount in dollars as a float64, rounded to the nearest
// representable value.
func (m Money) Float() float64 {
	return float64(m.Dollars) + float64(m.Picodollars)/measurekit.PicoPerDollar
}

// Dollars returns what a call with input prompt tokens (cached included),
// cached of them served from the prefix cache, and output completion tokens
// costs at p, in US dollars: the rule the Client's cost meters use, as a float
// for exporters. Negative counts count as zero.
func (p Price) Dollars(input, cached, output int64) float64 {
	return float64(measurekit.PerToken(p.Input, p.CachedInput, p.Output).Cost(input, cached, output)) / measurekit.PicoPerDollar
}
