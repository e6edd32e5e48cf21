package main

import (
	"fmt"
	"net/http"
	"time"

	"github.com/tpsroute/tpsroute/measure"

	"github.com/tpsroute/tpsroute/replay"
	"github.com/tpsroute/tpsroute/route"
)

// model is the logical model every simulated provider serves. Callers ask for
// it; each deployment may call it by its own provider model id.
const model = "llama-3.3-70b"

// outputTokens is the length of every simulated answer. Every answer is the
// deterministic replay.Text(outputTokens), so a truncated, duplicated or
// stitched answer is detected, not just a failed one.
const outputTokens = 120

// simProvider is one simulated provider: a deployment plus the replay script
// that plays it. The numbers are made up but of realistic size.
type simProvider struct {
	Provider, Region string
	WireModel        string        // the provider's own model id
	TTFT             time.Duration // median time to first token
	TPS              float64       // generation speed, tokens/s
	Price            measure.Price // USD per million tokens
	Reliability      string        // what goes wrong, for the legend
	script           replay.Script
}

// Label is the name a deployment is shown under: provider/region.
func (p simProvider) Label() string { return p.Provider + "/" + p.Region }

// timeline says when the scripted events happen, as offsets from the start.
// It scales with the run's duration so that a short smoke run still shows
// every event; at the default 25 s the outage lasts 7.5 s.
type timeline struct {
	Slowdown             time.Duration // groq's TPS halves
	OutageFrom, OutageTo time.Duration // eu-west answers 503
	End                  time.Duration
}

func newTimeline(d time.Duration) timeline {
	at := func(f float64) time.Duration { return time.Duration(f * float64(d)).Round(100 * time.Millisecond) }
	return timeline{Slowdown: at(0.2), OutageFrom: at(0.45), OutageTo: at(0.75), End: d}
}

// phase is a stretch of the run between two scripted events.
type phase struct {
	Name     string
	From, To time.Duration
}

func (t timeline) phases() []phase {
	return []phase{
		{"all healthy", 0, t.Slowdown},
		{"groq slows down", t.Slowdown, t.OutageFrom},
		{"eu-west outage", t.OutageFrom, t.OutageTo},
		{"eu-west back", t.OutageTo, t.End},
	}
}

// phaseAt returns the index of the phase that contains offset d.
func (t timeline) phaseAt(d time.Duration) int {
	ps := t.phases()
	for i := len(ps) - 1; i > 0; i-- {
		if d >= ps[i].From {
			return i
		}
	}
	return 0
}

// events are the scripted events, for the live output.
func (t timeline) events() []event {
	return []event{
		{t.Slowdown, "groq/us-east slows down: its TPS halves (280 -> 140 tok/s)"},
		{t.OutageFrom, fmt.Sprintf("eu-west outage: fireworks and deepinfra answer 503 for %s", t.OutageTo-t.OutageFrom)},
		{t.OutageTo, "eu-west recovers"},
	}
}

type event struct {
	At   time.Duration
	What string
}

// every returns the attempt numbers first, first+n, first+2n, ... up to 5000:
// a deterministic "1 call in n" for replay's OnAttempts.
func every(n, first int) []int {
	var out []int
	for a := first; a <= 5000; a += n {
		out = append(out, a)
	}
	return out
}

// providers returns the five simulated providers in three regions, with their
// scripts for timeline t. Each has its own TTFT, speed, price and failure mode.
func providers(t timeline) []simProvider {
	outage := replay.Status(http.StatusServiceUnavailable, "", nil).During(t.OutageFrom, t.OutageTo)
	profile := func(ttft time.Duration, tps float64, seed uint64, region string, phases ...replay.Phase) *replay.Profile {
		return &replay.Profile{TTFT: ttft, TPS: tps, Jitter: 0.2, OutputTokens: outputTokens, Seed: seed, Region: region, Phases: phases}
	}
	return []simProvider{
		{
			Provider: "groq", Region: "us-east", WireModel: "llama-3.3-70b-versatile",
			TTFT: 300 * time.Millisecond, TPS: 280, Price: measure.Price{Input: 0.59, Output: 0.79},
			Reliability: "fastest; rate-limits 1 call in 40 (429, Retry-After: 1)",
			script: replay.WithFaults(
				profile(300*time.Millisecond, 280, 1, "us-east", replay.Phase{After: t.Slowdown, TPS: 140}),
				replay.RateLimited("1").OnAttempts(every(40, 20)...)),
		},
		{
			Provider: "fireworks", Region: "eu-west", WireModel: "accounts/fireworks/models/llama-v3p3-70b-instruct",
			TTFT: 350 * time.Millisecond, TPS: 190, Price: measure.Price{Input: 0.90, Output: 0.90},
			Reliability: "reliable, except the eu-west outage",
			script:      replay.WithFaults(profile(350*time.Millisecond, 190, 2, "eu-west"), outage),
		},
		{
			Provider: "together", Region: "us-east", WireModel: "meta-llama/Llama-3.3-70B-Instruct-Turbo",
			TTFT: 450 * time.Millisecond, TPS: 120, Price: measure.Price{Input: 0.88, Output: 0.88},
			Reliability: "cuts 1 stream in 12 mid-answer",
			script: replay.WithFaults(profile(450*time.Millisecond, 120, 3, "us-east"),
				replay.CutAfter(40).OnAttempts(every(12, 6)...)),
		},
		{
			Provider: "deepinfra", Region: "eu-west", WireModel: "meta-llama/Llama-3.3-70B-Instruct",
			TTFT: 200 * time.Millisecond, TPS: 70, Price: measure.Price{Input: 0.23, Output: 0.40},
			Reliability: "lowest TTFT, cheapest; HTTP 500 on 1 call in 8",
			script: replay.WithFaults(profile(200*time.Millisecond, 70, 4, "eu-west"),
				replay.Status(http.StatusInternalServerError, "", nil).OnAttempts(every(8, 4)...), outage),
		},
		{
			Provider: "vllm", Region: "ap-south", WireModel: "llama-3.3-70b",
			TTFT: 700 * time.Millisecond, TPS: 60, Price: measure.Price{Input: 0.30, Output: 0.60},
			Reliability: "self-hosted, slow, reliable",
			script:      profile(700*time.Millisecond, 60, 5, "ap-south"),
		},
	}
}

// deployment returns the route.Deployment of p served at baseURL.
func (p simProvider) deployment(baseURL string) route.Deployment {
	return route.Deployment{
		Provider: p.Provider, Region: p.Region, Model: model, ProviderModel: p.WireModel,
		BaseURL: baseURL, APIKey: "sk-demo-" + p.Provider, Price: p.Price,
		// Every simulated provider reports usage when asked and continues a
		// final assistant message, so a stream cut mid-answer can be resumed
		// on another provider (fallback.MidStreamContinue).
		Capabilities: route.Capabilities{AssistantPrefill: true},
	}
}
