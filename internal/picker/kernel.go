package picker

import (
	"github.com/tpsroute/tpsroute/internal/registry"
	"github.com/tpsroute/tpsroute/internal/routekit"
	"github.com/tpsroute/tpsroute/measure"
	"github.com/tpsroute/tpsroute/route"
)

// kernel is what the Picker needs of route's vocabulary that route does not
// export: route implements it (route/kernel.go, whose comments say what
// each method does) and hands it over through routekit.Kernel. A pointer
// passed to one of its methods escapes (the call is through an interface),
// so the Picker passes only pointers into its heap (p.ds, the pooled
// scratch), never to a local.
type kernel interface {
	Blend(x *route.Expected, e *registry.Estimate, ok bool, ttftAt, tpsAt route.Percentile)
	Factors(x *route.Expected) (tpsF, ttftF, marginal *float32, ttftQ *float64)
	Score(p route.Policy, d *route.Deployment, e *route.Expected, r *route.Request) float64
	Merge(s, def route.SLO) route.SLO
	Check(s *route.SLO, priceOut float64, e *route.Expected) route.Violation
	Distance(s *route.SLO, priceOut float64, e *route.Expected, v route.Violation) float64
	Margin(s *route.SLO, e *route.Expected) float64
	Admits(d *route.Deployment, model string) bool
	CapabilitiesFor(d *route.Deployment, model string) route.Capabilities
	Matches(p route.Pin, d *route.Deployment) bool
	OverCap(price, cap *measure.Price) bool
	CapWindowTTFT(x route.Expected, b float64) route.Expected
	SetKey(c *route.Candidate, k *measure.Key)
}

// rk is route's kernel, set by route's init, which runs before this
// package's variables are initialised since this package imports route.
var rk = routekit.Kernel.(kernel)

// clamp and valid are routekit's, shared with route.
func clamp(v float64) float64 { return routekit.Clamp(v) }
func valid(v float64) bool    { return routekit.Valid(v) }
