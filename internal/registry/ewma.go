package registry

import (
	"math"
	"time"
)

// defaultHalfLife is the half-life of a zero EWMA or PeakEWMA: 30 s. After a
// step change at a steady sample rate, the average has moved half-way within
// 30 s, 75% within a minute and 90% within 100 s, which is fast against the
// five-minute percentile window yet smooths the call-to-call noise of LLM
// latencies at a few calls per minute.
const defaultHalfLife = 30 * time.Second

// EWMA is an exponentially weighted moving average that decays with time, not
// per sample: it is the average of every value updated so far, each weighted
// by 2^(-age/HalfLife). Irregular sampling is therefore handled: many values
// at the same instant count equally, and after a long silence the next value
// dominates whatever came before.
//
// The zero EWMA is ready to use with a 30 s half-life (defaultHalfLife).
// An EWMA is not safe for concurrent use.
type EWMA struct {
	// HalfLife is the age at which a value's weight has halved.
	// Zero or negative means 30 s (defaultHalfLife).
	HalfLife time.Duration

	sum, weight float64 // decayed to last
	last        int64   // UnixNano of the newest update
	ok          bool
}

func (e *EWMA) halfLife() float64 {
	if e.HalfLife <= 0 {
		return float64(defaultHalfLife)
	}
	return float64(e.HalfLife)
}

// Update adds v observed at now. NaN and ±Inf are ignored. A value older than
// the newest update is weighted by its age instead of ageing the others.
func (e *EWMA) Update(now time.Time, v float64) {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return
	}
	t := now.UnixNano()
	if !e.ok {
		e.sum, e.weight, e.last, e.ok = v, 1, t, true
		return
	}
	w := 1.0
	if dt := t - e.last; dt > 0 {
		d := math.Exp2(-float64(dt) / e.halfLife())
		e.sum *= d
		e.weight *= d
		e.last = t
	} else if dt < 0 {
		w = math.Exp2(float64(dt) / e.halfLife())
	}
	e.sum += w * v
	e.weight += w
	if e.weight < 1e-300 { // everything before decayed to nothing
		e.sum, e.weight = v, 1
	}
}

// Value returns the average, and false before the first Update.
func (e *EWMA) Value() (float64, bool) {
	if !e.ok {
		return 0, false
	}
	return e.sum / e.weight, true
}

// Reset forgets every update, keeping HalfLife.
func (e *EWMA) Reset() { *e = EWMA{HalfLife: e.HalfLife} }

// combineEWMA returns the EWMA of the union of the updates of es, which must
// share one half-life: each one's weighted sum and weight are aged to the
// newest update among them and added. False when none has a value.
func combineEWMA(es ...*EWMA) (float64, bool) {
	var last int64
	var any bool
	for _, e := range es {
		if e != nil && e.ok && (!any || e.last > last) {
			last, any = e.last, true
		}
	}
	if !any {
		return 0, false
	}
	var sum, weight float64
	for _, e := range es {
		if e == nil || !e.ok {
			continue
		}
		d := math.Exp2(-float64(last-e.last) / e.halfLife())
		sum += e.sum * d
		weight += e.weight * d
	}
	if !(weight > 0) {
		return 0, false
	}
	return sum / weight, true
}

// PeakEWMA is a peak-sensitive EWMA for latencies, after the load metric of
// Finagle's and Linkerd's peak-EWMA balancers: a value above the current
// average replaces it at once, and lower values pull it down as an EWMA with
// the same half-life does. A deployment that turns slow looks slow on its
// next sample; one that recovers looks fast again within a few half-lives.
// Unlike Finagle, the value does not decay towards zero while idle: an idle
// deployment keeps its last known latency instead of looking fast.
//
// The zero PeakEWMA is ready to use with a 30 s half-life (defaultHalfLife).
// A PeakEWMA is not safe for concurrent use.
type PeakEWMA struct {
	// HalfLife is the age at which a value's weight has halved.
	// Zero or negative means 30 s (defaultHalfLife).
	HalfLife time.Duration

	e EWMA
}

// Update adds v observed at now. NaN and ±Inf are ignored.
func (p *PeakEWMA) Update(now time.Time, v float64) {
	p.e.HalfLife = p.HalfLife
	if cur, ok := p.e.Value(); ok && v > cur && !math.IsNaN(v) && !math.IsInf(v, 0) {
		// Jump to the peak, keeping the accumulated weight so that the
		// following lower values pull it down at the usual rate.
		p.e.Update(now, v) // ages the average to now
		p.e.sum = v * p.e.weight
		return
	}
	p.e.Update(now, v)
}

// Value returns the peak-sensitive average, and false before the first Update.
func (p *PeakEWMA) Value() (float64, bool) { return p.e.Value() }

// Reset forgets every update, keeping HalfLife.
func (p *PeakEWMA) Reset() { *p = PeakEWMA{HalfLife: p.HalfLife} }
