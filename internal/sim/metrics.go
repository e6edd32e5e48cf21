package sim

import (
	"cmp"
	"math"
	"slices"
	"time"

	"github.com/tpsroute/tpsroute/internal/bench"
)

// Summary is what the callers of one run got. Ratios are filled by Compare.
type Summary struct {
	Calls  int `json:"calls"`
	Failed int `json:"failed"`
	// TPSP50 and TPSMean are the delivered generation speed of the
	// successful calls, tokens/s.
	TPSP50  float64 `json:"tps_p50"`
	TPSMean float64 `json:"tps_mean"`
	// TTFTP50 and TTFTP95 are from the call's start, failover included.
	TTFTP50 time.Duration `json:"ttft_p50"`
	TTFTP95 time.Duration `json:"ttft_p95"`
	// CostPerMOutput is US dollars per million output tokens delivered.
	CostPerMOutput float64 `json:"cost_per_m_output"`
	// TrueBest is the share of the calls first sent to a deployment truly
	// best for them (Call.TrueBest): 1 for the oracle, by construction.
	TrueBest float64 `json:"true_best"`
	// Events are the degradations and recoveries of the scenario, with how
	// the run reacted.
	Events []Event `json:"events,omitempty"`
	// Ratios are this run's TPSMean over each other policy's, by name.
	Ratios map[string]float64 `json:"tps_mean_ratio,omitempty"`
}

// Event is a change of a deployment's health in the scenario and how one run
// reacted to it.
type Event struct {
	Deployment string        `json:"deployment"`
	Kind       string        `json:"kind"` // "degrade", "recover" or "join"
	At         time.Duration `json:"at"`
	// Degrade: calls sent to the deployment from At until the first bucket
	// in which its share was below 20%; Shed says whether that happened
	// before it recovered.
	CallsBeforeShed int  `json:"calls_before_shed,omitempty"`
	Shed            bool `json:"shed,omitempty"`
	// Recover and join: the time from At to the first bucket in which the
	// deployment's share reached Target; Regained says whether it did.
	Target   float64       `json:"target,omitempty"`
	Regain   time.Duration `json:"regain,omitempty"`
	Regained bool          `json:"regained,omitempty"`
}

// Bucket is one slice of a run's timeline.
type Bucket struct {
	Start time.Duration `json:"start"`
	Calls int           `json:"calls"`
	// Share is the share of the bucket's calls first sent to each
	// deployment, in scenario order.
	Share []float64 `json:"share"`
	// TPSMean is the mean delivered TPS of the bucket's successful calls.
	TPSMean float64 `json:"tps_mean"`
}

// buckets is the number of timeline buckets of a run.
const buckets = 60

func (res *Result) summarise(sc *Scenario) {
	slices.SortStableFunc(res.Calls, func(a, b Call) int { return cmp.Compare(a.Start, b.Start) })
	s := &res.Summary
	var tps, ttft []float64
	var cost float64
	var out int64
	for _, c := range res.Calls {
		s.Calls++
		if c.TrueBest {
			s.TrueBest++
		}
		if c.Failed {
			s.Failed++
			continue
		}
		if c.TPS > 0 {
			tps = append(tps, c.TPS)
		}
		ttft = append(ttft, float64(c.TTFT))
		cost += c.Cost
		out += c.OutputTokens
	}
	if s.Calls > 0 {
		s.TrueBest /= float64(s.Calls)
	}
	td, fd := bench.NewDist(tps), bench.NewDist(ttft)
	s.TPSP50, s.TPSMean = td.P50, td.Mean
	s.TTFTP50, s.TTFTP95 = time.Duration(fd.P50), time.Duration(fd.P95)
	if out > 0 {
		s.CostPerMOutput = cost / float64(out) * 1e6
	}

	total := time.Duration(sc.Duration)
	res.Bucket = total / buckets
	res.Timeline = make([]Bucket, buckets)
	sums := make([]float64, buckets)
	oks := make([]int, buckets)
	for b := range res.Timeline {
		res.Timeline[b] = Bucket{Start: time.Duration(b) * res.Bucket, Share: make([]float64, len(sc.Deployments))}
	}
	for _, c := range res.Calls {
		b := min(int(c.Start/res.Bucket), buckets-1)
		res.Timeline[b].Calls++
		if c.Sent >= 0 {
			res.Timeline[b].Share[c.Sent]++
		}
		if !c.Failed && c.TPS > 0 {
			sums[b] += c.TPS
			oks[b]++
		}
	}
	for b := range res.Timeline {
		bk := &res.Timeline[b]
		for i := range bk.Share {
			if bk.Calls > 0 {
				bk.Share[i] /= float64(bk.Calls)
			}
		}
		if oks[b] > 0 {
			bk.TPSMean = sums[b] / float64(oks[b])
		}
	}
	s.Events = res.events(sc)
}

// events finds the scenario's health changes and measures the run's reaction.
func (res *Result) events(sc *Scenario) []Event {
	var out []Event
	for i := range sc.Deployments {
		d := &sc.Deployments[i]
		if d.Join > 0 {
			e := Event{Deployment: d.name(), Kind: "join", At: time.Duration(d.Join), Target: 0.2}
			res.regain(i, &e)
			out = append(out, e)
		}
		was := d.degraded(0)
		var degradedAt time.Duration
		for _, ph := range d.Phases {
			at := time.Duration(ph.From)
			now := d.degraded(at)
			switch {
			case now && !was:
				degradedAt = at
				e := Event{Deployment: d.name(), Kind: "degrade", At: at}
				until := d.recoveryAfter(at, time.Duration(sc.Duration))
				for _, c := range res.Calls {
					if c.Start < at || c.Sent != i {
						continue
					}
					if c.Start >= until {
						break
					}
					b := min(int(c.Start/res.Bucket), buckets-1)
					if res.Timeline[b].Share[i] < 0.2 {
						e.Shed = true
						break
					}
					e.CallsBeforeShed++
				}
				if !e.Shed {
					// Shed in a bucket with no call to it at all.
					for b := int(at / res.Bucket); b < buckets && res.Timeline[b].Start < until; b++ {
						if res.Timeline[b].Calls > 0 && res.Timeline[b].Share[i] < 0.2 {
							e.Shed = true
							break
						}
					}
				}
				out = append(out, e)
			case !now && was:
				e := Event{Deployment: d.name(), Kind: "recover", At: at}
				e.Target = max(0.8*res.shareBetween(i, degradedAt-time.Duration(sc.Duration)/6, degradedAt), 0.05)
				res.regain(i, &e)
				out = append(out, e)
			}
			was = now
		}
	}
	return out
}

// recoveryAfter returns when the deployment stops being degraded after at.
func (d *Deployment) recoveryAfter(at, end time.Duration) time.Duration {
	for _, ph := range d.Phases {
		if time.Duration(ph.From) > at && !d.degraded(time.Duration(ph.From)) {
			return time.Duration(ph.From)
		}
	}
	return end
}

// shareBetween is deployment i's share of the calls started in [from, to).
func (res *Result) shareBetween(i int, from, to time.Duration) float64 {
	n, k := 0, 0
	for _, c := range res.Calls {
		if c.Start >= from && c.Start < to {
			n++
			if c.Sent == i {
				k++
			}
		}
	}
	if n == 0 {
		return 0
	}
	return float64(k) / float64(n)
}

// regain fills e's Regain: the first bucket from e.At on where deployment i's
// share reached e.Target.
func (res *Result) regain(i int, e *Event) {
	for b := int(e.At / res.Bucket); b < buckets; b++ {
		bk := res.Timeline[b]
		if bk.Calls > 0 && bk.Share[i] >= e.Target {
			e.Regained = true
			e.Regain = max(bk.Start+res.Bucket-e.At, 0)
			return
		}
	}
}

// ratio returns a/b, or NaN when b is 0.
func ratio(a, b float64) float64 {
	if b == 0 {
		return math.NaN()
	}
	return a / b
}
