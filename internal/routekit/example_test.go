package routekit_test

import (
	"fmt"
	"math"

	"github.com/tpsroute/tpsroute/internal/routekit"
)

func ExampleClamp() {
	for _, v := range []float64{math.NaN(), math.Inf(1), -2.5} {
		fmt.Println(routekit.Clamp(v) == -math.MaxFloat64, routekit.Clamp(v))
	}
	// Output:
	// true -1.7976931348623157e+308
	// false 1.7976931348623157e+308
	// false -2.5
}

func ExampleValid() {
	fmt.Println(routekit.Valid(0.3), routekit.Valid(0), routekit.Valid(math.Inf(1)), routekit.Valid(math.NaN()))
	// Output:
	// true false false false
}

func ExampleOne() {
	fmt.Println(routekit.One(0), routekit.One(0.5))
	// Output:
	// 1 0.5
}
