package bench

import (
	"net/http"
	"time"

	"github.com/tpsroute/tpsroute"
	"github.com/tpsroute/tpsroute/measure"
	"github.com/tpsroute/tpsroute/replay"
	"github.com/tpsroute/tpsroute/route"
)

// DemoModel is the logical model the Demo deployments serve.
const DemoModel = "llama-3.3-70b"

// Demo returns a router config of four simulated deployments, two providers
// in two regions each with distinct TTFT and TPS, whose prompt caches cut the
// TTFT of a fully cached prompt to 30%. It runs entirely in memory: every
// deployment is a replay.Handler reached through its in-memory transport,
// so no socket, network or key is used.
// Answers are outputTokens long (0 means 120); seed makes the timing jitter
// reproducible. Demo starts no goroutines and needs no Close; created
// inside a testing/synctest bubble, all its waiting is virtual.
func Demo(outputTokens int, seed uint64) tpsroute.Config {
	if outputTokens <= 0 {
		outputTokens = 120
	}
	hosts := replay.Hosts{}
	var deps []route.Deployment
	for i, p := range []struct {
		Provider, Region string
		TTFT             time.Duration // median time to first token (cold prompt cache)
		TPS              float64       // median generation tokens/s
	}{
		{"swiftai", "us-east", 180 * time.Millisecond, 170},
		{"swiftai", "eu-west", 320 * time.Millisecond, 150},
		{"steadyml", "us-east", 450 * time.Millisecond, 75},
		{"steadyml", "eu-west", 260 * time.Millisecond, 60},
	} {
		host := p.Provider + "-" + p.Region + ".demo.invalid"
		prof := &replay.Profile{
			TTFTDist:     replay.LogNormal{Median: p.TTFT.Seconds(), Sigma: 0.2},
			TPSDist:      replay.LogNormal{Median: p.TPS, Sigma: 0.08},
			Jitter:       0.1,
			OutputTokens: outputTokens,
			PromptCache:  replay.PromptCache{Enabled: true, TTFTFactor: 0.3},
			Region:       p.Region,
			Seed:         seed + uint64(i)*7919,
		}
		hosts[host] = replay.NewHandler(map[string]replay.Script{DemoModel: prof})
		deps = append(deps, route.Deployment{
			Provider:     p.Provider,
			Region:       p.Region,
			Model:        DemoModel,
			BaseURL:      "http://" + host + "/v1",
			Price:        measure.Price{Input: 0.6, CachedInput: 0.15, Output: 0.8},
			Capabilities: route.Capabilities{CacheControl: true},
		})
	}
	return tpsroute.Config{
		Deployments: deps,
		HTTPClient:  &http.Client{Transport: hosts},
	}
}
