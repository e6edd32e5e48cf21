package registry

import (
	"bytes"
	"math"
	"math/rand/v2"
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
