package registry

import (
	"bytes"
	"fmt"
	"maps"
	"math"
	"sync"
	"time"

	enc "github.com/DataDog/sketches-go/ddsketch/encoding"

	"github.com/tpsroute/tpsroute/measure"
)

// Delta is what one Registry measured for one Key between two exports, in a
// form that another Registry merges exactly (Registry.MergeAt): the TTFT and
// TPS values added to each sub-window (DDSketch bins, counts and sums), the
// successes and failures per sub-window, the weighted sums and weights that
// the TTFT PeakEWMA and the TPS EWMA gained, and the request, error, token
// and cost meters' increments. Cache states are folded together. A Delta
// holds no prompt, completion or credential, only numbers and the Key.
//
// A Delta is a value; it is not safe for concurrent modification.
type Delta struct {
	Key measure.Key
	// TTFT and TPS hold the values added since the previous export, in the
	// sub-windows they were added to.
	TTFT, TPS Window
	// Outcomes are the successes and failures added per sub-window.
	Outcomes []Outcomes
	// TTFTEWMA and TPSEWMA are the weighted sum and weight the averages
	// gained, aged to their Last update.
	TTFTEWMA, TPSEWMA EWMAState
	// Requests, Errors and the token meters are increments.
	Requests, Errors                        int64
	InputTokens, CachedTokens, OutputTokens int64
	// Cost is the cost increment.
	Cost measure.Money
	// Newest is the time of the newest sample included.
	Newest time.Time
}

// Outcomes counts the successful and failed calls of one sub-window (Epoch
// is the sub-window's index since the Unix epoch, in window widths).
type Outcomes struct {
	Epoch    int64
	OK, Fail int64
}

// EWMAState is the exported state of an EWMA: the weighted sum and weight of
// its updates, aged to Last. Adding two states of one half-life (aged to the
// newer Last) is the EWMA of the union of their updates.
type EWMAState struct {
	Sum, Weight float64
	Last        int64 // UnixNano
}

// value returns the average, and false when the state holds no weight.
func (s EWMAState) value() (float64, bool) {
	if !(s.Weight > 0) {
		return 0, false
	}
	return s.Sum / s.Weight, true
}

// aged returns s aged to t (no change when t is not after s.Last).
func (s EWMAState) aged(t int64, halfLife float64) EWMAState {
	if s.Weight == 0 || t <= s.Last {
		return s
	}
	d := math.Exp2(-float64(t-s.Last) / halfLife)
	return EWMAState{Sum: s.Sum * d, Weight: s.Weight * d, Last: t}
}

// add returns s plus o, both aged to the newer of the two.
func (s EWMAState) add(o EWMAState, halfLife float64) EWMAState {
	if o.Weight == 0 {
		return s
	}
	if s.Weight == 0 {
		return o
	}
	t := max(s.Last, o.Last)
	a, b := s.aged(t, halfLife), o.aged(t, halfLife)
	return EWMAState{Sum: a.Sum + b.Sum, Weight: a.Weight + b.Weight, Last: t}
}

// sub returns what cur gained over prev: cur minus prev aged to cur.Last,
// clamped at zero (values are never negative).
func (s EWMAState) sub(prev EWMAState, halfLife float64) EWMAState {
	if prev.Weight == 0 {
		return s
	}
	p := prev.aged(s.Last, halfLife)
	d := EWMAState{Sum: s.Sum - p.Sum, Weight: s.Weight - p.Weight, Last: s.Last}
	if !(d.Weight > 1e-12) || !(d.Sum >= 0) {
		return EWMAState{}
	}
	return d
}

func (e *EWMA) state() EWMAState {
	if !e.ok {
		return EWMAState{}
	}
	return EWMAState{Sum: e.sum, Weight: e.weight, Last: e.last}
}

// folded is one key's statistics with its cache states folded together,
// what a Delta carries: an Exporter folds the key's own (aggregateLocked),
// and MergeAt adds other Registries' into the key's remote layer.
type folded struct {
	ttft, tps                               Window
	ring                                    outcomeRing
	ttftE, tpsE                             EWMAState
	requests, errors, input, cached, output int64
	cost                                    measure.Money
	newest                                  int64
}

func newFolded(w measure.WindowOptions) *folded {
	f := &folded{}
	f.ttft.init(w)
	f.tps.init(w)
	f.ring = outcomeRing{width: f.ttft.width, slots: make([]outcomeSlot, w.Buckets)}
	return f
}

// aggregateLocked folds e's local statistics. e.mu must be held.
func (r *Registry) aggregateLocked(e *entry) *folded {
	a := newFolded(r.opts.Window)
	a.newest = e.newest
	hl := float64(r.opts.HalfLife)
	a.ttftE = e.ttftE.e.state()
	for _, st := range e.states {
		if st == nil {
			continue
		}
		_ = a.ttft.Merge(&st.ttft) // same options: cannot fail
		_ = a.tps.Merge(&st.tps)
		a.tpsE = a.tpsE.add(st.tpsE.state(), hl)
		for _, s := range st.ring.slots {
			if s.any > 0 {
				a.ring.addEpoch(s.epoch, s.ok, s.fail)
			}
		}
		addCount(&a.requests, st.requests)
		addCount(&a.errors, st.errors)
		addCount(&a.input, st.input)
		addCount(&a.cached, st.cached)
		addCount(&a.output, st.output)
		addMoney(&a.cost, st.cost)
	}
	return a
}

// delta returns what cur gained over prev (nil prev: everything), and false
// when it gained nothing.
func (r *Registry) delta(k measure.Key, cur, prev *folded) (Delta, bool) {
	d := Delta{Key: k, Newest: time.Unix(0, cur.newest)}
	hl := float64(r.opts.HalfLife)
	d.TTFT.init(r.opts.Window)
	d.TPS.init(r.opts.Window)
	if prev == nil {
		prev = newFolded(r.opts.Window)
	}
	windowDiff(&d.TTFT, &cur.ttft, &prev.ttft)
	windowDiff(&d.TPS, &cur.tps, &prev.tps)
	for i, c := range cur.ring.slots {
		if c.any == 0 {
			continue
		}
		o := Outcomes{Epoch: c.epoch, OK: c.ok, Fail: c.fail}
		if p := prev.ring.slots[i]; p.any > 0 && p.epoch == c.epoch {
			o.OK -= p.ok
			o.Fail -= p.fail
		}
		if o.OK > 0 || o.Fail > 0 {
			o.OK, o.Fail = max(o.OK, 0), max(o.Fail, 0)
			d.Outcomes = append(d.Outcomes, o)
		}
	}
	d.TTFTEWMA = cur.ttftE.sub(prev.ttftE, hl)
	d.TPSEWMA = cur.tpsE.sub(prev.tpsE, hl)
	d.Requests = max(cur.requests-prev.requests, 0)
	d.Errors = max(cur.errors-prev.errors, 0)
	d.InputTokens = max(cur.input-prev.input, 0)
	d.CachedTokens = max(cur.cached-prev.cached, 0)
	d.OutputTokens = max(cur.output-prev.output, 0)
	d.Cost = subMoney(cur.cost, prev.cost)
	changed := d.Requests > 0 || len(d.Outcomes) > 0 || d.TTFT.newest != noEpoch || d.TPS.newest != noEpoch
	return d, changed
}

func subMoney(a, b measure.Money) measure.Money {
	m := measure.Money{Dollars: a.Dollars - b.Dollars, Picodollars: a.Picodollars - b.Picodollars}
	if m.Picodollars < 0 {
		m.Dollars--
		m.Picodollars += picoPerDollar
	}
	if m.Dollars < 0 {
		return measure.Money{}
	}
	return m
}

// windowDiff sets dst (empty, same options) to the values cur holds beyond
// prev, sub-window by sub-window.
func windowDiff(dst, cur, prev *Window) {
	for i := range cur.subs {
		c := &cur.subs[i]
		if c.n == 0 {
			continue
		}
		var p *subWindow
		if i < len(prev.subs) && prev.subs[i].n > 0 && prev.subs[i].epoch == c.epoch {
			p = &prev.subs[i]
		}
		if p != nil && p.n >= c.n {
			continue
		}
		s := dst.slot(c.epoch)
		if s == nil {
			continue
		}
		dst.newest = max(dst.newest, c.epoch)
		if p == nil {
			s.n, s.zero, s.sum = c.n, c.zero, c.sum
			s.pos.MergeWith(&c.pos, dst.opts.MaxBins)
			continue
		}
		s.zero = c.zero - min(p.zero, c.zero)
		s.sum = max(c.sum-p.sum, 0)
		for idx := c.pos.lo; idx <= c.pos.hi && c.pos.count > 0; idx++ {
			n := c.pos.at(idx - c.pos.offset)
			if o := p.pos.countAt(idx); o < n {
				s.pos.addCount(idx, n-o, dst.opts.MaxBins)
			}
		}
		s.n = s.zero + s.pos.count
	}
}

// countAt returns the count at index, 0 outside the store.
func (s *compactStore) countAt(index int) uint64 {
	if s.count == 0 || index < s.lo || index > s.hi {
		return 0
	}
	return s.at(index - s.offset)
}

// Exporter turns a Registry's local measurements into Deltas: each Export
// returns what every key measured since the last committed export. It reads
// the Registry under each key's own lock, off the Record path (Record does no
// extra work for it). Data merged in from other Registries (MergeAt) is never
// exported again.
//
// An Exporter is safe for concurrent use; Export and Commit are meant to be
// called by one background loop.
type Exporter struct {
	r       *Registry
	mu      sync.Mutex
	last    map[measure.Key]*folded // committed: what the fleet has
	pending map[measure.Key]*folded // exported, not yet committed
}

// NewExporter returns an Exporter whose first Export returns everything the
// Registry holds.
func (r *Registry) NewExporter() *Exporter {
	return &Exporter{r: r, last: map[measure.Key]*folded{}}
}

// Export returns a Delta for every key that changed since the last Commit
// (or since NewExporter). Until Commit is called, the next Export returns
// the same changes again, plus newer ones: call Commit once the Deltas are
// published, and not at all when publishing failed.
func (x *Exporter) Export() []Delta {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.pending = map[measure.Key]*folded{}
	var out []Delta
	for k, e := range *x.r.keys.Load() {
		prev := x.last[k]
		e.mu.Lock()
		if e.dead || e.newest == 0 || (prev != nil && e.newest <= prev.newest && sumRequests(e) == prev.requests) {
			e.mu.Unlock()
			continue
		}
		cur := x.r.aggregateLocked(e)
		e.mu.Unlock()
		if d, ok := x.r.delta(k, cur, prev); ok {
			out = append(out, d)
			x.pending[k] = cur
		}
	}
	return out
}

func sumRequests(e *entry) int64 {
	var n int64
	for _, st := range e.states {
		if st != nil {
			n += st.requests
		}
	}
	return n
}

// Commit marks the Deltas of the last Export as published. Keys pruned from
// the Registry are forgotten.
func (x *Exporter) Commit() {
	x.mu.Lock()
	defer x.mu.Unlock()
	keys := *x.r.keys.Load()
	maps.DeleteFunc(x.last, func(k measure.Key, _ *folded) bool { return keys[k] == nil })
	maps.Copy(x.last, x.pending)
	x.pending = nil
}

// MergeAt merges a Delta measured by another Registry into k's estimates at
// now: its sub-windows join this Registry's windows (exactly, sub-window by
// sub-window), its outcomes the error rate, its EWMA sums and weights the
// averages, and the Estimate is republished at once. A remote value counts as
// much as a local one. The key is created if needed and kept alive by merges
// as by Records. It returns ErrIncompatible when the Delta's windows differ
// from this Registry's options, and merges nothing then.
func (r *Registry) MergeAt(now time.Time, d *Delta) error {
	d.TTFT.lazyInit()
	d.TPS.lazyInit()
	w := r.opts.Window
	for _, dw := range []*Window{&d.TTFT, &d.TPS} {
		if err := compatible(dw.opts, w); err != nil {
			return fmt.Errorf("%w (the delta for %v, then this registry)", err, d.Key)
		}
	}
	e := r.locked(d.Key)
	defer e.mu.Unlock()
	if e.remote == nil {
		e.remote = newFolded(w)
	}
	rs := e.remote
	_ = rs.ttft.Merge(&d.TTFT)
	_ = rs.tps.Merge(&d.TPS)
	for _, o := range d.Outcomes {
		rs.ring.addEpoch(o.Epoch, o.OK, o.Fail)
	}
	hl := float64(r.opts.HalfLife)
	rs.ttftE = rs.ttftE.add(d.TTFTEWMA, hl)
	rs.tpsE = rs.tpsE.add(d.TPSEWMA, hl)
	// The meters saturate (count.go): a peer's increments, however large,
	// never wrap them.
	addCount(&rs.requests, d.Requests)
	addCount(&rs.errors, d.Errors)
	addCount(&rs.input, d.InputTokens)
	addCount(&rs.cached, d.CachedTokens)
	addCount(&rs.output, d.OutputTokens)
	addMoney(&rs.cost, measure.Money{Dollars: min(max(d.Cost.Dollars, 0), maxCount), Picodollars: min(max(d.Cost.Picodollars, 0), picoPerDollar-1)})
	if !d.Newest.IsZero() {
		rs.newest = max(rs.newest, min(d.Newest.UnixNano(), now.UnixNano()))
	}
	e.lastSeen = max(e.lastSeen, now.UnixNano())
	r.refresh(e, now)
	return nil
}

const deltaMagic = "TPSD\x01"

// MarshalBinary encodes the Delta: the key's three strings, the two windows
// in Window.MarshalBinary's format, the outcomes, the EWMA states and the
// meters.
func (d *Delta) MarshalBinary() ([]byte, error) {
	b := []byte(deltaMagic)
	appendKey(&b, d.Key)
	for _, w := range []*Window{&d.TTFT, &d.TPS} {
		appendBytes(&b, w.appendBinary(nil))
	}
	enc.EncodeUvarint64(&b, uint64(len(d.Outcomes)))
	for _, o := range d.Outcomes {
		enc.EncodeVarint64(&b, o.Epoch)
		enc.EncodeUvarint64(&b, uint64(o.OK))
		enc.EncodeUvarint64(&b, uint64(o.Fail))
	}
	for _, s := range []EWMAState{d.TTFTEWMA, d.TPSEWMA} {
		enc.EncodeFloat64LE(&b, s.Sum)
		enc.EncodeFloat64LE(&b, s.Weight)
		enc.EncodeVarint64(&b, s.Last)
	}
	for _, v := range []int64{d.Requests, d.Errors, d.InputTokens, d.CachedTokens, d.OutputTokens, d.Cost.Dollars, d.Cost.Picodollars} {
		enc.EncodeUvarint64(&b, uint64(max(v, 0)))
	}
	var newest int64
	if !d.Newest.IsZero() {
		newest = d.Newest.UnixNano()
	}
	enc.EncodeVarint64(&b, newest)
	return b, nil
}

// UnmarshalBinary replaces d with a Delta decoded from data produced by
// MarshalBinary. Errors wrap ErrEncoding; d is left unchanged on error.
func (d *Delta) UnmarshalBinary(data []byte) error {
	if !bytes.HasPrefix(data, []byte(deltaMagic)) {
		return fmt.Errorf("%w: delta: bad magic or version", ErrEncoding)
	}
	dd := &decoder{b: data[len(deltaMagic):], kind: ErrEncoding}
	var nd Delta
	nd.Key = dd.key(math.MaxUint64)
	for _, w := range []*Window{&nd.TTFT, &nd.TPS} {
		wb := dd.bytes("delta window", math.MaxUint64)
		if dd.err != nil {
			return dd.err
		}
		if err := w.UnmarshalBinary(wb); err != nil {
			return err
		}
	}
	n := dd.count("delta outcomes", 1<<16)
	for range n {
		o := Outcomes{Epoch: dd.varint("delta outcome epoch")}
		o.OK = dd.count("delta outcome count", maxCount)
		o.Fail = dd.count("delta outcome count", maxCount)
		if dd.err != nil {
			return dd.err
		}
		nd.Outcomes = append(nd.Outcomes, o)
	}
	for _, s := range []*EWMAState{&nd.TTFTEWMA, &nd.TPSEWMA} {
		s.Sum = dd.float("delta EWMA sum")
		s.Weight = dd.float("delta EWMA weight")
		s.Last = dd.varint("delta EWMA time")
		if s.Sum < 0 || s.Weight < 0 {
			dd.fail("delta EWMA state out of range")
		}
	}
	for _, p := range []*int64{&nd.Requests, &nd.Errors, &nd.InputTokens, &nd.CachedTokens, &nd.OutputTokens, &nd.Cost.Dollars, &nd.Cost.Picodollars} {
		*p = dd.count("delta meter", maxCount)
	}
	if nd.Cost.Picodollars >= picoPerDollar {
		dd.fail("delta picodollars out of range")
	}
	if newest := dd.varint("delta newest"); newest != 0 {
		nd.Newest = time.Unix(0, newest)
	}
	if err := dd.end(); err != nil {
		return err
	}
	*d = nd
	return nil
}

// Options returns the Registry's options with defaults filled in (Prices
// included).
func (r *Registry) Options() measure.Options {
	o := r.opts
	o.Prices = maps.Clone(o.Prices)
	return o
}
