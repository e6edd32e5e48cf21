package picker

import (
	"sync/atomic"
	"time"
)

type coldState struct {
	window atomic.Int64 // start of the current window, unix nanoseconds
	n      atomic.Int64 // probes given in the current window
}

// shareState counts the cold probes of one ColdShare window. A new window
// is a new shareState swapped in, so a probe counted late by a concurrent
// pick lands in the window it was checked against.
type shareState struct {
	start  int64  // unix nanoseconds
	picks0 uint64 // counters[cPicks] at start
	probes atomic.Int64
}

// halfOpenProbe returns the position in s.order of the first half-open,
// SLO-compliant candidate of the leading model whose probe budget it takes,
// or -1. Candidates are sorted by model, then health, so the half-open ones
// of the leading model follow the head.
func (p *Picker) halfOpenProbe(s *scratch, head int, now time.Time) int {
	items, order := s.items, s.order
	m := items[order[0]].model
	for i := head; i < len(order); i++ {
		it := &items[order[i]]
		if it.model != m || it.health > healthHalfOpen {
			break
		}
		if it.health == healthHalfOpen && it.viol == 0 && p.takeHalfOpen(it.idx, now) {
			return i
		}
	}
	return -1
}

// takeHalfOpen spends the half-open probe of deployment idx if none was
// given within the last Options.HalfOpenProbeInterval before now. A clock
// that went back by more than the interval starts afresh; smaller steps back
// (concurrent picks that read the clock out of order) do not give a second
// probe.
func (p *Picker) takeHalfOpen(idx int32, now time.Time) bool {
	h := &p.half[idx]
	t := now.UnixNano()
	last := h.Load()
	if last != 0 && t-last < p.halfWin && last-t <= p.halfWin {
		return false
	}
	return h.CompareAndSwap(last, t)
}

// takeCold spends one cold probe of deployment idx, if its window has
// budget and, when shared and beyond its first probe of the window, the
// Picker's ColdShare window has room. A new window starts once the interval has passed, or
// when the clock went back by more than the interval; smaller steps back
// (concurrent picks that read the clock out of order) stay in the current
// window, as in takeHalfOpen. It takes no lock: the share is reserved first
// (compare-and-swap), then the deployment's count, and the share is given
// back if the count was taken meanwhile.
func (p *Picker) takeCold(idx int32, now time.Time, shared bool) bool {
	c := &p.cold[idx]
	t := now.UnixNano()
	if w := c.window.Load(); t-w >= p.coldWin || w-t > p.coldWin {
		if c.window.CompareAndSwap(w, t) {
			c.n.Store(0)
		}
	}
	var sw *shareState
	if shared {
		sw = p.shareWindow(t)
	}
	n := c.n.Load()
	if n == 0 {
		// The first probe of the window is always given.
		if c.n.CompareAndSwap(0, 1) {
			if sw != nil {
				sw.probes.Add(1)
			}
			return true
		}
		n = c.n.Load()
	}
	if n >= p.coldMax {
		return false
	}
	if sw != nil && !p.reserveShare(sw) {
		return false
	}
	for ; n < p.coldMax; n = c.n.Load() {
		if c.n.CompareAndSwap(n, n+1) {
			return true
		}
	}
	if sw != nil {
		sw.probes.Add(-1)
	}
	return false
}

// shareWindow returns the ColdShare window that t falls in, starting a new
// one when the interval has passed or the clock went back by more than it.
func (p *Picker) shareWindow(t int64) *shareState {
	for {
		sw := p.shareWin.Load()
		if sw != nil && t-sw.start < p.coldWin && sw.start-t <= p.coldWin {
			return sw
		}
		next := &shareState{start: t, picks0: p.counters[cPicks].Load()}
		if p.shareWin.CompareAndSwap(sw, next) {
			return next
		}
	}
}

// reserveShare counts one more probe in sw if the probes other than the
// window's first stay fewer than ColdShare times the window's picks, this
// one included.
func (p *Picker) reserveShare(sw *shareState) bool {
	limit := p.share*float64(p.counters[cPicks].Load()-sw.picks0+1) + 1
	for {
		n := sw.probes.Load()
		if float64(n) >= limit {
			return false
		}
		if sw.probes.CompareAndSwap(n, n+1) {
			return true
		}
	}
}
