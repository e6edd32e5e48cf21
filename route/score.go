package route

import (
	"time"

	"github.com/tpsroute/tpsroute/measure"
)

// scoring is what scoreItems needs of a request, resolved once per pick.
type scoring struct {
	scorer   Scorer // nil: the request's Policy
	slo      SLO    // merged with Options.SLO
	checkSLO bool   // slo has a limit
	in, out  float64
}

// scoreItems sets every item's health, SLO violations, tier, expected cost
// and score, from the Expected readEstimates set, and returns how many items
// have an open breaker and how many are usable (neither open nor excluded).
func (p *Picker) scoreItems(s *scratch, sc *scoring, now time.Time) (open, usable int) {
	req := &s.req
	health := p.opts.Health
	var wd Deployment
	for i := range s.items {
		it := &s.items[i]
		m := &p.meta[it.idx]
		d := &p.ds[it.idx]
		kp := &p.keys[it.idx]
		var wk measure.Key
		if m.wild {
			wd = *d
			wd.Model = s.models[it.model].name
			d = &wd
			wk = p.keyOf(s, it)
			kp = &wk
			s.nWild++
		}
		it.cold = !it.exp.OK
		if health != nil {
			it.health, it.busy = healthOf(health.Status(*kp, now), now)
			if it.health == healthOpen {
				open++
			}
		}
		if sc.checkSLO {
			it.viol = sc.slo.check(m.priceOut, &it.exp)
			if it.viol != 0 && sc.slo.Strict {
				it.excl = exclStrict
			}
		}
		if it.excl == exclNone && it.health != healthOpen {
			usable++
		}
		it.tier = tier{model: it.model, health: it.health, violating: it.viol != 0, cold: it.cold}
		if len(req.Providers) > 0 {
			it.tier.prov = int32(min(indexOf(req.Providers, d.Provider), 1<<20))
		}
		it.cost = (sc.in*m.priceIn + sc.out*m.priceOut) / 1e6
		switch {
		case sc.scorer != nil:
			it.score = clamp(sc.scorer.Score(*d, it.exp, req))
		case req.Policy == Cost:
			it.score = clamp(-it.cost)
			if it.exp.TPSOK {
				it.tie = clamp(it.exp.TPS)
			}
		default:
			it.score = req.Policy.score(d, &it.exp, req)
		}
	}
	return open, usable
}

// healthOf classifies a deployment's Status at now.
func healthOf(st Status, now time.Time) (health, busy uint8) {
	switch {
	case st.Breaker == BreakerOpen:
		return healthOpen, 0
	case st.CoolingUntil.After(now):
		return healthBusy, busyCooling
	case st.NoHeadroom:
		return healthBusy, busyHeadroom
	case st.RateLimited:
		return healthBusy, busyLimited
	case st.Breaker == BreakerHalfOpen:
		return healthHalfOpen, 0
	}
	return healthOK, 0
}
