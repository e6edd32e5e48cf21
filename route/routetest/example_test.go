package routetest_test

import (
	"fmt"

	"github.com/tpsroute/tpsroute/route"
	"github.com/tpsroute/tpsroute/route/routetest"
)

// tpsPerDollar scores a deployment by expected tokens per second per dollar
// of output price; an unknown TPS scores 0, below every known one.
type tpsPerDollar struct{}

func (tpsPerDollar) Score(d route.Deployment, e route.Expected, _ *route.Request) float64 {
	if !e.TPSOK {
		return 0
	}
	return e.TPS / (1 + d.Price.Output)
}

// slowIsBetter wrongly prefers a lower TPS.
type slowIsBetter struct{}

func (slowIsBetter) Score(_ route.Deployment, e route.Expected, _ *route.Request) float64 {
	return -e.TPS
}

// Check a custom Scorer against the properties it claims, outside a test.
func ExampleCheck() {
	fmt.Println("tpsPerDollar:", routetest.Check(tpsPerDollar{}, routetest.PrefersTPS, routetest.PrefersLowPrice))
	err := routetest.Check(slowIsBetter{}, routetest.PrefersTPS)
	fmt.Println("slowIsBetter fails:", err != nil)
	// Output:
	// tpsPerDollar: <nil>
	// slowIsBetter fails: true
}
