package registry

import (
	"math"
)

// Load dependence. A provider batches concurrent streams, so each stream's
// generation speed falls as more of them run: per output token a decode step
// costs a fixed time plus a share that grows with the batch, so the time per
// token is close to linear in the concurrency,
//
//	1/TPS = a + b·x,   that is   TPS = (1/a) / (1 + x/K),  K = a/b,
//
// with x the other calls in flight. The Registry tracks each key's
// in-flight count over time (loadTrack: Begin and end mark it), reads every
// successful TPS sample's x two ways, at its start and as the mean over its
// generation (meanOver), and fits a line on each online by weighted least
// squares with four times the Registry's half-life (loadFit). The one whose
// line explains more of the variance of 1/TPS is used (entry.loadModel): a
// provider that batches live slows every running stream as others join, so
// the mean over the stream's life is its load; one whose streams keep the
// speed they began with is read at the start. Both are outranked by the
// slope within each stream (withinFit, within.go) once it establishes one: it
// is measured where the fits across streams see only per-call noise. A load dependence is reported only when the line
// explains at least 40% of the variance of 1/TPS (loadMinExplained), and
// the slope used is the fit's lower 95% confidence bound, so noise, slow
// outliers or a narrow spread of x give no load dependence rather than a
// false one; K is then a/b through the samples' centroid. The Estimate publishes K and the load at which the
// line gives the samples' mean TPS (LoadRef), so a reader scales the TPS
// figures, which describe the load the samples were taken at, to the load a
// new call would meet (Estimate.LoadFactor). Change detection is fed each
// sample scaled to
// LoadRef the same way, so a load swing is not read as a change of level.

const (
	// loadMarks is how many of a key's latest Begins and ends are kept to
	// find the in-flight count at a stream's start: a stream during which
	// more than about 32 other calls began and ended has no load measured.
	// 64 marks are 1,024 bytes per key.
	loadMarks = 64
	// loadMinWeight is the least decayed sample weight before a fit is used.
	loadMinWeight = 8
	// loadMinSpread is the least weighted variance of x (in calls²) before a
	// slope is fitted. It is small: once routing keeps a load-sensitive
	// deployment at one or two calls, x varies little, and the fit must not
	// be dropped then (the slope's confidence bound and loadMinExplained
	// do the guarding).
	loadMinSpread = 0.02
	// loadMinExplained is the least share of the variance of 1/TPS that
	// the line must explain (its R²) before a load dependence is reported.
	// A slope can be significant and still not load's: a call that is slow
	// for its own reason (a noisy neighbour, one slow call) stays in flight
	// longer, so the calls that start meanwhile see a higher load and, in a
	// slow period, are slow too. Such a slope explains little: in the
	// simulator's outliers at most 0.28, in noisy mostly 0.1 to 0.3 (at
	// most 0.59), while streams that do slow with load give 0.7 to 0.93
	// (load), and K = 2 under log-normal noise of spread 0.3 over 0 to 2
	// other calls gives 0.45. docs/ROUTING.md has the figures.
	loadMinExplained = 0.4
	// loadHalfLives is the fit's half-life in Registry half-lives (2 minutes
	// by default): long enough to keep the spread of loads seen while the
	// router was finding the balance.
	loadHalfLives = 4
	// loadMinK bounds K from below: a stream never slows by more than 4×
	// per extra concurrent call.
	loadMinK = 0.25
	// loadProbeK is the load dependence a key stays suspected of until its
	// samples rule it out (Estimate.LoadUntested): a stream that halves at
	// 8 other calls in flight. The choice matters little: K 4 and K 16 gave
	// the random fleets' figures within 0.01 of K 8's, one fleet more or
	// fewer with a baseline ahead (docs/ROUTING.md, eighth round).
	loadProbeK = 8
)

// loadMark is the in-flight count after a Begin or an end.
type loadMark struct {
	t int64 // UnixNano
	n int32 // in flight just after t
}

// loadTrack follows a key's in-flight count over time. The entry's lock
// guards it; times are clamped so that they never run backwards.
type loadTrack struct {
	last  int64 // UnixNano of the latest event
	n     int32 // in flight since last
	marks [loadMarks]loadMark
	next  int32 // ring position of the next mark
	count int32 // marks written, at most loadMarks
}

// begin counts one more call in flight from t.
func (l *loadTrack) begin(t int64) {
	l.n++
	l.mark(t)
}

// end counts one call fewer from t.
func (l *loadTrack) end(t int64) {
	if l.n > 0 {
		l.n--
	}
	l.mark(t)
}

func (l *loadTrack) mark(t int64) {
	l.last = max(l.last, t)
	l.marks[l.next] = loadMark{t: l.last, n: l.n}
	l.next = (l.next + 1) % loadMarks
	l.count = min(l.count+1, loadMarks)
}

// countAt returns the number of calls in flight just after t, and false
// when t is before the oldest mark or nothing was ever begun.
func (l *loadTrack) countAt(t int64) (int32, bool) {
	if l.count == 0 {
		return 0, false
	}
	if t >= l.last {
		return l.n, true
	}
	first, k := l.upTo(t)
	if k == 0 {
		return 0, false
	}
	return l.marks[(first+k-1)%loadMarks].n, true
}

// upTo returns the ring index of the oldest mark and how many marks from it
// are at or before t (marks are in time order from the oldest, at
// (next-count) mod loadMarks).
func (l *loadTrack) upTo(t int64) (first, k int) {
	first = (int(l.next) - int(l.count) + loadMarks) % loadMarks
	lo, hi := 0, int(l.count)
	for lo < hi {
		mid := (lo + hi) / 2
		if l.marks[(first+mid)%loadMarks].t <= t {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return first, lo
}

// meanOver returns the time-weighted mean of the in-flight count over
// [t0, t1], and false when t0 is before the oldest mark or nothing was ever
// begun. When t1 is not after t0 it is the count just after t0.
func (l *loadTrack) meanOver(t0, t1 int64) (float64, bool) {
	n0, ok := l.countAt(t0)
	if !ok {
		return 0, false
	}
	if t1 <= t0 || t0 >= l.last {
		return float64(n0), true
	}
	first, lo := l.upTo(t0) // the marks from lo on are after t0
	sum, at, n := 0.0, t0, float64(n0)
	for i := lo; i < int(l.count); i++ {
		m := l.marks[(first+i)%loadMarks]
		if m.t >= t1 {
			break
		}
		sum += n * float64(m.t-at)
		at, n = m.t, float64(m.n)
	}
	sum += n * float64(t1-at)
	return sum / float64(t1-t0), true
}

// loadFit is a time-decayed weighted least-squares fit of 1/TPS on x. The
// entry's lock guards it.
type loadFit struct {
	w, x, y, xx, xy, yy float64 // decayed sums
	v                   float64 // decayed sum of TPS
	last                int64   // UnixNano of the newest sample
}

// add takes one sample at t: x other calls in flight, tps tokens/s.
func (f *loadFit) add(t int64, halfLife float64, x, tps float64) {
	if !(tps > 0) || math.IsInf(tps, 0) || !(x >= 0) || math.IsInf(x, 0) {
		return
	}
	if f.w > 0 && t > f.last {
		d := math.Exp2(-float64(t-f.last) / halfLife)
		f.w, f.x, f.y, f.xx, f.xy, f.yy, f.v = f.w*d, f.x*d, f.y*d, f.xx*d, f.xy*d, f.yy*d, f.v*d
	}
	f.last = max(f.last, t)
	y := 1 / tps
	f.w++
	f.x += x
	f.y += y
	f.xx += x * x
	f.xy += x * y
	f.yy += y * y
	f.v += tps
}

// model returns K (the other calls in flight that halve a stream's TPS; 0
// when no load dependence is established) and the reference load: the load
// at which the fitted line gives the samples' mean TPS (the figure an EWMA
// of TPS holds), so that mean TPS × loadFactor(K, ref, x) is the line's TPS
// at x. Without load dependence ref is the samples' mean x.
func (f *loadFit) model() (k, ref float64) {
	k, ref, _ = f.modelR2()
	return k, ref
}

// modelR2 is model, with the share of the variance of 1/TPS the line
// explains (its R²; 0 without a load dependence).
func (f *loadFit) modelR2() (k, ref, r2 float64) {
	if f.w <= 0 {
		return 0, 0, 0
	}
	l, ok := f.line()
	if !ok {
		return 0, f.x / f.w, 0
	}
	if !(l.explained >= loadMinExplained*l.syy) {
		return 0, l.mx, 0
	}
	r2 = l.explained / l.syy
	b := l.b - 2*l.se
	if !(b > 0) {
		return 0, l.mx, 0
	}
	a := l.my - b*l.mx
	k = loadMinK
	if a > 0 {
		k = max(a/b, loadMinK)
	}
	return k, f.refFor(b*k, k), r2 // the line through (0, b·k) with slope b
}

// fitLine is a loadFit's least-squares line of 1/TPS on x.
type fitLine struct {
	mx, my    float64 // the samples' mean load and mean 1/TPS
	syy       float64 // the variance of 1/TPS
	explained float64 // the part of syy the line explains (b·sxy)
	b, se     float64 // the slope and its standard error
}

// line returns f's line, and false with less than loadMinWeight of
// sample weight or a spread of loads below loadMinSpread, where no slope is
// fitted.
func (f *loadFit) line() (fitLine, bool) {
	if !(f.w >= loadMinWeight) {
		return fitLine{}, false
	}
	mx, my := f.x/f.w, f.y/f.w
	sxx := f.xx/f.w - mx*mx
	if !(sxx >= loadMinSpread) {
		return fitLine{}, false
	}
	sxy := f.xy/f.w - mx*my
	syy := f.yy/f.w - my*my
	b := sxy / sxx
	resid := max(0, syy-b*sxy) // residual variance per unit weight
	se := math.Sqrt(resid / (sxx * max(f.w-2, 1)))
	return fitLine{mx: mx, my: my, syy: syy, explained: b * sxy, b: b, se: se}, true
}

// rulesOut reports whether f's samples rule out, at 95%, a load dependence
// as strong as K k: the upper bound of the fitted slope of 1/TPS on x,
// relative to the line's level at the samples' mean load, is below the
// 1/(k + x̄) that K k gives there. A fit with too few samples or too narrow
// a spread of loads rules nothing out.
func (f *loadFit) rulesOut(k float64) bool {
	l, ok := f.line()
	return ok && (l.b+2*l.se)/l.my < 1/(k+l.mx)
}

// loadFactor returns (1 + ref/k) / (1 + x/k): how a stream's TPS at x other
// calls in flight compares with its TPS at ref (the load model's rule, which
// Estimate.LoadFactor applies). 1 when k is not positive.
func loadFactor(k, ref, x float64) float64 {
	if !(k > 0) || math.IsInf(k, 0) {
		return 1
	}
	return (1 + max(ref, 0)/k) / (1 + max(x, 0)/k)
}

// refAt returns the reference load of f's samples under a load model of
// K k: refFor the line through their mean load and mean 1/TPS with that K;
// 0 without samples.
func (f *loadFit) refAt(k float64) float64 {
	if !(f.w > 0) || !(f.v > 0) || !(k > 0) {
		return 0
	}
	return f.refFor(f.y/f.w/(1+f.x/f.w/k), k)
}

// refFor returns the load at which the line 1/TPS = a·(1 + x/k) (a: 1/TPS
// at no other call) gives the samples' mean TPS, 1/(a·(1 + ref/k)) = mean
// TPS; 0 when that is not a load (negative, infinite or NaN).
func (f *loadFit) refFor(a, k float64) float64 {
	ref := (f.w/(f.v*a) - 1) * k
	if !(ref >= 0) || math.IsInf(ref, 0) {
		return 0
	}
	return ref
}
