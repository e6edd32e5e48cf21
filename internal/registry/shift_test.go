package registry

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestShiftDetects checks the CUSUM's reaction in samples: a fall to a third
// (or a rise to three times) is flagged on the second sample after the change
// and the new level is the changed samples' geometric mean; a halving takes at
// most four; one outlier, however far, is never flagged.
func TestShiftDetects(t *testing.T) {
	warm := func() *shift {
		var s shift
		for range 100 {
			if s.add(1000) {
				t.Fatal("a steady series changed")
			}
		}
		return &s
	}
	for _, tc := range []struct {
		factor float64
		within int
	}{{1.0 / 3, 2}, {3, 2}, {0.1, 2}, {10, 2}, {0.5, 4}, {2, 4}} {
		s := warm()
		got := 0
		for i := 1; i <= 10; i++ {
			if s.add(1000 * tc.factor) {
				got = i
				if math.Abs(math.Exp(s.level)/(1000*tc.factor)-1) > 1e-9 {
					t.Errorf("factor %v: level %v", tc.factor, math.Exp(s.level))
				}
				break
			}
		}
		if got == 0 || got > tc.within {
			t.Errorf("factor %v: flagged after %d samples, want 1..%d", tc.factor, got, tc.within)
		}
	}
	for _, f := range []float64{0.01, 100} {
		s := warm()
		if s.add(1000 * f) {
			t.Errorf("one outlier at %v× flagged", f)
		}
		for range 20 {
			if s.add(1000) {
				t.Errorf("the level after one outlier at %v× flagged", f)
			}
		}
	}
}

// TestShiftQuietUnderNoise checks the false-alarm rate on log-normal noise
// of spread 0.2 and 0.3: none in 10,000 samples at 0.2, at most 2 at 0.3, at most 10 at 0.6 and 1
// (the threshold follows the spread).
func TestShiftQuietUnderNoise(t *testing.T) {
	for _, tc := range []struct {
		sigma float64
		max   int
	}{{0.2, 0}, {0.3, 2}, {0.6, 10}, {1, 10}} {
		rng := rand.New(rand.NewPCG(1, 2))
		var s shift
		n := 0
		for range 10000 {
			if s.add(1000 * math.Exp(tc.sigma*rng.NormFloat64())) {
				n++
			}
		}
		if n > tc.max {
			t.Errorf("sigma %v: %d changes in 10000 samples, want <= %d", tc.sigma, n, tc.max)
		}
		t.Logf("sigma %v: %d false changes in 10000 samples", tc.sigma, n)
	}
}

// TestShiftSpreadAfterChange checks that the samples that make a change are
// not learned as noise: after a doubling, then a recovery, the detector's
// spread is the series' own (sigma 0.05), not inflated by the changes'
// samples, and the rebased p95 bounds a window that holds both levels (p95
// twice p50) to a lognormal's at that spread.
func TestShiftSpreadAfterChange(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	var s shift
	feed := func(level float64, n int) (changed bool) {
		for range n {
			if s.add(level * math.Exp(0.05*rng.NormFloat64())) {
				changed = true
			}
		}
		return changed
	}
	feed(0.2, 50)
	if !feed(0.4, 10) || !feed(0.2, 10) {
		t.Fatal("a doubling and its end were not both detected")
	}
	if sigma := math.Sqrt(s.vari); sigma > 0.1 {
		t.Errorf("spread after the changes: sigma %.3f, want about 0.05", sigma)
	}
	p50, p95, _ := s.rebase(0.2, 0.4)
	if limit := p50 * math.Exp(1.645*0.1); p95 > limit {
		t.Errorf("rebased p95 %.3f over a window twice as wide as p50: want at most %.3f", p95, limit)
	}
}

// TestShiftPending checks what a change looks like before it is confirmed:
// after the first sample at half the level the detector shows it pending,
// at the samples' level, through the three more it takes to fire, and then
// nothing is pending. A sample within the allowance shows nothing, and one
// outlier's pending change is gone once the next samples are back at the
// level.
func TestShiftPending(t *testing.T) {
	warm := func() *shift {
		var s shift
		for range 100 {
			s.add(1000)
		}
		return &s
	}
	s := warm()
	if p := s.pending(); p != 0 {
		t.Fatalf("steady: pending %v", p)
	}
	s.add(1100)
	if p := s.pending(); p != 0 {
		t.Fatalf("within the allowance: pending %v", p)
	}
	s = warm()
	for i := range 3 {
		if s.add(500) {
			t.Fatalf("sample %d fired", i+1)
		}
		if p := s.pending(); math.Abs(p/500-1) > 1e-9 {
			t.Fatalf("after %d samples at half: pending %v, want 500", i+1, p)
		}
	}
	if !s.add(500) {
		t.Fatal("the fourth sample at half did not fire")
	}
	if p := s.pending(); p != 0 {
		t.Fatalf("after the change: pending %v", p)
	}
	s = warm()
	s.add(100)
	if p := s.pending(); math.Abs(p/100-1) > 1e-9 {
		t.Fatalf("one outlier at a tenth: pending %v, want 100", p)
	}
	for range 3 {
		s.add(1000)
	}
	if p := s.pending(); p != 0 {
		t.Fatalf("after the outlier: pending %v", p)
	}
}

// TestShiftFollowsDrift checks the drift correction: on a series that falls
// by 2.5% a sample (log-normal noise of spread 0.1), the level where it is
// now (shift.now) is on average within 12% of the truth over the last 50
// samples, less than half as far as the level itself (which lags the
// drift by its memory until the CUSUM flags the lag as a change); on a
// steady series the correction is 0 in at least 98% of samples (it counts
// only beyond three standard deviations of what noise gives); and a change of level
// restarts the correction at 0, so that a step's own samples are not
// extrapolated past it.
func TestShiftFollowsDrift(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 28))
	var s shift
	x := math.Log(1000.0)
	var offNow, offLevel float64
	for i := range 120 {
		if i >= 40 {
			x -= 0.025
		}
		s.add(math.Exp(x + 0.1*rng.NormFloat64()))
		if i >= 70 {
			offNow += math.Abs(s.now()-x) / 50
			offLevel += math.Abs(s.level-x) / 50
		}
	}
	if offNow > math.Log(1.12) {
		t.Errorf("drifting: level now %.3f log units from the truth on average, want within 12%%", offNow)
	}
	if offLevel < 2*offNow {
		t.Errorf("drifting: the level lags %.3f on average, the corrected level %.3f: less than half", offLevel, offNow)
	}
	var q shift
	corrected := 0
	for i := range 2000 {
		q.add(math.Exp(math.Log(500) + 0.1*rng.NormFloat64()))
		if i >= 100 && q.drift() != 0 {
			corrected++
		}
	}
	if corrected > 38 {
		t.Errorf("steady: corrected for a drift in %d of 1900 samples, want at most 2%%", corrected)
	}
	if d := math.Abs(q.now() - math.Log(500)); d > 0.1 {
		t.Errorf("steady: level now %.3f log units off", d)
	}
	for i := 0; i < 10 && !q.add(100); i++ {
	}
	if q.slow != q.level {
		t.Errorf("after a change: slow %v, level %v; the correction should restart at 0", q.slow, q.level)
	}
	if got := math.Exp(q.now()); math.Abs(got/100-1) > 0.05 {
		t.Errorf("after a change to 100: level now %v", got)
	}
}

// TestShiftIgnoresBadValues checks that a value that is not positive and
// finite leaves the detector as it was.
func TestShiftIgnoresBadValues(t *testing.T) {
	var s shift
	for _, v := range []float64{0, -1, math.Inf(1), math.Inf(-1), math.NaN()} {
		if s.add(v) || s != (shift{}) {
			t.Fatalf("add(%v) changed the detector: %+v", v, s)
		}
	}
	s.add(100)
	want := s
	for _, v := range []float64{0, math.Inf(1)} {
		if s.add(v) || s != want {
			t.Fatalf("add(%v) after a sample changed the detector", v)
		}
	}
}

// TestShiftCalmed checks that a state file saves the spreads kept from
// before changes exactly when one of them differs from the spread.
func TestShiftCalmed(t *testing.T) {
	s := shift{vari: 0.04, upVari: 0.04, downVari: 0.04, calm: 0.04}
	if s.calmed() {
		t.Fatal("every spread equal: nothing to save")
	}
	for _, set := range []func(*shift){
		func(s *shift) { s.upVari = 0.09 },
		func(s *shift) { s.downVari = 0.09 },
		func(s *shift) { s.calm = 0.09 },
	} {
		c := s
		set(&c)
		if !c.calmed() {
			t.Fatalf("%+v: a kept spread differs, yet calmed is false", c)
		}
	}
}

// TestShiftRebase checks the figures published after a change: the level
// as p50 and EWMA, and p95 at the window's ratio of p95 to p50, at most a
// lognormal's at the spread from before the change, or the level alone
// when the window has no figures.
func TestShiftRebase(t *testing.T) {
	s := shift{level: math.Log(100), slow: math.Log(100), calm: 0.09, vari: 0.09, nv: 2 * shiftMemory, n: shiftMemory}
	lognormal := 100 * math.Exp(1.645*0.3) // 163.8
	for _, c := range []struct {
		p50, p95, want float64
	}{
		{100, 150, 150},       // the window's ratio
		{100, 200, lognormal}, // capped at the lognormal's
		{0, 150, 100},         // no p50: the level alone
		{100, 0, 100},         // no p95: the level alone
		{0, 0, 100},
	} {
		p50, p95, ewma := s.rebase(c.p50, c.p95)
		if math.Abs(p50-100) > 1e-9 || math.Abs(ewma-100) > 1e-9 || math.Abs(p95-c.want) > 1e-9 {
			t.Errorf("rebase(%v, %v) = %v, %v, %v; want 100, %v, 100", c.p50, c.p95, p50, p95, ewma, c.want)
		}
	}
}

// TestShiftLearnsSpread checks when the spread is learnt: the first sample
// sets the level and the next shiftMemory measure the spread, so after
// shiftMemory+1 steady samples (and not one before) drifted reports the
// level, a sample at a third is pending at once and the second one fires;
// one sample earlier, the sample at a third is learnt as spread.
func TestShiftLearnsSpread(t *testing.T) {
	for _, c := range []struct {
		name   string
		warm   int
		learnt bool
	}{
		{"one short", shiftMemory, false},
		{"learnt", shiftMemory + 1, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			var s shift
			for range c.warm {
				require.False(t, s.add(1000))
			}
			level, drifting, learnt := s.drifted()
			assert.Equal(t, c.learnt, learnt)
			assert.False(t, drifting)
			require.False(t, s.add(1000.0/3))
			if !c.learnt {
				assert.Zero(t, level)
				assert.Zero(t, s.pending(), "a sample learnt as spread is not pending")
				return
			}
			assert.InDelta(t, 1000, level, 1e-9)
			assert.InDelta(t, 1000.0/3, s.pending(), 1e-9)
			assert.True(t, s.add(1000.0/3), "the second sample at a third")
		})
	}
}

// TestShiftKeepsSpreadAtDeparture checks upVari and downVari against their
// definition on a noisy series with planted outliers each way: each is the
// spread at the sample where its statistic left 0, unchanged while the
// statistic stays 0 or grows.
func TestShiftKeepsSpreadAtDeparture(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	var s shift
	var ups, downs int
	for i := range 400 {
		v := 1000 * math.Exp(0.05*rng.NormFloat64())
		switch i % 20 {
		case 10:
			v *= 1.5
		case 15:
			v /= 1.5
		}
		before := s
		require.False(t, s.add(v), "sample %d fired", i)
		if before.up == 0 && s.up > 0 {
			ups++
			require.Equal(t, before.vari, s.upVari, "sample %d: up left 0", i)
		} else {
			require.Equal(t, before.upVari, s.upVari, "sample %d: up did not leave 0", i)
		}
		if before.down == 0 && s.down > 0 {
			downs++
			require.Equal(t, before.vari, s.downVari, "sample %d: down left 0", i)
		} else {
			require.Equal(t, before.downVari, s.downVari, "sample %d: down did not leave 0", i)
		}
	}
	require.Positive(t, ups)
	require.Positive(t, downs)
}

// TestShiftCusum checks the CUSUM step: the statistic is floored at 0 and
// counts the samples since it was last 0, so a step that brings it to
// exactly 0 restarts the count.
func TestShiftCusum(t *testing.T) {
	for _, c := range []struct {
		name  string
		c     float64
		n     int32
		step  float64
		wantC float64
		wantN int32
	}{
		{"rises", 0.5, 3, 0.25, 0.75, 4},
		{"to exactly 0", 0.5, 3, -0.5, 0, 0},
		{"below 0", 0.5, 3, -1, 0, 0},
		{"from 0", 0, 0, 0.5, 0.5, 1},
		{"count saturates", 1, math.MaxInt32, 0.5, 1.5, math.MaxInt32},
	} {
		t.Run(c.name, func(t *testing.T) {
			gotC, gotN := cusum(c.c, c.n, c.step)
			assert.Equal(t, c.wantC, gotC)
			assert.Equal(t, c.wantN, gotN)
		})
	}
}

// TestShiftDriftThreshold checks the drift correction's threshold at the
// boundary, with figures exact in binary: a lag of shiftDriftZ ×
// shiftDriftNoise spreads (0.375 at a spread of 1) is still noise, and any
// more is a drift.
func TestShiftDriftThreshold(t *testing.T) {
	for _, c := range []struct {
		name string
		lag  float64
		want float64
	}{
		{"within", 0.25, 0},
		{"at the threshold", 0.375, 0},
		{"beyond", 0.5, 0.5},
		{"beyond, falling", -0.5, -0.5},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := shift{level: c.lag, vari: 1, n: shiftMemory, nv: 2 * shiftMemory}
			assert.Equal(t, c.want, s.drift())
			level, drifting, learnt := s.drifted()
			assert.True(t, learnt)
			assert.Equal(t, c.want != 0, drifting)
			assert.InDelta(t, math.Exp(c.lag+c.want), level, 1e-12)
		})
	}
}

// TestShiftPendingAllowance checks pending against Estimate.TPSPending's
// contract: a change is pending once its statistic holds more than one
// allowance (0.25 at a small spread), not at exactly one.
func TestShiftPendingAllowance(t *testing.T) {
	for _, c := range []struct {
		name     string
		up, down float64
		want     float64
	}{
		{"below", 0.125, 0, 0},
		{"exactly one allowance", 0.25, 0, 0},
		{"beyond", 0.375, 0, 500},
		{"beyond, down", 0, 0.375, 500},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := shift{vari: 0.01, n: shiftMemory, nv: 2 * shiftMemory, up: c.up, down: c.down, next: 1}
			s.ring[0] = math.Log(500)
			if c.up > 0 {
				s.upN = 1
			}
			if c.down > 0 {
				s.downN = 1
			}
			assert.InDelta(t, c.want, s.pending(), 1e-9)
		})
	}
}
