package picker

import (
	"github.com/tpsroute/tpsroute/measure"
	"github.com/tpsroute/tpsroute/route"
)

// materialize builds the Plan from s.order (included, in order) and the
// excluded items, in one allocation; a second one holds the concrete copies
// of wildcard deployments, and their keys, if any.
func (p *Picker) materialize(s *scratch, policyName string) route.Plan {
	nExcl := s.nExcl
	out := make([]route.Candidate, len(s.order)+nExcl)
	var wild []concrete
	if s.nWild > 0 {
		wild = make([]concrete, 0, s.nWild)
	}
	for i, o := range s.order {
		p.candidate(&out[i], s, &s.items[o], &wild)
	}
	plan := route.Plan{Deployments: out[:len(s.order):len(s.order)], Policy: policyName}
	if nExcl == 0 {
		return plan
	}
	j := len(s.order)
	for i := range s.items {
		if it := &s.items[i]; it.excl != exclNone {
			p.candidate(&out[j], s, it, &wild)
			out[j].Reason = route.ReasonStrictSLO
			if it.excl == exclOpen {
				out[j].Reason = route.ReasonOpen
			}
			j++
		}
	}
	plan.Excluded = out[len(s.order):]
	return plan
}

// concrete is a wildcard deployment made concrete for one Plan, with its key.
type concrete struct {
	d route.Deployment
	k measure.Key
}

// candidate fills c from it. c.Deployment and its key point into p.ds and
// p.keys, or for a wildcard deployment into a concrete copy appended to
// *wild (whose capacity covers every wildcard candidate, so earlier pointers
// stay valid).
func (p *Picker) candidate(c *route.Candidate, s *scratch, it *item, wild *[]concrete) {
	if !p.meta[it.idx].wild {
		fill(c, it, &p.ds[it.idx], &p.keys[it.idx])
		return
	}
	*wild = append(*wild, concrete{d: p.ds[it.idx], k: p.keys[it.idx]})
	w := &(*wild)[len(*wild)-1]
	w.d.Model = s.models[it.model].name
	w.d.Capabilities = rk.CapabilitiesFor(&w.d, w.d.Model)
	w.k.Model = s.models[it.model].keyModel
	fill(c, it, &w.d, &w.k)
}

// fill sets c from it, whose deployment is d under key k.
func fill(c *route.Candidate, it *item, d *route.Deployment, k *measure.Key) {
	c.Deployment = d
	rk.SetKey(c, k)
	c.Score = it.score
	c.Violations = it.viol
	c.Expected = it.exp
	c.Cost = it.cost
	c.Demoted = it.health != healthOK || it.viol != 0
	switch {
	case it.health == healthOpen:
		c.Reason = route.ReasonFailOpen
	case it.health == healthBusy && it.busy == busyHeadroom:
		c.Reason = route.ReasonNoHeadroom
	case it.health == healthBusy && it.busy == busyLimited:
		c.Reason = route.ReasonLimited
	case it.health == healthBusy:
		c.Reason = route.ReasonCooling
	case it.health == healthHalfOpen:
		c.Reason = route.ReasonHalfOpen
	case it.viol != 0:
		c.Reason = route.ReasonSLO
	case it.cold:
		c.Reason = route.ReasonCold
	default:
		c.Reason = route.ReasonRanked
	}
}
