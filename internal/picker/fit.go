package picker

import (
	"math"
	"time"

	"github.com/tpsroute/tpsroute/internal/registry"
	"github.com/tpsroute/tpsroute/internal/routekit"
	"github.com/tpsroute/tpsroute/route"
)

// This file fits an Expected to the call being picked: the factors behind
// CallTPS, CallTTFT and MarginalTPS, and a deployment's prior. The factors
// are Expected's unexported fields, reached through route's kernel
// (rk.Factors, kernel.go).

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
func overdue(x *route.Expected, h registry.EstimateHandle, now int64) {
	if !x.TPSOK || !x.TTFTOK {
		return
	}
	if r := registry.Overdue(h, time.Unix(0, now), x.CallTTFT(), x.CallTPS()); r >= overdueAfter {
		tpsF, _, _, _ := rk.Factors(x)
		*tpsF = float32(routekit.One(*tpsF) / r)
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
func live(x *route.Expected, h registry.EstimateHandle) {
	if !x.TPSOK {
		return
	}
	v, n := registry.LiveTPS(h)
	if n < liveMinStreams {
		return
	}
	if c := x.CallTPS(); v < c && c > 0 {
		tpsF, _, _, _ := rk.Factors(x)
		*tpsF = float32(routekit.One(*tpsF) * v / c)
	}
}

// shape fits a blended Expected to the call about to be made, leaving its
// TPS and TTFT (the deployment's figures, which exploration remembers and
// the SLO check reads) and setting the factors behind CallTPS, CallTTFT and
// MarginalTPS. With a load model (registry.Estimate.LoadK) the call's TPS is
// the EWMA, the figure the model refers to (a window's p50 over a mix of
// loads is not the speed at any one load), scaled to the deployment's calls
// in flight now, inFlight (registry.Estimate.LoadFactor), so that traffic spreads
// before a load-sensitive leader saturates; MarginalTPS takes off the
// slowdown the call causes those calls. A warm prompt-size class of in
// tokens gives the call its class's TPS, scaled the same way, and scales
// its TTFT by the class's ratio (registry.Estimate.Input). An Estimate
// without classes or load model (a source other than measure's Registry,
// or too few samples) sets no factor.
func shape(x *route.Expected, e *registry.Estimate, inFlight, in int64) {
	if !x.TPSOK && !x.TTFTOK {
		return
	}
	tpsF, ttftF, marginal, _ := rk.Factors(x)
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
			*ttftF = float32(f.TTFTRatio)
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
			*marginal = float32(max(float64(n+1)-float64(n)*e.LoadFactor(n-1)/lf, 1e-9))
		}
	}
	if tps != x.TPS {
		*tpsF = float32(tps / x.TPS)
	}
}

// shapeAnswer fits a blended Expected to an embeddings call of in input
// tokens (in 0: unknown), whose TTFT is the whole answer's latency and
// which has no output phase: it sets the factor behind CallTTFT so that
// CallTTFT is the latency expected for in tokens, not the key's figure,
// which mixes every batch size the deployment served (the more pessimistic
// of a window's p95 and the EWMA over small calls and big batches alike).
// A warm prompt-size class's latency is its mean TTFT
// (registry.InputFigures.TTFT). The call's own class, when
// warm, gives its latency. Otherwise the nearest warm classes below and
// above it, lo and hi, taken at their typical sizes (classTokens): between
// the two, the latency is interpolated in tokens (a fixed start plus a time
// per input token, fitted through them); above every warm class it is lo's
// time per input token times in; below every one, hi's latency. Outside the
// measured sizes both are at least what the call should take (latency grows
// with the batch, less than in proportion), so that a deployment measured
// only on small calls is not preferred for a big batch on their speed, nor
// one measured only on big batches for a small call. No warm class (an
// unknown size, too few samples, an Estimate from another Source) leaves
// the key's figure. TPS stays unset: an embeddings answer has no output
// tokens.
func shapeAnswer(x *route.Expected, e *registry.Estimate, in int64) {
	if !x.TTFTOK || in <= 0 || !(x.TTFT > 0) {
		return
	}
	// latency returns class k's mean latency, and whether it is warm.
	latency := func(k int) (float64, bool) {
		f, ok := e.Input(classTokens(k))
		return f.TTFT, ok && valid(f.TTFT)
	}
	c := registry.InputClass(in)
	t, ok := latency(c)
	if !ok {
		lo, hi := c-1, c+1
		var tlo, thi float64
		okLo, okHi := false, false
		for ; lo >= 0 && !okLo; lo-- {
			tlo, okLo = latency(lo)
		}
		for ; hi < registry.InputClasses && !okHi; hi++ {
			thi, okHi = latency(hi)
		}
		lo, hi = lo+1, hi-1 // the loops stepped past the class they found
		n := float64(in)
		switch {
		case okLo && okHi:
			nlo, nhi := float64(classTokens(lo)), float64(classTokens(hi))
			t = tlo + (thi-tlo)*(n-nlo)/(nhi-nlo)
		case okLo:
			t = tlo * n / float64(classTokens(lo))
		case okHi:
			t = thi
		default:
			return
		}
	}
	if t > 0 {
		_, ttftF, _, _ := rk.Factors(x)
		*ttftF = float32(t / x.TTFT)
	}
}

// classTokens returns a typical size, in tokens, of prompt-size class c
// (registry.InputClass): 64 for class 0 (under 128 tokens), else the
// geometric middle of [2^(c+6), 2^(c+7)), 2^(c+6.5), rounded down.
func classTokens(c int) int64 {
	if c <= 0 {
		return 64
	}
	return int64(math.Exp2(float64(c) + 6.5))
}

// applyPrior shrinks e toward the prior pr, in log terms, with the prior
// worth priorSamples samples against e's (at least measure's default
// MinSamples once the deployment has been compared: its window may have
// emptied since), and makes e OK.
func applyPrior(e *route.Expected, pr route.Prior, warmed bool, priorSamples float64) {
	n := float64(e.Samples)
	if warmed {
		n = max(n, registry.DefaultMinSamples)
	}
	w := priorSamples / (priorSamples + n)
	if pr.TPS > 0 {
		e.TPS, e.TPSOK = shrink(e.TPS, e.TPSOK, pr.TPS, w), true
	}
	if pr.TTFT > 0 {
		v := pr.TTFT.Seconds()
		if _, _, _, ttftQ := rk.Factors(e); *ttftQ > 0 {
			*ttftQ = shrink(*ttftQ, true, v, w)
		}
		e.TTFT, e.TTFTOK = shrink(e.TTFT, e.TTFTOK, v, w), true
	}
	e.OK = true
}

// shrink returns the geometric mix of x (when ok) and the prior v, v
// weighted w.
func shrink(x float64, ok bool, v, w float64) float64 {
	if !ok {
		return v
	}
	if w < 0.01 {
		return x
	}
	return math.Exp(w*math.Log(v) + (1-w)*math.Log(x))
}
