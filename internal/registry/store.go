package registry

import (
	"errors"
	"fmt"
	"math"

	enc "github.com/DataDog/sketches-go/ddsketch/encoding"
)

// compactStore is a DDSketch store that keeps integer bin counts in a
// contiguous array spanning exactly the indexes seen (plus a little slack),
// and collapses the lowest bins once the span would exceed maxBins.
//
// Counts are whole samples, kept in 16 bits per bin until one bin passes
// 65535 within one sub-window (over 2,000 calls a second on one key in one
// 2%-wide bin), and in 32 bits from then on (saturating at 2^32-1).
//
// Why not sketches-go's own ddsketch, mapping and store packages: all three
// import its sketchpb package and so google.golang.org/protobuf, which this
// module does not otherwise need; only the dependency-free encoding package
// is imported here, for a compatible wire format. That is a dependency
// choice, not a necessity. The memory argument is the stronger one, and it
// is an estimate from sketches-go v1.4.8's source, not a measurement: a
// DenseStore keeps float64 counts over the span seen plus 63 bins of slack,
// so a latency distribution spanning 20x (about 150 bins at 1%) takes about
// 1.7 KiB; a BufferedPaginatedStore uses pages of 32 float64 bins, about the
// same. A key holds up to 13 windows of 10 sub-window sketches (4 metrics x
// 3 cache states, plus chunk gaps), about 220 KiB at that size, over the
// 64 KiB per-key budget; the same sketches in 2-byte bins measure 52-60 KB
// per key (BenchmarkMemoryPerKey). The mapping is small and reimplemented
// here (logMapping, equal to mapping.LogarithmicMapping). Collapsing the
// lowest bins (as sketches-go's CollapsingLowestDenseStore does) bounds
// memory against absurd inputs while keeping the upper quantiles (the tail)
// exact to the mapping's accuracy; with the default 2048 bins it only
// triggers on values spanning a ratio above 4e17.
//
// That each sub-window's encoding decodes with sketches-go's
// ddsketch.DecodeDDSketch, with the same counts and quantiles, is tested by
// the separate module in testdata/sketchescompat, which may import
// sketches-go whole (run `go test ./...` there; the root module's tests do
// not). The other direction, decoding bins that sketches-go itself encoded
// (DecodeAndMergeWith's dense and index-only encodings), is tested on bins
// written by hand in each encoding and by the fuzz test of Window decoding.
//
// A compactStore is not safe for concurrent use.
type compactStore struct {
	narrow []uint16  // the bins while every count fits in 16 bits
	wide   *[]uint32 // the bins once one did not; narrow is then nil
	offset int       // index of bin 0
	lo, hi int       // min and max index with data; valid when count > 0
	count  uint64
}

func (s *compactStore) length() int {
	if s.wide != nil {
		return len(*s.wide)
	}
	return len(s.narrow)
}

func (s *compactStore) capacity() int {
	if s.wide != nil {
		return cap(*s.wide)
	}
	return cap(s.narrow)
}

// at returns the count at array position i.
func (s *compactStore) at(i int) uint64 {
	if s.wide != nil {
		return uint64((*s.wide)[i])
	}
	return uint64(s.narrow[i])
}

// set stores v at array position i, widening the bins if v needs it.
func (s *compactStore) set(i int, v uint64) {
	v = min(v, math.MaxUint32)
	if s.wide == nil && v > math.MaxUint16 {
		wide := make([]uint32, len(s.narrow), cap(s.narrow))
		for j, c := range s.narrow {
			wide[j] = uint32(c)
		}
		s.wide, s.narrow = &wide, nil
	}
	if s.wide != nil {
		(*s.wide)[i] = uint32(v)
	} else {
		s.narrow[i] = uint16(v)
	}
}

// AddWithCount adds count at index. Counts are rounded to whole samples;
// non-positive and non-finite counts are ignored.
func (s *compactStore) AddWithCount(index int, count float64, maxBins int) {
	if !(count > 0) || math.IsInf(count, 0) {
		return
	}
	c := math.Round(count)
	if c < 1 {
		return
	}
	s.addCount(index, uint64(min(c, math.MaxUint32)), maxBins)
}

func (s *compactStore) addCount(index int, c uint64, maxBins int) {
	i := s.normalize(index, maxBins)
	if s.wide == nil && c == 1 {
		if v := s.narrow[i]; v < math.MaxUint16 {
			s.narrow[i] = v + 1
			s.count++
			return
		}
	}
	s.set(i, s.at(i)+c)
	s.count += c
}

// normalize makes room for index and returns its position in the array.
func (s *compactStore) normalize(index, maxBins int) int {
	if s.count == 0 {
		if s.capacity() == 0 {
			s.narrow = make([]uint16, 0, 16)
		}
		s.resize(s.capacity())
		s.clearAll()
		s.offset = index - s.length()/2
		s.lo, s.hi = index, index
		return index - s.offset
	}
	if index < s.lo {
		if s.hi-index+1 > maxBins {
			// Collapse: everything below hi-maxBins+1 goes to that bin.
			floor := s.hi - maxBins + 1
			s.collapseBelow(floor)
			index = max(index, floor)
		}
		if index < s.lo {
			s.grow(index, s.hi)
			s.lo = index
		}
	} else if index > s.hi {
		if index-s.lo+1 > maxBins {
			s.collapseBelow(index - maxBins + 1)
		}
		s.grow(s.lo, index)
		s.hi = index
	}
	return index - s.offset
}

func (s *compactStore) resize(n int) {
	if s.wide != nil {
		*s.wide = (*s.wide)[:n]
	} else {
		s.narrow = s.narrow[:n]
	}
}

func (s *compactStore) clearAll() {
	if s.wide != nil {
		clear(*s.wide)
	}
	clear(s.narrow)
}

// collapseBelow folds all counts at indexes below floor into floor.
func (s *compactStore) collapseBelow(floor int) {
	if s.lo >= floor {
		return
	}
	var sum uint64
	for i := s.lo; i < floor && i <= s.hi; i++ {
		sum += s.at(i - s.offset)
		s.set(i-s.offset, 0)
	}
	if floor > s.hi {
		// Everything collapsed into one bin beyond the old range.
		s.clearAll()
		s.offset = floor - s.length()/2
		s.hi = floor
	}
	s.lo = floor
	j := floor - s.offset
	s.set(j, s.at(j)+sum)
}

// grow makes the array cover [lo, hi], which must contain [s.lo, s.hi]. It
// reallocates with a little slack on the side that grew, so that a drifting
// distribution does not reallocate on every new extreme, and reuses the
// array when it is large enough.
func (s *compactStore) grow(lo, hi int) {
	if lo >= s.offset && hi < s.offset+s.length() {
		return
	}
	span := hi - lo + 1
	n := span + span/16 + 4
	if n <= s.capacity() {
		n = s.capacity()
	}
	newOffset := lo
	if lo < s.offset {
		newOffset = hi - n + 1 // grew downwards: slack below
	}
	from, to, at := s.lo-s.offset, s.hi-s.offset+1, s.lo-newOffset
	if s.wide != nil {
		*s.wide = regrow(*s.wide, n, from, to, at)
	} else {
		s.narrow = regrow(s.narrow, n, from, to, at)
	}
	s.offset = newOffset
}

// regrow returns an array of length n holding old[from:to] at position at
// and zeros elsewhere, reusing old when its capacity allows.
func regrow[T uint16 | uint32](old []T, n, from, to, at int) []T {
	var nb []T
	if n <= cap(old) {
		nb = old[:n]
	} else {
		nb = make([]T, n)
	}
	copy(nb[at:at+to-from], old[from:to])
	clear(nb[:at])
	clear(nb[at+to-from:])
	return nb
}

// Clear empties the store and keeps its array for reuse.
func (s *compactStore) Clear() {
	s.count = 0
}

// MergeWith adds every bin of o to s.
func (s *compactStore) MergeWith(o *compactStore, maxBins int) {
	if o.count == 0 {
		return
	}
	for i := o.lo; i <= o.hi; i++ {
		if c := o.at(i - o.offset); c != 0 {
			s.addCount(i, c, maxBins)
		}
	}
}

// Encode appends the non-empty bins in the sketches-go sparse binary format
// (index deltas and counts), which sketches-go's stores decode (tested in
// testdata/sketchescompat).
func (s *compactStore) Encode(b *[]byte, t enc.FlagType) {
	if s.count == 0 {
		return
	}
	var n uint64
	for i := s.lo; i <= s.hi; i++ {
		if s.at(i-s.offset) != 0 {
			n++
		}
	}
	enc.EncodeFlag(b, enc.NewFlag(t, enc.BinEncodingIndexDeltasAndCounts))
	enc.EncodeUvarint64(b, n)
	prev := 0
	for i := s.lo; i <= s.hi; i++ {
		if c := s.at(i - s.offset); c != 0 {
			enc.EncodeVarint64(b, int64(i-prev))
			enc.EncodeVarfloat64(b, float64(c))
			prev = i
		}
	}
}

// DecodeAndMergeWith decodes bins in any of the sketches-go bin encodings and
// adds them to s, advancing b past them. A bin at an index that m gives no
// finite value is an error, and so is an unknown encoding; the bins before
// it are added.
func (s *compactStore) DecodeAndMergeWith(b *[]byte, mode enc.SubFlag, m logMapping, maxBins int) error {
	switch mode {
	case enc.BinEncodingIndexDeltasAndCounts, enc.BinEncodingIndexDeltas:
		n, err := enc.DecodeUvarint64(b)
		if err != nil {
			return err
		}
		var index int64
		for range n {
			d, err := enc.DecodeVarint64(b)
			if err != nil {
				return err
			}
			c := 1.0 // BinEncodingIndexDeltas: every bin counts one
			if mode == enc.BinEncodingIndexDeltasAndCounts {
				if c, err = enc.DecodeVarfloat64(b); err != nil {
					return err
				}
			}
			index += d
			if err := m.checkIndex(index); err != nil {
				return err
			}
			s.AddWithCount(int(index), c, maxBins)
		}
	case enc.BinEncodingContiguousCounts:
		n, err := enc.DecodeUvarint64(b)
		if err != nil {
			return err
		}
		index, err := enc.DecodeVarint64(b)
		if err != nil {
			return err
		}
		delta, err := enc.DecodeVarint64(b)
		if err != nil {
			return err
		}
		for range n {
			c, err := enc.DecodeVarfloat64(b)
			if err != nil {
				return err
			}
			if err := m.checkIndex(index); err != nil {
				return err
			}
			s.AddWithCount(int(index), c, maxBins)
			index += delta
		}
	default:
		return errors.New("measure: unknown bin encoding")
	}
	return nil
}

// checkIndex returns an error when no finite value maps to index i.
func (m logMapping) checkIndex(i int64) error {
	if i < int64(m.minIndex) || i > int64(m.maxIndex) {
		return fmt.Errorf("bin index %d outside the mapping's [%d, %d]", i, m.minIndex, m.maxIndex)
	}
	return nil
}
