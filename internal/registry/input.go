package registry

import (
	"time"
)

// inputClass is one class's statistics. The entry's lock guards it.
type inputClass struct {
	tps    EWMA // unloaded TPS (load.go): TPS × (1 + x/K)
	ttft   EWMA // seconds
	n      int32
	newest int64 // UnixNano of the newest sample
}

// published is what refresh stores: the Estimate and the table it points
// to, in one allocation.
type published struct {
	est Estimate
	tab inputTable
}

// addInput adds one sample of input class c at now: unloaded TPS u (0 when
// the sample has none) and TTFT seconds (0 when none).
func (e *entry) addInput(now time.Time, c int, u, ttft float64) {
	ic := &e.inputs[c]
	if ic.tps.HalfLife == 0 {
		ic.tps.HalfLife, ic.ttft.HalfLife = e.gapE.HalfLife, e.gapE.HalfLife
	}
	if u > 0 {
		ic.tps.Update(now, u)
		e.inU.Update(now, u)
	}
	if ttft > 0 {
		ic.ttft.Update(now, ttft)
	}
	if ic.n < 1<<30 {
		ic.n++
	}
	ic.newest = max(ic.newest, now.UnixNano())
}

// resetInputs forgets every class after a change of level.
func (e *entry) resetInputs() {
	for i := range e.inputs {
		e.inputs[i] = inputClass{}
	}
	e.inU = EWMA{HalfLife: e.inU.HalfLife}
}

// classNorm returns the factor that maps a sample of class c, already
// scaled to the key's load reference, to the key's aggregate level: the
// aggregate unloaded TPS over the class's, once the class has minSamples
// samples; else 1.
func (e *entry) classNorm(c, minSamples int) float64 {
	ic := &e.inputs[c]
	if int(ic.n) < minSamples {
		return 1
	}
	v, ok := ic.tps.Value()
	agg, okA := e.inU.Value()
	if !ok || !okA || !(v > 0) || !(agg > 0) {
		return 1
	}
	return agg / v
}

// fillInputs fills tab with the warm classes' figures at now and reports
// whether any is warm. k and ref are the key's load model; level is the
// key's published TPS EWMA (Estimate.TPSEWMA), 0 when none: a class's TPS
// is then its ratio to the key's unloaded EWMA times level, so that a
// class tells the shape of a call and the key's level (which follows a
// drift, shift.go) tells how fast the deployment is now; the class EWMAs
// alone lag a drift by their half-life.
func (e *entry) fillInputs(tab *inputTable, now int64, minSamples int, window int64, k, ref, level float64) bool {
	var any bool
	var es [InputClasses]*EWMA
	for i := range e.inputs {
		es[i] = &e.inputs[i].ttft
	}
	meanTTFT, okT := combineEWMA(es[:]...)
	scale := 1.0
	if k > 0 {
		scale = 1 / (1 + ref/k)
	}
	if agg, ok := e.inU.Value(); ok && agg > 0 && level > 0 {
		scale = level / agg
	}
	for i := range e.inputs {
		ic := &e.inputs[i]
		if int(ic.n) < minSamples || now-ic.newest >= window {
			continue
		}
		if v, ok := ic.tps.Value(); ok && v > 0 {
			tab.TPS[i], any = v*scale, true
		}
		if v, ok := ic.ttft.Value(); ok && v > 0 && okT && meanTTFT > 0 {
			tab.TTFT[i], tab.Mean[i], any = v/meanTTFT, v, true
		}
		tab.N[i] = ic.n
	}
	return any
}

// sanitize replaces the NaN and infinite figures of e by 0.
func sanitize(e *Estimate) {
	for _, p := range []*float64{&e.TTFTP50, &e.TTFTP95, &e.TPSP50, &e.TPSP95, &e.TTFTEWMA, &e.TPSEWMA, &e.ErrorRate, &e.LoadK, &e.LoadRef, &e.TPSPending, &e.TTFTPending} {
		*p = finite(*p)
	}
}
