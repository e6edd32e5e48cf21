package registry

import (
	"bytes"
	"math"
	"math/rand/v2"
	"slices"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tpsroute/tpsroute/measure"
	"github.com/tpsroute/tpsroute/tps"
)

func ns(d time.Duration) int64 { return t0.Add(d).UnixNano() }

func TestLoadTrackCount(t *testing.T) {
	var l loadTrack
	_, ok := l.countAt(ns(0))
	assert.False(t, ok, "nothing begun")
	// Calls in flight: one from 0 to 4 s, a second from 1 s to 3 s, a third
	// from 2 s on.
	l.begin(ns(0))
	l.begin(ns(time.Second))
	l.begin(ns(2 * time.Second))
	l.end(ns(3 * time.Second))
	l.end(ns(4 * time.Second))
	for _, c := range []struct {
		at time.Duration
		n  int32
	}{
		{0, 1}, {500 * time.Millisecond, 1}, {time.Second, 2}, {2500 * time.Millisecond, 3},
		{3 * time.Second, 2}, {4 * time.Second, 1}, {time.Hour, 1},
	} {
		n, ok := l.countAt(ns(c.at))
		require.True(t, ok)
		assert.Equal(t, c.n, n, "at %v", c.at)
	}
	_, ok = l.countAt(ns(-time.Second))
	assert.False(t, ok, "before the first mark")
	// A time before the latest event is clamped: the marks stay in order.
	l.end(ns(time.Second))
	n, _ := l.countAt(ns(5 * time.Second))
	assert.Equal(t, int32(0), n)
	n, _ = l.countAt(ns(3500 * time.Millisecond))
	assert.Equal(t, int32(2), n, "the clamped end is at 4 s")
}

func TestLoadTrackEndWithoutBegin(t *testing.T) {
	var l loadTrack
	l.end(ns(0))
	n, ok := l.countAt(ns(time.Second))
	require.True(t, ok)
	assert.Equal(t, int32(0), n, "an end without a begin does not count below zero")
	l.begin(ns(2 * time.Second))
	n, _ = l.countAt(ns(3 * time.Second))
	assert.Equal(t, int32(1), n)
}

func TestLoadTrackOldestMark(t *testing.T) {
	var l loadTrack
	for i := range loadMarks + 10 {
		l.begin(ns(time.Duration(i) * time.Second))
	}
	// The marks are the begins at 10 s and later: 11 in flight after 10 s.
	_, ok := l.countAt(ns(9 * time.Second))
	assert.False(t, ok, "older than the oldest mark")
	n, ok := l.countAt(ns(10 * time.Second))
	require.True(t, ok)
	assert.Equal(t, int32(11), n)
}

func TestLoadTrackMeanOver(t *testing.T) {
	var l loadTrack
	_, ok := l.meanOver(ns(0), ns(time.Second))
	assert.False(t, ok, "nothing begun")
	// As in TestLoadTrackCount: 1 in flight from 0, 2 from 1 s, 3 from 2 s,
	// 2 from 3 s, 1 from 4 s.
	l.begin(ns(0))
	l.begin(ns(time.Second))
	l.begin(ns(2 * time.Second))
	l.end(ns(3 * time.Second))
	l.end(ns(4 * time.Second))
	for _, c := range []struct {
		name     string
		from, to time.Duration
		want     float64
	}{
		{"whole", 0, 4 * time.Second, 2},
		{"across one mark", 500 * time.Millisecond, 1500 * time.Millisecond, 1.5},
		{"within one count", 2100 * time.Millisecond, 2900 * time.Millisecond, 3},
		{"past the last mark", 3500 * time.Millisecond, 10 * time.Second, 7 / 6.5},
		{"empty interval: the count at its start", 2500 * time.Millisecond, 2500 * time.Millisecond, 3},
		{"reversed interval: the count at its start", 3500 * time.Millisecond, time.Second, 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			m, ok := l.meanOver(ns(c.from), ns(c.to))
			require.True(t, ok)
			assert.InDelta(t, c.want, m, 1e-9)
		})
	}
	_, ok = l.meanOver(ns(-time.Second), ns(time.Second))
	assert.False(t, ok, "from before the first mark")
}

// fitSamples feeds f with TPS = base/(1+x/k) at loads x, times 100 ms apart,
// with log-normal noise sigma.
func fitSamples(f *loadFit, r *rand.Rand, base, k, sigma float64, xs []float64) {
	for i, x := range xs {
		v := base / (1 + x/k) * math.Exp(sigma*r.NormFloat64())
		f.add(ns(time.Duration(i)*100*time.Millisecond), float64(defaultHalfLife), x, v)
	}
}

func TestLoadFit(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	xs := make([]float64, 400)
	for i := range xs {
		xs[i] = float64(r.IntN(8))
	}
	t.Run("exact curve", func(t *testing.T) {
		var f loadFit
		fitSamples(&f, r, 2000, 2, 0, xs)
		k, ref := f.model()
		assert.InDelta(t, 2, k, 1e-6)
		// The mean TPS scaled by the factor is the curve.
		mean := f.v / f.w
		assert.InDelta(t, 2000, mean*loadFactor(k, ref, 0), 1e-3)
		assert.InDelta(t, 500, mean*loadFactor(k, ref, 6), 1e-3)
		assert.InDelta(t, 1, loadFactor(k, ref, ref), 1e-12)
		assert.Greater(t, ref, 1.0)
		assert.Less(t, ref, 3.5, "below the mean load: the mean of TPS favours the fast streams")
	})
	t.Run("noisy curve", func(t *testing.T) {
		var f loadFit
		fitSamples(&f, r, 2000, 2, 0.3, xs)
		k, _ := f.model()
		assert.InDelta(t, 2, k, 0.8, "the lower confidence bound of the slope: K a little high")
		assert.GreaterOrEqual(t, k, 2.0*0.9)
	})
	t.Run("old samples decay", func(t *testing.T) {
		// An hour ago the curve had K 2; now, 60 half-lives later, it is
		// flat at 2000 tok/s: the old samples weigh 2⁻⁶⁰ and the fit is the
		// new one's alone.
		var f loadFit
		half := float64(time.Minute)
		for i, x := range xs[:40] {
			f.add(ns(time.Duration(i)*time.Millisecond), half, x, 2000/(1+x/2))
		}
		k, _ := f.model()
		require.InDelta(t, 2, k, 1e-6, "the old curve")
		for i, x := range xs[40:80] {
			f.add(ns(time.Hour+time.Duration(i)*time.Millisecond), half, x, 2000)
		}
		k, ref := f.model()
		assert.Zero(t, k, "no load dependence left of the old curve")
		assert.InDelta(t, 40, f.w, 0.1, "the new samples' weight")
		assert.InDelta(t, 2000, f.v/f.w, 1e-6)
		assert.Greater(t, ref, 0.0)
	})
	t.Run("flat under noise", func(t *testing.T) {
		var f loadFit
		fitSamples(&f, r, 700, math.Inf(1), 0.5, xs)
		k, _ := f.model()
		assert.Zero(t, k, "no load dependence made up from noise")
	})
	t.Run("slow outliers", func(t *testing.T) {
		// Flat at 1000 tok/s (10% noise), but now and then a call runs at a
		// fifth of the speed; a slow call stays in flight longer, so slow
		// calls come more often at one or two other calls in flight. The
		// slope is significant, yet explains little: no load dependence.
		var f loadFit
		for i := range 400 {
			x, slow := 0.0, 0.02
			if u := r.Float64(); u < 0.3 {
				x, slow = 1+math.Floor(u/0.25), 0.15
			}
			v := 1000 * math.Exp(0.1*r.NormFloat64())
			if r.Float64() < slow {
				v /= 5
			}
			f.add(ns(time.Duration(i)*100*time.Millisecond), float64(defaultHalfLife), x, v)
		}
		mx, my := f.x/f.w, f.y/f.w
		sxx, sxy, syy := f.xx/f.w-mx*mx, f.xy/f.w-mx*my, f.yy/f.w-my*my
		b := sxy / sxx
		se := math.Sqrt((syy - b*sxy) / (sxx * (f.w - 2)))
		require.Greater(t, b-2*se, 0.0, "the slope's lower 95%% bound alone would report a load dependence")
		require.Less(t, b*sxy/syy, loadMinExplained)
		k, ref := f.model()
		assert.Zero(t, k, "no load dependence made up from slow outliers")
		assert.InDelta(t, mx, ref, 1e-12, "the samples' mean load")
	})
	t.Run("no spread", func(t *testing.T) {
		var f loadFit
		fitSamples(&f, r, 2000, 2, 0, make([]float64, 100))
		k, ref := f.model()
		assert.Zero(t, k)
		assert.Zero(t, ref, "the samples' mean load")
	})
	t.Run("too few", func(t *testing.T) {
		var f loadFit
		fitSamples(&f, r, 2000, 2, 0, []float64{0, 4, 0, 4, 0})
		k, _ := f.model()
		assert.Zero(t, k)
	})
	t.Run("faster under load", func(t *testing.T) {
		var f loadFit
		for i, x := range xs {
			f.add(ns(time.Duration(i)*100*time.Millisecond), float64(defaultHalfLife), x, 500*(1+x))
		}
		k, _ := f.model()
		assert.Zero(t, k, "a negative slope is no load dependence")
	})
	t.Run("bad input", func(t *testing.T) {
		var f loadFit
		f.add(ns(0), float64(defaultHalfLife), math.NaN(), 100)
		f.add(ns(0), float64(defaultHalfLife), 1, math.Inf(1))
		f.add(ns(0), float64(defaultHalfLife), -1, 100)
		f.add(ns(0), float64(defaultHalfLife), 1, 0)
		assert.Zero(t, f.w)
		assert.Equal(t, 1.0, loadFactor(0, 3, 5))
		assert.Equal(t, 1.0, loadFactor(math.Inf(1), 3, 5))
	})
}

// loadedRun records n streams of 400 tokens on one key, started back to
// back in groups of 1 to 8 concurrent streams, each at TPS = 2000/(1+x/2)
// with x the other streams of its group. It runs in a synctest bubble, so
// that each stream's end is seen at its virtual time.
func loadedRun(t *testing.T, r *Registry, k measure.Key, n int) {
	t.Helper()
	rng := rand.New(rand.NewPCG(3, 4))
	for done := 0; done < n; {
		g := 1 + rng.IntN(8)
		start := time.Now()
		rate := 2000 / (1 + float64(g-1)/2)
		gen := time.Duration(400 / rate * float64(time.Second))
		ends := make([]func(), g)
		for i := range ends {
			ends[i] = r.Begin(k)
		}
		time.Sleep(100*time.Millisecond + gen)
		for i := range ends {
			ends[i]()
			r.Record(k, tps.Sample{
				Start: start, TTFT: 100 * time.Millisecond, Last: 100*time.Millisecond + gen, Total: 100*time.Millisecond + gen,
				TPS: rate, TPSOK: true, OutputTokens: 400, InputTokens: 256,
			})
		}
		done += g
	}
}

func TestRegistryLoadModel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := New(measure.Options{})
		loadedRun(t, r, kA, 300)
		est, ok := r.Estimate(kA)
		require.True(t, ok)
		assert.InDelta(t, 2, est.LoadK, 0.05, "K fitted from the streams' loads")
		assert.Greater(t, est.LoadRef, 1.0)
		// The factor maps the figures (at LoadRef) to a given load: at 0
		// others the stream runs at 2000, at 6 at 500.
		assert.InDelta(t, 2000, est.TPSEWMA*est.LoadFactor(0), 2000*0.1)
		assert.InDelta(t, 500, est.TPSEWMA*est.LoadFactor(6), 500*0.1)
		// The TPS swings 4× with the load, but the detector sees every
		// sample at the reference load: no change of level.
		r.mu.Lock()
		e := r.lookup(kA)
		r.mu.Unlock()
		e.mu.Lock()
		assert.Zero(t, e.tpsSince, "a load swing is not a change of level")
		e.mu.Unlock()
	})
}

// joinedRun records n streams of 400 tokens on one key as a provider that
// batches live would serve them: in groups of 1 to 8, the first stream
// begins alone and the others join it as its first token arrives, and every
// stream of a group runs at TPS = 2000/(1+(g-1)/2) to the end, slowed by
// the streams that joined it. The load at the first stream's start (0) says
// nothing of its speed; the mean over its generation (g-1) does.
func joinedRun(t *testing.T, r *Registry, k measure.Key, n int) {
	t.Helper()
	rng := rand.New(rand.NewPCG(5, 6))
	ttft := 100 * time.Millisecond
	for done := 0; done < n; {
		g := 1 + rng.IntN(8)
		rate := 2000 / (1 + float64(g-1)/2)
		gen := time.Duration(400 / rate * float64(time.Second))
		start := time.Now()
		ends := []func(){r.Begin(k)}
		time.Sleep(ttft)
		join := time.Now()
		for range g - 1 {
			ends = append(ends, r.Begin(k))
		}
		time.Sleep(ttft + gen)
		for i, end := range ends {
			end()
			s := tps.Sample{Start: join, TTFT: ttft, Last: ttft + gen, Total: ttft + gen,
				TPS: rate, TPSOK: true, OutputTokens: 400, InputTokens: 256}
			if i == 0 {
				s.Start, s.Last, s.Total = start, 2*ttft+gen, 2*ttft+gen
			}
			r.Record(k, s)
		}
		done += g
	}
}

// TestRegistryLiveLoadModel: streams slowed by the streams that join them
// (joinedRun) are fitted on the mean load over their generation, whose
// line explains them, not on the load at their start.
func TestRegistryLiveLoadModel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := New(measure.Options{})
		joinedRun(t, r, kA, 300)
		est, ok := r.Estimate(kA)
		require.True(t, ok)
		assert.InDelta(t, 2, est.LoadK, 0.1, "K fitted from the mean load over each stream's generation")
		r.mu.Lock()
		e := r.lookup(kA)
		r.mu.Unlock()
		e.mu.Lock()
		defer e.mu.Unlock()
		_, _, gen := e.loadModel()
		assert.True(t, gen, "the generation's fit explains more")
		ks, _, r2s := e.fit.modelR2()
		_, _, r2g := e.fitGen.modelR2()
		assert.Less(t, r2s, r2g)
		t.Logf("start fit: K %.2f R² %.2f; generation fit: K %.2f R² %.2f", ks, r2s, est.LoadK, r2g)
	})
}

// TestRegistryLoadModelStartWins: streams whose speed is set by the load at
// their start (loadedRun, as the simulator's non-live deployments serve
// them; a group begins and ends together, so both fits see the same loads)
// keep the start fit: only a generation fit that explains more replaces it.
func TestRegistryLoadModelStartWins(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := New(measure.Options{})
		loadedRun(t, r, kA, 300)
		r.mu.Lock()
		e := r.lookup(kA)
		r.mu.Unlock()
		e.mu.Lock()
		defer e.mu.Unlock()
		k, _, gen := e.loadModel()
		assert.False(t, gen)
		assert.InDelta(t, 2, k, 0.05)
	})
}

func TestRegistryLoadUnknownWithoutBegin(t *testing.T) {
	r := New(measure.Options{})
	for i := range 50 {
		now := t0.Add(time.Duration(i) * time.Second)
		r.RecordAt(now, kA, tps.Sample{
			Start: now.Add(-time.Second), TTFT: 100 * time.Millisecond, Last: time.Second, Total: time.Second,
			TPS: 100 * float64(1+i%5), TPSOK: true, OutputTokens: 100,
		})
	}
	est, _ := r.Estimate(kA)
	assert.Zero(t, est.LoadK, "no Begin, no load measured")
	assert.Equal(t, 1.0, est.LoadFactor(10))
}

// TestStateShapeRoundTrip: the load model and the prompt-size classes
// survive SaveState and RestoreState (tag 3), and a file without them (a
// writer before tag 3) restores with none.
func TestStateShapeRoundTrip(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		orig := New(measure.Options{})
		loadedRun(t, orig, kA, 200)
		now := time.Now()
		orig.PruneAt(now) // publishes every Estimate at now, as a restore does
		want, _ := orig.Estimate(kA)
		require.Positive(t, want.LoadK)
		_, ok := want.Input(256)
		require.True(t, ok, "a warm class")
		var b bytes.Buffer
		require.NoError(t, orig.SaveState(&b, now))
		got := New(measure.Options{})
		_, err := got.RestoreState(bytes.NewReader(b.Bytes()), now, nil)
		require.NoError(t, err)
		have, _ := got.Estimate(kA)
		assert.Equal(t, want, have)
		fw, _ := want.Input(256)
		fh, _ := have.Input(256)
		assert.Equal(t, fw, fh)

		// Without the section (what a writer before tag 3 wrote): no load
		// model, no class, the rest restored.
		e := orig.lookup(kA)
		e.mu.Lock()
		e.fit, e.inU, e.inputs = loadFit{}, EWMA{HalfLife: e.inU.HalfLife}, [InputClasses]inputClass{}
		require.False(t, e.hasShape())
		e.mu.Unlock()
		var old bytes.Buffer
		require.NoError(t, orig.SaveState(&old, now))
		require.Less(t, old.Len(), b.Len())
		bare := New(measure.Options{})
		_, err = bare.RestoreState(bytes.NewReader(old.Bytes()), now, nil)
		require.NoError(t, err)
		est, ok := bare.Estimate(kA)
		require.True(t, ok)
		assert.Zero(t, est.LoadK)
		_, ok = est.Input(256)
		assert.False(t, ok)
		assert.Equal(t, want.TPSP50, est.TPSP50)
	})
}

// TestStreamLoad: each gap pairs with the calls in flight at the previous
// chunk (the count when the gap began, less the stream itself); the first
// gap has no previous chunk and is not counted, nor is a gap that is not
// positive and finite; reset starts over.
func TestStreamLoad(t *testing.T) {
	var s streamLoad
	f := func(p *atomic.Uint64) float64 { return math.Float64frombits(p.Load()) }
	s.add(3, 0.5) // the first gap: no previous chunk
	assert.Zero(t, f(&s.n))
	s.add(1, 0.2) // began with 3 in flight: 2 others
	s.add(1, math.Inf(1))
	s.add(2, 0) // ignored, but its count is the next gap's
	s.add(2, 0.3)
	assert.Equal(t, 2.0, f(&s.n))
	assert.Equal(t, 2+1.0, f(&s.x), "2 others, then the count of the ignored gap's report less one")
	assert.InDelta(t, 0.5, f(&s.y), 1e-12)
	assert.InDelta(t, 4+1.0, f(&s.xx), 1e-12)
	assert.InDelta(t, 2*0.2+1*0.3, f(&s.xy), 1e-12)
	assert.InDelta(t, 0.04+0.09, f(&s.yy), 1e-12)
	s.reset()
	s.add(5, 1)
	assert.Zero(t, f(&s.n)+f(&s.x)+f(&s.y)+f(&s.xx)+f(&s.xy)+f(&s.yy), "after reset the next gap is a first one")
	s.add(0, 1) // a count below one (no Begin) reads as the stream alone
	assert.Equal(t, 4.0, f(&s.x))
	s.add(0, 1)
	assert.Equal(t, 4.0, f(&s.x), "0 others")
	assert.Equal(t, 2.0, f(&s.n))
}

// withinStreams feeds f n streams ended one second apart, each with its own
// speed factor (log-normal of spread sigma) and chunk jitter (log-normal of
// spread jitter): per stream, chunk gaps at base, base+1, ... others in
// flight (loads of them), each load for per chunks, a gap of
// factor·(1 + x/k) (k 0: no load dependence). Each gap is reported with the
// count in flight when the next one begins (a join during the gap).
func withinStreams(f *withinFit, r *rand.Rand, n, base, loads, per int, k, sigma, jitter float64) {
	for i := range n {
		var s streamLoad
		c := 0.01 * math.Exp(sigma*r.NormFloat64())
		s.add(int64(base+1), 0) // the first chunk
		for x := base; x < base+loads; x++ {
			for j := range per {
				g := c * math.Exp(jitter*r.NormFloat64())
				if k > 0 {
					g *= 1 + float64(x)/k
				}
				next := x + 1
				if j == per-1 {
					next++
				}
				s.add(int64(next), g)
			}
		}
		f.add(ns(time.Duration(i)*time.Second), float64(defaultHalfLife), &s)
	}
}

func TestWithinFit(t *testing.T) {
	for _, c := range []struct {
		name                   string
		n, base, loads, per    int
		k, sigma, jitter, want float64
		tol                    float64
	}{
		{"K 2 under per-stream noise 0.3", 20, 0, 3, 5, 2, 0.3, 0, 2, 0.05},
		{"K 2.6 at 9 to 11 others", 20, 9, 3, 5, 2.6, 0.3, 0, 2.6, 0.1},
		{"K 8, chunk jitter 0.2", 40, 1, 4, 10, 8, 0.3, 0.2, 8, 2.5},
		{"no load dependence", 20, 0, 3, 5, 0, 0.3, 0, 0, 0},
		{"no load dependence, chunk jitter 0.3", 40, 0, 3, 10, 0, 0.3, 0.3, 0, 0},
		{"no load change within the streams", 20, 2, 1, 10, 2, 0.3, 0, 0, 0},
		{"too few gaps", 1, 0, 3, 2, 2, 0, 0, 0, 0},
		{"a steep slope: K at least loadMinK", 20, 0, 3, 5, 0.1, 0, 0, loadMinK, 1e-9},
		{"K 900: reported", 20, 0, 3, 5, 900, 0.3, 0, 900, 1},
		{"K 1100: above withinMaxK, none", 20, 0, 3, 5, 1100, 0.3, 0, 0, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			var f withinFit
			withinStreams(&f, rand.New(rand.NewPCG(7, 8)), c.n, c.base, c.loads, c.per, c.k, c.sigma, c.jitter)
			if c.want == 0 {
				assert.Zero(t, f.model())
				return
			}
			assert.InDelta(t, c.want, f.model(), c.tol)
		})
	}
	t.Run("a stream of one gap adds nothing", func(t *testing.T) {
		var f withinFit
		var s streamLoad
		s.add(1, 0)
		s.add(2, 0.1)
		f.add(ns(0), float64(defaultHalfLife), &s)
		assert.Equal(t, withinFit{}, f)
	})
	t.Run("a stream of two gaps is folded", func(t *testing.T) {
		var f withinFit
		var s streamLoad
		s.add(1, 0)
		s.add(2, 0.1)
		s.add(2, 0.2)
		f.add(ns(0), float64(defaultHalfLife), &s)
		assert.Equal(t, 1.0, f.dof)
		assert.InDelta(t, 0.5, f.xx, 1e-12, "x 0 then 1")
		assert.InDelta(t, 0.5*0.1/0.15, f.xy, 1e-12)
		assert.InDelta(t, 0.25, f.cx, 1e-12)
	})
	t.Run("every sum halves in a half-life", func(t *testing.T) {
		var f withinFit
		withinStreams(&f, rand.New(rand.NewPCG(13, 14)), 5, 0, 3, 5, 2, 0.3, 0.1)
		old := f
		// A stream at one load and one gap adds only its degrees of freedom.
		var s streamLoad
		s.add(1, 0)
		for range 4 {
			s.add(1, 0.5)
		}
		f.add(old.last+int64(defaultHalfLife), float64(defaultHalfLife), &s)
		assert.InDelta(t, old.xx/2, f.xx, 1e-12)
		assert.InDelta(t, old.xy/2, f.xy, 1e-12)
		assert.InDelta(t, old.yy/2, f.yy, 1e-12)
		assert.InDelta(t, old.cx/2, f.cx, 1e-12)
		assert.InDelta(t, old.dof/2+3, f.dof, 1e-12)
	})
	t.Run("old streams decay", func(t *testing.T) {
		// Streams an hour old with K 1, then new ones with no slope at all:
		// what is left of the old slope is below the new noise.
		var f withinFit
		r := rand.New(rand.NewPCG(9, 10))
		withinStreams(&f, r, 20, 0, 3, 5, 1, 0.3, 0)
		require.InDelta(t, 1, f.model(), 0.05)
		old := f.xx
		g := f
		for i := range 20 {
			var s streamLoad
			s.add(1, 0)
			for x := range 3 {
				for range 5 {
					s.add(int64(x+1), 0.01*math.Exp(0.2*r.NormFloat64()))
				}
			}
			g.add(ns(time.Hour+time.Duration(i)*time.Second), float64(defaultHalfLife), &s)
		}
		assert.Less(t, g.xx, old, "decayed, though streams were added")
		assert.Zero(t, g.model())
		// Without the decay the old slope would still show.
		h := f
		h.last = ns(time.Hour + 20*time.Second)
		for i := range 20 {
			var s streamLoad
			s.add(1, 0)
			for x := range 3 {
				for range 5 {
					s.add(int64(x+1), 0.01)
				}
			}
			h.add(ns(time.Hour+time.Duration(i)*time.Second), float64(defaultHalfLife), &s)
		}
		assert.Positive(t, h.model(), "streams out of order do not decay the sums")
	})
}

// TestLoadFitRefAt: under the K a fit finds itself, refAt gives the
// reference load modelR2 gives; without samples or K, 0.
func TestLoadFitRefAt(t *testing.T) {
	var f loadFit
	assert.Zero(t, f.refAt(2))
	xs := make([]float64, 200)
	for i := range xs {
		xs[i] = float64(i % 6)
	}
	fitSamples(&f, rand.New(rand.NewPCG(1, 2)), 1000, 2, 0, xs)
	k, ref, _ := f.modelR2()
	require.InDelta(t, 2, k, 1e-6)
	assert.InDelta(t, ref, f.refAt(k), 1e-6)
	assert.Greater(t, f.refAt(k), 1.0)
	assert.Zero(t, f.refAt(0))
}

// TestRegistryWithinStreamLoad: streams whose samples all start alone and
// whose generation loads barely vary give the fits across streams nothing,
// but each stream's chunk gaps slow as two others join it: the within-stream
// slope gives K, and the Estimate's LoadK is it.
func TestRegistryWithinStreamLoad(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := New(measure.Options{})
		rng := rand.New(rand.NewPCG(11, 12))
		const k = 2.0
		for range 40 {
			c := 0.01 * math.Exp(0.3*rng.NormFloat64()) // the stream's own speed, 20 tokens a chunk
			start := time.Now()
			f := r.BeginFlightAt(start, kA, 400)
			f.Gap(0) // the first chunk
			var gen time.Duration
			// Five chunks at x others; then (a call joins or leaves during
			// the last gap, paced at x) the next.
			chunks := func(x int, then func()) {
				for i := range 5 {
					g := time.Duration(c * (1 + float64(x)/k) * float64(time.Second))
					time.Sleep(g)
					gen += g
					if i == 4 {
						then()
					}
					f.Gap(g)
				}
			}
			var e1, e2 func()
			chunks(0, func() { e1 = r.BeginAt(time.Now(), kA) })
			chunks(1, func() { e2 = r.BeginAt(time.Now(), kA) })
			chunks(2, func() { e1(); e2() })
			chunks(0, func() {})
			r.RecordAt(time.Now(), kA, tps.Sample{Start: start, Last: gen, Total: gen, TPS: 400 / gen.Seconds(),
				TPSOK: true, OutputTokens: 400})
			f.End()
			time.Sleep(time.Second)
		}
		r.mu.Lock()
		e := r.lookup(kA)
		r.mu.Unlock()
		e.mu.Lock()
		ks, _, _ := e.fit.modelR2()
		kw := e.within.model()
		kl, ref, gen := e.loadModel()
		e.mu.Unlock()
		assert.Zero(t, ks, "every sample started alone")
		assert.InDelta(t, k, kw, 0.05)
		assert.Equal(t, kw, kl, "the within-stream slope is the load model")
		assert.True(t, gen, "read on the generation's load")
		assert.InDelta(t, 0.75, ref, 0.2, "about the streams' mean load over their generation")
		r.PruneAt(time.Now())    // publishes the Estimate
		est, _ := r.Estimate(kA) // not OK: no TTFT in these samples
		assert.InDelta(t, k, est.LoadK, 0.05)
		assert.Equal(t, ref, est.LoadRef)
	})
}

// loadOracle is modelR2's answer for samples taken at one time, computed
// from centred sums rather than decayed raw moments: the least-squares
// slope of 1/TPS on x lowered by two standard errors, K where that line
// halves the intercept's TPS, the load at which it gives the mean TPS, and
// the share of 1/TPS's variance the unlowered line explains. It assumes a
// fit that passes every gate.
func loadOracle(xs, tpss []float64) (k, ref, r2 float64) {
	n := float64(len(xs))
	var mx, my, mv float64
	for i := range xs {
		mx += xs[i] / n
		my += 1 / tpss[i] / n
		mv += tpss[i] / n
	}
	var sxx, sxy, syy float64
	for i := range xs {
		dx, dy := xs[i]-mx, 1/tpss[i]-my
		sxx += dx * dx / n
		sxy += dx * dy / n
		syy += dy * dy / n
	}
	b := sxy / sxx
	r2 = b * sxy / syy
	b -= 2 * math.Sqrt((syy-b*sxy)/(sxx*(n-2)))
	k = max((my-b*mx)/b, loadMinK)
	return k, (1/(mv*b*k) - 1) * k, r2
}

// TestLoadFitOracle checks modelR2's figures against loadOracle on noisy
// curves: the slope's standard error (with its n−2 degrees of freedom), the
// residual variance and R² each move K, ref or R², and a fit of exactly
// loadMinWeight samples is used. An empty fit has no model and no mean.
func TestLoadFitOracle(t *testing.T) {
	var empty loadFit
	k, ref, r2 := empty.modelR2()
	assert.Zero(t, k)
	assert.Zero(t, ref, "no samples, no mean load")
	assert.Zero(t, r2)
	for _, c := range []struct {
		name  string
		n     int
		sigma float64
	}{
		{"exactly loadMinWeight samples", loadMinWeight, 0.05},
		{"a few more", 12, 0.1},
		{"many", 400, 0.2},
	} {
		t.Run(c.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(11, uint64(c.n)))
			xs, tpss := make([]float64, c.n), make([]float64, c.n)
			var f loadFit
			for i := range xs {
				xs[i] = float64(i % 8)
				tpss[i] = 2000 / (1 + xs[i]/2) * math.Exp(c.sigma*rng.NormFloat64())
				f.add(ns(0), float64(defaultHalfLife), xs[i], tpss[i])
			}
			wantK, wantRef, wantR2 := loadOracle(xs, tpss)
			require.Greater(t, wantR2, loadMinExplained, "the curve passes the fit's gates")
			require.Greater(t, wantK, loadMinK)
			k, ref, r2 := f.modelR2()
			assert.InEpsilon(t, wantK, k, 1e-9)
			assert.InEpsilon(t, wantRef, ref, 1e-9)
			assert.InEpsilon(t, wantR2, r2, 1e-9)
		})
	}
}

// TestWithinModel: the pooled within-stream fit's K from its sums, against
// the formula worked by hand: the slope xy/xx lowered by two standard errors
// on dof-1 degrees of freedom, K = 1/slope less the mean load; a fit of
// exactly loadMinWeight degrees of freedom is established, one below is not.
func TestWithinModel(t *testing.T) {
	k := func(xx, xy, yy, cx, dof float64) float64 {
		b := xy/xx - 2*math.Sqrt((yy-xy*xy/xx)/(xx*(dof-1)))
		return 1/b - cx/xx
	}
	for _, tc := range []struct {
		name string
		f    withinFit
		want float64
	}{
		{"eleven degrees of freedom", withinFit{xx: 10, xy: 2, yy: 0.5, cx: 5, dof: 11}, k(10, 2, 0.5, 5, 11)},
		{"exactly loadMinWeight", withinFit{xx: 10, xy: 2, yy: 0.5, cx: 5, dof: loadMinWeight}, k(10, 2, 0.5, 5, loadMinWeight)},
		{"below loadMinWeight", withinFit{xx: 10, xy: 2, yy: 0.5, cx: 5, dof: loadMinWeight - 0.5}, 0},
		{"no spread of load", withinFit{xy: 2, yy: 0.5, cx: 5, dof: 11}, 0},
		{"a flat slope", withinFit{xx: 10, xy: 0.1, yy: 0.5, cx: 5, dof: 11}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.InDelta(t, tc.want, tc.f.model(), 1e-9)
		})
	}
	assert.InDelta(t, 6.81, k(10, 2, 0.5, 5, 11), 0.01, "the worked example")
}

// TestLoadRulesOut: a fit rules out a load dependence as strong as K 8 only
// when its samples spread over loads and their slope's upper bound is
// below 8's; a steeper or equal slope, one load, or too few samples rule
// nothing out.
func TestLoadRulesOut(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	spread := make([]float64, 200)
	for i := range spread {
		spread[i] = float64(r.IntN(8))
	}
	one := make([]float64, 200)
	for i := range one {
		one[i] = 3
	}
	narrow := slices.Clone(one[:100])
	narrow[0] = 4 // a variance of 0.0099 calls², below loadMinSpread
	for _, c := range []struct {
		name     string
		k, sigma float64 // the samples' K (Inf: flat) and log-normal noise
		xs       []float64
		want     bool
	}{
		{"flat under noise 0.3", math.Inf(1), 0.3, spread, true},
		{"K 64, exact", 64, 0, spread, true},
		{"K 8, exact", 8, 0, spread, false},
		{"K 8 under noise 0.3", 8, 0.3, spread, false},
		{"K 2 under noise 0.3", 2, 0.3, spread, false},
		{"flat, at one load", math.Inf(1), 0.3, one, false},
		{"flat, exact, too narrow a spread of loads", math.Inf(1), 0, narrow, false},
		{"flat, too few samples", math.Inf(1), 0, spread[:loadMinWeight-1], false},
		{"flat under noise 3: too wide to tell", math.Inf(1), 3, spread[:20], false},
	} {
		t.Run(c.name, func(t *testing.T) {
			var f loadFit
			fitSamples(&f, rand.New(rand.NewPCG(5, 6)), 1000, c.k, c.sigma, c.xs)
			assert.Equal(t, c.want, f.rulesOut(loadProbeK))
		})
	}
	assert.False(t, (&loadFit{}).rulesOut(loadProbeK), "no samples")

	for _, c := range []struct {
		name                string
		n, base, loads, per int
		k, jitter           float64
		want                bool
	}{
		{"within: flat, chunk jitter 0.3", 40, 2, 3, 10, 0, 0.3, true},
		{"within: K 64 at 9 to 11 others", 40, 9, 3, 10, 64, 0, true},
		{"within: K 8 at 9 to 11 others", 40, 9, 3, 10, 8, 0.1, false},
		{"within: K 2.6 at 9 to 11 others", 40, 9, 3, 10, 2.6, 0.3, false},
		{"within: flat, no load change", 40, 2, 1, 10, 0, 0.3, false},
		{"within: flat, too few gaps", 1, 2, 3, 2, 0, 0, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			var f withinFit
			withinStreams(&f, rand.New(rand.NewPCG(7, 8)), c.n, c.base, c.loads, c.per, c.k, 0.3, c.jitter)
			assert.Equal(t, c.want, f.rulesOut(loadProbeK))
		})
	}
}

// TestRegistryLoadUntested: a key whose streams all ran at one steady load
// publishes LoadUntested; once calls join and leave its streams and their
// speed does not change, the load is tested and the flag is gone; streams
// that do slow as calls join give LoadK, and no flag.
func TestRegistryLoadUntested(t *testing.T) {
	for _, c := range []struct {
		name  string
		k     float64 // 0: flat
		joins bool
		want  bool // LoadUntested
	}{
		{"steady load", 0, false, true},
		{"flat as calls join", 0, true, false},
		{"K 2 as calls join", 2, true, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := New(measure.Options{})
				rng := rand.New(rand.NewPCG(11, 12))
				for range 40 {
					c0 := 0.01 * math.Exp(0.1*rng.NormFloat64())
					start := time.Now()
					f := r.BeginFlightAt(start, kA, 400)
					f.Gap(0)
					var gen time.Duration
					chunks := func(x int, then func()) {
						for i := range 5 {
							g := time.Duration(c0 * float64(time.Second))
							if c.k > 0 {
								g = time.Duration(float64(g) * (1 + float64(x)/c.k))
							}
							time.Sleep(g)
							gen += g
							if i == 4 {
								then()
							}
							f.Gap(g)
						}
					}
					x, end := 0, func() {}
					if c.joins {
						chunks(0, func() { end = r.BeginAt(time.Now(), kA) })
						x = 1
					}
					chunks(x, func() { end() })
					chunks(0, func() {})
					r.RecordAt(time.Now(), kA, tps.Sample{Start: start, Last: gen, Total: gen, TPS: 400 / gen.Seconds(),
						TPSOK: true, OutputTokens: 400})
					f.End()
					time.Sleep(time.Second)
				}
				r.PruneAt(time.Now()) // publishes the Estimate
				est, _ := r.Estimate(kA)
				assert.Equal(t, c.want, est.LoadUntested)
				assert.Equal(t, c.k > 0, est.LoadK > 0)
			})
		})
	}
}

// TestEntryLoadUntested: any one of the three fits that rules out K 8
// ends the doubt; with none, the key is untested.
func TestEntryLoadUntested(t *testing.T) {
	spread := make([]float64, 100)
	for i := range spread {
		spread[i] = float64(i % 6)
	}
	flat := func(f *loadFit) { fitSamples(f, rand.New(rand.NewPCG(1, 2)), 1000, math.Inf(1), 0.1, spread) }
	for _, c := range []struct {
		name string
		set  func(e *entry)
		want bool
	}{
		{"no samples", func(*entry) {}, true},
		{"flat at the start", func(e *entry) { flat(&e.fit) }, false},
		{"flat over the generation", func(e *entry) { flat(&e.fitGen) }, false},
		{"flat within the streams", func(e *entry) {
			withinStreams(&e.within, rand.New(rand.NewPCG(7, 8)), 40, 2, 3, 10, 0, 0.3, 0.3)
		}, false},
		{"K 2 at the start", func(e *entry) {
			fitSamples(&e.fit, rand.New(rand.NewPCG(1, 2)), 1000, 2, 0.1, spread)
		}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			var e entry
			c.set(&e)
			assert.Equal(t, c.want, e.loadUntested())
		})
	}
}

// TestLoadRulesOutOracle: rulesOut is the test on the centred sums, for
// fits of 8 to 40 samples at once (no decay): the slope of 1/TPS on x
// plus two standard errors (n−2 degrees of freedom), over the mean 1/TPS,
// against 1/(8 + x̄).
func TestLoadRulesOutOracle(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 22))
	agree, out := 0, 0
	for range 2000 {
		n := loadMinWeight + r.IntN(33)
		k := []float64{2, 8, 16, 64, math.Inf(1)}[r.IntN(5)]
		sigma := 0.02 + 0.3*r.Float64()
		var f loadFit
		xs, ys := make([]float64, n), make([]float64, n)
		for i := range n {
			xs[i] = float64(r.IntN(6))
			v := 1000 / (1 + xs[i]/k) * math.Exp(sigma*r.NormFloat64())
			ys[i] = 1 / v
			f.add(0, float64(defaultHalfLife), xs[i], v)
		}
		var mx, my float64
		for i := range n {
			mx += xs[i] / float64(n)
			my += ys[i] / float64(n)
		}
		var sxx, sxy, syy float64
		for i := range n {
			sxx += (xs[i] - mx) * (xs[i] - mx)
			sxy += (xs[i] - mx) * (ys[i] - my)
			syy += (ys[i] - my) * (ys[i] - my)
		}
		want := false
		if sxx/float64(n) >= loadMinSpread {
			b := sxy / sxx
			se := math.Sqrt(max(0, syy-b*sxy) / float64(n-2) / sxx)
			up := b + 2*se
			// Skip the cases within rounding of the boundary.
			d := up/my - 1/(loadProbeK+mx)
			if math.Abs(d) < 1e-9*math.Abs(1/(loadProbeK+mx)) {
				continue
			}
			want = d < 0
		}
		if f.rulesOut(loadProbeK) == want {
			agree++
		}
		if want {
			out++
		}
	}
	assert.Equal(t, 2000, agree)
	assert.Greater(t, out, 200, "enough fits rule K 8 out")
	assert.Greater(t, 2000-out, 200, "and enough do not")
}
