package registry

import (
	"math"
	"time"
)

// query merges the live sub-windows of one or more windows that share an
// index mapping, without copying bins: quantiles are read in one pass over
// the union of their index ranges. The zero query is empty. A query holds
// pointers into the windows and is valid until they are next modified.
type query struct {
	n, zero uint64
	sum     float64
	m       logMapping
	lo, hi  int
	ns      int
	stores  [64]*compactStore
	extra   []*compactStore // beyond len(stores); rare
}

// add includes w's sub-windows live at now.
func (q *query) add(w *Window, now time.Time) {
	if w.subs == nil {
		return
	}
	e := w.epoch(now)
	for i := range w.subs {
		s := &w.subs[i]
		if !w.live(s, e) {
			continue
		}
		if q.n == 0 && q.ns == 0 {
			q.m = w.m
			q.lo, q.hi = math.MaxInt, math.MinInt
		}
		q.n += s.n
		q.zero += s.zero
		q.sum += s.sum
		if s.pos.count == 0 {
			continue
		}
		q.lo = min(q.lo, s.pos.lo)
		q.hi = max(q.hi, s.pos.hi)
		if q.ns < len(q.stores) {
			q.stores[q.ns] = &s.pos
		} else {
			q.extra = append(q.extra, &s.pos)
		}
		q.ns++
	}
}

func (q *query) store(i int) *compactStore {
	if i < len(q.stores) {
		return q.stores[i]
	}
	return q.extra[i-len(q.stores)]
}

// quantiles writes the value at each q in qs (ascending, in [0,1]) to out:
// the value at rank q*(n-1), interpolated linearly between the bins of the
// two whole ranks around it (Hyndman and Fan's type 7, numpy's default),
// where ranks below the zero count read as 0. Without the interpolation the
// median of two samples was the lower one, and a noisy deployment measured
// twice ranked on its worse sample (docs/ROUTING.md, "How estimates
// adapt"). The query must not be empty.
//
// It sums the stores into one histogram over [lo, hi], on the stack when the
// span is at most 1024 bins (a ratio of 8e8 between the smallest and largest
// value at 1% accuracy), and then walks it once per bound.
func (q *query) quantiles(qs []float64, out []float64) {
	var buf [1024]uint64
	h := q.histogram(buf[:])
	lo, hi := rankCursor{q: q, h: h, i: -1, cum: float64(q.zero)}, rankCursor{q: q, h: h, i: -1, cum: float64(q.zero)}
	last := float64(q.n - 1)
	for j, x := range qs {
		r := x * last
		k := math.Floor(r)
		v := lo.at(k)
		if f := r - k; f > 0 { // then k < last
			v += f * (hi.at(k+1) - v)
		}
		out[j] = v
	}
}

// histogram returns the sum of q's stores over [q.lo, q.hi], in buf when
// it fits; nil when q has no stores (every sample is in the zero count).
func (q *query) histogram(buf []uint64) []uint64 {
	if q.ns == 0 {
		return nil
	}
	span := q.hi - q.lo + 1
	h := buf[:min(span, len(buf))]
	if span > len(buf) {
		h = make([]uint64, span)
	}
	for k := 0; k < q.ns; k++ {
		s := q.store(k)
		from, to := s.lo-s.offset, s.hi-s.offset+1
		dst := h[s.lo-q.lo:]
		if s.wide != nil {
			for i, c := range (*s.wide)[from:to] {
				dst[i] += uint64(c)
			}
			continue
		}
		for i, c := range s.narrow[from:to] {
			dst[i] += uint64(c)
		}
	}
	return h
}

// rankCursor walks a query's histogram h toward higher ranks: at returns
// the value of the bin holding a rank, each call's rank at least the last's.
type rankCursor struct {
	q   *query
	h   []uint64
	i   int     // bin of the last answer; -1 before the first bin
	cum float64 // samples up to bin i, the zero count included
}

// at returns the value at whole rank r (0 below the zero count).
func (c *rankCursor) at(r float64) float64 {
	if r < float64(c.q.zero) { // every rank is, when h is empty
		return 0
	}
	for c.cum <= r && c.i < len(c.h)-1 {
		c.i++
		c.cum += float64(c.h[c.i])
	}
	return c.q.m.value(c.q.lo + c.i)
}
