package registry

import (
	"math"
	"sync/atomic"
	"time"

	"github.com/tpsroute/tpsroute/measure"
)

// Live speed. A stream in flight shows its speed before it ends: its output
// chunks arrive at the deployment's speed as it is now, with the streams
// running now. When a batching provider takes more streams, or drifts
// slower, the streams already running slow down at once, while a sample
// says so only at its end. The Registry follows the chunk gaps of the calls
// it tracks in flight (the overdue slots, BeginFlightAt; Flight.Gap, which
// the tap's reader calls for every output chunk after the first) as a
// recent mean gap per call, and the key's tokens per gap from its finished
// samples (TPS × generation time / gaps); LiveTPS turns the two into the
// speed the running streams are getting, without a lock. route reads it as
// a pessimistic bound on a deployment's call TPS (docs/ROUTING.md, "Live
// speed").

// liveMinGaps is how many gaps a call in flight must have shown before its
// recent gap counts: fewer are one chunk's noise.
const liveMinGaps = 3

// liveGapWeight is the weight of each new gap in a call's recent mean gap:
// about the last four gaps.
const liveGapWeight = 0.25

// Flight is one call in flight begun with Registry.BeginFlightAt. Its
// reader reports each output chunk after the first with Gap, and ends it
// with End. The zero Flight does nothing. Gap must be called by one
// goroutine at a time (the stream's reader); End is safe from any, and
// only its first call counts.
type Flight struct {
	e    *entry
	slot int
	end  func()
}

// BeginFlightAt is BeginCallAt returning a Flight, whose Gap lets LiveTPS
// see the call's speed while it runs. A call beyond the tracked slots, or
// without an output cap, is counted in flight and its gaps are ignored.
func (r *Registry) BeginFlightAt(now time.Time, k measure.Key, out int64) Flight {
	f := Flight{slot: -1}
	f.end = r.beginTracked(now, k, out, &f.e, &f.slot)
	return f
}

// Gap reports an output chunk that came gap after the previous one.
func (f Flight) Gap(gap time.Duration) {
	if f.e == nil || f.slot < 0 || gap < 0 {
		return
	}
	s := &f.e.flights[f.slot]
	g := gap.Seconds()
	if old := math.Float64frombits(s.gap.Load()); s.gaps.Load() > 0 {
		g = old + liveGapWeight*(g-old)
	}
	s.gap.Store(math.Float64bits(g))
	s.gaps.Add(1)
	s.load.add(f.e.inflight.Load(), gap.Seconds())
}

// End ends the call in flight (see BeginCallAt's end).
func (f Flight) End() {
	if f.end != nil {
		f.end()
	}
}

// addTokensPerGap folds a finished sample's tokens per chunk gap into the
// key's figure. e.mu must be held.
func (e *entry) addTokensPerGap(tps float64, gen time.Duration, gaps int64) {
	if !(tps > 0) || gen <= 0 || gaps <= 0 {
		return
	}
	v := tps * gen.Seconds() / float64(gaps)
	if math.IsInf(v, 0) {
		return
	}
	if old := math.Float64frombits(e.tpg.Load()); old > 0 {
		v = old + (v-old)/8
	}
	e.tpg.Store(math.Float64bits(v))
}

// LiveTPS returns the speed, tokens/s, of the fastest of the calls in
// flight on h's key that have shown at least three chunk gaps (its recent
// mean gap at the key's tokens per gap), and how many such calls there
// were; 0, 0 when none, before the key has a finished sample with gaps, and
// for a handle not from Registry.Handle. The fastest, not the mean: a
// slowdown of the deployment slows every running stream, while one slow
// stream is that stream's own noise. It takes no lock and allocates
// nothing.
func LiveTPS(h EstimateHandle) (float64, int) {
	rh, ok := h.(*handle)
	if !ok {
		return 0, 0
	}
	tpg := math.Float64frombits(rh.tpg.Load())
	if !(tpg > 0) {
		return 0, 0
	}
	var best float64
	n := 0
	for i := range rh.flights {
		s := &rh.flights[i]
		if s.start.Load() == 0 || s.gaps.Load() < liveMinGaps {
			continue
		}
		if g := math.Float64frombits(s.gap.Load()); g > 0 {
			best = max(best, tpg/g)
			n++
		}
	}
	return best, n
}

// liveSlot is the live part of a flightSlot: its recent mean gap (float64
// bits, seconds) and how many gaps it has seen.
type liveSlot struct {
	gap  atomic.Uint64
	gaps atomic.Int32
	load streamLoad // the gaps against the load (within.go)
}
