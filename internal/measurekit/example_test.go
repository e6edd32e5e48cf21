package measurekit_test

import (
	"fmt"

	"github.com/tpsroute/tpsroute/internal/measurekit"
)

// PerToken and Cost are the exact cost rule: $0.40 per million prompt
// tokens, $0.10 per million cached ones, $1.60 per million completion
// tokens, in picodollars.
func ExampleTokenPrice_Cost() {
	p := measurekit.PerToken(0.4, 0.1, 1.6)
	pico := p.Cost(10_000, 8_000, 500)
	fmt.Println(pico, float64(pico)/measurekit.PicoPerDollar)
	// Output: 2400000000 0.0024
}
