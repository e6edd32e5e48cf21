package route

import (
	"math"
	"strings"

	"github.com/tpsroute/tpsroute/internal/registry"
	"github.com/tpsroute/tpsroute/internal/routekit"
)

// Policy is a built-in way to order deployments. The zero Policy means "the
// default": in a Request, Options.Policy; in Options, Throughput.
// Policy implements Scorer. A Policy is a constant and safe for concurrent use.
type Policy uint8

const (
	// Throughput maximises the expected generation-phase tokens per second,
	// ranking by Expected.MarginalTPS: with measure's load model, what the
	// call adds to the deployment's total TPS at its current load.
	// Embeddings, which have no output phase, are ranked by Latency instead.
	Throughput Policy = iota + 1
	// Latency minimises the expected time to first token or, with
	// LatencyCompletion, the expected completion time
	// (TTFT + expected output tokens / TPS).
	Latency
	// Cost minimises the expected cost in USD of this request, among the
	// deployments that meet the SLO. Equal costs are ordered by throughput.
	// Prices are known without samples, so cold deployments are ordered by
	// cost too (still behind warm ones of their tier, and never as fast).
	Cost
)

// policyNames is the one table of the built-in policies and their names, in
// order. String, ParsePolicy and Policies read it; the config file, the
// gateway's directives, sim's scenarios and routetest name policies through
// them.
var policyNames = [...]struct {
	p    Policy
	name string
}{{Throughput, "throughput"}, {Latency, "latency"}, {Cost, "cost"}}

// String returns "throughput", "latency", "cost" or "default".
func (p Policy) String() string {
	for _, n := range policyNames {
		if n.p == p {
			return n.name
		}
	}
	return "default"
}

// ParsePolicy returns the built-in Policy whose String is name, in any case,
// and true; or the default (zero) Policy and false for any other name.
func ParsePolicy(name string) (Policy, bool) {
	for _, n := range policyNames {
		if strings.EqualFold(n.name, name) {
			return n.p, true
		}
	}
	return 0, false
}

// Policies returns the built-in policies in order: Throughput, Latency,
// Cost. The slice is new on every call.
func Policies() []Policy {
	out := make([]Policy, len(policyNames))
	for i, n := range policyNames {
		out[i] = n.p
	}
	return out
}

// LatencyMetric says what the Latency policy minimises. The zero value means
// the default: in a Request, Options.LatencyMetric; in Options,
// LatencyTTFT. It is a constant and safe for concurrent use.
type LatencyMetric uint8

const (
	// LatencyTTFT minimises the expected time to first token.
	LatencyTTFT LatencyMetric = iota + 1
	// LatencyCompletion minimises TTFT + expected output tokens / TPS.
	LatencyCompletion
)

// Percentile selects which windowed percentile an estimate is read at.
// The zero value means the default for the metric: P95 for TTFT, P50 for TPS.
// It is a constant and safe for concurrent use.
type Percentile uint8

const (
	// P50 reads the median.
	P50 Percentile = iota + 1
	// P95 reads the 95th percentile.
	P95
)

// Scorer orders deployments: the picker places higher scores first within a
// tier (health, SLO, model and provider order come before the score).
//
// Score receives the deployment (already concrete for wildcard deployments),
// its blended Expected statistics, and the request with defaults applied
// (Policy, LatencyMetric and the expected token counts are never zero). It must
// not modify the Request, must be deterministic for equal inputs, must not
// block, and must be safe for concurrent use. It is called for cold
// deployments too (Expected.OK false) and must not treat a missing value as
// fast. A NaN score is read as the worst score (-math.MaxFloat64) and ±Inf
// is clamped to ±math.MaxFloat64, so Plan scores are never NaN; conforming
// scorers return neither (see routetest.TestScorer).
type Scorer interface {
	Score(d Deployment, e Expected, r *Request) float64
}

// Expected is the picker's view of one deployment's statistics: the windowed
// percentile and the EWMA blended by taking the more pessimistic of the two
// (the higher TTFT, the lower TPS), shrunk toward the deployment's prior
// (Deployment.Expected) when it has one; after a change of level that measure
// detected, both are the new level, so a TPS falling 3× or more shows within
// two samples (see the package documentation, Estimates). TTFT and TPS are
// the deployment's figures; the picker also fits them to the call, a warm
// prompt-size class's figures and the deployment's current load
// (registry.Estimate.Input, LoadFactor), which CallTPS, CallTTFT and
// MarginalTPS return and the built-in policies rank by. It is a value,
// safe to copy and for concurrent reads.
type Expected struct {
	TTFT      float64 // seconds; valid only if TTFTOK
	TPS       float64 // generation-phase tokens/s; valid only if TPSOK
	ErrorRate float64 // in [0,1]; 0 when unknown
	Samples   int64   // successful samples in the window
	TTFTOK    bool    // a finite positive TTFT was available
	TPSOK     bool    // a finite positive TPS was available
	OK        bool    // warm: TTFTOK or TPSOK, and the source had enough samples, or the picker compared the deployment before (its window has emptied since: the figures are its last level), or a prior (Deployment.Expected) gives them

	// The call's figures over the deployment's (internal/picker/fit.go's shape): TPS
	// for the prompt's size class at the current load, TTFT for the class,
	// and MarginalTPS over the call's TPS. 0 means 1. float32, and tpsF in
	// the bools' padding, to keep the Plan's candidates small.
	tpsF float32

	ttftQ float64 // TTFT at the window percentile alone, for the SLO check; 0 when unknown

	ttftF, marginal float32
}

// blend sets *x to the Expected view of e, reading TTFT at ttftAt and TPS
// at tpsAt (zero Percentiles mean P95 and P50); ok is the source's found
// flag (measure had statistics for the key). NaN, infinite, zero and
// negative inputs are treated as missing. It writes in place because a pick
// calls it once per candidate; internal/picker calls it through
// internal/routekit.
func blend(x *Expected, e *registry.Estimate, ok bool, ttftAt, tpsAt Percentile) {
	*x = Expected{Samples: max(e.Samples, 0)}
	if r := e.ErrorRate; r > 0 && r <= 1 {
		x.ErrorRate = r
	} else if r > 1 && r <= math.MaxFloat64 {
		x.ErrorRate = 1
	}
	ttftP := e.TTFTP95
	if ttftAt == P50 {
		ttftP = e.TTFTP50
	}
	tpsP := e.TPSP50
	if tpsAt == P95 {
		tpsP = e.TPSP95
	}
	// Straight-line on purpose: a pick blends once per candidate.
	x.TTFT, x.TTFTOK = pessimistic(ttftP, e.TTFTEWMA, true)
	x.TPS, x.TPSOK = pessimistic(tpsP, e.TPSEWMA, false)
	x.OK = ok && e.OK && (x.TTFTOK || x.TPSOK)
	if valid(ttftP) {
		x.ttftQ = ttftP
	}
}

// pessimistic returns the higher (for TTFT) or lower (for TPS) of the valid
// values among a and b, and whether either was valid.
func pessimistic(a, b float64, higher bool) (float64, bool) {
	va, vb := valid(a), valid(b)
	switch {
	case va && vb:
		if (b > a) == higher {
			return b, true
		}
		return a, true
	case va:
		return a, true
	case vb:
		return b, true
	}
	return 0, false
}

// valid is routekit.Valid: finite and positive.
func valid(v float64) bool { return routekit.Valid(v) }

// Score implements Scorer for the built-in policies:
//   - Throughput: Expected.MarginalTPS, or 0 when unknown;
//   - Latency: minus Expected.CallTTFT in seconds, or minus CallTTFT +
//     output tokens / CallTPS with LatencyCompletion; -math.MaxFloat64 when
//     unknown;
//   - Cost: minus the expected cost in USD (Deployment.ExpectedCost).
//
// The zero Policy scores as Throughput.
func (p Policy) Score(d Deployment, e Expected, r *Request) float64 {
	return p.score(&d, &e, r)
}

func (p Policy) score(d *Deployment, e *Expected, r *Request) float64 {
	switch p {
	case Latency:
		t, ok := e.CallTTFT(), e.TTFTOK
		if r != nil && r.LatencyMetric == LatencyCompletion {
			t, ok = completion(e, r.outputTokens())
		}
		if !ok {
			return -math.MaxFloat64
		}
		return clamp(-t)
	case Cost:
		var in, out int64 = routekit.ExpectedInputTokens, routekit.ExpectedOutputTokens
		if r != nil {
			in, out = r.inputTokens(), r.outputTokens()
		}
		return clamp(-d.ExpectedCost(in, out))
	}
	return throughputScore(e)
}

// throughputScore is Throughput's score of e.
func throughputScore(e *Expected) float64 {
	if !e.TPSOK {
		return 0
	}
	return clamp(e.MarginalTPS())
}

// CallTPS is the TPS expected for the call being picked: TPS, the
// deployment's figure, for the prompt's size class when that class is warm
// and at the deployment's calls in flight now when measure has a load model
// (see the package documentation, Estimates). Valid only if TPSOK.
func (e Expected) CallTPS() float64 { return e.TPS * one(e.tpsF) }

// CallTTFT is the TTFT expected for the call being picked: TTFT scaled by
// the prompt's size class when that class is warm; for an embeddings call,
// the answer's latency expected for its input tokens, from the key's warm
// classes (docs/ROUTING.md, "Embeddings"). Valid only if TTFTOK.
func (e Expected) CallTTFT() float64 { return e.TTFT * one(e.ttftF) }

// MarginalTPS is what the call adds to the deployment's total TPS (the sum
// over its streams): CallTPS minus the slowdown the call causes the calls
// already in flight, from measure's load model; CallTPS without one. The
// Throughput policy ranks by it. Valid only if TPSOK.
func (e Expected) MarginalTPS() float64 { return e.CallTPS() * one(e.marginal) }

// one is routekit.One: f, or 1 for 0 (unset).
func one(f float32) float64 { return routekit.One(f) }

// completion returns TTFT + out/TPS in seconds.
func completion(e *Expected, out int64) (float64, bool) {
	if !e.TTFTOK || !e.TPSOK {
		return 0, false
	}
	return e.CallTTFT() + float64(out)/e.CallTPS(), true
}

// ExpectedCost returns the cost in USD of a call with in input and out output
// tokens at d's prices. Negative counts count as zero.
func (d Deployment) ExpectedCost(in, out int64) float64 {
	return (float64(max(in, 0))*d.Price.Input + float64(max(out, 0))*d.Price.Output) / 1e6
}

// clamp is routekit.Clamp: NaN is the worst score, ±Inf is clamped.
func clamp(v float64) float64 { return routekit.Clamp(v) }
