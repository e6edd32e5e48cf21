package registry

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tpsroute/tpsroute/measure"
	"github.com/tpsroute/tpsroute/tps"
)

func TestInputClass(t *testing.T) {
	for _, c := range []struct {
		tokens int64
		class  int
	}{
		{-5, 0}, {0, 0}, {1, 0}, {127, 0}, {128, 1}, {255, 1}, {256, 2}, {4095, 5}, {4096, 6}, {6000, 6},
		{1 << 16, 10}, {1<<17 - 1, 10}, {1 << 17, 11}, {1 << 40, 11},
	} {
		assert.Equal(t, c.class, InputClass(c.tokens), "%d tokens", c.tokens)
	}
}

// promptSample is a successful sample at now of a prompt of in tokens at
// tps tokens/s and a TTFT of ttft.
func promptSample(now time.Time, in int64, rate float64, ttft time.Duration) tps.Sample {
	return tps.Sample{
		Start: now.Add(-time.Second), TTFT: ttft, Last: time.Second, Total: time.Second,
		TPS: rate, TPSOK: true, OutputTokens: 200, InputTokens: in,
	}
}

func TestInputClassFigures(t *testing.T) {
	r := New(measure.Options{})
	now := t0
	// Short prompts at 900 tok/s and 160 ms, long ones at 200 tok/s and
	// 350 ms, in the cycle short, long, long, short.
	for i := range 40 {
		now = now.Add(500 * time.Millisecond)
		if i%4 == 0 || i%4 == 3 {
			r.RecordAt(now, kA, promptSample(now, 150, 900, 160*time.Millisecond))
		} else {
			r.RecordAt(now, kA, promptSample(now, 6000, 200, 350*time.Millisecond))
		}
	}
	est, ok := r.Estimate(kA)
	require.True(t, ok)
	short, ok := est.Input(150)
	require.True(t, ok, "20 samples: warm")
	long, ok := est.Input(5000)
	require.True(t, ok)
	assert.InDelta(t, 900, short.TPS, 1e-6)
	assert.InDelta(t, 200, long.TPS, 1e-6)
	assert.Equal(t, int64(20), short.Samples)
	// The TTFT ratios are against the mean over classes (about 255 ms).
	assert.InDelta(t, 160.0/350, short.TTFTRatio/long.TTFTRatio, 1e-6)
	assert.Less(t, short.TTFTRatio, 1.0)
	assert.Greater(t, long.TTFTRatio, 1.0)
	// No class of that size, unknown size: the aggregate.
	_, ok = est.Input(1 << 17)
	assert.False(t, ok)
	_, ok = est.Input(0)
	assert.False(t, ok)
	var none Estimate
	_, ok = none.Input(150)
	assert.False(t, ok, "an Estimate not from a Registry")
	// The mix does not read as a change of level: both classes are mapped
	// to the aggregate level before the detector.
	assert.Zero(t, r.lookup(kA).tpsSince)

	// A class goes cold when its newest sample leaves the window.
	now = now.Add(defaultWindow - 5*time.Second)
	for range 20 {
		now = now.Add(500 * time.Millisecond)
		r.RecordAt(now, kA, promptSample(now, 150, 900, 160*time.Millisecond))
	}
	est, _ = r.Estimate(kA)
	_, ok = est.Input(6000)
	assert.False(t, ok, "no long prompt within the window")
	_, ok = est.Input(150)
	assert.True(t, ok)
}

func TestInputClassesForgetOnChange(t *testing.T) {
	r := New(measure.Options{})
	now := t0
	for i := range 40 {
		now = now.Add(500 * time.Millisecond)
		in := int64(150)
		if i%2 == 1 {
			in = 6000
		}
		r.RecordAt(now, kA, promptSample(now, in, 900, 160*time.Millisecond))
	}
	est, _ := r.Estimate(kA)
	_, ok := est.Input(150)
	require.True(t, ok)
	// The deployment slows 5× on every prompt size: the change forgets the
	// classes, so the aggregate (the new level) is read until they warm up
	// again.
	for range 3 {
		now = now.Add(500 * time.Millisecond)
		r.RecordAt(now, kA, promptSample(now, 150, 180, 160*time.Millisecond))
	}
	require.NotZero(t, r.lookup(kA).tpsSince, "a change of level")
	est, _ = r.Estimate(kA)
	_, ok = est.Input(150)
	assert.False(t, ok, "classes forgotten at the change")
	assert.InDelta(t, 180, est.TPSP50, 180*0.05, "the new level")
}

// TestInputClassFollowsDrift checks that a warm prompt-size class gives a
// call its shape and the key's level its speed: when every class slows by
// 2.5% a sample, the class's TPS follows the key's level (within 15% of the
// truth after 40 samples of drift), where the class's own EWMA, whose
// half-life is in seconds, still remembers the speed from before.
func TestInputClassFollowsDrift(t *testing.T) {
	r := New(measure.Options{})
	now := t0
	f := 1.0
	for i := range 80 {
		now = now.Add(500 * time.Millisecond)
		if i >= 40 {
			f *= 0.975
		}
		if i%2 == 0 {
			r.RecordAt(now, kA, promptSample(now, 150, 900*f, 160*time.Millisecond))
		} else {
			r.RecordAt(now, kA, promptSample(now, 6000, 200*f, 350*time.Millisecond))
		}
	}
	est, ok := r.Estimate(kA)
	require.True(t, ok)
	short, ok := est.Input(150)
	require.True(t, ok)
	long, ok := est.Input(6000)
	require.True(t, ok)
	assert.InEpsilon(t, 900*f, short.TPS, 0.15, "short prompts now")
	assert.InEpsilon(t, 200*f, long.TPS, 0.15, "long prompts now")
	assert.InDelta(t, 4.5, short.TPS/long.TPS, 0.2, "the classes' shape")
	own, ok := r.lookup(kA).inputs[InputClass(150)].tps.Value()
	require.True(t, ok)
	assert.Greater(t, own, 1.3*900*f, "the class's own EWMA lags the drift")
}

// TestInputClassAdd checks what one sample does to its class: the class's
// EWMAs take the key's half-life, a sample without TPS (or TTFT) leaves
// that figure alone, the sample count stops at 1<<30 (the most a state file
// holds) and the newest time only moves forward.
func TestInputClassAdd(t *testing.T) {
	const c = 3
	newEntry := func() *entry {
		e := &entry{}
		e.gapE.HalfLife, e.inU.HalfLife = 7*time.Second, 7*time.Second
		return e
	}
	t.Run("half-life", func(t *testing.T) {
		e := newEntry()
		e.addInput(t0, c, 500, 0.2)
		assert.Equal(t, 7*time.Second, e.inputs[c].tps.HalfLife)
		assert.Equal(t, 7*time.Second, e.inputs[c].ttft.HalfLife)
	})
	for _, s := range []struct {
		name       string
		u, ttft    float64
		tps, first bool
	}{
		{"both", 500, 0.2, true, true},
		{"no TPS", 0, 0.2, false, true},
		{"no TTFT", 500, 0, true, false},
	} {
		t.Run(s.name, func(t *testing.T) {
			e := newEntry()
			e.addInput(t0, c, s.u, s.ttft)
			_, ok := e.inputs[c].tps.Value()
			assert.Equal(t, s.tps, ok, "class TPS")
			_, ok = e.inU.Value()
			assert.Equal(t, s.tps, ok, "aggregate unloaded TPS")
			_, ok = e.inputs[c].ttft.Value()
			assert.Equal(t, s.first, ok, "class TTFT")
			assert.Equal(t, int32(1), e.inputs[c].n)
		})
	}
	for _, n := range []struct{ from, want int32 }{{1<<30 - 1, 1 << 30}, {1 << 30, 1 << 30}} {
		t.Run(fmt.Sprintf("count from %d", n.from), func(t *testing.T) {
			e := newEntry()
			e.inputs[c].n = n.from
			e.addInput(t0, c, 500, 0.2)
			assert.Equal(t, n.want, e.inputs[c].n)
		})
	}
	t.Run("newest", func(t *testing.T) {
		e := newEntry()
		e.addInput(t0.Add(time.Second), c, 500, 0.2)
		e.addInput(t0, c, 500, 0.2)
		assert.Equal(t, t0.Add(time.Second).UnixNano(), e.inputs[c].newest)
	})
}

// TestInputClassNorm checks the factor that maps a class's sample to the
// key's level: the aggregate unloaded TPS over the class's once the class
// has minSamples samples (exactly that many is enough), else 1.
func TestInputClassNorm(t *testing.T) {
	const c = 3
	e := &entry{}
	for range 4 {
		e.addInput(t0, c, 200, 0)
		e.addInput(t0, c+1, 600, 0)
	}
	for _, s := range []struct {
		min  int
		want float64
	}{{3, 2}, {4, 2}, {5, 1}} {
		t.Run(fmt.Sprintf("min %d", s.min), func(t *testing.T) {
			assert.InDelta(t, s.want, e.classNorm(c, s.min), 1e-12)
		})
	}
	assert.InDelta(t, 1, e.classNorm(c+2, 0), 1e-12, "a class with no TPS")
}

// TestInputClassFill checks the table an Estimate publishes: a class's TPS
// is its ratio to the key's unloaded EWMA times the key's level, or its
// unloaded TPS scaled to the load reference (1/(1 + ref/K)) when the key
// has no level, or as it is without a load model; its TTFT is a ratio to
// the mean over classes. A class is warm from minSamples samples and until
// its newest sample is a window old.
func TestInputClassFill(t *testing.T) {
	const window = int64(time.Minute)
	e := &entry{}
	for range 4 {
		e.addInput(t0, 3, 300, 0.1) // twice as slow as class 4, a third of its TTFT
		e.addInput(t0, 4, 600, 0.3)
	}
	now := t0.UnixNano()
	for _, c := range []struct {
		name            string
		now             int64
		min             int
		k, ref, level   float64
		tps3, tps4      float64
		warm3, anyTable bool
	}{
		{"at the key's level", now, 4, 2, 1, 900, 600, 1200, true, true},
		{"no level: at the load reference", now, 4, 2, 1, 0, 200, 400, true, true},
		{"no level, no load model", now, 4, 0, 1, 0, 300, 600, true, true},
		{"exactly minSamples", now, 4, 0, 0, 0, 300, 600, true, true},
		{"too few samples", now, 5, 0, 0, 450, 0, 0, false, false},
		{"newest just within the window", now + window - 1, 4, 0, 0, 450, 300, 600, true, true},
		{"newest a window old", now + window, 4, 0, 0, 450, 0, 0, false, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			var tab inputTable
			any := e.fillInputs(&tab, c.now, c.min, window, c.k, c.ref, c.level)
			assert.Equal(t, c.anyTable, any)
			assert.InDelta(t, c.tps3, tab.TPS[3], 1e-9)
			assert.InDelta(t, c.tps4, tab.TPS[4], 1e-9)
			if !c.warm3 {
				assert.Zero(t, tab.TTFT[3])
				assert.Zero(t, tab.N[3])
				return
			}
			assert.InDelta(t, 0.5, tab.TTFT[3], 1e-9, "against the mean TTFT 0.2 s")
			assert.InDelta(t, 1.5, tab.TTFT[4], 1e-9)
			assert.InDelta(t, 0.1, tab.Mean[3], 1e-9)
			assert.Equal(t, int32(4), tab.N[3])
			assert.Zero(t, tab.TPS[2], "a class with no samples")
		})
	}
}

// TestInputClassZeroFigures checks the guards against EWMAs at 0 or below,
// which RestoreState accepts (it checks an EWMA's weight, not its sum): a
// class or aggregate TPS at 0 gives the norm 1, a key whose aggregate is 0
// scales classes by the load model instead of dividing by it, a class whose
// figures are 0 is not warm, and a mean TTFT of 0 gives no TTFT ratio.
func TestInputClassZeroFigures(t *testing.T) {
	at := func(v float64) EWMA { return EWMA{sum: v, weight: 1, last: t0.UnixNano(), ok: true} }
	class := func(tps, ttft float64, n int32) inputClass {
		return inputClass{tps: at(tps), ttft: at(ttft), n: n, newest: t0.UnixNano()}
	}
	now, window := t0.UnixNano(), int64(time.Minute)
	t.Run("norm", func(t *testing.T) {
		e := &entry{inU: at(400)}
		e.inputs[3] = class(0, 0.1, 4)
		e.inputs[4] = class(200, 0.1, 4)
		assert.Equal(t, 1.0, e.classNorm(3, 1), "class TPS 0")
		assert.Equal(t, 2.0, e.classNorm(4, 1))
		e.inU = at(0)
		assert.Equal(t, 1.0, e.classNorm(4, 1), "aggregate 0")
	})
	t.Run("aggregate 0", func(t *testing.T) {
		e := &entry{inU: at(0)}
		e.inputs[4] = class(600, 0.1, 4)
		var tab inputTable
		require.True(t, e.fillInputs(&tab, now, 4, window, 0, 0, 900))
		assert.Equal(t, 600.0, tab.TPS[4], "unscaled, not level/0")
	})
	t.Run("class figures 0", func(t *testing.T) {
		e := &entry{inU: at(400)}
		e.inputs[3] = class(0, 0, 4)
		e.inputs[4] = class(600, 0.3, 2) // too few samples, but in the mean TTFT
		var tab inputTable
		assert.False(t, e.fillInputs(&tab, now, 4, window, 0, 0, 900))
		assert.Zero(t, tab.TTFT[3])
		assert.Zero(t, tab.Mean[3])
	})
	t.Run("mean TTFT 0", func(t *testing.T) {
		e := &entry{inU: at(400)}
		e.inputs[3] = class(400, 0.1, 4)
		e.inputs[4] = class(400, -0.1, 2)
		var tab inputTable
		assert.True(t, e.fillInputs(&tab, now, 4, window, 0, 0, 0))
		assert.Zero(t, tab.TTFT[3], "no ratio to a mean of 0")
		assert.Zero(t, tab.Mean[3])
	})
}
