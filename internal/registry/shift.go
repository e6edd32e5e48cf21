package registry

import "math"

// Change detection. A deployment that slows down (or recovers) is a change of
// level, not noise: a two-sided CUSUM on the logarithm of each successful
// sample (TPS, TTFT) detects it within a few samples of the change, and the
// level is then the geometric mean of the samples that made the change (then
// of up to shiftMemory samples since). Until the window holds only samples
// taken after the change, the Estimate's p50 and EWMA are that level (the
// p95 keeps the window's spread around it), so the Estimate describes the
// new level at once instead of after minutes of ageing, in both directions.
// (Rebasing only on falls protects the sim's load scenario, whose fast
// deployment slows with concurrency, but halves the gain on recovery:
// docs/ROUTING.md gives both figures.) The windows
// themselves are untouched: Stats, exports and snapshots still see every
// sample. docs/ROUTING.md gives the simulator's
// figures behind the constants.
//
// The allowance and threshold follow the series' own spread sigma (the
// running standard deviation of log values around the level; no change is
// reported before shiftMemory samples have measured it): allowance k = max(0.25, sigma/2), threshold h = max(1.5,
// 3.5 sigma²/k), which keeps the false-alarm run length near e^7 ≈ 1000
// samples (Siegmund's approximation exp(2kh/sigma²)) on noisier series.
// For TPS at sigma <= 0.3 that is k = 0.25, h = 1.5: two samples at a
// third of the level (or three times it) cross it, a halving takes four.
// One sample's deviation is capped at 0.8h, so one outlier, however far,
// never makes a change by itself. The samples that make a change are not
// noise: when a change fires, sigma goes back to what it was before they
// arrived (the samples were learned while the statistic rose), and the
// rebased p95 keeps the window's spread only up to that sigma's (a window
// holding both levels is wider than either), so that a deployment that
// recovers under a p95 TTFT limit complies as soon as the recovery is
// detected, not once the old level's samples leave the window.
//
// Drift. A level that averages its last shiftMemory samples lags a steady
// drift by about as many samples' worth of it, and the CUSUM flags the lag
// only once it exceeds the allowance (28%): a leader slowing by 2.5% a call
// was ranked 30–70% above its speed when it crossed the runner-up
// (docs/ROUTING.md, "Random fleets"). So the level is smoothed once more
// (slow), and the level where the series is now is the level plus its lag
// behind slow (Brown's double smoothing: under a steady drift the level
// lags the series by as much as slow lags the level), counted only beyond
// three standard deviations of what noise alone gives, so that a steady
// series keeps the level's full memory (without that threshold the bundled
// outliers and noisy scenarios fell below their floors); a change of level
// restarts the correction at 0, so that a step's own samples are not
// extrapolated past it. The published figures after a change are that
// level, and while a drift is seen or once a change has been, the TPS EWMA
// is at most it (registry.go): a memory in calls, as well as the EWMA's in
// seconds. The CUSUM still runs on the level itself, so the detector's
// reaction to steps is what it was.
const (
	shiftSlack  = 0.25 // least allowance per sample, natural log units (±28%)
	shiftLimit  = 1.5  // least decision threshold
	shiftRunLen = 3.5  // threshold × allowance / sigma²: ln(run length)/2
	// shiftMemory is the most samples the running level averages, so that it
	// follows slow drifts the CUSUM does not flag.
	shiftMemory = 16
	// shiftRing is how many of the latest samples are kept to form the new
	// level from.
	shiftRing = 8
	// shiftDriftNoise is the standard deviation of level − slow over the
	// spread on a steady series at shiftMemory (0.123, by simulation), and
	// shiftDriftZ how many of them make a drift: noise alone passes 3 in
	// about 0.3% of samples.
	shiftDriftNoise = 0.125
	shiftDriftZ     = 3
)

// shift is a two-sided CUSUM change detector over log values. It is not safe
// for concurrent use (the entry's lock guards it).
type shift struct {
	level      float64 // log level of the current regime
	slow       float64 // level smoothed once more: level − slow is its lag behind a drift
	vari       float64 // running variance of log values around the level
	n          int32   // samples in the level, at most shiftMemory
	nv         int32   // samples in vari, at most 2*shiftMemory
	up, down   float64 // CUSUM statistics, >= 0
	upN, downN int32   // samples since each statistic was last 0
	// The spread when each statistic last left 0, and calm, the one from
	// before the last change began: vari has learned the change's own
	// samples as noise, so rebase bounds the window's spread by calm.
	upVari, downVari, calm float64
	ring                   [shiftRing]float64
	next                   int32 // ring position of the next sample
}

// add takes one positive, finite value and reports whether it completes a
// change of level; the new level is then the geometric mean of the samples
// of the change (those since the statistic that fired was last 0, at most
// shiftRing).
func (s *shift) add(v float64) bool {
	if !(v > 0) || math.IsInf(v, 0) {
		return false
	}
	x := math.Log(v)
	s.ring[s.next] = x
	s.next = (s.next + 1) % shiftRing
	if s.n == 0 {
		s.level, s.slow, s.n = x, x, 1
		return false
	}
	if s.nv < shiftMemory { // learning the spread: no change yet
		s.learn(x, x-s.level)
		return false
	}
	k, h := s.limits()
	d := min(max(x-s.level, -0.8*h), 0.8*h)
	up0, down0 := s.up == 0, s.down == 0
	s.up, s.upN = cusum(s.up, s.upN, d-k)
	s.down, s.downN = cusum(s.down, s.downN, -d-k)
	if up0 && s.up > 0 {
		s.upVari = s.vari
	}
	if down0 && s.down > 0 {
		s.downVari = s.vari
	}
	var n int
	switch {
	case s.down > h:
		n = int(s.downN)
		s.calm, s.vari = s.downVari, s.downVari
	case s.up > h:
		n = int(s.upN)
		s.calm, s.vari = s.upVari, s.upVari
	default:
		s.learn(x, d)
		return false
	}
	n = min(n, shiftRing)
	s.level, s.n = s.recent(n), int32(n)
	s.slow = s.level
	s.up, s.upN, s.down, s.downN = 0, 0, 0, 0
	return true
}

// limits returns the allowance and the threshold at the learnt spread.
func (s *shift) limits() (k, h float64) {
	sigma := math.Sqrt(s.vari)
	k = max(shiftSlack, sigma/2)
	return k, max(shiftLimit, shiftRunLen*sigma*sigma/k)
}

// pending returns the level of the change the statistics have begun to
// see and not yet confirmed (Estimate.TPSPending): the geometric mean of the
// samples since the statistic that holds more than an allowance (the
// larger if both do) last left 0, of up to shiftRing; 0 when neither does.
func (s *shift) pending() float64 {
	if s.nv < shiftMemory {
		return 0
	}
	k, _ := s.limits()
	c, n := s.up, s.upN
	if s.down > c {
		c, n = s.down, s.downN
	}
	if c <= k || n == 0 { // more than an allowance (Estimate.TPSPending)
		return 0
	}
	return math.Exp(s.recent(min(int(n), shiftRing)))
}

// recent returns the mean of the latest n log values (1 <= n <= shiftRing).
func (s *shift) recent(n int) float64 {
	sum := 0.0
	for i := range n {
		sum += s.ring[(int(s.next)-n+i+shiftRing)%shiftRing]
	}
	return sum / float64(n)
}

// calmed reports whether the spreads kept from before changes say more
// than vari does (a state file then saves them).
func (s *shift) calmed() bool {
	return s.upVari != s.vari || s.downVari != s.vari || s.calm != s.vari
}

// rebase returns the level where the series is now (now) as p50 and EWMA,
// and p95 at the window's ratio of p95 to p50 around it, at most a
// lognormal's at the spread from before the change (the level alone when
// the window has none).
func (s *shift) rebase(p50, p95 float64) (np50, np95, ewma float64) {
	l := math.Exp(s.now())
	np95 = l
	if p50 > 0 && p95 > 0 {
		np95 = l * min(p95/p50, math.Exp(1.645*math.Sqrt(s.calm)))
	}
	return l, np95, l
}

// learn moves the level, its slow smoothing and the spread by x, at
// deviation d from the level.
func (s *shift) learn(x, d float64) {
	s.nv = min(s.nv+1, 2*shiftMemory)
	s.vari += (d*d - s.vari) / float64(s.nv)
	s.n = min(s.n+1, shiftMemory)
	s.level += (x - s.level) / float64(s.n)
	s.slow += (s.level - s.slow) / float64(s.n)
}

// now returns the log level where it is now: the level plus its lag behind
// a drift (drift).
func (s *shift) now() float64 { return s.level + s.drift() }

// drift returns the level's lag behind a drift, in log units: how far it
// lags slow (Brown's double smoothing: under a steady drift the level lags
// the series by as much as slow lags the level), or 0 while that is within
// shiftDriftZ standard deviations of what noise alone gives (about
// shiftDriftNoise times the spread), so that on a steady series the level
// keeps its full memory.
func (s *shift) drift() float64 {
	l := s.level - s.slow
	if l*l <= shiftDriftZ*shiftDriftZ*shiftDriftNoise*shiftDriftNoise*s.vari {
		return 0
	}
	return l
}

// cusum adds step to a CUSUM statistic floored at 0, counting the samples
// since it was last 0.
func cusum(c float64, n int32, step float64) (float64, int32) {
	c += step
	if c <= 0 {
		return 0, 0
	}
	return c, min(n, math.MaxInt32-1) + 1 // a state file holds up to MaxInt32
}

// drifted returns the level where the series is now (now), in the series'
// units, whether a drift is seen (drift is not 0), and whether the spread
// is learnt: before that there is no level to publish and no drift.
func (s *shift) drifted() (level float64, drifting, learnt bool) {
	if s.nv < shiftMemory {
		return 0, false, false
	}
	d := s.drift()
	return math.Exp(s.level + d), d != 0, true
}
