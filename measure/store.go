package measure

import (
	"errors"
	"math"

	enc "github.com/DataDog/sketches-go/ddsketch/encoding"
)

// compactStore is a DDSketch store that keeps integer bin counts in a
// contiguous []uint32 spanning exactly the indexes seen (plus a little slack),
// and collapses the lowest bins once the span would exceed maxBins.
//
// Why not a store from sketches-go (its ddsketch, mapping and store packages
// need google.golang.org/protobuf, which this module does not require; only
// its dependency-free encoding package is used): its dense stores keep float64 counts and
// grow by 64+ bins at a time, about 2 KiB per sketch for a typical latency
// distribution; a Window holds up to Buckets sketches per metric, and a key
// holds 13 windows, so float64 bins would not fit the 64 KiB per-key budget.
// Counts here are whole samples, so uint32 loses nothing (a bin saturates at
// 2^32-1 within one sub-window, i.e. never in practice). Collapsing the lowest
// bins (as store.CollapsingLowestDenseStore does) bounds memory against absurd
// inputs while keeping the upper quantiles (the tail) exact to the mapping's
// accuracy.
//
// A compactStore is not safe for concurrent use.
type compactStore struct {
	bins    []uint32
	offset  int // index of bins[0]
	lo, hi  int // min and max index with data; valid when count > 0
	count   uint64
	maxBins int
}

// AddWithCount adds count at index. Counts are rounded to whole samples;
// non-positive and non-finite counts are ignored.
func (s *compactStore) AddWithCount(index int, count float64) {
	if !(count > 0) || math.IsInf(count, 0) {
		return
	}
	c := math.Round(count)
	if c < 1 {
		return
	}
	if c > math.MaxUint32 {
		c = math.MaxUint32
	}
	s.addCount(index, uint32(c))
}

func (s *compactStore) addCount(index int, c uint32) {
	i := s.normalize(index)
	v := s.bins[i] + c
	if v < c { // saturate rather than wrap
		v = math.MaxUint32
	}
	s.bins[i] = v
	s.count += uint64(c)
}

// normalize makes room for index and returns its position in bins.
func (s *compactStore) normalize(index int) int {
	if s.count == 0 {
		if len(s.bins) == 0 {
			s.bins = make([]uint32, 0, 16)
		}
		s.bins = s.bins[:cap(s.bins)]
		clear(s.bins)
		s.offset = index - len(s.bins)/2
		s.lo, s.hi = index, index
		return index - s.offset
	}
	if index < s.lo {
		if s.hi-index+1 > s.maxBins {
			// Collapse: everything below hi-maxBins+1 goes to that bin.
			floor := s.hi - s.maxBins + 1
			s.collapseBelow(floor)
			if index < floor {
				index = floor
			}
		}
		if index < s.lo {
			s.grow(index, s.hi)
			s.lo = index
		}
	} else if index > s.hi {
		if index-s.lo+1 > s.maxBins {
			s.collapseBelow(index - s.maxBins + 1)
		}
		s.grow(s.lo, index)
		s.hi = index
	}
	return index - s.offset
}

// collapseBelow folds all counts at indexes below floor into floor.
func (s *compactStore) collapseBelow(floor int) {
	if s.lo >= floor {
		return
	}
	var sum uint64
	for i := s.lo; i < floor && i <= s.hi; i++ {
		sum += uint64(s.bins[i-s.offset])
		s.bins[i-s.offset] = 0
	}
	if floor > s.hi {
		// Everything collapsed into one bin beyond the old range.
		clear(s.bins)
		s.offset = floor - len(s.bins)/2
		s.hi = floor
	}
	s.lo = floor
	j := floor - s.offset
	s.bins[j] = uint32(min(uint64(s.bins[j])+sum, math.MaxUint32))
}

// grow makes bins cover [lo, hi], which must contain [s.lo, s.hi]. It
// reallocates with a little slack on the side that grew, so that a drifting
// distribution does not reallocate on every new extreme, and reuses the
// array when it is large enough.
func (s *compactStore) grow(lo, hi int) {
	if lo >= s.offset && hi < s.offset+len(s.bins) {
		return
	}
	span := hi - lo + 1
	n := span + span/8 + 4
	var nb []uint32
	if n <= cap(s.bins) {
		n = cap(s.bins)
		nb = s.bins[:n]
	} else {
		nb = make([]uint32, n)
	}
	newOffset := lo
	if lo < s.offset {
		newOffset = hi - n + 1 // grew downwards: slack below
	}
	dlo, dhi := s.lo-newOffset, s.hi-newOffset
	copy(nb[dlo:dhi+1], s.bins[s.lo-s.offset:s.hi-s.offset+1])
	clear(nb[:dlo])
	clear(nb[dhi+1:])
	s.bins = nb
	s.offset = newOffset
}

// Clear empties the store and keeps its array for reuse.
func (s *compactStore) Clear() {
	s.count = 0
}

func (s *compactStore) IsEmpty() bool { return s.count == 0 }

// KeyAtRank returns the lowest index whose cumulative count exceeds rank, the
// same definition as the sketches-go stores.
func (s *compactStore) KeyAtRank(rank float64) int {
	if rank < 0 {
		rank = 0
	}
	var n uint64
	for i := s.lo; i <= s.hi; i++ {
		n += uint64(s.bins[i-s.offset])
		if float64(n) > rank {
			return i
		}
	}
	return s.hi
}

// MergeWith adds every bin of o to s.
func (s *compactStore) MergeWith(o *compactStore) {
	if o.count == 0 {
		return
	}
	for i := o.lo; i <= o.hi; i++ {
		if c := o.bins[i-o.offset]; c != 0 {
			s.addCount(i, c)
		}
	}
}

// Encode appends the non-empty bins in the sketches-go sparse binary format
// (index deltas and counts), readable by any sketches-go store.
func (s *compactStore) Encode(b *[]byte, t enc.FlagType) {
	if s.count == 0 {
		return
	}
	var n uint64
	for i := s.lo; i <= s.hi; i++ {
		if s.bins[i-s.offset] != 0 {
			n++
		}
	}
	enc.EncodeFlag(b, enc.NewFlag(t, enc.BinEncodingIndexDeltasAndCounts))
	enc.EncodeUvarint64(b, n)
	prev := 0
	for i := s.lo; i <= s.hi; i++ {
		if c := s.bins[i-s.offset]; c != 0 {
			enc.EncodeVarint64(b, int64(i-prev))
			enc.EncodeVarfloat64(b, float64(c))
			prev = i
		}
	}
}

// DecodeAndMergeWith decodes bins in any of the sketches-go bin encodings and
// adds them to s, advancing b past them.
func (s *compactStore) DecodeAndMergeWith(b *[]byte, mode enc.SubFlag) error {
	switch mode {
	case enc.BinEncodingIndexDeltasAndCounts:
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
			c, err := enc.DecodeVarfloat64(b)
			if err != nil {
				return err
			}
			index += d
			if err := checkIndex(index); err != nil {
				return err
			}
			s.AddWithCount(int(index), c)
		}
	case enc.BinEncodingIndexDeltas:
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
			index += d
			if err := checkIndex(index); err != nil {
				return err
			}
			s.addCount(int(index), 1)
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
			if err := checkIndex(index); err != nil {
				return err
			}
			s.AddWithCount(int(index), c)
			index += delta
		}
	default:
		return errors.New("measure: unknown bin encoding")
	}
	return nil
}

func checkIndex(i int64) error {
	if i < math.MinInt32 || i > math.MaxInt32 {
		return errors.New("measure: bin index out of range")
	}
	return nil
}
