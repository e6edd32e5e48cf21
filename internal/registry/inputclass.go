package registry

import (
	"math/bits"
)

// Input-size classes. A long prompt fills the KV cache and slows every decode
// step, and its prefill adds to the time to first token, by amounts that differ
// between providers: the deployment fastest on short prompts may be slow on
// long ones. A key therefore keeps, per class of prompt size (log2 buckets of
// the sample's input tokens), an EWMA of its TPS (scaled to no load, see
// internal/registry/load.go) and of its TTFT, and a count. A class with
// Options.MinSamples samples, the newest within the window and none before the
// latest change of level, is warm: Estimate.Input then gives its figures, and a
// reader routes a prompt of that class on them instead of on the key's
// aggregate. A change of level (internal/registry/shift.go) forgets every class
// of the key, so a degraded deployment is judged on its new level at once and
// its classes warm up again from there.
//
// Per class that is two EWMAs, a count and a time, 96 bytes; InputClasses
// classes per key, 1,152 bytes.
//
// An embeddings key, whose TTFT is the answer's latency, routes a call of N
// input tokens on its classes' mean TTFT (InputFigures.TTFT; docs/ROUTING.md,
// "Embeddings").

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

// InputFigures are one prompt-size class's figures in an Estimate (see
// Estimate.Input). They are values, safe for concurrent reads.
type InputFigures struct {
	// TPS is the class's generation speed, tokens/s, at the load the key's
	// TPS figures describe (Estimate.LoadRef): the class's ratio to the
	// key's speed over every class times the key's TPSEWMA, so that it
	// follows the key's level through a drift; 0 when the class has no TPS
	// sample.
	TPS float64
	// TTFTRatio is the class's mean TTFT over the key's mean TTFT across
	// classes: the factor to apply to the key's TTFT figures for a prompt of
	// this class; 0 when unknown.
	TTFTRatio float64
	// TTFT is the class's mean TTFT, seconds (an EWMA at Options.HalfLife);
	// 0 when unknown. For an embeddings key, whose TTFT is the answer's
	// latency, it is the latency of a call of the class.
	TTFT float64
	// Samples is the number of samples of the class since the key's latest
	// change of level (saturating).
	Samples int64
}

// Input returns the figures of the class of a prompt of tokens input tokens
// and reports whether that class is warm (Options.MinSamples samples, the
// newest within the window, none before the latest change of level). A
// non-positive token count (unknown), an Estimate not made by the Client's statistics (a custom
// internal/picker's Source) or
// a cold class give false: use the aggregate figures.
func (e *Estimate) Input(tokens int64) (InputFigures, bool) {
	t := e.inputs
	if t == nil || tokens <= 0 {
		return InputFigures{}, false
	}
	c := InputClass(tokens)
	if t.TPS[c] == 0 && t.TTFT[c] == 0 {
		return InputFigures{}, false
	}
	return InputFigures{TPS: t.TPS[c], TTFTRatio: t.TTFT[c], TTFT: t.Mean[c], Samples: int64(t.N[c])}, true
}

// LoadFactor returns how the TPS of a call that starts with inflight other
// calls in flight compares with the Estimate's TPS figures, which describe
// the load LoadRef: (1 + LoadRef/LoadK) / (1 + inflight/LoadK), or 1 when
// no load dependence is measured (LoadK 0). Multiply TPSP50, TPSEWMA or an
// InputFigures.TPS by it.
func (e *Estimate) LoadFactor(inflight int64) float64 {
	return loadFactor(e.LoadK, e.LoadRef, float64(inflight))
}

// inputTable is the published figures of every prompt-size class of a key,
// immutable once published; a nil *inputTable has none warm.
type inputTable struct {
	TPS  [InputClasses]float64 // at the Estimate's LoadRef; 0: not warm for TPS
	TTFT [InputClasses]float64 // ratio to the key's mean TTFT; 0: not warm for TTFT
	Mean [InputClasses]float64 // the class's mean TTFT, seconds; 0 when TTFT is 0
	N    [InputClasses]int32   // samples since the key's latest change of level
}
