package registry

import (
	"time"

	"github.com/tpsroute/tpsroute/internal/measurekit"
	"github.com/tpsroute/tpsroute/measure"
)

// Counters and meters saturate at maxCount (measurekit says why); the rule
// lives in measurekit, which measure's Price.Dollars shares.

// maxCount is the largest value of a counter or meter (requests, tokens,
// cost dollars, error classes) and of one sample's count.
const maxCount = measurekit.MaxCount

// maxOutcomes is the largest count of successes or of failures in one
// sub-window of the error rate, so that the two add up within maxCount.
const maxOutcomes = maxCount / 2

// picoPerDollar is the number of picodollars in a dollar.
const picoPerDollar = measurekit.PicoPerDollar

// addCapped returns a + b, with b counted as 0 when negative, capped at
// limit (measurekit.AddCapped).
func addCapped(a, b, limit int64) int64 { return measurekit.AddCapped(a, b, limit) }

// addCount adds b (a sample's count, 0 when negative) to the counter *p,
// saturating at maxCount.
func addCount(p *int64, b int64) { *p = addCapped(*p, b, maxCount) }

// perToken returns p in picodollars per token, the unit the cost meters
// sum in.
func perToken(p measure.Price) measurekit.TokenPrice {
	return measurekit.PerToken(p.Input, p.CachedInput, p.Output)
}

// addPico adds p picodollars (p in [0, maxCount]) to m; Dollars saturates
// at maxCount.
func addPico(m *measure.Money, p int64) {
	m.Picodollars += max(p, 0)
	if m.Picodollars >= picoPerDollar {
		m.Dollars = addCapped(m.Dollars, m.Picodollars/picoPerDollar, maxCount)
		m.Picodollars %= picoPerDollar
	}
}

// addMoney adds o (its Dollars in [0, maxCount]) to m; Dollars saturates at
// maxCount.
func addMoney(m *measure.Money, o measure.Money) {
	m.Dollars = addCapped(m.Dollars, o.Dollars, maxCount)
	addPico(m, o.Picodollars)
}

// A Snapshot's contents are unexported in measure; measure's init hands over
// the function that sets them (measurekit's hook).
var newSnapshot = measurekit.NewSnapshot.(func(time.Time, []measure.Key, map[measure.Key]measure.Stats) measure.Snapshot)
