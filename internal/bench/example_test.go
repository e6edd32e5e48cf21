package bench_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/tpsroute/tpsroute/internal/bench"
)

// Compare the four demo deployments, cold then warm prompt cache, and
// print the p50 TTFT of each. The demo runs in memory; inside a synctest
// bubble its timing is virtual, so the numbers are reproducible.
func Example() {
	synctest.Test(&testing.T{}, func(*testing.T) {
		rep, err := bench.Run(context.Background(), bench.Config{
			Router:      bench.Demo(60, 1),
			Concurrency: []int{4},
			Cache:       []bench.CacheMode{bench.Cold, bench.Warm},
			Workload:    bench.Workload{Seed: 1},
		})
		if err != nil {
			fmt.Println(err)
			return
		}
		for _, s := range rep.Summaries {
			fmt.Printf("%-7s %-32s TTFT p50 %4.0f ms  cached %3.0f%%\n",
				rep.Configs[s.Config].Label(), s.Target, s.TTFT.P50, 100*s.CachedShare)
		}
	})
	// Output:
	// cold c=4 swiftai/us-east/llama-3.3-70b    TTFT p50  196 ms  cached   0%
	// cold c=4 swiftai/eu-west/llama-3.3-70b    TTFT p50  298 ms  cached   0%
	// cold c=4 steadyml/us-east/llama-3.3-70b   TTFT p50  486 ms  cached   0%
	// cold c=4 steadyml/eu-west/llama-3.3-70b   TTFT p50  239 ms  cached   0%
	// warm c=4 swiftai/us-east/llama-3.3-70b    TTFT p50   72 ms  cached  82%
	// warm c=4 swiftai/eu-west/llama-3.3-70b    TTFT p50  136 ms  cached  82%
	// warm c=4 steadyml/us-east/llama-3.3-70b   TTFT p50  199 ms  cached  82%
	// warm c=4 steadyml/eu-west/llama-3.3-70b   TTFT p50   99 ms  cached  82%
}

// Parse an SLO and a prompts file.
func ExampleParseSLO() {
	slo, _ := bench.ParseSLO("ttft=300ms,tps=30")
	fmt.Println(slo)
	prompts, _ := bench.LoadPrompts(strings.NewReader(`{"prompt":"Say hi","max_tokens":16}
{"messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Why is the sky blue?"}]}`))
	fmt.Println(len(prompts), prompts[0].Messages[0].Role, prompts[0].MaxTokens, len(prompts[1].Messages))
	// Output:
	// ttft=300ms,tps=30,p=95
	// 2 user 16 2
}

// Exact nearest-rank percentiles, as the reports use.
func ExamplePercentile() {
	ttft := []float64{180, 190, 200, 210, 950} // sorted, ms
	p50, _ := bench.Percentile(ttft, 50)
	p99, _ := bench.Percentile(ttft, 99)
	fmt.Println(p50, p99)
	// Output:
	// 200 950
}

// A Chart renders one inline SVG plot in the report's style.
func ExampleChart() {
	c := bench.Chart{ID: "share", Title: "share", XLabel: "s", YLabel: "%", Series: []bench.Series{
		{Name: "a", Points: [][2]float64{{0, 10}, {1, 20}}},
	}}
	svg := c.SVG()
	fmt.Println(strings.HasPrefix(svg, "<svg"), strings.Contains(svg, bench.Palette(0)))
	// Output: true true
}

// Body is the request a workload sends, as JSON.
func ExampleWorkload_Body() {
	w := bench.Workload{Model: "m", InputTokens: []int{3}, MaxTokens: 8}
	fmt.Println(string(w.Body(0, bench.Cold, "n")))
	// Output: {"model":"m","stream":true,"max_tokens":8,"messages":[{"role":"user","content":"[request n-0] for for the"}]}
}
