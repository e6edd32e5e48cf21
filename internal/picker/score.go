package picker

import (
	"slices"
	"time"

	"github.com/tpsroute/tpsroute/route"
)

// scoring is what scoreItems needs of a request, resolved once per pick.
type scoring struct {
	scorer   route.Scorer // nil: the request's Policy
	slo      route.SLO    // merged with Options.SLO
	checkSLO bool         // slo has a limit
	in, out  float64
}

// scoreItems reads every item's Expected from the Source (readEstimate, in
// the request's estimated prompt tokens, 0 unknown), sets its health, SLO
// violations, tier, expected cost and score, and appends the rank of each
// one not excluded to s.ranks; it returns how many items have an open
// breaker and how many are usable (neither open nor excluded). One pass
// over the items, as Pick's budget wants: each item is read once.
func (p *Picker) scoreItems(s *scratch, sc *scoring, in int64, now time.Time) (open, usable int) {
	req := &s.req
	health, t := p.health, now.UnixNano()
	policy, scorer, checkSLO, strict := req.Policy, sc.scorer, sc.checkSLO, sc.slo.Strict
	items, ranks := s.items, slices.Grow(s.ranks, len(s.items))
	wd, est := &s.wd, &s.est // in the scratch: through route's kernel a local would escape
	for i := range items {
		it := &items[i]
		if p.src != nil {
			p.readEstimate(s, it, est, in, t)
		}
		m, d := &p.meta[it.idx], &p.ds[it.idx]
		if m.wild {
			*wd = *d
			wd.Model = s.models[it.model].name
			d = wd
			s.nWild++
		}
		p.warmUp(it, m, d, t)
		if health != nil {
			it.health, it.busy = healthOf(health.Status(p.keyOf(s, it), now), now)
			if it.health == healthOpen {
				open++
			}
		}
		if checkSLO {
			it.viol = rk.Check(&s.slo, m.priceOut, &it.exp) // s.slo is sc.slo: &sc.slo would move sc to the heap (kernel.go)
			if it.viol != 0 {
				it.dist = rk.Distance(&s.slo, m.priceOut, &it.exp, it.viol)
				if strict {
					it.excl = exclStrict
				}
			}
		}
		it.tier = tier{model: it.model, health: it.health, violating: it.viol != 0, cold: it.cold}
		if len(req.Providers) > 0 {
			it.tier.prov = int32(min(indexOf(req.Providers, d.Provider), 1<<20))
		}
		it.cost = (sc.in*m.priceIn + sc.out*m.priceOut) / 1e6
		switch {
		case scorer != nil:
			it.score = clamp(scorer.Score(*d, it.exp, req))
		case policy == route.Cost:
			it.score = clamp(-it.cost)
			switch {
			case p.answered && it.exp.TTFTOK: // embeddings: the sooner answer
				it.tie = clamp(-it.exp.CallTTFT())
			case it.exp.TPSOK:
				it.tie = clamp(it.exp.CallTPS())
			}
		case policy == route.Throughput:
			// route.Throughput's score (Policy.Score), inlined: the hot path.
			if it.exp.TPSOK {
				it.score = clamp(it.exp.MarginalTPS())
			} else {
				it.score = 0
			}
		default:
			it.score = rk.Score(policy, d, &it.exp, req)
		}
		if it.cold {
			s.nCold++
		}
		if it.excl != exclNone {
			s.nExcl++
			continue
		}
		if it.health != healthOpen {
			usable++
		}
		n := len(ranks)
		ranks = ranks[:n+1] // in place (grown above): append would copy
		ranks[n] = rank{tier: it.tier.order(), score: it.score, tie: it.tie, idx: it.idx, item: int32(i)}
		if it.viol != 0 {
			// Violators rank by their SLO distance, the closest first, then by score.
			ranks[n].score, ranks[n].tie = -it.dist, it.score
		}
	}
	s.ranks = ranks
	return open, usable
}

// excludeOpen excludes the ranked items with an open breaker: Pick's rule
// when some are open and others usable.
func (p *Picker) excludeOpen(s *scratch) {
	s.ranks = slices.DeleteFunc(s.ranks, func(r rank) bool {
		it := &s.items[r.item]
		if it.health != healthOpen {
			return false
		}
		it.excl = exclOpen
		s.nExcl++
		return true
	})
}

// healthOf classifies a deployment's Status at now.
func healthOf(st route.Status, now time.Time) (health, busy uint8) {
	switch {
	case st.Breaker == route.BreakerOpen:
		return healthOpen, 0
	case st.CoolingUntil.After(now):
		return healthBusy, busyCooling
	case st.NoHeadroom:
		return healthBusy, busyHeadroom
	case st.RateLimited:
		return healthBusy, busyLimited
	case st.Breaker == route.BreakerHalfOpen:
		return healthHalfOpen, 0
	}
	return healthOK, 0
}

// warmUp decides whether it is compared on its figures or probed as cold,
// and applies its deployment's prior; mt is its meta. A deployment is compared once its
// window holds minCompare successful samples, and stays compared (on the
// level it last showed, Expected.OK) when its window empties after that:
// being measured before, it is not new, and exploration re-measures it.
// A prior makes it compared from the start.
func (p *Picker) warmUp(it *item, mt *meta, d *route.Deployment, now int64) {
	it.prior = 0
	e := &it.exp
	has := e.TTFTOK || e.TPSOK
	warmed := false
	if !mt.wild {
		m := &p.memo[it.idx]
		if has && (e.OK || e.Samples >= minCompare) {
			m.remember(it, now, &p.rising)
		}
		warmed = m.warm.Load()
	}
	if has && warmed {
		e.OK = true
	}
	if mt.prior {
		it.prior = priorSamples
		applyPrior(e, d.Expected, warmed, priorSamples)
		has = true
	}
	it.cold = !has || !(e.OK || e.Samples >= minCompare)
}

// indexOf returns the index of s in list, or len(list).
func indexOf(list []string, s string) int {
	for i, v := range list {
		if v == s {
			return i
		}
	}
	return len(list)
}
