package measure

import (
	"math/bits"
	"time"
)

// Input-size classes. A long prompt fills the KV cache and slows every
// decode step, and its prefill adds to the time to first token, by amounts
// that differ between providers: the deployment fastest on short prompts
// may be slow on long ones. A key therefore keeps, per class of prompt size
// (log2 buckets of the sample's input tokens), an EWMA of its TPS (scaled to
// no load, see load.go) and of its TTFT, and a count. A class with
// Options.MinSamples samples, the newest within the window and none before
// the latest change of level, is warm: Estimate.Input then gives its
// figures, and a reader routes a prompt of that class on them instead of on
// the key's aggregate. A change of level (shift.go) forgets every class of
// the key, so a degraded deployment is judged on its new level at once
// and its classes warm up again from there.
//
// Per class that is two EWMAs, a count and a time, 96 bytes; InputClasses
// classes per key, 1,152 bytes.

// InputClasses is the number of prompt-size classes per key: class 0 holds
// prompts under 128 tokens, class c (1 <= c < InputClasses-1) prompts of
// [2^(c+6), 2^(c+7)) tokens, and the last class everything from 128Ki tokens.
const InputClasses = 12

// InputClass returns the class of a prompt of tokens input tokens, in
// [0, InputClasses). Zero or negative counts are class 0.
func InputClass(tokens int64) int {
	if tokens <= 0 {
		return 0
	}
	return min(max(bits.Len64(uint64(tokens))-7, 0), InputClasses-1)
}

// inputClass is one class's statistics. The entry's lock guards it.
type inputClass struct {
	tps    EWMA // unloaded TPS (load.go): TPS × (1 + x/K)
	ttft   EWMA // seconds
	n      int32
	newest int64 // UnixNano of the newest sample
}

// InputFigures are one prompt-size class's figures in an Estimate (see
// Estimate.Input). They are values, safe for concurrent reads.
type InputFigures struct {
	// TPS is the class's generation speed, tokens/s, at the load the key's
	// TPS figures describe (Estimate.LoadRef); 0 when the class has no TPS
	// sample.
	TPS float64
	// TTFTRatio is the class's mean TTFT over the key's mean TTFT across
	// classes: the factor to apply to the key's TTFT figures for a prompt of
	// this class; 0 when unknown.
	TTFTRatio float64
	// Samples is the number of samples of the class since the key's latest
	// change of level (saturating).
	Samples int64
}

// inputTable is the published figures of every class, immutable once
// published; a nil *inputTable has none warm.
type inputTable struct {
	tps  [InputClasses]float64 // at LoadRef; 0: not warm for TPS
	ttft [InputClasses]float64 // ratio; 0: not warm for TTFT
	n    [InputClasses]int32
}

// published is what refresh stores: the Estimate and the table it points
// to, in one allocation.
type published struct {
	est Estimate
	tab inputTable
}

// Input returns the figures of the class of a prompt of tokens input tokens
// and reports whether that class is warm (Options.MinSamples samples, the
// newest within the window, none before the latest change of level). A
// non-positive token count (unknown), an Estimate not made by a Registry or
// a cold class give false: use the aggregate figures.
func (e *Estimate) Input(tokens int64) (InputFigures, bool) {
	t := e.inputs
	if t == nil || tokens <= 0 {
		return InputFigures{}, false
	}
	c := InputClass(tokens)
	if t.tps[c] == 0 && t.ttft[c] == 0 {
		return InputFigures{}, false
	}
	return InputFigures{TPS: t.tps[c], TTFTRatio: t.ttft[c], Samples: int64(t.n[c])}, true
}

// LoadFactor returns how the TPS of a call that starts with inflight other
// calls in flight compares with the Estimate's TPS figures, which describe
// the load LoadRef: (1 + LoadRef/LoadK) / (1 + inflight/LoadK), or 1 when
// no load dependence is measured (LoadK 0). Multiply TPSP50, TPSEWMA or an
// InputFigures.TPS by it.
func (e *Estimate) LoadFactor(inflight int64) float64 {
	return loadFactor(e.LoadK, e.LoadRef, float64(inflight))
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
// whether any is warm. k and ref are the key's load model.
func (e *entry) fillInputs(tab *inputTable, now int64, minSamples int, window int64, k, ref float64) bool {
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
	for i := range e.inputs {
		ic := &e.inputs[i]
		if int(ic.n) < minSamples || now-ic.newest >= window {
			continue
		}
		if v, ok := ic.tps.Value(); ok && v > 0 {
			tab.tps[i], any = v*scale, true
		}
		if v, ok := ic.ttft.Value(); ok && v > 0 && okT && meanTTFT > 0 {
			tab.ttft[i], any = v/meanTTFT, true
		}
		tab.n[i] = ic.n
	}
	return any
}
