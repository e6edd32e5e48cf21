package route

import (
	"github.com/tpsroute/tpsroute/measure"
)

// hbox holds a resolved measure.EstimateHandle behind an atomic pointer.
type hbox struct{ h measure.EstimateHandle }

// readEstimates sets every item's Expected from the Source: through the
// deployment's handle when the Source hands them out (decided once, in
// NewPicker), else through Source.Estimate. The two loops are kept apart so
// that a plain Source pays nothing for the handle machinery.
func (p *Picker) readEstimates(s *scratch) {
	tAt, pAt := p.opts.TTFTPercentile, p.opts.TPSPercentile
	items := s.items
	if p.hsrc == nil {
		for i := range items {
			it := &items[i]
			var est measure.Estimate
			var ok bool
			if p.meta[it.idx].wild {
				est, ok = p.src.Estimate(p.keyOf(s, it))
			} else {
				est, ok = p.src.Estimate(p.keys[it.idx])
			}
			blend(&it.exp, &est, ok, tAt, pAt)
			it.note(&est)
		}
		return
	}
	for i := range items {
		it := &items[i]
		var est measure.Estimate
		var ok bool
		if b := p.handles[it.idx].Load(); b != nil && b.h.Live() {
			est, ok = b.h.Estimate()
		} else {
			est, ok = p.resolveEstimate(s, it)
		}
		blend(&it.exp, &est, ok, tAt, pAt)
		it.note(&est)
	}
}

// resolveEstimate reads it's statistics when its deployment has no live
// handle: a wildcard deployment (whose key depends on the request) always
// reads Source.Estimate; any other asks the HandleSource for a handle and
// keeps it for the next picks.
func (p *Picker) resolveEstimate(s *scratch, it *item) (measure.Estimate, bool) {
	if p.meta[it.idx].wild {
		return p.src.Estimate(p.keyOf(s, it))
	}
	// Concurrent picks may resolve at once and store in any order; a stale
	// handle stored last is not Live and is resolved again next time.
	h := p.hsrc.Handle(p.keys[it.idx])
	if h == nil {
		return measure.Estimate{}, false
	}
	p.handles[it.idx].Store(&hbox{h: h})
	return h.Estimate()
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
