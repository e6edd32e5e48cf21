package picker

import (
	"github.com/tpsroute/tpsroute/internal/registry"
	"github.com/tpsroute/tpsroute/measure"
	"github.com/tpsroute/tpsroute/route"
)

// hbox holds a resolved registry.EstimateHandle behind an atomic pointer.
type hbox struct{ h registry.EstimateHandle }

// readEstimate sets it's Expected from the Source: through the deployment's
// handle when the Source hands them out (decided once, in New), else
// through Source.Estimate. est is the caller's buffer, overwritten whole. in
// is the request's estimated prompt tokens, 0 when unknown (see shape).
// Through a handle it also reads how overdue the deployment's calls in
// flight are at now, in Unix nanoseconds (see overdue).
func (p *Picker) readEstimate(s *scratch, it *item, est *registry.Estimate, in, now int64) {
	var ok bool
	var h registry.EstimateHandle
	switch {
	case p.hsrc == nil && p.meta[it.idx].wild:
		*est, ok = p.src.Estimate(p.keyOf(s, it))
	case p.hsrc == nil:
		*est, ok = p.src.Estimate(p.keys[it.idx])
	default:
		b := p.handles[it.idx].Load()
		if b != nil {
			if pe, n := registry.PublishedEstimate(b.h); pe != nil {
				p.derive(s, it, pe)
				it.flight = n
				p.shape(it, pe, n, in)
				if n > 0 {
					live(&it.exp, b.h)
					overdue(&it.exp, b.h, now)
				}
				return
			}
		}
		if b == nil || !b.h.Live() {
			ok = p.resolveEstimate(s, it, est)
			break
		}
		ok, h = registry.ReadEstimate(b.h, est), b.h
	}
	p.blend(it, est, ok)
	it.flight = est.InFlight
	p.shape(it, est, est.InFlight, in)
	if h != nil && it.flight > 0 {
		live(&it.exp, h)
		overdue(&it.exp, h, now)
	}
}

// shape fits it's Expected to the call of in prompt tokens (0 unknown) with
// inFlight calls in flight on its deployment: the call fit (fit.go), or for
// embeddings (p.answered) the fit of an answer's latency to its input
// tokens.
func (p *Picker) shape(it *item, e *registry.Estimate, inFlight, in int64) {
	if p.answered {
		shapeAnswer(&it.exp, e, in)
		return
	}
	shape(&it.exp, e, inFlight, in)
}

// blend sets it's Expected from e (route's blend at the Picker's percentiles) and
// what exploration notes of e.
func (p *Picker) blend(it *item, e *registry.Estimate, ok bool) {
	rk.Blend(&it.exp, e, ok, p.opts.TTFTPercentile, p.opts.TPSPercentile)
	it.note(e)
}

// derived is what a pick derives from a deployment's published Estimate
// alone (its blend and what exploration notes), kept per scratch until
// measure publishes a new one.
type derived struct {
	est      *registry.Estimate // the published Estimate it was derived from; nil none
	exp      route.Expected
	newest   int64
	spread   float64
	pend     [2]float32
	untested bool
}

// derive sets it's Expected, newest, spread and pend from the published
// Estimate e, through s's cache: a Registry republishes a key's Estimate
// only when its figures change, so most picks find every deployment's
// derivation done. s.derived has a slot per deployment (pick makes it).
func (p *Picker) derive(s *scratch, it *item, e *registry.Estimate) {
	d := &s.derived[it.idx]
	if d.est != e {
		p.blend(it, e, e.OK)
		*d = derived{est: e, exp: it.exp, newest: it.newest, spread: it.spread, pend: it.pend, untested: it.untested}
		return
	}
	it.exp, it.newest, it.spread, it.pend, it.untested = d.exp, d.newest, d.spread, d.pend, d.untested
}

// resolveEstimate reads it's statistics into *est when its deployment has
// no live handle, and returns their ok: a wildcard deployment (whose key
// depends on the request) always reads Source.Estimate; any other asks the
// HandleSource for a handle and keeps it for the next picks.
func (p *Picker) resolveEstimate(s *scratch, it *item, est *registry.Estimate) bool {
	var ok bool
	if p.meta[it.idx].wild {
		*est, ok = p.src.Estimate(p.keyOf(s, it))
		return ok
	}
	// Concurrent picks may resolve at once and store in any order; a stale
	// handle stored last is not Live and is resolved again next time.
	h := p.hsrc.Handle(p.keys[it.idx])
	if h == nil {
		*est = registry.Estimate{}
		return false
	}
	p.handles[it.idx].Store(&hbox{h: h})
	return registry.ReadEstimate(h, est)
}

// keyOf returns the measure.Key of it: the precomputed key, or for a wildcard
// deployment the key for the requested model.
func (p *Picker) keyOf(s *scratch, it *item) measure.Key {
	if p.meta[it.idx].wild {
		k := p.keys[it.idx]
		k.Model = s.models[it.model].keyModel
		return k
	}
	return p.keys[it.idx]
}
