package registry

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"time"

	enc "github.com/DataDog/sketches-go/ddsketch/encoding"

	"github.com/tpsroute/tpsroute/measure"
)

// Window defaults. A zero WindowOptions means these.
const (
	// defaultWindow is the default window length: five minutes is long enough
	// for a p99 to rest on a few hundred calls of a busy deployment, and short
	// enough that a degradation fully replaces the old percentiles within
	// minutes (the EWMAs react within seconds).
	defaultWindow = 5 * time.Minute
	// defaultBuckets is the default number of sub-windows: ten 30 s sub-windows
	// let the window slide in steps of a tenth of its length, so a query covers
	// between 90% and 100% of the window, while keeping memory per window at
	// ten small sketches.
	defaultBuckets = 10
	// DefaultRelativeAccuracy is the default DDSketch relative accuracy: every
	// quantile is within 1% of a value of the true distribution's rank.
	DefaultRelativeAccuracy = 0.01
	// defaultMaxBins bounds each sub-window sketch to 2048 bins (8 KiB). At 1%
	// accuracy that spans a ratio of 4e17 between smallest and largest value,
	// so it only ever collapses absurd inputs; when it does, the lowest bins
	// are folded together and the upper quantiles (the tail) stay exact.
	defaultMaxBins = 2048
)

// normalizeWindow returns o with its zero or negative fields set to their
// defaults.
func normalizeWindow(o measure.WindowOptions) measure.WindowOptions {
	if o.Length <= 0 {
		o.Length = defaultWindow
	}
	if o.Buckets <= 0 {
		o.Buckets = defaultBuckets
	}
	if int64(o.Length) < int64(o.Buckets) {
		o.Buckets = int(o.Length)
	}
	if !(o.RelativeAccuracy > 0 && o.RelativeAccuracy < 1) {
		o.RelativeAccuracy = DefaultRelativeAccuracy
	}
	if o.MaxBins <= 0 {
		o.MaxBins = defaultMaxBins
	}
	return o
}

// ErrIncompatible is returned by Window.Merge when the two windows differ in
// length, sub-window count or accuracy.
var ErrIncompatible = errors.New("measure: incompatible windows")

// ErrEncoding is wrapped by the errors Window.UnmarshalBinary returns for
// malformed input.
var ErrEncoding = errors.New("measure: malformed window encoding")

// Window is a sliding time window of non-negative values (durations in
// seconds, rates) answering quantile queries within a relative accuracy. It
// is a ring of sub-windows, each a DDSketch (a logarithmic index mapping over
// integer bin counts), rotated by the time passed to each call; a query
// merges the sub-windows still inside the window.
//
// Sub-windows are aligned on the Unix epoch (sub-window n covers
// [n*w, (n+1)*w) with w = Length/Buckets), so windows of different processes
// line up and Merge is exact. At time now, the window holds the current
// sub-window and the Buckets-1 before it.
//
// The zero Window is ready to use with the WindowOptions defaults.
// A Window is not safe for concurrent use; the Registry guards its windows
// with a per-key mutex.
type Window struct {
	ready bool // opts, width and m are set
	opts  measure.WindowOptions
	width int64 // sub-window width in ns
	m     logMapping
	subs  []subWindow
	// newest is the newest epoch ever added; values at or before
	// newest-Buckets are rejected as too old.
	newest int64
}

type subWindow struct {
	epoch int64   // valid when n > 0
	n     uint64  // values, including zero
	zero  uint64  // values too small to index (< about 1e-300), counted as 0
	sum   float64 // exact sum for the mean
	pos   compactStore
}

// NewWindow returns a Window with the given options.
func NewWindow(o measure.WindowOptions) *Window {
	w := &Window{}
	w.init(o)
	return w
}

func (w *Window) init(o measure.WindowOptions) {
	w.opts = normalizeWindow(o)
	w.width = int64(w.opts.Length) / int64(w.opts.Buckets)
	w.m = newLogMapping(w.opts.RelativeAccuracy)
	w.subs = nil // allocated by the first slot call
	w.newest = noEpoch
	w.ready = true
}

func (w *Window) lazyInit() {
	if !w.ready {
		w.init(measure.WindowOptions{})
	}
}

// Options returns the window's options with defaults filled in.
func (w *Window) Options() measure.WindowOptions {
	w.lazyInit()
	return w.opts
}

func (w *Window) epoch(now time.Time) int64 { return floorDiv(now.UnixNano(), w.width) }

// Add records v at time now and reports whether it was accepted. NaN, ±Inf
// and negative values are rejected, as are values older than the window
// (at or before the newest time added minus Length). Values too small to
// index (below about 1e-300) count as 0.
func (w *Window) Add(now time.Time, v float64) bool {
	w.lazyInit()
	if !(v >= 0) || v > w.m.maxIndexable {
		return false
	}
	e := w.epoch(now)
	if e <= w.newest-int64(w.opts.Buckets) {
		return false
	}
	s := w.slot(e)
	if s == nil {
		return false
	}
	w.newest = max(w.newest, e)
	s.n++
	s.sum += v
	if v < w.m.minIndexable {
		s.zero++
	} else {
		s.pos.addCount(w.m.index(v), 1, w.opts.MaxBins)
	}
	return true
}

// slot returns the sub-window for epoch e, clearing it if it held an older
// epoch, or nil if it holds a newer one.
func (w *Window) slot(e int64) *subWindow {
	if w.subs == nil {
		w.subs = make([]subWindow, w.opts.Buckets)
	}
	s := &w.subs[mod(e, int64(len(w.subs)))]
	if s.n == 0 || s.epoch < e {
		s.epoch = e
		s.n, s.zero, s.sum = 0, 0, 0
		s.pos.Clear()
	} else if s.epoch > e {
		return nil
	}
	return s
}

func (w *Window) live(s *subWindow, now int64) bool {
	return s.n > 0 && s.epoch > now-int64(len(w.subs))
}

// Count returns the number of values inside the window at now.
func (w *Window) Count(now time.Time) int64 {
	if w.subs == nil {
		return 0
	}
	e := w.epoch(now)
	var n uint64
	for i := range w.subs {
		if s := &w.subs[i]; w.live(s, e) {
			n += s.n
		}
	}
	return int64(n)
}

// Mean returns the exact mean of the values inside the window at now, and
// false when the window is empty.
func (w *Window) Mean(now time.Time) (float64, bool) {
	var q query
	q.add(w, now)
	if q.n == 0 {
		return 0, false
	}
	return q.sum / float64(q.n), true
}

// Quantile returns the q-quantile (q in [0, 1]) of the values inside the
// window at now, within the relative accuracy of the true value at rank
// q*(count-1), interpolated linearly between the two whole ranks around it
// (the median of two values is their mean); false when the window is empty
// or q is outside [0, 1].
func (w *Window) Quantile(now time.Time, q float64) (float64, bool) {
	if !(q >= 0 && q <= 1) {
		return 0, false
	}
	var qr query
	qr.add(w, now)
	if qr.n == 0 {
		return 0, false
	}
	var out [1]float64
	qr.quantiles([]float64{q}, out[:])
	return out[0], true
}

// Reset empties the window, keeping its options.
func (w *Window) Reset() {
	if w.subs == nil {
		return
	}
	for i := range w.subs {
		w.subs[i].n = 0
		w.subs[i].pos.Clear()
	}
	w.newest = noEpoch
}

// Merge adds the contents of o to w, as if every value added to o had been
// added to w at the same time. Sub-windows of either that are older than the
// newer window allows are dropped. It returns ErrIncompatible when the
// windows differ in Length, Buckets or RelativeAccuracy (their mappings'
// bases, (1+a)/(1-a), more than 1e-12 apart relatively; MaxBins may
// differ). o is not modified.
func (w *Window) Merge(o *Window) error {
	w.lazyInit()
	o.lazyInit()
	if err := compatible(w.opts, o.opts); err != nil {
		return err
	}
	newest := max(w.newest, o.newest)
	for i := range o.subs {
		src := &o.subs[i]
		if src.n == 0 || src.epoch <= newest-int64(w.opts.Buckets) {
			continue
		}
		dst := w.slot(src.epoch)
		if dst == nil {
			continue
		}
		dst.n += src.n
		dst.zero += src.zero
		dst.sum += src.sum
		dst.pos.MergeWith(&src.pos, w.opts.MaxBins)
	}
	w.newest = newest
	// Drop our own sub-windows that fell out of the merged window.
	for i := range w.subs {
		if s := &w.subs[i]; s.n > 0 && s.epoch <= newest-int64(w.opts.Buckets) {
			s.n = 0
			s.pos.Clear()
		}
	}
	return nil
}

const windowMagic = "TPSW\x01"

// MarshalBinary encodes the window: its options, then each non-empty
// sub-window's epoch, count and sum, and its sketch in the sketches-go
// DDSketch binary format (index mapping included), so that each sub-window
// can also be decoded with sketches-go's ddsketch.DecodeDDSketch (tested by
// the separate module in measure/testdata/sketchescompat).
func (w *Window) MarshalBinary() ([]byte, error) {
	return w.appendBinary(nil), nil
}

// appendBinary appends MarshalBinary's encoding to b.
func (w *Window) appendBinary(b []byte) []byte {
	w.lazyInit()
	b = append(b, windowMagic...)
	enc.EncodeUvarint64(&b, uint64(w.opts.Length))
	enc.EncodeUvarint64(&b, uint64(w.opts.Buckets))
	enc.EncodeFloat64LE(&b, w.opts.RelativeAccuracy)
	enc.EncodeUvarint64(&b, uint64(w.opts.MaxBins))
	var n uint64
	for i := range w.subs {
		if w.subs[i].n > 0 {
			n++
		}
	}
	enc.EncodeUvarint64(&b, n)
	var sk []byte
	for i := range w.subs {
		s := &w.subs[i]
		if s.n == 0 {
			continue
		}
		enc.EncodeVarint64(&b, s.epoch)
		enc.EncodeUvarint64(&b, s.n)
		enc.EncodeFloat64LE(&b, s.sum)
		sk = sk[:0]
		w.encodeSketch(s, &sk)
		enc.EncodeUvarint64(&b, uint64(len(sk)))
		b = append(b, sk...)
	}
	return b
}

// encodeSketch appends s's sketch in the sketches-go DDSketch binary format.
func (w *Window) encodeSketch(s *subWindow, b *[]byte) {
	if s.zero > 0 {
		enc.EncodeFlag(b, enc.FlagZeroCountVarFloat)
		enc.EncodeVarfloat64(b, float64(s.zero))
	}
	w.m.encode(b)
	s.pos.Encode(b, enc.FlagTypePositiveStore)
}

// UnmarshalBinary replaces w with a window decoded from data produced by
// MarshalBinary. A sketch bin at an index that no finite value maps to
// (outside ±35,4xx at 1% accuracy) is malformed. On error (wrapping
// ErrEncoding) w is left unchanged.
func (w *Window) UnmarshalBinary(data []byte) error {
	if !bytes.HasPrefix(data, []byte(windowMagic)) {
		return fmt.Errorf("%w: bad magic or version", ErrEncoding)
	}
	d := &decoder{b: data[len(windowMagic):], kind: ErrEncoding}
	length := d.uvarint("window length")
	buckets := d.uvarint("sub-window count")
	acc := d.float("relative accuracy")
	maxBins := d.uvarint("maximum bins")
	if d.err != nil {
		return d.err
	}
	if length == 0 || length > math.MaxInt64 || buckets == 0 || buckets > 1<<16 ||
		!(acc > 0 && acc < 1) || maxBins == 0 || maxBins > 1<<20 || buckets > length {
		return fmt.Errorf("%w: options out of range", ErrEncoding)
	}
	var nw Window
	nw.init(measure.WindowOptions{Length: time.Duration(length), Buckets: int(buckets), RelativeAccuracy: acc, MaxBins: int(maxBins)})
	n := d.count("sub-windows", buckets)
	for range n {
		e := d.varint("sub-window epoch")
		cnt := d.uvarint("sub-window count")
		sum := d.float("sub-window sum")
		sk := d.bytes("sketch", math.MaxUint64)
		if d.err != nil {
			return d.err
		}
		if e <= nw.newest-int64(buckets) {
			return fmt.Errorf("%w: sub-windows out of range", ErrEncoding)
		}
		s := nw.slot(e)
		if s == nil || s.n > 0 {
			return fmt.Errorf("%w: duplicate sub-window", ErrEncoding)
		}
		if err := nw.decodeSketch(s, sk); err != nil {
			return fmt.Errorf("%w: %v", ErrEncoding, err)
		}
		if cnt != s.zero+s.pos.count || sum < 0 {
			return fmt.Errorf("%w: count or sum inconsistent with sketch", ErrEncoding)
		}
		s.n = cnt
		s.sum = sum
		nw.newest = max(nw.newest, e)
	}
	if err := d.end(); err != nil {
		return err
	}
	*w = nw
	return nil
}

func (w *Window) decodeSketch(s *subWindow, b []byte) error {
	for len(b) > 0 {
		flag, err := enc.DecodeFlag(&b)
		if err != nil {
			return err
		}
		switch {
		case flag == enc.FlagZeroCountVarFloat:
			z, err := enc.DecodeVarfloat64(&b)
			if err != nil {
				return err
			}
			if !(z >= 0) || z > math.MaxUint32*float64(1<<20) {
				return errors.New("bad zero count")
			}
			s.zero += uint64(math.Round(z))
		case flag == enc.FlagIndexMappingBaseLogarithmic:
			gamma, err := enc.DecodeFloat64LE(&b)
			if err != nil {
				return err
			}
			off, err := enc.DecodeFloat64LE(&b)
			if err != nil {
				return err
			}
			if !sameGamma(gamma, w.m.gamma) || off != 0 {
				return errors.New("index mapping differs from the window's")
			}
		case flag.Type() == enc.FlagTypePositiveStore:
			if err := s.pos.DecodeAndMergeWith(&b, flag.SubFlag(), w.m, w.opts.MaxBins); err != nil {
				return err
			}
		default:
			return fmt.Errorf("unsupported sketch flag %#x", flag)
		}
	}
	return nil
}

// logMapping is the DDSketch logarithmic index mapping, identical to
// sketches-go's mapping.LogarithmicMapping with index offset 0.
//
// Values from minIndexable to maxIndexable map to the indexes minIndex to
// maxIndex (about ±ln(MaxFloat64)/ln(gamma), ±35,4xx at 1% accuracy), and
// no finite value maps elsewhere: a decoded bin outside them was crafted
// or damaged, and is rejected (compactStore.DecodeAndMergeWith), which
// bounds the index span a query walks.
type logMapping struct {
	gamma, multiplier, accuracy float64
	minIndexable, maxIndexable  float64
	minIndex, maxIndex          int
}

// gammaOf returns the base of the logarithmic mapping of a relative
// accuracy: each bin spans a ratio of gamma.
func gammaOf(relativeAccuracy float64) float64 {
	return (1 + relativeAccuracy) / (1 - relativeAccuracy)
}

func newLogMapping(relativeAccuracy float64) logMapping {
	gamma := gammaOf(relativeAccuracy)
	mult := 1 / math.Log(gamma)
	m := logMapping{
		gamma:        gamma,
		multiplier:   mult,
		accuracy:     1 - 2/(1+gamma),
		minIndexable: math.Max(math.Exp(math.MinInt32/mult+1), 0x1p-1022*gamma),
		maxIndexable: math.Min(math.Exp(math.MaxInt32/mult-1), math.Exp(709)/(2*gamma)*(gamma+1)),
	}
	m.minIndex, m.maxIndex = m.index(m.minIndexable), m.index(m.maxIndexable)
	return m
}

func (m logMapping) index(v float64) int {
	i := math.Log(v) * m.multiplier
	if i >= 0 {
		return int(i)
	}
	return int(i) - 1
}

func (m logMapping) value(index int) float64 {
	return math.Exp(float64(index)/m.multiplier) * (1 + m.accuracy)
}

func (m logMapping) encode(b *[]byte) {
	enc.EncodeFlag(b, enc.FlagIndexMappingBaseLogarithmic)
	enc.EncodeFloat64LE(b, m.gamma)
	enc.EncodeFloat64LE(b, 0)
}

// compatible returns nil when windows of options a and b (normalized) may
// be merged: the same Length, the same Buckets, and the same index mapping
// (sameGamma of their accuracies). Otherwise the error wraps
// ErrIncompatible and names both. It is the one rule of Window.Merge,
// Registry.MergeAt and RestoreState.
func compatible(a, b measure.WindowOptions) error {
	if a.Length != b.Length || a.Buckets != b.Buckets || !sameGamma(gammaOf(a.RelativeAccuracy), gammaOf(b.RelativeAccuracy)) {
		return fmt.Errorf("%w: %v/%d/%g and %v/%d/%g", ErrIncompatible,
			a.Length, a.Buckets, a.RelativeAccuracy, b.Length, b.Buckets, b.RelativeAccuracy)
	}
	return nil
}

// sameGamma reports whether logarithmic mappings of bases x and y index
// values alike: x and y within 1e-12 of each other, relatively, the
// tolerance of sketches-go's LogarithmicMapping.Equals.
//
// Gamma, not the relative accuracy, because the index depends on it alone
// (floor(ln v / ln gamma)) and a sketch's encoding carries only it; the two
// are one-to-one, but a relative tolerance on the accuracy is another rule
// (50 times stricter at 1%). A tolerance, not equality, because the bases
// compared are not always computed from one float64 by one expression: a
// sketch may come from another DDSketch implementation, and an accuracy
// from a configuration's arithmetic (1-0.99 is 0.010000000000000009). At
// 1e-12 an index can differ only for a value within 2e-6 of a bin's width
// of a bin boundary, even at the largest index (35,448 at 1%). NaN and
// ±Inf (an accuracy of 1 read from a file) are the same as nothing.
func sameGamma(x, y float64) bool {
	return math.Abs(x-y) <= 1e-12*math.Min(math.Abs(x), math.Abs(y))
}

// noEpoch is the newest epoch of an empty window: far enough below any real
// epoch that newest-Buckets cannot overflow.
const noEpoch = math.MinInt64 / 2
