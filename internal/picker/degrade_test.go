package picker

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/tpsroute/tpsroute/internal/registry"
	"github.com/tpsroute/tpsroute/measure"
	"github.com/tpsroute/tpsroute/route"
	"github.com/tpsroute/tpsroute/tps"
)

// TestDegradedLeaderLosesShare is issue 16's first target, on the real
// Registry: a warm leader whose TPS falls 3× (or whose TTFT rises 3×) stops
// leading within 10 of its own calls after the change, and its share of the
// next 100 calls is below 20%, whether it had been good for 100 calls at 1/s
// or for 30 minutes at one call every 10 s. It fails without measure's change
// detection (the leader then keeps the lead for tens of calls).
func TestDegradedLeaderLosesShare(t *testing.T) {
	for _, tc := range []struct {
		name    string
		history int
		every   time.Duration
		policy  route.Policy
		ttft    bool
	}{
		{"tps/100 calls", 100, time.Second, route.Throughput, false},
		{"tps/30 minutes", 180, 10 * time.Second, route.Throughput, false},
		{"ttft/100 calls", 100, time.Second, route.Latency, true},
		{"ttft/30 minutes", 180, 10 * time.Second, route.Latency, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reg := registry.New(measure.Options{})
			ds := []route.Deployment{
				{Provider: "lead", Region: "us", Model: "m", BaseURL: "http://lead"},
				{Provider: "next", Region: "us", Model: "m", BaseURL: "http://next"},
			}
			p, err := New(ds, reg, nil, route.Options{Policy: tc.policy, Seed: 7})
			if err != nil {
				t.Fatal(err)
			}
			// ranked is p without exploration and band: who leads.
			ranked, err := New(ds, reg, nil, route.Options{Policy: tc.policy, Exploration: route.Off, Band: route.Off})
			if err != nil {
				t.Fatal(err)
			}
			rng := rand.New(rand.NewPCG(1, 2))
			// lead: 1500 tok/s, 200 ms; next: 600 tok/s, 400 ms.
			tpsOf := []float64{1500, 600}
			ttftOf := []time.Duration{200 * time.Millisecond, 400 * time.Millisecond}
			now := time.Unix(1_700_000_000, 0)
			call := func(i int) {
				noise := math.Exp(0.1 * rng.NormFloat64())
				reg.RecordAt(now, ds[i].Key(), tps.Sample{
					TTFT: time.Duration(float64(ttftOf[i]) * noise), TPS: tpsOf[i] * noise, TPSOK: true,
					OutputTokens: 200, InputTokens: 100,
				})
			}
			for range 20 {
				now = now.Add(time.Second)
				call(1)
			}
			for i := range tc.history {
				now = now.Add(tc.every)
				call(0)
				if tc.every > time.Second || i%5 == 0 { // next stays warm, as exploration keeps it
					call(1)
				}
			}
			pick := func(p *Picker) int {
				plan, err := p.PickAt(route.Request{Model: "m"}, now)
				if err != nil {
					t.Fatal(err)
				}
				if plan.Deployments[0].Deployment.Provider == "lead" {
					return 0
				}
				return 1
			}
			lead := func() int { return pick(ranked) }
			if lead() != 0 {
				t.Fatal("lead does not lead before the change")
			}
			if tc.ttft {
				ttftOf[0] *= 3 // 600 ms against 400 ms
			} else {
				tpsOf[0] /= 3 // 500 tok/s against 600
			}
			own := 0
			for lead() == 0 {
				own++
				if own > 10 {
					t.Fatalf("lead still leads after %d of its own calls since the change", own-1)
				}
				now = now.Add(time.Second)
				call(0)
			}
			t.Logf("lead lost the lead after %d of its own calls", own)
			n := 0
			for range 100 {
				now = now.Add(time.Second)
				i := pick(p)
				if i == 0 {
					n++
				}
				call(i)
			}
			if n >= 20 {
				t.Errorf("lead kept %d of the next 100 calls, want < 20", n)
			}
		})
	}
}
