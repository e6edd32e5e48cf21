package route

import (
	"time"

	"github.com/tpsroute/tpsroute/internal/registry"
	"github.com/tpsroute/tpsroute/measure"
)

// hbox holds a resolved measure.EstimateHandle behind an atomic pointer.
type hbox struct{ h measure.EstimateHandle }

// readEstimate sets it's Expected from the Source: through the deployment's
// handle when the Source hands them out (decided once, in NewPicker), else
// through Source.Estimate. est is the caller's buffer, overwritten whole. in
// is the request's estimated prompt tokens, 0 when unknown (see shape).
// Through a handle it also reads how overdue the deployment's calls in
// flight are at now, in Unix nanoseconds (see overdue).
func (p *Picker) readEstimate(s *scratch, it *item, est *measure.Estimate, in, now int64) {
	var ok bool
	var h measure.EstimateHandle
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
				shape(&it.exp, pe, n, in)
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
	shape(&it.exp, est, est.InFlight, in)
	if h != nil && it.flight > 0 {
		live(&it.exp, h)
		overdue(&it.exp, h, now)
	}
}

// overdueAfter is how many times the time its deployment's figures give it
// a call in flight must have run before overdue counts it: the figures are
// read on the slow side (TTFT at p95, TPS at the more pessimistic of p50
// and EWMA) and the time at the call's output cap, so a call of ordinary
// noise stays below it.
const overdueAfter = 2

// overdue lowers the call TPS of x when the most overdue of the calls in
// flight on h's key (registry.Overdue, at x's CallTTFT and CallTPS: the
// deployment's figures now, at its current load, so that calls slowed by a
// load the load model expects are not overdue) has run at least
// overdueAfter times its time, by that ratio: the most the speed it is
// getting can be, as a fraction of the expected one, since it has not
// ended. A deployment whose calls have stalled (a slow
// period begins: in the simulator's noisy scenario the calls take five
// times as long) thus ranks below the others at twice a call's time, not
// once two of its slow calls have ended and measure has detected the
// change; once they end, their samples decide. Throughput and
// LatencyCompletion rank by the call TPS; TTFT, the SLO check and
// exploration's memory read the deployment's figures, which it leaves
// alone.
func overdue(x *Expected, h measure.EstimateHandle, now int64) {
	if !x.TPSOK || !x.TTFTOK {
		return
	}
	if r := registry.Overdue(h, time.Unix(0, now), x.CallTTFT(), x.CallTPS()); r >= overdueAfter {
		x.tpsF = float32(one(x.tpsF) / r)
	}
}

// liveMinStreams is how many calls in flight must show their speed before
// live reads it: one stream's speed is as much its own noise as the
// deployment's (bundled outliers' true-best share fell from 0.92 to 0.84
// reading one).
const liveMinStreams = 2

// live lowers the call TPS of x to the speed the fastest of the calls in
// flight on h's key is getting now (registry.LiveTPS), when at least
// liveMinStreams show one and it is lower: a deployment that
// slows while streams run (a batching provider taking more streams, a drift,
// a slow period) ranks by what its running streams show before they end,
// not by samples that describe it as it was. Higher live speeds are left to
// the samples, which confirm them at their end. Throughput and
// LatencyCompletion rank by the call TPS; the deployment's figures, which
// exploration remembers and the SLO check reads, are left alone.
func live(x *Expected, h measure.EstimateHandle) {
	if !x.TPSOK {
		return
	}
	v, n := registry.LiveTPS(h)
	if n < liveMinStreams {
		return
	}
	if c := x.CallTPS(); v < c && c > 0 {
		x.tpsF = float32(one(x.tpsF) * v / c)
	}
}

// blend sets it's Expected from e (Blend at the Picker's percentiles) and
// what exploration notes of e.
func (p *Picker) blend(it *item, e *measure.Estimate, ok bool) {
	blend(&it.exp, e, ok, p.opts.TTFTPercentile, p.opts.TPSPercentile)
	it.note(e)
}

// derived is what a pick derives from a deployment's published Estimate
// alone (its blend and what exploration notes), kept per scratch until
// measure publishes a new one.
type derived struct {
	est    *measure.Estimate // the published Estimate it was derived from; nil none
	exp    Expected
	newest int64
	spread float64
	pend   [2]float32
}

// derive sets it's Expected, newest, spread and pend from the published
// Estimate e, through s's cache: a Registry republishes a key's Estimate
// only when its figures change, so most picks find every deployment's
// derivation done. s.derived has a slot per deployment (pick makes it).
func (p *Picker) derive(s *scratch, it *item, e *measure.Estimate) {
	d := &s.derived[it.idx]
	if d.est != e {
		p.blend(it, e, e.OK)
		*d = derived{est: e, exp: it.exp, newest: it.newest, spread: it.spread, pend: it.pend}
		return
	}
	it.exp, it.newest, it.spread, it.pend = d.exp, d.newest, d.spread, d.pend
}

// shape fits a blended Expected to the call about to be made, leaving its
// TPS and TTFT (the deployment's figures, which exploration remembers and
// the SLO check reads) and setting the factors behind CallTPS, CallTTFT and
// MarginalTPS. With a load model (measure.Estimate.LoadK) the call's TPS is
// the EWMA, the figure the model refers to (a window's p50 over a mix of
// loads is not the speed at any one load), scaled to the deployment's calls
// in flight now, inFlight (measure.Estimate.LoadFactor), so that traffic spreads
// before a load-sensitive leader saturates; MarginalTPS takes off the
// slowdown the call causes those calls. A warm prompt-size class of in
// tokens gives the call its class's TPS, scaled the same way, and scales
// its TTFT by the class's ratio (measure.Estimate.Input). An Estimate
// without classes or load model (any Source other than measure's Registry,
// or too few samples) sets no factor.
func shape(x *Expected, e *measure.Estimate, inFlight, in int64) {
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
		lf := e.LoadFactor(inFlight)
		tps *= lf
		if n := inFlight; n > 0 {
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
