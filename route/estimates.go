package route

import (
	"github.com/tpsroute/tpsroute/measure"
)

// hbox holds a resolved measure.EstimateHandle behind an atomic pointer.
type hbox struct{ h measure.EstimateHandle }

// readEstimates sets every item's Expected from the Source: through the
// deployment's handle when the Source hands them out (decided once, in
// NewPicker), else through Source.Estimate. The two loops are kept apart so
// that a plain Source pays nothing for the handle machinery. in is the
// request's estimated prompt tokens, 0 when unknown (see shape).
func (p *Picker) readEstimates(s *scratch, in int64) {
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
			shape(&it.exp, &est, in)
		}
		return
	}
	var est measure.Estimate // each read overwrites it whole
	for i := range items {
		it := &items[i]
		var ok bool
		if b := p.handles[it.idx].Load(); b != nil && b.h.Live() {
			ok = measure.ReadEstimate(b.h, &est)
		} else {
			ok = p.resolveEstimate(s, it, &est)
		}
		blend(&it.exp, &est, ok, tAt, pAt)
		it.note(&est)
		shape(&it.exp, &est, in)
	}
}

// shape fits a blended Expected to the call about to be made, leaving its
// TPS and TTFT (the deployment's figures, which exploration remembers and
// the SLO check reads) and setting the factors behind CallTPS, CallTTFT and
// MarginalTPS. With a load model (measure.Estimate.LoadK) the call's TPS is
// the EWMA, the figure the model refers to (a window's p50 over a mix of
// loads is not the speed at any one load), scaled to the deployment's calls
// in flight now (measure.Estimate.LoadFactor), so that traffic spreads
// before a load-sensitive leader saturates; MarginalTPS takes off the
// slowdown the call causes those calls. A warm prompt-size class of in
// tokens gives the call its class's TPS, scaled the same way, and scales
// its TTFT by the class's ratio (measure.Estimate.Input). An Estimate
// without classes or load model (any Source other than measure's Registry,
// or too few samples) sets no factor.
func shape(x *Expected, e *measure.Estimate, in int64) {
	if !x.TPSOK && !x.TTFTOK {
		return
	}
	load := e.LoadK > 0
	tps := x.TPS
	if load && x.TPSOK && valid(e.TPSEWMA) {
		tps = e.TPSEWMA
	}
	if f, ok := e.Input(in); ok {
		if valid(f.TPS) {
			tps = f.TPS
		}
		if valid(f.TTFTRatio) && x.TTFTOK {
			x.ttftF = float32(f.TTFTRatio)
		}
	}
	if !x.TPSOK {
		return
	}
	if load {
		// MarginalTPS: (n+1)·T(n) − n·T(n−1) over T(n), T(n) = tps·LoadFactor(n).
		lf := e.LoadFactor(e.InFlight)
		tps *= lf
		if n := e.InFlight; n > 0 {
			x.marginal = float32(max(float64(n+1)-float64(n)*e.LoadFactor(n-1)/lf, 1e-9))
		}
	}
	if tps != x.TPS {
		x.tpsF = float32(tps / x.TPS)
	}
}

// resolveEstimate reads it's statistics into *est when its deployment has
// no live handle, and returns their ok: a wildcard deployment (whose key
// depends on the request) always reads Source.Estimate; any other asks the
// HandleSource for a handle and keeps it for the next picks.
func (p *Picker) resolveEstimate(s *scratch, it *item, est *measure.Estimate) bool {
	var ok bool
	if p.meta[it.idx].wild {
		*est, ok = p.src.Estimate(p.keyOf(s, it))
		return ok
	}
	// Concurrent picks may resolve at once and store in any order; a stale
	// handle stored last is not Live and is resolved again next time.
	h := p.hsrc.Handle(p.keys[it.idx])
	if h == nil {
		*est = measure.Estimate{}
		return false
	}
	p.handles[it.idx].Store(&hbox{h: h})
	return measure.ReadEstimate(h, est)
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
