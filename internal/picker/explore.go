package picker

import (
	"math"
	"sync/atomic"
	"time"

	"github.com/tpsroute/tpsroute/internal/registry"
	"github.com/tpsroute/tpsroute/route"
)

// Exploration re-measures deployments other than the leader with the
// probability that they would now lead, as Thompson sampling would: each
// candidate's level (log TPS, log TTFT, or its distance from the SLO) is
// uncertain by its per-sample spread over its sample count, plus a drift
// that grows with the time since its newest sample, and a pick explores a
// candidate with the chance that it beats the leader under that
// uncertainty. A clearly worse deployment that was measured recently is
// thus almost never explored; a near-equal or long-unseen one is, and
// exploration follows the traffic: a probability per pick.
//
// A deployment that led (or came close) within peakMemory and has since
// fallen behind is a contender: with probability min(1, age/revertTime),
// age being the time since its newest sample, it is judged at its best
// remembered level instead, since a slowdown often ends. At r picks per
// second a demoted contender is then re-measured about every
// sqrt(2·revertTime/r) seconds (10 s at 1/s, 3 s at 10/s, 1 s at 100/s),
// which is what lets a recovered leader regain its share within seconds;
// and a contender whose newest sample began a change of level back toward
// its best (registry.Estimate.TPSPending: the change detector's statistic
// toward it holds more than an allowance, and the samples point at least
// halfway back) is re-measured by the next pick that finds it with no call
// in flight, so the samples that confirm or refute a recovery (a 2× one
// needs four) follow one another at once.
// docs/ROUTING.md gives the simulator's figures behind the constants.
const (
	// minCompare is the number of successful samples after which a
	// deployment is compared on its figures, its uncertainty counted by
	// exploration, rather than probed as cold. One: a deployment far behind
	// after its first sample is then left alone (its gap is several
	// standard errors of one sample), one near the leader is re-measured
	// with the chance that it leads, and a wide fleet's cold start costs
	// one probe a deployment, not three, as successive elimination does
	// (issue 28: 12 deployments from cold took 143 calls to settle with
	// three; docs/ROUTING.md gives the random-fleet ablation).
	minCompare = 1
	// priorSamples is what a Deployment.Expected prior is worth, in samples.
	priorSamples = 3
	// driftTime is how long unseen makes a level as uncertain as one
	// sample. At a minute, a deployment 10% behind the leader was explored
	// about every 10 s for a drift that sudden changes of level, not drift,
	// cause; five minutes (contenders have their own rule) raised the sim's
	// noisy true-best share by about 0.02 over 40 seeds (docs/ROUTING.md).
	driftTime = float64(300 * time.Second)
	// revertTime is the age at which a contender is as likely as not judged
	// at its remembered best.
	revertTime = float64(50 * time.Second)
	// peakMemory is how long a deployment's best level is remembered.
	peakMemory = int64(10 * time.Minute)
	// peakSmoothing is how many better levels in a row move the remembered
	// best most of the way (1 - 1/e) to them. Taken whole, the best was the
	// luckiest of a deployment's estimates: after a change, an estimate is
	// the mean of the two samples that made it, and in the simulator's noisy
	// scenario (per-sample spread 0.1) the second of three deployments,
	// truly 10% slower, was remembered as fast as the first and explored as
	// a contender whenever the first led (docs/ROUTING.md).
	peakSmoothing = 8
	// loadProbe is the chance that a pick holds a call back from a leader
	// with calls in flight whose load dependence is untested
	// (registry.Estimate.LoadUntested) and sends it to the next candidate.
	loadProbe = 0.1
	// defaultSigma is the per-sample log spread assumed when the window
	// does not tell it (fewer than 10 samples, or no spread).
	defaultSigma = 0.3
)

// memo is what the Picker remembers of one configured deployment across
// picks, without a lock: whether it has been compared on its figures, and
// its best recent levels.
type memo struct {
	warm     atomic.Bool
	bestTPS  atomic.Uint64 // math.Float64bits of the highest TPS seen; 0 none
	tpsAt    atomic.Int64  // unix ns when bestTPS was last seen
	bestTTFT atomic.Uint64 // math.Float64bits of the lowest TTFT seen; 0 none
	ttftAt   atomic.Int64  // unix ns when bestTTFT was last seen
	// The newest sample seen, and whether it began a change back toward the
	// best (recovering).
	seen   atomic.Int64 // item.newest
	rising atomic.Bool
}

// remember records the levels of it's figures at now: the best TPS and
// TTFT it has had within peakMemory, on two samples or more (with a prior's
// worth), and whether its newest sample began a
// change back toward them. It looks only when a sample arrived since it
// last did (item.newest), and writes only when a level improves on (or
// renews) the remembered one. rising counts the Picker's memo entries with
// rising set.
func (m *memo) remember(it *item, now int64, rising *atomic.Int64) {
	e, newest := &it.exp, it.newest
	seen := m.seen.Load()
	if newest == seen && (newest != 0 || m.warm.Load()) {
		// Nothing new since the last pick that looked (the usual case), or
		// a Source that does not say when its samples are from: then no
		// levels are remembered (no contender rule).
		return
	}
	if !m.warm.Load() {
		m.warm.Store(true)
	}
	if newest == 0 {
		return
	}
	if newest > seen {
		m.note(it, now, rising)
	}
	// One sample is not a level: a deployment whose first sample was lucky
	// is not remembered at it, a contender for peakMemory.
	if samples(it, e) < 2 {
		return
	}
	if e.TPSOK {
		keepBest(&m.bestTPS, &m.tpsAt, e.TPS, now, func(v, best float64) (bool, bool) { return v > best, v >= 0.8*best })
	}
	if e.TTFTOK {
		keepBest(&m.bestTTFT, &m.ttftAt, e.TTFT, now, func(v, best float64) (bool, bool) { return best == 0 || v < best, v <= 1.25*best })
	}
}

// note records a new sample of it and whether it began a change back
// toward the remembered best (recovering).
func (m *memo) note(it *item, now int64, rising *atomic.Int64) {
	opt, contender := m.peak(&it.exp, now)
	if r := contender && it.recovering(&opt); m.rising.Swap(r) != r {
		if r {
			rising.Add(1)
		} else {
			rising.Add(-1)
		}
	}
	m.seen.Store(it.newest)
}

// recovering reports whether measure has begun to see a change of it's
// level (item.pend) that points back toward its best figures opt, at least
// halfway in log units (noise points a little way; a recovery all the way).
func (it *item) recovering(opt *route.Expected) bool {
	e := &it.exp
	tps, ttft := float64(it.pend[0]), float64(it.pend[1])
	return (tps > 0 && e.TPSOK && opt.TPS > e.TPS && tps*tps >= e.TPS*opt.TPS) ||
		(ttft > 0 && e.TTFTOK && opt.TTFT < e.TTFT && ttft*ttft <= e.TTFT*opt.TTFT)
}

// keepBest keeps the best level, seen at now: v when none is stored or the
// stored one is older than peakMemory; when better says v improves on it,
// the stored one moves a peakSmoothing-th of the way to v (so the best is
// that of the levels a deployment held, not the luckiest of its noisy
// estimates); and the stored one's time is renewed when v is near it
// (better's second result) and its time is older than an eighth of
// peakMemory.
func keepBest(best *atomic.Uint64, at *atomic.Int64, v float64, now int64, better func(v, best float64) (improves, near bool)) {
	b, t := math.Float64frombits(best.Load()), at.Load()
	improves, near := better(v, b)
	switch {
	case b == 0 || now-t > peakMemory:
		best.Store(math.Float64bits(v))
		at.Store(now)
	case improves:
		best.Store(math.Float64bits(b + (v-b)/peakSmoothing))
		at.Store(now)
	case near && now-t > peakMemory/8:
		at.Store(now)
	}
}

// peak returns e at the best levels m remembers at now, and whether it is
// better than e in either.
func (m *memo) peak(e *route.Expected, now int64) (route.Expected, bool) {
	x, better := *e, false
	if b := math.Float64frombits(m.bestTPS.Load()); e.TPSOK && b > e.TPS && now-m.tpsAt.Load() <= peakMemory {
		x.TPS, better = b, true
	}
	if b := math.Float64frombits(m.bestTTFT.Load()); e.TTFTOK && b > 0 && b < e.TTFT && now-m.ttftAt.Load() <= peakMemory {
		x.TTFT, better = b, true
		x = rk.CapWindowTTFT(x, b)
	}
	return x, better
}

// explore returns the position in s.order of the candidate a pick with
// uniform draw u re-measures, or -1. Candidates are those of the leading
// model and provider-order tier with a closed breaker and no cooldown that
// are compared on their figures (cold ones have cold probes), compliant or
// not. The pick explores each with probability chance, scaled down in
// proportion when they add up to more than Options.Exploration, so a draw
// at or above it costs nothing.
func (p *Picker) explore(s *scratch, u float64, now time.Time) int {
	limit := p.opts.Exploration
	if limit == 0 {
		return -1
	}
	if i := p.confirm(s); i > 0 {
		return i
	}
	if u >= limit {
		return -1
	}
	items, order := s.items, s.order
	lead := &items[order[0]]
	t := now.UnixNano()
	lv := variance(lead, &lead.exp, t)
	s.chances = s.chances[:0]
	total := 0.0
	// A leader with calls in flight whose load dependence is untested
	// gives the next candidate at least loadProbe: the load its streams
	// run at then varies, and the slope within them shows.
	probe := lead.untested && lead.flight > 0
	for i := 1; i < len(order); i++ {
		it := &items[order[i]]
		if it.model != lead.model {
			break
		}
		c := 0.0
		if it.health == healthOK && !it.cold && it.tier.prov == lead.tier.prov {
			c = p.chance(s, lead, it, lv, t)
			if probe {
				c, probe = max(c, loadProbe), false
			}
		}
		s.chances = append(s.chances, c)
		total += c
	}
	if total > limit {
		u *= total / limit
	}
	for i, c := range s.chances {
		if u < c {
			return i + 1
		}
		u -= c
	}
	return -1
}

// confirm returns the position of a contender whose newest sample began a
// change back toward its best (memo.rising) and that has no call in
// flight, or -1: the calls that confirm or refute a recovery are due at
// once, not at exploration's odds, one at a time (calls in flight slow a
// deployment whose speed falls with load: sent at once, as many as the
// change needed, they herded the sim's load scenario, 707 tok/s mean
// against 746).
func (p *Picker) confirm(s *scratch) int {
	if p.rising.Load() <= 0 {
		return -1
	}
	items, order := s.items, s.order
	lead := &items[order[0]]
	for i := 1; i < len(order); i++ {
		it := &items[order[i]]
		if it.model != lead.model {
			break
		}
		if m := &p.memo[it.idx]; it.health == healthOK && !it.cold && it.tier.prov == lead.tier.prov && !p.meta[it.idx].wild &&
			m.rising.Load() && it.flight == 0 {
			return i
		}
	}
	return -1
}

// chance is the probability that it would now lead: the normal tail of its
// gap to the leader over their combined uncertainty (the leader's variance
// is lv), mixed for a contender with the chance at its remembered best.
func (p *Picker) chance(s *scratch, lead, it *item, lv float64, now int64) float64 {
	g := p.gap(s, lead, it, &it.exp, it.score)
	var c float64
	if g <= 0 || g*g < 36*(lv+variance1(it, &it.exp, now)) {
		// Not hopeless even at the widest spread (sigma 1): the normal tail.
		c = tail(g, math.Sqrt(lv+variance(it, &it.exp, now)))
	}
	if p.meta[it.idx].wild {
		return c
	}
	// s.opt, not a local: a pointer to it goes through route's kernel, an
	// interface, which would move a local to the heap on every call.
	opt := &s.opt
	var better bool
	*opt, better = p.memo[it.idx].peak(&it.exp, now)
	if !better {
		return c
	}
	age := 0.0
	if it.newest > 0 {
		age = float64(max(now-it.newest, 0))
	}
	w := min(age/revertTime, 1)
	if w == 0 {
		return c
	}
	sd := math.Sqrt(lv + variance(it, &it.exp, now))
	return w*tail(p.gap(s, lead, it, opt, p.scoreOf(s, it, opt)), sd) + (1-w)*c
}

// gap is how much it, with figures e and score sc, must improve, in log
// units, to lead: its score's distance below the leader's, and when it
// violates the SLO its distance from meeting it (when the leader violates
// too, the difference of their distances); negative when it would lead, as
// a cheaper deployment that complies does under Cost, by its SLO margin.
// +Inf means it cannot lead whatever its figures (a dearer deployment
// under Cost).
func (p *Picker) gap(s *scratch, lead, it *item, e *route.Expected, sc float64) float64 {
	if lead.viol != 0 { // violators rank by distance alone
		viol := rk.Check(&s.slo, p.meta[it.idx].priceOut, e)
		return rk.Distance(&s.slo, p.meta[it.idx].priceOut, e, viol) - lead.dist
	}
	var gs float64
	if s.costly {
		switch {
		case it.cost > lead.cost:
			return math.Inf(1)
		case it.cost == lead.cost && e.TPSOK && lead.exp.TPSOK:
			gs = math.Log(lead.exp.TPS / e.TPS)
		}
	} else {
		gs = scoreGap(lead.score, sc)
	}
	if !s.checkSLO {
		return gs
	}
	viol := rk.Check(&s.slo, p.meta[it.idx].priceOut, e)
	if viol != 0 {
		return max(gs, rk.Distance(&s.slo, p.meta[it.idx].priceOut, e, viol))
	}
	if s.costly && it.cost < lead.cost {
		// Cheaper and compliant, it leads by its margin inside the SLO.
		return min(gs, -rk.Margin(&s.slo, e))
	}
	return gs
}

// scoreOf is it's score with figures e.
func (p *Picker) scoreOf(s *scratch, it *item, e *route.Expected) float64 {
	d := &p.ds[it.idx]
	if s.scorer != nil {
		return clamp(s.scorer.Score(*d, *e, &s.req))
	}
	return rk.Score(s.req.Policy, d, e, &s.req)
}

// scoreGap is the log distance of score x below the leader's score l: the
// log ratio when both have one sign (TPS, or minus a latency), else 0 when
// x is at least l and 1 when it is below.
func scoreGap(l, x float64) float64 {
	switch {
	case l > 0 && x > 0:
		return math.Log(l / x)
	case l < 0 && x < 0:
		return math.Log(x / l)
	case x >= l:
		return 0
	}
	return 1
}

// variance is the uncertainty of it's level with figures e, in squared log
// units: sigma² over the samples (a prior counts as priorSamples), plus
// sigma² per driftTime since the newest sample.
func variance(it *item, e *route.Expected, now int64) float64 {
	sigma := defaultSigma
	if e.Samples >= 10 && it.spread > 1 {
		sigma = min(max(math.Log(it.spread)/1.645, 0.05), 1)
	}
	v := 1 / samples(it, e)
	if it.newest > 0 && now > it.newest {
		v += float64(now-it.newest) / driftTime
	}
	return sigma * sigma * v
}

// samples is how many samples it's level rests on: its window's and its
// prior's worth, at least one.
func samples(it *item, e *route.Expected) float64 {
	return max(float64(e.Samples)+it.prior, 1)
}

// variance1 is variance at sigma 1, the most variance allows: a bound
// that needs no logarithm.
func variance1(it *item, e *route.Expected, now int64) float64 {
	v := 1 / samples(it, e)
	if it.newest > 0 && now > it.newest {
		v += float64(now-it.newest) / driftTime
	}
	return v
}

// note keeps what exploration reads of e besides its Expected view: the
// newest sample's time, the levels of the changes measure has begun to see,
// and the spread as p95/p50 (the log is taken only when exploring), TPS's
// when known, else TTFT's. TPS's p95 is its fast
// tail, so it reads the per-sample noise; TTFT's p95 is its slow tail,
// which slow periods (changes of level, for change detection) inflate up
// to the cap: with it taken too, deployments 10% apart were explored
// toward the 20% cap in the simulator's noisy scenario (docs/ROUTING.md).
func (it *item) note(e *registry.Estimate) {
	it.newest, it.spread = 0, 0
	it.pend = [2]float32{float32(e.TPSPending), float32(e.TTFTPending)}
	it.untested = e.LoadUntested
	if !e.Newest.IsZero() {
		it.newest = e.Newest.UnixNano()
	}
	switch {
	case valid(e.TPSP50) && valid(e.TPSP95) && e.TPSP95 > e.TPSP50:
		it.spread = e.TPSP95 / e.TPSP50
	case valid(e.TTFTP50) && valid(e.TTFTP95) && e.TTFTP95 > e.TTFTP50:
		it.spread = e.TTFTP95 / e.TTFTP50
	}
}

// tail is P(Z > g/sd) for a standard normal Z.
func tail(g, sd float64) float64 {
	switch {
	case math.IsInf(g, 1) || math.IsNaN(g):
		return 0
	case sd == 0 && g < 0:
		return 1
	case sd == 0 && g == 0:
		return 0.5
	case sd == 0:
		return 0
	}
	z := g / sd
	if z > 6 {
		return 0
	}
	return 0.5 * math.Erfc(z/math.Sqrt2)
}
