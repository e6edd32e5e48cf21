package picker_test

import (
	"errors"
	"fmt"
	"time"

	"github.com/tpsroute/tpsroute/internal/picker"
	"github.com/tpsroute/tpsroute/internal/registry"
	"github.com/tpsroute/tpsroute/measure"
	"github.com/tpsroute/tpsroute/route"
)

// stats is a fixed Source; in the Client it is a *registry.Registry.
type stats map[measure.Key]registry.Estimate

func (s stats) Estimate(k measure.Key) (registry.Estimate, bool) {
	e, ok := s[k]
	return e, ok
}

func estimate(ttft, tps float64) registry.Estimate {
	return registry.Estimate{TTFTP50: ttft, TTFTP95: ttft, TTFTEWMA: ttft, TPSP50: tps, TPSP95: tps, TPSEWMA: tps, Samples: 40, OK: true}
}

func example() ([]route.Deployment, stats) {
	ds := []route.Deployment{
		{Provider: "groq", Region: "us", Model: "llama-70b", BaseURL: "https://api.groq.com/openai/v1", Price: measure.Price{Input: 0.59, Output: 0.79}},
		{Provider: "together", Region: "us", Model: "llama-70b", BaseURL: "https://api.together.xyz/v1", Price: measure.Price{Input: 0.88, Output: 0.88}},
		{Provider: "vllm", Region: "eu", Model: "llama-70b", BaseURL: "http://10.0.0.7:8000/v1", Price: measure.Price{Input: 0.2, Output: 0.2}},
	}
	s := stats{
		ds[0].Key(): estimate(0.35, 280),
		ds[1].Key(): estimate(0.25, 95),
		ds[2].Key(): estimate(0.90, 40),
	}
	return ds, s
}

func ExamplePicker_Pick() {
	ds, s := example()
	p, err := picker.New(ds, s, nil, route.Options{Seed: 1, Exploration: -1})
	if err != nil {
		panic(err)
	}
	for _, policy := range []route.Policy{route.Throughput, route.Latency, route.Cost} {
		plan, err := p.Pick(route.Request{Model: "llama-70b", Policy: policy})
		if err != nil {
			panic(err)
		}
		fmt.Print(policy, ":")
		for _, c := range plan.Deployments {
			fmt.Print(" ", c.Deployment.Provider)
		}
		fmt.Println()
	}
	// Output:
	// throughput: groq together vllm
	// latency: together groq vllm
	// cost: vllm groq together
}

func ExamplePicker_Pick_slo() {
	ds, s := example()
	p, _ := picker.New(ds, s, nil, route.Options{Seed: 1, Exploration: -1})
	// Cheapest among deployments generating at least 60 tokens/s.
	plan, _ := p.Pick(route.Request{Model: "llama-70b", Policy: route.Cost, SLO: route.SLO{MinTPS: 60}})
	for _, c := range plan.Deployments {
		fmt.Printf("%s %s (%s)\n", c.Deployment.Provider, c.Reason, c.Violations)
	}
	// Output:
	// groq best score ()
	// together ranked ()
	// vllm demoted: violates slo (tps)
}

func ExamplePicker_Pick_pins() {
	ds, s := example()
	p, _ := picker.New(ds, s, nil, route.Options{Seed: 1})
	plan, _ := p.Pick(route.Request{Model: "llama-70b", Regions: []string{"eu"}})
	fmt.Println(plan.Deployments[0].Key())

	_, err := p.Pick(route.Request{Model: "llama-70b", Regions: []string{"ap-south"}})
	fmt.Println(errors.Is(err, route.ErrNoDeployment))
	fmt.Println(err)
	// Output:
	// vllm/eu/llama-70b
	// true
	// route: no deployment: unknown region "ap-south"; regions: "eu", "us"
}

func ExamplePicker_Served() {
	ds, s := example()
	p, _ := picker.New(ds, s, nil, route.Options{Seed: 1, Exploration: -1})
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

	// The session's last call was served by together: its prompt cache is warm there.
	p.Served("session-42", ds[1].Key(), now)
	plan, _ := p.PickAt(route.Request{Model: "llama-70b", CacheKey: "session-42"}, now.Add(time.Minute))
	fmt.Println(plan.Deployments[0].Deployment.Provider, "-", plan.Deployments[0].Reason)

	// After the TTL (5 minutes by default) the fastest wins again.
	plan, _ = p.PickAt(route.Request{Model: "llama-70b", CacheKey: "session-42"}, now.Add(time.Hour))
	fmt.Println(plan.Deployments[0].Deployment.Provider, "-", plan.Deployments[0].Reason)
	fmt.Printf("%+v\n", p.Stats())
	// Output:
	// together - cache affinity
	// groq - best score
	// {Picks:2 NoDeployment:0 AffinityHits:1 AffinityMisses:0 AffinityBroken:1 ColdProbes:0 Explorations:0 BandPicks:0 HalfOpenProbes:0}
}

func ExamplePlan_Explain() {
	ds, s := example()
	p, _ := picker.New(ds, s, nil, route.Options{Seed: 1, Exploration: -1})
	plan, _ := p.Pick(route.Request{Model: "llama-70b", ExpectedOutputTokens: 500})
	fmt.Println(plan.Explain())
	// Output:
	// throughput: groq/us/llama-70b [best score score=280 tps=280 ttft=0.35s n=40 cost=$0.000985] > together/us/llama-70b [ranked score=95 tps=95 ttft=0.25s n=40 cost=$0.00132] > vllm/eu/llama-70b [ranked score=40 tps=40 ttft=0.9s n=40 cost=$0.0003]
}
