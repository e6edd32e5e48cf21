package picker

import (
	"math"
	"math/rand/v2"
	"time"

	"github.com/tpsroute/tpsroute/route"
)

// chooseFirst moves one candidate to the front by cache affinity, half-open
// probe, cold probe, exploration or a weighted draw within the band, and
// returns the reason for the first place. All but the half-open probe and
// exploration choose within the leading tier (the head).
func (p *Picker) chooseFirst(s *scratch, req *route.Request, now time.Time) string {
	items, order := s.items, s.order
	// The head: the leading run of candidates in the same model, health,
	// SLO and provider-order tier as the first, warm or cold.
	head := 1
	lead := items[order[0]].tier
	for head < len(order) && items[order[head]].tier.sameGroup(lead) {
		head++
	}
	var rng rand.PCG
	rng.Seed(p.seed, splitmix(p.counter.Add(1)))

	if req.CacheKey != "" && p.aff != nil && p.affinityFirst(s, req, head, now) {
		return route.ReasonAffinity
	}
	if items[order[0]].health != healthOK {
		return "" // keep the demotion reason
	}
	if r := p.probe(s, req, head, now); r != "" {
		return r
	}
	if items[order[0]].cold && !s.costly {
		// Only cold candidates (probe budgets spent) and nothing known to
		// rank them by: spread the first place over all of them by weight,
		// rather than herd onto one. Under Cost the expected cost is known
		// without samples, so they go on to the cheapest (exploration and the
		// band still apply), not to a blind draw.
		p.draw(s, head, unit(&rng), drawFilter{all: true})
		return route.ReasonColdProbe
	}
	if i := p.explore(s, unit(&rng), now); i > 0 {
		moveFront(order, i)
		p.counters[cExplorations].Add(1)
		return route.ReasonExplore
	}
	if items[order[0]].viol != 0 {
		return "" // keep the demotion reason
	}
	if head > 1 && p.opts.Band > 0 {
		return p.band(s, head, unit(&rng))
	}
	return route.ReasonBest
}

// affinityFirst moves the request's cache-key deployment to the front when
// it is in the head and the leader is healthy and compliant, counting the
// hit, miss or break, and reports whether it did.
func (p *Picker) affinityFirst(s *scratch, req *route.Request, head int, now time.Time) bool {
	items, order := s.items, s.order
	k, live, found := p.aff.get(req.CacheKey, now)
	switch {
	case !found:
		p.counters[cAffinityMisses].Add(1)
		return false
	case !live:
		p.counters[cAffinityBroken].Add(1)
		return false
	}
	if items[order[0]].health == healthOK && items[order[0]].viol == 0 {
		for i, o := range order[:head] {
			if p.keyOf(s, &items[o]) == k {
				moveFront(order, i)
				p.counters[cAffinityHits].Add(1)
				return true
			}
		}
	}
	p.counters[cAffinityBroken].Add(1)
	return false
}

// probe puts a half-open deployment (its breaker's probe) or a cold one (a
// cold probe) first, and returns the reason, or "" when none is due.
func (p *Picker) probe(s *scratch, req *route.Request, head int, now time.Time) string {
	items, order := s.items, s.order
	if p.halfWin > 0 && !req.NoFallbacks && items[order[0]].viol == 0 {
		if i := p.halfOpenProbe(s, head, now); i >= 0 {
			moveFront(order, i)
			p.counters[cHalfOpenProbes].Add(1)
			return route.ReasonHalfOpenProbe
		}
	}
	if p.coldMax == 0 || (head == 1 && !items[order[0]].cold) {
		return ""
	}
	// The share cap applies when a warm candidate leads (warm sort before
	// cold within the head): only then does a probe take a measured call.
	if i := p.coldProbe(s, head, now, p.share > 0 && !items[order[0]].cold); i >= 0 {
		moveFront(order, i)
		p.counters[cColdProbes].Add(1)
		return route.ReasonColdProbe
	}
	return ""
}

// coldProbe returns the position of the head's cold candidate whose probe
// budget it takes (see takeCold), or -1: of those with no call in flight,
// the one with the fewest samples, so that cold deployments are probed in
// turn, else the first with budget. A cold deployment whose probe has not
// answered yet gets no other: one probe per doubtful deployment at a time,
// never a burst measured under its own load (in a random fleet the calls
// then go to the measured leader; docs/ROUTING.md, "Random fleets").
func (p *Picker) coldProbe(s *scratch, head int, now time.Time, shared bool) int {
	if s.nCold == 0 {
		return -1
	}
	items, order := s.items, s.order
	fewest := -1
	for j := range head {
		if it := &items[order[j]]; it.cold && it.flight == 0 && (fewest < 0 || it.exp.Samples < items[order[fewest]].exp.Samples) {
			fewest = j
		}
	}
	if fewest < 0 {
		return -1
	}
	if p.takeCold(items[order[fewest]].idx, now, shared) {
		return fewest
	}
	for j := range head {
		if j != fewest && items[order[j]].cold && items[order[j]].flight == 0 && p.takeCold(items[order[j]].idx, now, shared) {
			return j
		}
	}
	return -1
}

// band draws the first place by weight among the head's candidates within
// Options.Band of the best score (and tie-break), and returns ReasonBand, or
// ReasonBest when fewer than two qualify.
func (p *Picker) band(s *scratch, head int, v float64) string {
	best := &s.items[s.order[0]]
	lo := best.score - p.opts.Band*math.Abs(best.score)
	tlo := best.tie - p.opts.Band*math.Abs(best.tie)
	i := p.draw(s, head, v, drawFilter{lo: lo, tlo: tlo, cold: s.costly})
	if i < 0 {
		return route.ReasonBest
	}
	if i > 0 {
		p.counters[cBandPicks].Add(1)
	}
	return route.ReasonBand
}

// unit returns a uniform draw in [0,1) from rng.
func unit(rng *rand.PCG) float64 { return float64(rng.Uint64()>>11) * 0x1p-53 }

// drawFilter says which candidates a draw is among: all of them, or those
// scoring at least lo with a tie-break at least tlo, cold ones only if cold.
type drawFilter struct {
	all     bool
	cold    bool
	lo, tlo float64
}

func (f drawFilter) in(it *item) bool {
	return f.all || ((!it.cold || f.cold) && it.score >= f.lo && it.tie >= f.tlo)
}

// draw moves to the front a candidate drawn by Deployment.Weight from the
// leading run of order[:head] that f admits, using v in [0,1). It returns
// the drawn position, or -1 when fewer than two candidates qualify.
func (p *Picker) draw(s *scratch, head int, v float64, f drawFilter) int {
	items, order := s.items, s.order
	n, total := 0, 0.0
	for _, o := range order[:head] {
		if !f.in(&items[o]) {
			break
		}
		n++
		total += p.meta[items[o].idx].weight
	}
	if n < 2 {
		return -1
	}
	x := v * total
	for i, o := range order[:n] {
		x -= p.meta[items[o].idx].weight
		if x < 0 || i == n-1 {
			moveFront(order, i)
			return i
		}
	}
	return -1
}

func weight(w float64) float64 {
	if w <= 0 {
		return 1
	}
	return w
}

func moveFront(order []int32, i int) {
	if i == 0 {
		return
	}
	v := order[i]
	copy(order[1:i+1], order[:i])
	order[0] = v
}

func splitmix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}
