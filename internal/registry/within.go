package registry

import (
	"math"
	"sync/atomic"
)

// The load within a stream. A running stream's chunk gaps before and after
// other streams join or leave share that stream's own speed (its per-call
// noise, its prompt, its place in the batch), so their ratio measures the
// load's effect alone, where the fits above compare streams whose own
// noise is most of the variance once routing holds the load near one
// value. The tap reports every chunk gap of a tracked call (Flight.Gap);
// each gap is paired with the calls in flight when it began (at the
// previous chunk) in the call's streamLoad, and when the call ends its
// within-stream sums, centred on its own means and scaled by its own mean
// gap, join the key's withinFit. With a gap of c·(a + b·x) for a stream's
// own factor c, a stream's relative slope is b/(a + b·x̄) = 1/(K + x̄), so
// the pooled slope β gives K = 1/β − x̄, x̄ the streams' mean load in the
// pool's weights. A provider whose streams keep the speed they began with
// shows no slope within a stream, and the fits above decide.

// streamLoad holds one tracked call's chunk gaps against the load: the
// in flight count (this call included) at its previous chunk, and the
// sums over its gaps of x (other calls in flight when the gap began) and y
// (the gap, seconds). Only the call's reader writes it (Flight.Gap); the
// end reads it under the entry's lock, and track resets it.
type streamLoad struct {
	prev                atomic.Int32  // in flight at the previous chunk; 0 none yet
	n, x, y, xx, xy, yy atomic.Uint64 // float64 bits
}

// add takes one chunk gap of y seconds, reported with inFlight calls in
// flight (this one included): the gap pairs with the count at the previous
// chunk, when it began.
func (s *streamLoad) add(inFlight int64, y float64) {
	prev := s.prev.Swap(int32(min(max(inFlight, 1), math.MaxInt32)))
	if prev <= 0 || !(y > 0) || math.IsInf(y, 0) {
		return
	}
	x := float64(prev - 1)
	for _, a := range [...]struct {
		p *atomic.Uint64
		v float64
	}{{&s.n, 1}, {&s.x, x}, {&s.y, y}, {&s.xx, x * x}, {&s.xy, x * y}, {&s.yy, y * y}} {
		a.p.Store(math.Float64bits(math.Float64frombits(a.p.Load()) + a.v))
	}
}

// reset clears s for a new call.
func (s *streamLoad) reset() {
	s.prev.Store(0)
	for _, p := range [...]*atomic.Uint64{&s.n, &s.x, &s.y, &s.xx, &s.xy, &s.yy} {
		p.Store(0)
	}
}

// withinMaxK bounds the K a within-stream slope reports: a stream that
// slows by less than 0.1% per other call in flight shows no load
// dependence, and the fits across streams decide (exactly paced streams
// give a slope whose bound is a rounding error above 0, K 1e14).
const withinMaxK = 1000

// withinFit pools the streams' within-stream slopes of the chunk gap on the
// load, each stream's sums centred on its own means and divided by its mean
// gap (its mean gap squared for yy), decayed by time as loadFit is. The
// entry's lock guards it.
type withinFit struct {
	xx, xy, yy float64 // Σ Sxx, Σ Sxy/ȳ, Σ Syy/ȳ² over the streams
	cx         float64 // Σ Sxx·x̄: the streams' mean load in the weights of xx
	dof        float64 // Σ (gaps − 1): the residual's degrees of freedom
	last       int64   // UnixNano of the newest stream
}

// add folds the stream s, ended at t, into f.
func (f *withinFit) add(t int64, halfLife float64, s *streamLoad) {
	ld := func(p *atomic.Uint64) float64 { return math.Float64frombits(p.Load()) }
	n := ld(&s.n)
	if n < 2 {
		return
	}
	mx, my := ld(&s.x)/n, ld(&s.y)/n // every gap counted is positive and finite, and so is my
	sxx := max(ld(&s.xx)-n*mx*mx, 0)
	sxy := ld(&s.xy) - n*mx*my
	syy := max(ld(&s.yy)-n*my*my, 0)
	if f.last != 0 && t > f.last {
		d := math.Exp2(-float64(t-f.last) / halfLife)
		f.xx, f.xy, f.yy, f.cx, f.dof = f.xx*d, f.xy*d, f.yy*d, f.cx*d, f.dof*d
	}
	f.last = max(f.last, t)
	f.xx += sxx
	f.xy += sxy / my
	f.yy += syy / (my * my)
	f.cx += sxx * mx
	f.dof += n - 1
}

// model returns K from the pooled within-stream slope, 0 when it
// establishes no load dependence: fewer than loadMinWeight degrees of
// freedom, no spread of load within the streams, a slope whose lower 95%
// confidence bound is not positive (the bound, as loadFit's, so that chunk
// noise gives no load dependence rather than a false one), or K above
// withinMaxK.
func (f *withinFit) model() float64 {
	b, se, ok := f.slope()
	if !ok {
		return 0
	}
	b -= 2 * se
	if !(b > 0) {
		return 0
	}
	k := 1/b - f.cx/f.xx
	if !(k <= withinMaxK) {
		return 0
	}
	return max(k, loadMinK)
}

// slope returns the pooled relative slope of the chunk gap on the load and
// its standard error, and false with no spread of load within the streams
// or fewer than loadMinWeight degrees of freedom.
func (f *withinFit) slope() (b, se float64, ok bool) {
	if !(f.xx > 0) || !(f.dof >= loadMinWeight) {
		return 0, 0, false
	}
	b = f.xy / f.xx
	resid := max(0, f.yy-b*f.xy)
	return b, math.Sqrt(resid / (f.xx * max(f.dof-1, 1))), true
}

// rulesOut reports whether the pooled streams rule out, at 95%, a load
// dependence as strong as K k: the upper bound of their relative slope is
// below the 1/(k + x̄) that K k gives at their mean load x̄. Streams whose
// load never changed rule nothing out.
func (f *withinFit) rulesOut(k float64) bool {
	b, se, ok := f.slope()
	return ok && b+2*se < 1/(k+f.cx/f.xx)
}
