package registry

import (
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
