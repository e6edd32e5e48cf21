package registry

import (
	"bytes"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tpsroute/tpsroute/measure"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 0, 0, time.UTC)

// oracle returns the exact value at rank q*(n-1) of sorted xs, interpolated
// linearly between the two whole ranks around it, as Window's quantiles are.
func oracle(sorted []float64, q float64) float64 {
	r := q * float64(len(sorted)-1)
	k := int(r)
	if k+1 >= len(sorted) {
		return sorted[k]
	}
	return sorted[k] + (r-float64(k))*(sorted[k+1]-sorted[k])
}

// TestWindowQuantileInterpolates: a quantile between two ranks lies between
// their values, in proportion, so that the median of two samples is their
// mean and not the lower one (a noisy deployment measured twice ranked on
// its worse sample: docs/ROUTING.md, "Random fleets"); ranks among zeros
// read 0.
func TestWindowQuantileInterpolates(t *testing.T) {
	for _, tc := range []struct {
		name   string
		values []float64
		q      float64
		want   float64
	}{
		{"median of two", []float64{249, 573}, 0.5, 411},
		{"p95 of two", []float64{249, 573}, 0.95, 556.8},
		{"p0 of two", []float64{573, 249}, 0, 249},
		{"p100 of two", []float64{249, 573}, 1, 573},
		{"median of four", []float64{100, 200, 300, 400}, 0.5, 250},
		{"median of three", []float64{100, 200, 900}, 0.5, 200},
		{"p25 of five", []float64{100, 200, 300, 400, 500}, 0.25, 200},
		{"p30 of five", []float64{100, 200, 300, 400, 500}, 0.3, 220},
		{"one", []float64{300}, 0.5, 300},
		{"among zeros", []float64{0, 0, 10}, 0.5, 0},
		{"from zero to a value", []float64{0, 0, 10}, 0.75, 5},
		{"above the zeros", []float64{0, 0, 10}, 1, 10},
		{"only zeros", []float64{0, 0}, 0.5, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := NewWindow(measure.WindowOptions{Length: time.Minute, Buckets: 6})
			for _, v := range tc.values {
				require.True(t, w.Add(t0, v))
			}
			got, ok := w.Quantile(t0, tc.q)
			require.True(t, ok)
			assert.InEpsilon(t, tc.want+1e-9, got+1e-9, 0.011, "q %v of %v", tc.q, tc.values)
		})
	}
	t.Run("several at once ascend", func(t *testing.T) {
		w := NewWindow(measure.WindowOptions{Length: time.Minute, Buckets: 6})
		for _, v := range []float64{0, 100, 200, 300, 400} {
			require.True(t, w.Add(t0, v))
		}
		var q query
		q.add(w, t0)
		out := make([]float64, 4)
		q.quantiles([]float64{0.1, 0.5, 0.55, 1}, out)
		for i, want := range []float64{40, 200, 220, 400} {
			assert.InEpsilon(t, want, out[i], 0.011, "quantile %d", i)
		}
	})
	t.Run("more sub-windows than the query holds inline", func(t *testing.T) {
		// 70 windows of one sample each, 100 to 169: past the query's 64
		// inline stores, the rest read from its overflow.
		var q query
		for i := range 70 {
			w := NewWindow(measure.WindowOptions{Length: time.Minute, Buckets: 6})
			require.True(t, w.Add(t0, float64(100+i)))
			q.add(w, t0)
		}
		require.Equal(t, 70, q.ns)
		out := make([]float64, 3)
		q.quantiles([]float64{0, 0.5, 1}, out)
		for i, want := range []float64{100, 134.5, 169} {
			assert.InEpsilon(t, want, out[i], 0.011, "quantile %d", i)
		}
	})
}

func TestWindowAccuracy(t *testing.T) {
	const n = 100_000
	gens := []struct {
		name string
		gen  func(r *rand.Rand) float64
	}{
		{"lognormal", func(r *rand.Rand) float64 { return math.Exp(r.NormFloat64()*0.8 - 0.5) }},
		{"lognormal_wide", func(r *rand.Rand) float64 { return math.Exp(r.NormFloat64()*2 + 3) }},
		{"bimodal", func(r *rand.Rand) float64 {
			if r.IntN(10) < 7 {
				return math.Exp(r.NormFloat64()*0.2 - 1.5) // fast, cached
			}
			return math.Exp(r.NormFloat64()*0.3 + 1) // slow, queued
		}},
	}
	qs := []float64{0, 0.01, 0.1, 0.25, 0.5, 0.75, 0.9, 0.95, 0.99, 0.999, 1}
	for _, g := range gens {
		t.Run(g.name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(1, 2))
			w := NewWindow(measure.WindowOptions{})
			xs := make([]float64, n)
			for i := range xs {
				xs[i] = g.gen(r)
				// spread over the whole window
				now := t0.Add(time.Duration(i) * (defaultWindow - time.Second) / n)
				require.True(t, w.Add(now, xs[i]))
			}
			slices.Sort(xs)
			now := t0.Add(defaultWindow - time.Second)
			require.Equal(t, int64(n), w.Count(now))
			for _, q := range qs {
				got, ok := w.Quantile(now, q)
				require.True(t, ok)
				want := oracle(xs, q)
				assert.InEpsilon(t, want, got, 0.01, "q=%v", q)
			}
			var sum float64
			for _, x := range xs {
				sum += x
			}
			mean, ok := w.Mean(now)
			require.True(t, ok)
			assert.InEpsilon(t, sum/n, mean, 1e-9)
		})
	}
}

func TestWindowExpiry(t *testing.T) {
	w := NewWindow(measure.WindowOptions{Length: time.Minute, Buckets: 6})
	for i := range 60 {
		require.True(t, w.Add(t0.Add(time.Duration(i)*time.Second), 1))
	}
	tests := []struct {
		name string
		at   time.Duration
		want int64
	}{
		{"all_live", 59 * time.Second, 60},
		{"first_bucket_gone", 60 * time.Second, 50},
		{"half_gone", 80 * time.Second, 30},
		{"last_bucket_only", 109 * time.Second, 10},
		{"all_gone", 110 * time.Second, 0},
		{"long_after", time.Hour, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, w.Count(t0.Add(tt.at)))
			_, ok := w.Quantile(t0.Add(tt.at), 0.5)
			assert.Equal(t, tt.want > 0, ok)
		})
	}
	t.Run("rotation_reuses_slot", func(t *testing.T) {
		require.True(t, w.Add(t0.Add(2*time.Minute), 5))
		assert.Equal(t, int64(1), w.Count(t0.Add(2*time.Minute)))
		v, ok := w.Quantile(t0.Add(2*time.Minute), 0.5)
		require.True(t, ok)
		assert.InEpsilon(t, 5, v, 0.01)
	})
	t.Run("too_old_rejected", func(t *testing.T) {
		assert.False(t, w.Add(t0, 1))
		assert.True(t, w.Add(t0.Add(2*time.Minute-50*time.Second), 1), "inside the window, out of order")
	})
}

func TestWindowRejects(t *testing.T) {
	tests := []struct {
		name string
		v    float64
		ok   bool
	}{
		{"nan", math.NaN(), false},
		{"inf", math.Inf(1), false},
		{"neg_inf", math.Inf(-1), false},
		{"negative", -1, false},
		{"huge", math.MaxFloat64, false},
		{"zero", 0, true},
		{"tiny", 1e-320, true},
		{"normal", 0.25, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var w Window
			assert.Equal(t, tt.ok, w.Add(t0, tt.v))
			if tt.ok {
				got, ok := w.Quantile(t0, 0.5)
				require.True(t, ok)
				if tt.v < 1e-300 {
					assert.Zero(t, got)
				} else {
					assert.InEpsilon(t, tt.v, got, 0.01)
				}
			} else {
				assert.Zero(t, w.Count(t0))
			}
		})
	}
	t.Run("bad_q", func(t *testing.T) {
		var w Window
		w.Add(t0, 1)
		for _, q := range []float64{-0.1, 1.1, math.NaN()} {
			_, ok := w.Quantile(t0, q)
			assert.False(t, ok)
		}
	})
}

func fill(w *Window, r *rand.Rand, from time.Time, n int, span time.Duration) {
	for i := range n {
		w.Add(from.Add(time.Duration(i)*span/time.Duration(n)), math.Exp(r.NormFloat64()))
	}
}

func sameWindow(t *testing.T, want, got *Window, now time.Time) {
	t.Helper()
	require.Equal(t, want.Count(now), got.Count(now))
	for _, q := range []float64{0, 0.1, 0.5, 0.9, 0.99, 1} {
		a, aok := want.Quantile(now, q)
		b, bok := got.Quantile(now, q)
		require.Equal(t, aok, bok)
		assert.Equal(t, a, b, "q=%v", q)
	}
	a, _ := want.Mean(now)
	b, _ := got.Mean(now)
	assert.InDelta(t, a, b, 1e-9*math.Abs(a))
}

func TestWindowMergeEqualsUnion(t *testing.T) {
	tests := []struct {
		name         string
		aFrom, bFrom time.Duration
	}{
		{"same_time", 0, 0},
		{"b_later_overlapping", 0, 2 * time.Minute},
		{"b_much_later", 0, 20 * time.Minute},
		{"a_later", 3 * time.Minute, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ra, rb := rand.New(rand.NewPCG(1, 1)), rand.New(rand.NewPCG(2, 2))
			var a, b, union Window
			fill(&a, ra, t0.Add(tt.aFrom), 5000, 4*time.Minute)
			fill(&b, rb, t0.Add(tt.bFrom), 7000, 4*time.Minute)
			// The union: the same values, added in time order to one window.
			type tv struct {
				at time.Time
				v  float64
			}
			var all []tv
			ua, ub := rand.New(rand.NewPCG(1, 1)), rand.New(rand.NewPCG(2, 2))
			for i := range 5000 {
				all = append(all, tv{t0.Add(tt.aFrom).Add(time.Duration(i) * 4 * time.Minute / 5000), math.Exp(ua.NormFloat64())})
			}
			for i := range 7000 {
				all = append(all, tv{t0.Add(tt.bFrom).Add(time.Duration(i) * 4 * time.Minute / 7000), math.Exp(ub.NormFloat64())})
			}
			slices.SortStableFunc(all, func(x, y tv) int { return x.at.Compare(y.at) })
			for _, x := range all {
				require.True(t, union.Add(x.at, x.v))
			}
			require.NoError(t, a.Merge(&b))
			end := all[len(all)-1].at
			for _, d := range []time.Duration{0, time.Minute, 4 * time.Minute} {
				sameWindow(t, &union, &a, end.Add(d))
			}
		})
	}
	t.Run("incompatible", func(t *testing.T) {
		a := NewWindow(measure.WindowOptions{Length: time.Minute})
		b := NewWindow(measure.WindowOptions{})
		c := NewWindow(measure.WindowOptions{Length: time.Minute, RelativeAccuracy: 0.02})
		assert.ErrorIs(t, a.Merge(b), ErrIncompatible)
		assert.ErrorIs(t, a.Merge(c), ErrIncompatible)
	})
}

func TestWindowEncoding(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	var w Window
	fill(&w, r, t0, 20000, 4*time.Minute)
	w.Add(t0.Add(time.Minute), 0)
	now := t0.Add(4 * time.Minute)

	t.Run("round_trip", func(t *testing.T) {
		b, err := w.MarshalBinary()
		require.NoError(t, err)
		var got Window
		require.NoError(t, got.UnmarshalBinary(b))
		sameWindow(t, &w, &got, now)
		assert.Equal(t, w.Options(), got.Options())
		b2, err := got.MarshalBinary()
		require.NoError(t, err)
		assert.Equal(t, b, b2)
	})
	t.Run("empty_round_trip", func(t *testing.T) {
		var e Window
		b, err := e.MarshalBinary()
		require.NoError(t, err)
		var got Window
		require.NoError(t, got.UnmarshalBinary(b))
		assert.Zero(t, got.Count(now))
	})
	t.Run("corrupt", func(t *testing.T) {
		b, err := w.MarshalBinary()
		require.NoError(t, err)
		cases := map[string][]byte{
			"empty":     nil,
			"magic":     append([]byte("XXXX"), b[4:]...),
			"truncated": b[:len(b)/2],
			"trailing":  append(append([]byte(nil), b...), 0),
		}
		for name, data := range cases {
			t.Run(name, func(t *testing.T) {
				got := NewWindow(measure.WindowOptions{})
				assert.ErrorIs(t, got.UnmarshalBinary(data), ErrEncoding)
			})
		}
	})
}

func FuzzWindowUnmarshal(f *testing.F) {
	r := rand.New(rand.NewPCG(5, 6))
	var w Window
	fill(&w, r, t0, 300, 4*time.Minute)
	w.Add(t0.Add(time.Minute), 0)
	b, _ := w.MarshalBinary()
	f.Add(b)
	var empty Window
	b, _ = empty.MarshalBinary()
	f.Add(b)
	// Bins where no finite value maps (TestWindowRejectsIndexesNoValueReaches).
	plantBins(&w, t0.Add(time.Minute), -hostileSpan, hostileSpan)
	b, _ = w.MarshalBinary()
	f.Add(b)
	f.Fuzz(func(t *testing.T, data []byte) {
		var w Window
		if err := w.UnmarshalBinary(data); err != nil {
			require.ErrorIs(t, err, ErrEncoding)
			return
		}
		// Whatever decodes must answer queries and round-trip.
		for _, now := range []time.Time{t0, t0.Add(time.Hour)} {
			n := w.Count(now)
			if _, ok := w.Quantile(now, 0.99); ok != (n > 0) {
				t.Fatalf("quantile ok=%v with count %d", ok, n)
			}
		}
		again, err := w.MarshalBinary()
		require.NoError(t, err)
		var w2 Window
		require.NoError(t, w2.UnmarshalBinary(again))
	})
}

// plantBins adds one count at each index to w, each in its own sub-window
// live at now, bypassing Add: what a crafted encoding can hold.
func plantBins(w *Window, now time.Time, idx ...int) {
	w.lazyInit()
	e := w.epoch(now)
	for i, x := range idx {
		s := w.slot(e - int64(i))
		s.pos.addCount(x, 1, w.opts.MaxBins)
		s.n++
		w.newest = max(w.newest, e)
	}
}

// allocated returns the bytes f allocates on the heap.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// hostileSpan is how far from 0 the crafted bins of the hostile-input tests
// sit: far outside the ±35,4xx indexes that finite values reach at 1%, yet
// small enough that the old decoder's blow-up (a quantile query built one
// array of 8 bytes per index across the span, 32 MiB here, 32 GiB at the
// ±2^31 the encoding allowed) stays survivable in a test.
const hostileSpan = 1 << 21

// maxQueryBytes bounds what one query may allocate: the array across every
// index that finite values reach at 1% accuracy (about 71k bins of 8 bytes)
// with room to spare.
const maxQueryBytes = 1 << 20

// TestWindowRejectsIndexesNoValueReaches: a window encoding whose bins lie
// outside the indexes the mapping gives finite positive values is malformed
// (ErrEncoding); the extreme indexes that values do reach decode, and a
// query across them stays within maxQueryBytes.
func TestWindowRejectsIndexesNoValueReaches(t *testing.T) {
	m := newLogMapping(DefaultRelativeAccuracy)
	require.Equal(t, m.index(m.maxIndexable), m.maxIndex)
	require.Equal(t, m.index(m.minIndexable), m.minIndex)
	require.Less(t, m.maxIndex, 36_000, "ln(MaxFloat64)/ln(gamma)")
	require.Greater(t, m.minIndex, -36_000)
	tests := []struct {
		name string
		idx  []int
		ok   bool
	}{
		{"extremes", []int{m.minIndex, m.maxIndex}, true},
		{"above", []int{0, m.maxIndex + 1}, false},
		{"below", []int{m.minIndex - 1, 0}, false},
		{"hostile", []int{-hostileSpan, hostileSpan}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var w Window
			plantBins(&w, t0, tt.idx...)
			b, err := w.MarshalBinary()
			require.NoError(t, err)
			var got Window
			err = got.UnmarshalBinary(b)
			if err == nil {
				n := allocated(func() { got.Quantile(t0, 0.5) })
				assert.LessOrEqual(t, n, uint64(maxQueryBytes), "one quantile query allocated %d bytes", n)
			}
			if tt.ok {
				require.NoError(t, err)
				assert.Equal(t, int64(len(tt.idx)), got.Count(t0))
				return
			}
			require.ErrorIs(t, err, ErrEncoding)
			assert.ErrorContains(t, err, "bin index")
		})
	}
}

// TestCompatible: one rule decides whether windows may be merged, and every
// path that merges or restores them follows it: Window.Merge,
// Registry.MergeAt of another registry's Delta, and RestoreState of another
// registry's file. Before, Window.Merge compared gamma and MergeAt and
// RestoreState the relative accuracy, so the "gamma-equal" row merged in
// one and was ErrIncompatible in the others.
func TestCompatible(t *testing.T) {
	def := normalizeWindow(measure.WindowOptions{})
	with := func(f func(*measure.WindowOptions)) measure.WindowOptions {
		o := def
		f(&o)
		return o
	}
	acc := func(a float64) measure.WindowOptions {
		return with(func(o *measure.WindowOptions) { o.RelativeAccuracy = a })
	}
	tests := []struct {
		name string
		a    measure.WindowOptions
		ok   bool
	}{
		{"same", def, true},
		{"length", with(func(o *measure.WindowOptions) { o.Length = time.Minute }), false},
		{"buckets", with(func(o *measure.WindowOptions) { o.Buckets = 5 }), false},
		{"max_bins", with(func(o *measure.WindowOptions) { o.MaxBins = 512 }), true},
		{"accuracy_by_arithmetic", acc(1 - 0.99), true}, // 0.010000000000000009
		{"gamma_equal", acc(0.01 * (1 + 1e-11)), true},  // gammas 2e-13 apart
		{"gamma_apart", acc(0.01 * (1 + 1e-9)), false},  // gammas 2e-11 apart
		{"accuracy", acc(0.0101), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			check := func(what string, err error) {
				t.Helper()
				if tt.ok {
					assert.NoError(t, err, what)
				} else {
					assert.ErrorIs(t, err, ErrIncompatible, what)
				}
			}
			check("rule", compatible(tt.a, def))
			src := NewWindow(tt.a)
			require.True(t, src.Add(t0, 1))
			check("Window.Merge", NewWindow(def).Merge(src))
			r := New(measure.Options{Window: tt.a})
			r.RecordAt(t0, kA, okSample(time.Second, 50, 0))
			ds := r.NewExporter().Export()
			require.Len(t, ds, 1)
			check("MergeAt", New(measure.Options{}).MergeAt(t0, &ds[0]))
			_, err := New(measure.Options{}).RestoreState(bytes.NewReader(save(t, r, t0)), t0, nil)
			check("RestoreState", err)
		})
	}
	t.Run("gamma", func(t *testing.T) {
		g := gammaOf(DefaultRelativeAccuracy)
		assert.True(t, sameGamma(g, g))
		assert.True(t, sameGamma(g, g*(1+5e-13)))
		assert.False(t, sameGamma(g, g*(1+2e-12)))
		assert.False(t, sameGamma(g, math.Inf(1)), "an accuracy of 1")
		assert.False(t, sameGamma(math.Inf(1), math.Inf(1)))
		assert.False(t, sameGamma(g, math.NaN()))
	})
}
