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

// quantiles writes the value at each q in qs (ascending, in [0,1]) to out,
// with the DDSketch definition: the bin holding rank q*(n-1), where ranks
// below the zero count read as 0. The query must not be empty.
//
// It sums the stores into one histogram over [lo, hi], on the stack when the
// span is at most 1024 bins (a ratio of 8e8 between the smallest and largest
// value at 1% accuracy), and then walks it once.
func (q *query) quantiles(qs []float64, out []float64) {
	j := 0
	cum := float64(q.zero)
	for j < len(qs) && qs[j]*float64(q.n-1) < cum {
		out[j] = 0
		j++
	}
	if j == len(qs) || q.ns == 0 {
		for ; j < len(qs); j++ {
			out[j] = 0
		}
		return
	}
	var buf [1024]uint64
	var h []uint64
	if span := q.hi - q.lo + 1; span <= len(buf) {
		h = buf[:span]
	} else {
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
		} else {
			for i, c := range s.narrow[from:to] {
				dst[i] += uint64(c)
			}
		}
	}
	for i, c := range h {
		if c == 0 {
			continue
		}
		cum += float64(c)
		for j < len(qs) && cum > qs[j]*float64(q.n-1) {
			out[j] = q.m.value(q.lo + i)
			j++
		}
		if j == len(qs) {
			return
		}
	}
	for ; j < len(qs); j++ {
		out[j] = q.m.value(q.hi)
	}
}
