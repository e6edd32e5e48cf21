package picker

import (
	"math"
	"slices"

	"github.com/tpsroute/tpsroute/internal/registry"
	"github.com/tpsroute/tpsroute/route"
)

// item is the per-candidate working state of one pick. It holds no
// pointers, so the pooled scratch costs the garbage collector nothing.
type item struct {
	tier   tier
	score  float64
	tie    float64
	cost   float64
	dist   float64    // SLO.distance when viol != 0
	prior  float64    // samples the deployment's prior adds to exp (0 or priorSamples)
	newest int64      // unix ns of the newest sample (registry.Estimate.Newest); 0 unknown
	spread float64    // p95/p50 of TPS, else of TTFT: the per-sample spread; 0 unknown
	pend   [2]float32 // levels of TPS's and TTFT's changes measure has begun to see (registry.Estimate.TPSPending); 0 none
	flight int64      // calls in flight to it, read at this pick
	exp    route.Expected
	idx    int32 // into p.ds
	model  int32 // into scratch.models
	health uint8
	busy   uint8 // why healthBusy: busyCooling, busyHeadroom or busyLimited
	excl   uint8 // exclNone, exclStrict or exclOpen
	viol   route.Violation
	cold   bool
	// untested: no load dependence is measured and none ruled out
	// (registry.Estimate.LoadUntested).
	untested bool
}

const (
	exclNone uint8 = iota
	exclStrict
	exclOpen
)

const (
	busyCooling uint8 = iota
	busyHeadroom
	busyLimited
)

const (
	healthOK uint8 = iota
	healthHalfOpen
	healthBusy
	healthOpen
)

type model struct {
	name, rev, keyModel string
	idxs                []int32 // p.byModel[name], looked up once
}

// tier is the coarse part of a candidate's rank: candidates are ordered by
// model (request order), then health, then SLO compliance, then position
// in Request.Providers, then warm before cold; score and tie-break order
// within a tier. The group (every field but cold) is the "head" that
// chooseFirst draws the first place from.
type tier struct {
	model     int32 // into scratch.models
	prov      int32 // position in Request.Providers; 0 without
	health    uint8 // healthOK .. healthOpen
	violating bool  // the Expected misses the SLO
	cold      bool  // the Estimate is not OK
}

// sameGroup reports whether t and u differ at most by warm or cold.
func (t tier) sameGroup(u tier) bool {
	return t.model == u.model && t.health == u.health && t.violating == u.violating && t.prov == u.prov
}

// order is t's place in the tier order as one number, so that the sort
// compares tiers in one step: the fields in order of precedence, each in a
// field of bits wide enough for its range (model 31, health 2, violating 1,
// prov 21 since it is at most 1<<20, cold 1), the lower ranking first.
func (t tier) order() uint64 {
	o := uint64(uint32(t.model))
	o = o<<2 | uint64(t.health)
	o = o<<1 | bit(t.violating)
	o = o<<21 | uint64(uint32(t.prov))
	return o<<1 | bit(t.cold)
}

func bit(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}

// rank is an item's sort key, kept apart from the item so the sort moves
// small values and compares without indirection.
type rank struct {
	tier  uint64 // item.tier.order()
	score float64
	tie   float64
	idx   int32 // into p.ds: the final tie-break
	item  int32 // into scratch.items
}

type scratch struct {
	req    route.Request
	items  []item
	ranks  []rank
	order  []int32
	models []model
	// chances are explore's per-candidate probabilities, order[1:].
	chances []float64
	// derived caches, per deployment, what picks derived from its
	// published Estimate (estimates.go's derive).
	derived []derived
	// last is the scratch's last sorted order (of more than insertionMax
	// ranks), by deployment (p.ds indices), which presort starts the next
	// sort from, and pos a deployment's place in it, +1 (or stale: last
	// tells); slots, filled and rest are presort's buffers.
	last   []int32
	pos    []int32
	slots  []rank
	filled []bool
	rest   []rank
	nWild  int  // candidates from wildcard deployments
	nCold  int  // candidates compared as cold (item.cold)
	nExcl  int  // candidates excluded (item.excl)
	costly bool // the built-in Cost policy orders: a cold score is known
	// For exploration: the merged SLO and the custom Scorer, if any.
	slo      route.SLO
	checkSLO bool
	scorer   route.Scorer

	// Buffers whose addresses go through route's kernel (kernel.go), which
	// would move locals to the heap: a wildcard's concrete deployment and
	// an estimate being read (scoreItems), and a remembered best (chance).
	wd  route.Deployment
	est registry.Estimate
	opt route.Expected
}

// presort sorts s.ranks (see sortRanks), n being the number of
// deployments. Beyond insertion sort's sizes it first puts the ranks in
// the order in which their deployments stood in this scratch's last sort,
// those not in it last: the figures change little between picks, so the
// ranks are then nearly sorted, and an insertion sort that gives up to
// pdqsort after a few moves per rank finishes in about one pass, where
// ranks in configuration order cost n log n comparisons. The order found
// does not depend on where the sort starts: compareRanks is a total order.
func (s *scratch) presort(n int) {
	if len(s.ranks) <= insertionMax {
		sortRanks(s.ranks)
		return
	}
	if len(s.pos) != n {
		s.pos, s.last = make([]int32, n), s.last[:0]
	}
	if s.place() {
		insertionSortBounded(s.ranks, 4*len(s.ranks))
	} else {
		sortRanks(s.ranks)
	}
	last, pos := s.last[:0], s.pos
	for i, r := range s.ranks {
		last = append(last, r.idx)
		pos[r.idx] = int32(i) + 1
	}
	s.last = last
}

// place puts s.ranks in the order of s.last, those not in it last, and
// reports whether there was a last order to follow.
func (s *scratch) place() bool {
	m, ranks, last, pos := len(s.last), s.ranks, s.last, s.pos
	if m < 2 {
		return false
	}
	slots := slices.Grow(s.slots[:0], m)[:m]
	filled := slices.Grow(s.filled[:0], m)[:m]
	clear(filled)
	rest, placed := s.rest[:0], 0
	for _, r := range ranks {
		// pos may be stale; last[at] says whether at is r's place. A
		// wildcard deployment ranks once per model, in one place.
		if at := pos[r.idx] - 1; at >= 0 && int(at) < m && last[at] == r.idx && !filled[at] {
			slots[at], filled[at] = r, true
			placed++
		} else {
			rest = append(rest, r)
		}
	}
	s.filled, s.rest = filled, rest
	if placed == m && len(rest) == 0 {
		// The same candidates as last time (the usual case): the slots
		// are the ranks, in order; swap the buffers.
		s.ranks, s.slots = slots, ranks
		return true
	}
	k := 0
	for i, ok := range filled {
		if ok {
			ranks[k] = slots[i]
			k++
		}
	}
	copy(ranks[k:], rest)
	s.slots = slots
	return true
}

// insertionSortBounded sorts r by insertion as long as that takes at most
// budget moves in all, then leaves the rest to sortRanks (pdqsort beyond
// insertionMax ranks).
func insertionSortBounded(r []rank, budget int) {
	for i := 1; i < len(r); i++ {
		x, j := r[i], i
		for ; j > 0 && compareRanks(&x, &r[j-1]) < 0; j-- {
			if budget--; budget < 0 {
				r[j] = x // r is whole again, if not in order
				sortRanks(r)
				return
			}
			r[j] = r[j-1]
		}
		r[j] = x
	}
}

// insertionMax is the most ranks sortRanks sorts by insertion.
const insertionMax = 24

// sortRanks sorts r by compareRanks: by insertion for the usual handful of
// candidates (often already nearly in order), by pdqsort beyond.
func sortRanks(r []rank) {
	if len(r) > insertionMax {
		slices.SortFunc(r, func(x, y rank) int { return compareRanks(&x, &y) })
		return
	}
	insertionSortBounded(r, math.MaxInt)
}

// compareRanks orders by tier, then higher score, then higher tie-break,
// then configuration order. It takes pointers so that the insertion sort
// does not copy the rank it compares against.
func compareRanks(x, y *rank) int {
	switch {
	case x.tier != y.tier:
		if x.tier < y.tier {
			return -1
		}
		return 1
	case x.score != y.score:
		if x.score > y.score {
			return -1
		}
		return 1
	case x.tie != y.tie:
		if x.tie > y.tie {
			return -1
		}
		return 1
	}
	return int(x.idx - y.idx)
}
