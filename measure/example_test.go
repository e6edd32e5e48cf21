package measure_test

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/tpsroute/tpsroute/measure"
)

// Options is what tpsroute.Config.Measure holds: a zero field is its
// default, and Prices give each key's cost.
func ExampleOptions() {
	k := measure.Key{Provider: "groq", Region: "us", Model: "llama-3.3-70b"}
	o := measure.Options{
		Window:     measure.WindowOptions{Length: time.Minute}, // 10 sub-windows of 6 s
		MinSamples: 3,
		Prices:     map[measure.Key]measure.Price{k: {Input: 0.59, Output: 0.79}},
	}
	fmt.Println(k, o.Window.Length)
	// Output: groq/us/llama-3.3-70b 1m0s
}

// Price.Dollars is the rule the Client's exact cost meters (Stats.CostExact)
// follow, as a float.
func ExamplePrice_Dollars() {
	p := measure.Price{Input: 0.4, CachedInput: 0.1, Output: 1.6}
	// 10,000 prompt tokens, 8,000 of them cached, and 500 completion tokens.
	fmt.Printf("$%.6f\n", p.Dollars(10_000, 8_000, 500))
	// Output: $0.002400
}

// Money keeps dollars and picodollars apart, so that sums do not drift.
func ExampleMoney() {
	m := measure.Money{Dollars: 2, Picodollars: 500_000_000_000}
	b, _ := json.Marshal(m)
	fmt.Println(m.Float(), string(b))
	// Output: 2.5 {"dollars":2,"picodollars":500000000000}
}
