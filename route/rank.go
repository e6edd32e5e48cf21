package route

import (
	"slices"
)

// item is the per-candidate working state of one pick. It holds no
// pointers, so the pooled scratch costs the garbage collector nothing.
type item struct {
	tier   tier
	score  float64
	tie    float64
	cost   float64
	dist   float64 // SLO.distance when viol != 0
	prior  float64 // samples the deployment's prior adds to exp (0 or priorSamples)
	newest int64   // unix ns of the newest sample (measure.Estimate.Newest); 0 unknown
	spread float64 // p95/p50 of TPS or TTFT, the larger: the per-sample spread; 0 unknown
	exp    Expected
	idx    int32 // into p.ds
	model  int32 // into scratch.models
	health uint8
	busy   uint8 // why healthBusy: busyCooling, busyHeadroom or busyLimited
	excl   uint8 // exclNone, exclStrict or exclOpen
	viol   Violation
	cold   bool
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

// compare orders tiers: -1 when t ranks first, 1 when u does, else 0.
func (t tier) compare(u tier) int {
	switch {
	case t.model != u.model:
		return cmpInt(t.model, u.model)
	case t.health != u.health:
		return cmpInt(int32(t.health), int32(u.health))
	case t.violating != u.violating:
		if u.violating {
			return -1
		}
		return 1
	case t.prov != u.prov:
		return cmpInt(t.prov, u.prov)
	case t.cold != u.cold:
		if u.cold {
			return -1
		}
		return 1
	}
	return 0
}

func cmpInt(a, b int32) int {
	if a < b {
		return -1
	}
	return 1
}

// rank is an item's sort key, kept apart from the item so the sort moves
// small values and compares without indirection.
type rank struct {
	tier  tier // item.tier
	score float64
	tie   float64
	idx   int32 // into p.ds: the final tie-break
	item  int32 // into scratch.items
}

type scratch struct {
	req    Request
	items  []item
	ranks  []rank
	order  []int32
	models []model
	// chances are explore's per-candidate probabilities, order[1:].
	chances []float64
	// derived caches, per deployment, what picks derived from its
	// published Estimate (estimates.go's derive).
	derived []derived
	nWild   int  // candidates from wildcard deployments
	nCold   int  // candidates compared as cold (item.cold)
	nExcl   int  // candidates excluded (item.excl)
	costly  bool // the built-in Cost policy orders: a cold score is known
	// For exploration: the merged SLO and the custom Scorer, if any.
	slo      SLO
	checkSLO bool
	scorer   Scorer
}

// sortRanks sorts r by compareRanks: by insertion for the usual handful of
// candidates (often already nearly in order), by pdqsort beyond.
func sortRanks(r []rank) {
	if len(r) > 24 {
		slices.SortFunc(r, func(x, y rank) int { return compareRanks(&x, &y) })
		return
	}
	for i := 1; i < len(r); i++ {
		for j := i; j > 0 && compareRanks(&r[j], &r[j-1]) < 0; j-- {
			r[j], r[j-1] = r[j-1], r[j]
		}
	}
}

// compareRanks orders by tier, then higher score, then higher tie-break,
// then configuration order. It takes pointers so that the insertion sort
// does not copy two ranks per comparison.
func compareRanks(x, y *rank) int {
	switch {
	case x.tier != y.tier:
		return x.tier.compare(y.tier)
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
