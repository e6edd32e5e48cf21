package route

import (
	"github.com/tpsroute/tpsroute/internal/registry"
	"github.com/tpsroute/tpsroute/internal/routekit"
	"github.com/tpsroute/tpsroute/measure"
)

func init() { routekit.Kernel = kernel{} }

// kernel gives internal/picker, through internal/routekit, what the engine
// needs of the vocabulary's unexported side: it fills an Expected's call
// factors and a Candidate's key, and applies the SLO, Policy, Pin and
// Deployment rules that live with those types. Its methods are exported only
// so that an interface in internal/picker can name them; the type is not,
// so users never see them. It is stateless and safe for concurrent use.
type kernel struct{}

// Blend sets *x to the Expected view of e (see blend).
func (kernel) Blend(x *Expected, e *registry.Estimate, ok bool, ttftAt, tpsAt Percentile) {
	blend(x, e, ok, ttftAt, tpsAt)
}

// Factors returns pointers to x's call factors (0 means 1): the TPS and
// TTFT factors behind CallTPS and CallTTFT, MarginalTPS's factor, and the
// TTFT at the window percentile alone that the SLO check reads. The picker
// fits them to the call (internal/picker/fit.go); x must outlive their use.
func (kernel) Factors(x *Expected) (tpsF, ttftF, marginal *float32, ttftQ *float64) {
	return &x.tpsF, &x.ttftF, &x.marginal, &x.ttftQ
}

// Score is p's score of d with e for r (see Policy.Score), without copies.
func (kernel) Score(p Policy, d *Deployment, e *Expected, r *Request) float64 {
	return p.score(d, e, r)
}

// Merge returns s with its zero fields taken from def (see SLO.merge).
func (kernel) Merge(s, def SLO) SLO { return s.merge(def) }

// Check returns what a deployment with output price priceOut and
// statistics e violates of s.
func (kernel) Check(s *SLO, priceOut float64, e *Expected) Violation { return s.check(priceOut, e) }

// Distance is how far a deployment with violations v is from meeting s.
func (kernel) Distance(s *SLO, priceOut float64, e *Expected, v Violation) float64 {
	return s.distance(priceOut, e, v)
}

// Margin is how far e is inside the measured limits of s.
func (kernel) Margin(s *SLO, e *Expected) float64 { return s.margin(e) }

// Admits reports whether d's Models list, if any, names model.
func (kernel) Admits(d *Deployment, model string) bool { return d.admits(model) }

// CapabilitiesFor returns d's capabilities for model (see ForModel).
func (kernel) CapabilitiesFor(d *Deployment, model string) Capabilities {
	return d.capabilitiesFor(model)
}

// Matches reports whether pin p matches d.
func (kernel) Matches(p Pin, d *Deployment) bool { return p.matches(d) }

// OverCap reports whether price is above cap (see Request.PriceCap).
func (kernel) OverCap(price, cap *measure.Price) bool { return overCap(price, cap) }

// CapWindowTTFT returns x with the TTFT its SLO check reads (the window's
// percentile, see sloTTFT) lowered to b when it is higher. It takes and
// returns a value so that the caller's Expected can stay on its stack.
func (kernel) CapWindowTTFT(x Expected, b float64) Expected {
	if x.ttftQ > b {
		x.ttftQ = b
	}
	return x
}

// SetKey makes c.Key() return *k without computing it; k must stay valid
// and unchanged as long as c is used.
func (kernel) SetKey(c *Candidate, k *measure.Key) { c.key = k }
