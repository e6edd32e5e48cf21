package registry

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestEWMA(t *testing.T) {
	t.Run("empty", func(t *testing.T) {
		var e EWMA
		_, ok := e.Value()
		assert.False(t, ok)
	})
	t.Run("first_value", func(t *testing.T) {
		var e EWMA
		e.Update(t0, 3)
		v, ok := e.Value()
		require.True(t, ok)
		assert.Equal(t, 3.0, v)
	})
	tests := []struct {
		name  string
		steps []struct {
			at time.Duration
			v  float64
		}
		want float64
	}{
		{"same_instant_is_plain_mean", []struct {
			at time.Duration
			v  float64
		}{{0, 1}, {0, 2}, {0, 3}}, 2},
		{"one_half_life_later", []struct {
			at time.Duration
			v  float64
		}{{0, 0}, {defaultHalfLife, 3}}, 2}, // weights 0.5 and 1
		{"long_silence_forgets", []struct {
			at time.Duration
			v  float64
		}{{0, 100}, {time.Hour, 1}}, 1},
		{"out_of_order_weighted_by_age", []struct {
			at time.Duration
			v  float64
		}{{defaultHalfLife, 3}, {0, 0}}, 2},
		{"nan_and_inf_ignored", []struct {
			at time.Duration
			v  float64
		}{{0, 5}, {1, math.NaN()}, {2, math.Inf(1)}}, 5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var e EWMA
			for _, s := range tt.steps {
				e.Update(t0.Add(s.at), s.v)
			}
			v, ok := e.Value()
			require.True(t, ok)
			assert.InDelta(t, tt.want, v, 1e-9)
		})
	}
	t.Run("irregular_sampling_converges_by_time", func(t *testing.T) {
		// A step from 1 to 2: after one half-life of steady samples the
		// average is half-way, whatever the sample rate.
		for _, every := range []time.Duration{10 * time.Millisecond, time.Second} {
			e := EWMA{HalfLife: 10 * time.Second}
			now := t0
			for ; now.Before(t0.Add(10 * time.Minute)); now = now.Add(every) {
				e.Update(now, 1)
			}
			end := now.Add(10 * time.Second)
			for ; now.Before(end); now = now.Add(every) {
				e.Update(now, 2)
			}
			v, _ := e.Value()
			assert.InDelta(t, 1.5, v, 0.05, "every=%v", every)
		}
	})
	t.Run("reset_keeps_half_life", func(t *testing.T) {
		e := EWMA{HalfLife: time.Second}
		e.Update(t0, 1)
		e.Reset()
		_, ok := e.Value()
		assert.False(t, ok)
		assert.Equal(t, time.Second, e.HalfLife)
	})
}

func TestPeakEWMA(t *testing.T) {
	var p PeakEWMA
	for i := range 100 {
		p.Update(t0.Add(time.Duration(i)*time.Second), 1)
	}
	now := t0.Add(100 * time.Second)
	p.Update(now, 10)
	v, _ := p.Value()
	assert.Equal(t, 10.0, v, "rises at once")

	p.Update(now.Add(time.Second), 1)
	v, _ = p.Value()
	assert.Greater(t, v, 5.0, "decays slowly")

	for i := 2; i < 300; i++ {
		p.Update(now.Add(time.Duration(i)*time.Second), 1)
	}
	v, _ = p.Value()
	assert.InDelta(t, 1, v, 0.01, "recovers after many half-lives")

	var plain EWMA
	plain.Update(t0, 1)
	plain.Update(t0.Add(time.Second), 10)
	pv, _ := plain.Value()
	assert.Less(t, pv, 10.0, "a plain EWMA does not jump")
}

func TestCombineEWMA(t *testing.T) {
	// The combination of EWMAs over disjoint updates equals one EWMA over
	// all of them.
	var a, b, all EWMA
	for i := range 100 {
		at := t0.Add(time.Duration(i) * 700 * time.Millisecond)
		v := float64(i % 7)
		if i%3 == 0 {
			a.Update(at, v)
		} else {
			b.Update(at, v)
		}
		all.Update(at, v)
	}
	got, ok := combineEWMA(&a, &b, nil)
	require.True(t, ok)
	want, _ := all.Value()
	assert.InDelta(t, want, got, 1e-9)
	_, ok = combineEWMA(nil, &EWMA{})
	assert.False(t, ok)
}
