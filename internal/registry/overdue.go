package registry

import (
	"math"
	"sync/atomic"
	"time"

	"github.com/tpsroute/tpsroute/measure"
)

// Overdue calls. A call in flight says something before it ends: one that
// has run twice as long as it should take at the key's current figures is
// slower than them, by at least its age over that time (a right-censored
// sample). The Registry keeps the start and the output cap of up to
// overdueSlots calls in flight per key (those begun with BeginCallAt and a
// cap), so that a reader can ask, without a lock, how far past the time its
// figures give them the most overdue of them is (Overdue). route uses it to
// rank a deployment whose calls have stalled below the others before the
// first of them ends: in the simulator's noisy scenario a slow period's
// calls take five times as long, and without this a deployment kept its
// traffic until two of them had ended (docs/ROUTING.md gives the figures).
// The time is read at the figures the reader has now, not those of the
// call's start: once the change is measured, the calls that showed it are
// no longer overdue at the new level, and do not count twice.
//
// A call begun while every slot is taken is counted in flight but not
// tracked. The slots fill in Begin order and are freed as calls end, so
// they hold the oldest calls, and a stalled call, ending late, keeps its
// slot: four are enough to see a stall, and Overdue, which a pick calls
// for every deployment with calls in flight, reads four in about 160
// instructions (eight, each with its own division, took 290).
const overdueSlots = 4

// flightSlot is one tracked call in flight: its start (UnixNano; 0 means
// free) and its output cap in tokens. The entry's lock guards writes;
// readers load without it, and a slot reused between their two loads gives
// one reader one wrong ratio.
type flightSlot struct {
	start, out atomic.Int64
	liveSlot   // live.go
}

// track takes a free slot for a call begun at t0 (UnixNano) with an output
// cap of out tokens, and returns its index, or -1 when none is free or out
// is not positive. e.mu must be held.
func (e *entry) track(t0, out int64) int {
	if out <= 0 {
		return -1
	}
	for i := range e.flights {
		s := &e.flights[i]
		if s.start.Load() == 0 {
			s.out.Store(out)
			s.gaps.Store(0)
			s.load.reset()
			s.start.Store(max(t0, 1))
			return i
		}
	}
	return -1
}

// untrack frees slot i (from track). e.mu must be held.
func (e *entry) untrack(i int) {
	if i >= 0 {
		e.flights[i].start.Store(0)
	}
}

// BeginCallAt is BeginAt for a call whose answer is capped at out tokens
// (its max_tokens): while it is in flight, Overdue compares its age with
// the time the key's figures give such a call. The cap is an upper bound
// on the answer, so a call that is merely long is never read as overdue. A
// zero or negative out tracks nothing beyond BeginAt.
func (r *Registry) BeginCallAt(now time.Time, k measure.Key, out int64) (end func()) {
	return r.begin(now, k, out)
}

// Overdue returns how far past its time the most overdue call in flight on
// h's key is at now, as its age over ttft (seconds) plus its output cap
// over tps (tokens/s), the figures the caller expects of the key: 2 means
// it has run twice as long as a call at those figures would. It reads the
// calls begun with BeginCallAt that the Registry tracks, and returns 0 when
// there are none, when ttft or tps is not positive and finite, and for a
// handle not from Registry.Handle. It takes no lock and allocates nothing.
func Overdue(h EstimateHandle, now time.Time, ttft, tps float64) float64 {
	rh, ok := h.(*handle)
	if !ok || !(ttft >= 0) || !(tps > 0) || math.IsInf(ttft, 0) || math.IsInf(tps, 0) {
		return 0
	}
	// The largest age/(ttft + out/tps), that is age·tps/(ttft·tps + out),
	// compared by cross-multiplying: one division in all.
	t, tt := now.UnixNano(), ttft*tps
	var age, due float64 // the most overdue so far; due 0 none
	for i := range rh.flights {
		s := &rh.flights[i]
		start := s.start.Load()
		if start == 0 || t <= start {
			continue
		}
		a, d := float64(t-start), tt+float64(s.out.Load())
		if due == 0 || a*due > age*d {
			age, due = a, d
		}
	}
	if due == 0 {
		return 0
	}
	return age / 1e9 * tps / due
}
