package route

import (
	"fmt"
	"strings"

	"github.com/tpsroute/tpsroute/measure"
)

// Plan is route's answer for one call: deployments in the order to try them,
// and those left out with the reason. A Plan is immutable once returned and
// safe to share.
type Plan struct {
	Deployments []Candidate // the order to try; never empty when a pick returns a nil error
	Excluded    []Candidate // serving the model but left out: breaker open, or violating a strict SLO
	Policy      string      // what ordered it: "throughput", "latency", "latency(completion)", "cost" or "custom"
}

// Reasons a Candidate has its place. Candidate.Reason is one of these, so
// callers can compare without matching free text.
const (
	ReasonBest          = "best score"                     // first by score
	ReasonBand          = "near-best, weighted pick"       // first by a weighted draw among near-equal scores
	ReasonAffinity      = "cache affinity"                 // first because it served Request.CacheKey recently
	ReasonColdProbe     = "cold probe"                     // first to gather its first samples
	ReasonHalfOpenProbe = "half-open probe"                // first so its half-open breaker gets the probe it needs to close
	ReasonExplore       = "explore"                        // first by the exploration share
	ReasonRanked        = "ranked"                         // placed by score after the first
	ReasonCold          = "cold: too few samples"          // no statistics yet; behind warm deployments of its tier
	ReasonSLO           = "demoted: violates slo"          // see Candidate.Violations
	ReasonHalfOpen      = "demoted: breaker half-open"     // behind closed ones; first now and then as a probe (ReasonHalfOpenProbe)
	ReasonCooling       = "demoted: cooling down"          // a Retry-After is pending
	ReasonNoHeadroom    = "demoted: no limiter headroom"   // RPM/TPM/in-flight budget exhausted
	ReasonLimited       = "demoted: provider rate-limited" // x-ratelimit-remaining-* said 0
	ReasonFailOpen      = "fail-open: breaker open"        // every candidate is open; tried last
	ReasonOpen          = "excluded: breaker open"         // in Plan.Excluded: open while others are not
	ReasonStrictSLO     = "excluded: violates strict slo"  // in Plan.Excluded: SLO.Strict and a violation
)

// Candidate is one entry of a Plan with the reason for its place and the
// values that decided it. It is a value, safe for concurrent reads.
//
// Deployment points into the picker's immutable copy of the configured
// deployments (for a wildcard deployment, into a concrete copy made for this
// Plan), so a Plan costs one small allocation however large the deployments
// are. It is never nil in a Plan from a pick, and it must not be
// modified; copy the value (*c.Deployment) to change it.
type Candidate struct {
	Deployment *Deployment // concrete: a wildcard deployment has Model set to the requested model; read-only
	Score      float64     // higher is better; never NaN
	Reason     string      // one of the Reason constants
	Demoted    bool        // violates a constraint or is unhealthy, placed behind compliant ones
	Violations Violation   // which SLO constraints it violates
	Expected   Expected    // the blended statistics used
	Cost       float64     // expected cost of this request in USD

	key *measure.Key // precomputed by the picker (routekit's SetKey); nil in a Candidate built by hand
}

// Key returns Deployment.Key(), the measure.Key the candidate's statistics,
// breaker and affinity are kept under. For a Candidate from a pick it is
// precomputed and does not allocate; for one built by hand it is computed
// from Deployment, and a Candidate with a nil Deployment gives the zero Key.
func (c Candidate) Key() measure.Key {
	switch {
	case c.key != nil:
		return *c.key
	case c.Deployment != nil:
		return c.Deployment.Key()
	}
	return measure.Key{}
}

// Explain returns a one-line summary for logs, e.g.
// "throughput: groq/us/llama [best score score=412 tps=412 ttft=0.21s] > ...".
func (p Plan) Explain() string {
	var b strings.Builder
	b.WriteString(p.Policy)
	b.WriteString(":")
	if len(p.Deployments) == 0 {
		b.WriteString(" no deployment")
	}
	for i, c := range p.Deployments {
		if i > 0 {
			b.WriteString(" >")
		}
		b.WriteByte(' ')
		c.explain(&b)
	}
	if len(p.Excluded) > 0 {
		b.WriteString("; excluded:")
		for _, c := range p.Excluded {
			b.WriteByte(' ')
			c.explain(&b)
		}
	}
	return b.String()
}

func (c *Candidate) explain(b *strings.Builder) {
	k := c.Key()
	fmt.Fprintf(b, "%s/%s/%s [%s", k.Provider, k.Region, k.Model, c.Reason)
	if c.Violations != 0 {
		fmt.Fprintf(b, " (%s)", c.Violations)
	}
	fmt.Fprintf(b, " score=%.4g", c.Score)
	if c.Expected.TPSOK {
		fmt.Fprintf(b, " tps=%.4g", c.Expected.TPS)
	}
	if c.Expected.TTFTOK {
		fmt.Fprintf(b, " ttft=%.3gs", c.Expected.TTFT)
	}
	if c.Expected.Samples > 0 {
		fmt.Fprintf(b, " n=%d", c.Expected.Samples)
	}
	if c.Cost > 0 {
		fmt.Fprintf(b, " cost=$%.3g", c.Cost)
	}
	b.WriteString("]")
}
