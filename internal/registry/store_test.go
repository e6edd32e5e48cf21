package registry

import (
	"math"
	"math/rand/v2"
	"testing"

	enc "github.com/DataDog/sketches-go/ddsketch/encoding"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// storeOracle checks a compactStore against a plain map of counts.
func storeOracle(t *testing.T, s *compactStore, want map[int]uint64) {
	t.Helper()
	var total uint64
	for _, c := range want {
		total += c
	}
	require.Equal(t, total, s.count)
	got := map[int]uint64{}
	for i := s.lo; i <= s.hi && s.count > 0; i++ {
		if c := s.at(i - s.offset); c != 0 {
			got[i] = c
		}
	}
	assert.Equal(t, want, got)
}

func TestCompactStore(t *testing.T) {
	tests := []struct {
		name    string
		maxBins int
		adds    []struct{ i, c int }
		want    map[int]uint64
		wide    bool
	}{
		{"single", 100, []struct{ i, c int }{{5, 1}}, map[int]uint64{5: 1}, false},
		{"grow_up_and_down", 100, []struct{ i, c int }{{0, 1}, {40, 2}, {-40, 3}, {0, 1}}, map[int]uint64{0: 2, 40: 2, -40: 3}, false},
		{"widen_past_uint16", 100, []struct{ i, c int }{{1, 65535}, {2, 1}, {1, 1}}, map[int]uint64{1: 65536, 2: 1}, true},
		{"collapse_lowest_when_growing_up", 10, []struct{ i, c int }{{0, 1}, {1, 1}, {5, 1}, {12, 1}}, map[int]uint64{3: 2, 5: 1, 12: 1}, false},
		{"collapse_new_low_value", 10, []struct{ i, c int }{{20, 1}, {29, 1}, {0, 4}}, map[int]uint64{20: 5, 29: 1}, false},
		{"collapse_everything", 4, []struct{ i, c int }{{0, 1}, {1, 1}, {100, 1}}, map[int]uint64{97: 2, 100: 1}, false},
		{"saturates", 10, []struct{ i, c int }{{0, math.MaxUint32}, {0, 5}}, map[int]uint64{0: math.MaxUint32}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var s compactStore
			for _, a := range tt.adds {
				s.addCount(a.i, uint64(a.c), tt.maxBins)
			}
			want := tt.want
			if tt.name == "saturates" {
				// count keeps the true total; the bin saturates.
				require.Equal(t, uint64(math.MaxUint32)+5, s.count)
				assert.Equal(t, uint64(math.MaxUint32), s.at(0-s.offset))
			} else {
				storeOracle(t, &s, want)
			}
			assert.Equal(t, tt.wide, s.wide != nil)
		})
	}
	t.Run("random_against_map", func(t *testing.T) {
		r := rand.New(rand.NewPCG(9, 9))
		var s compactStore
		for round := range 5 {
			want := map[int]uint64{}
			s.Clear()
			center := r.IntN(2000) - 1000
			for range 5000 {
				i := center + int(r.NormFloat64()*float64(50*(round+1)))
				s.addCount(i, 1, 1<<20)
				want[i]++
			}
			storeOracle(t, &s, want)
		}
	})
	t.Run("add_with_count_rounds_and_ignores_bad", func(t *testing.T) {
		var s compactStore
		for _, c := range []float64{-1, 0, 0.4, math.NaN(), math.Inf(1)} {
			s.AddWithCount(3, c, 100)
		}
		assert.Zero(t, s.count)
		s.AddWithCount(3, 2.6, 100)
		storeOracle(t, &s, map[int]uint64{3: 3})
	})
}

// TestCompactStoreDecodesEveryBinEncoding decodes bins 3, 5 (count 2) and 6
// written in each of the sketches-go bin encodings.
func TestCompactStoreDecodesEveryBinEncoding(t *testing.T) {
	want := map[int]uint64{3: 1, 5: 2, 6: 1}
	tests := []struct {
		name  string
		mode  enc.SubFlag
		write func(b *[]byte)
	}{
		{"index_deltas_and_counts", enc.BinEncodingIndexDeltasAndCounts, func(b *[]byte) {
			enc.EncodeUvarint64(b, 3)
			for _, d := range [][2]float64{{3, 1}, {2, 2}, {1, 1}} {
				enc.EncodeVarint64(b, int64(d[0]))
				enc.EncodeVarfloat64(b, d[1])
			}
		}},
		{"index_deltas", enc.BinEncodingIndexDeltas, func(b *[]byte) {
			enc.EncodeUvarint64(b, 4)
			for _, d := range []int64{3, 2, 0, 1} {
				enc.EncodeVarint64(b, d)
			}
		}},
		{"contiguous_counts", enc.BinEncodingContiguousCounts, func(b *[]byte) {
			enc.EncodeUvarint64(b, 4)
			enc.EncodeVarint64(b, 3) // first index
			enc.EncodeVarint64(b, 1) // index step
			for _, c := range []float64{1, 0, 2, 1} {
				enc.EncodeVarfloat64(b, c)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b []byte
			tt.write(&b)
			var s compactStore
			require.NoError(t, s.DecodeAndMergeWith(&b, tt.mode, newLogMapping(DefaultRelativeAccuracy), 100))
			assert.Empty(t, b)
			storeOracle(t, &s, want)
		})
	}
}
