package main

import (
	"net/http"
	"time"

	"github.com/tpsroute/tpsroute"
	"github.com/tpsroute/tpsroute/measure"
	"github.com/tpsroute/tpsroute/replay"
	"github.com/tpsroute/tpsroute/route"
)

// demoConfig returns the -demo setup: five deployments of two models on four
// simulated providers (replay profiles with realistic timing and a few
// faults), served in memory through the returned RoundTripper, so the demo
// needs no network and no keys.
func demoConfig() (tpsroute.Config, http.RoundTripper) {
	const tokens = 120
	llama := func(ttft time.Duration, tps float64, seed uint64) *replay.Profile {
		return &replay.Profile{TTFT: ttft, TPS: tps, Jitter: 0.3, OutputTokens: tokens, Seed: seed}
	}
	rt := replay.Hosts{
		"groq.demo": replay.NewHandler(map[string]replay.Script{
			// Fast, but every 9th stream is cut mid-way.
			"llama-3.3-70b-versatile": replay.WithFaults(llama(250*time.Millisecond, 280, 1),
				replay.CutAfter(40).OnAttempts(9, 18, 27, 36, 45, 54, 63, 72, 81, 90)),
		}),
		"together.demo": replay.NewHandler(map[string]replay.Script{
			"meta-llama/Llama-3.3-70B-Instruct-Turbo": llama(450*time.Millisecond, 110, 2),
		}),
		"vllm.demo": replay.NewHandler(map[string]replay.Script{
			// Down for the first 20 s (503), then the fastest first token.
			"llama-3.3-70b": replay.WithFaults(llama(120*time.Millisecond, 70, 3), replay.DownFor(20*time.Second)),
			"gpt-4.1-mini":  llama(200*time.Millisecond, 60, 4),
		}),
		"openai.demo": replay.NewHandler(map[string]replay.Script{
			"gpt-4.1-mini": &replay.Profile{TTFT: 500 * time.Millisecond, TPS: 90, Jitter: 0.2, OutputTokens: tokens, Seed: 5,
				PromptCache: replay.PromptCache{Enabled: true, Block: 128}},
		}),
	}
	all := route.Capabilities{AssistantPrefill: true}
	cfg := tpsroute.Config{
		Deployments: []route.Deployment{
			{Provider: "groq", Region: "us-east-1", Model: "llama-3.3-70b", ProviderModel: "llama-3.3-70b-versatile",
				BaseURL: "http://groq.demo/v1", Price: measure.Price{Input: 0.59, Output: 0.79}},
			{Provider: "together", Region: "us-west-2", Model: "llama-3.3-70b", ProviderModel: "meta-llama/Llama-3.3-70B-Instruct-Turbo",
				BaseURL: "http://together.demo/v1", Price: measure.Price{Input: 0.88, Output: 0.88}, Capabilities: all},
			{Provider: "vllm", Region: "eu-west", Model: "*", BaseURL: "http://vllm.demo/v1",
				Headers: map[string]string{"X-Route-Region": "eu-west"}, Capabilities: all},
			{Provider: "openai", Region: "eu", Model: "gpt-4.1-mini", BaseURL: "http://openai.demo/v1",
				Price:        measure.Price{Input: 0.40, CachedInput: 0.10, Output: 1.60},
				Capabilities: route.Capabilities{CacheControl: true}},
		},
		Route: route.Options{SLO: route.SLO{MaxErrorRate: 0.3}},
	}
	cfg.Route.Seed = 1
	cfg.Fallback.Seed = 1
	cfg.Fallback.BackoffBase = 50 * time.Millisecond
	return cfg, rt
}
