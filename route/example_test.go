package route_test

import (
	"errors"
	"fmt"
	"time"

	"github.com/tpsroute/tpsroute/measure"
	"github.com/tpsroute/tpsroute/route"
)

// cheapFast is a custom Scorer: tokens per second per dollar of output. It
// scores a deployment without TPS (a cold one) as the worst, never as fast.
type cheapFast struct{}

func (cheapFast) Score(d route.Deployment, e route.Expected, _ *route.Request) float64 {
	if !e.TPSOK {
		return 0
	}
	return e.CallTPS() / max(d.Price.Output, 0.01)
}

// A Scorer sees a deployment and its Expected statistics; a test of one
// builds them as literals.
func ExampleScorer() {
	groq := route.Deployment{Provider: "groq", Region: "us", Model: "llama-70b", Price: measure.Price{Output: 0.79}}
	vllm := route.Deployment{Provider: "vllm", Region: "eu", Model: "llama-70b", Price: measure.Price{Output: 0.2}}
	fast := route.Expected{TPS: 280, TPSOK: true, Samples: 40, OK: true}
	slow := route.Expected{TPS: 38, TPSOK: true, Samples: 40, OK: true}

	var s route.Scorer = cheapFast{}
	fmt.Printf("groq %.0f, vllm %.0f, cold %.0f\n", s.Score(groq, fast, nil), s.Score(vllm, slow, nil), s.Score(vllm, route.Expected{}, nil))
	// Output:
	// groq 354, vllm 190, cold 0
}

func ExampleParsePolicy() {
	for _, name := range []string{"Latency", "fastest"} {
		p, ok := route.ParsePolicy(name)
		fmt.Println(name, "->", p, ok)
	}
	fmt.Println(route.Policies())
	// Output:
	// Latency -> latency true
	// fastest -> default false
	// [throughput latency cost]
}

func ExampleSLO_Validate() {
	slo := route.SLO{MaxTTFT: 800 * time.Millisecond, MaxErrorRate: 1.5}
	err := slo.Validate()
	var se *route.SLOError
	fmt.Println(errors.As(err, &se), se.Field)
	fmt.Println(err)
	// Output:
	// true MaxErrorRate
	// route: invalid SLO: MaxErrorRate: must be in [0, 1]
}

// A Plan is what Config.OnDecision receives: Explain renders it for logs,
// and each Candidate's Reason is one of the Reason constants.
func ExamplePlan_Explain() {
	groq := route.Deployment{Provider: "groq", Region: "us", Model: "llama-70b"}
	vllm := route.Deployment{Provider: "vllm", Region: "eu", Model: "llama-70b"}
	plan := route.Plan{
		Policy: "throughput",
		Deployments: []route.Candidate{
			{Deployment: &groq, Score: 280, Reason: route.ReasonBest, Expected: route.Expected{TPS: 280, TPSOK: true, Samples: 40, OK: true}},
			{Deployment: &vllm, Score: 40, Reason: route.ReasonRanked, Expected: route.Expected{TPS: 40, TPSOK: true, Samples: 40, OK: true}},
		},
	}
	fmt.Println(plan.Explain())
	fmt.Println(plan.Deployments[0].Reason == route.ReasonBest, plan.Deployments[1].Key())
	// Output:
	// throughput: groq/us/llama-70b [best score score=280 tps=280 n=40] > vllm/eu/llama-70b [ranked score=40 tps=40 n=40]
	// true vllm/eu/llama-70b
}
