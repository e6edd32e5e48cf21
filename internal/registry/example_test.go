package registry_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"

	"github.com/tpsroute/tpsroute/internal/registry"
	"github.com/tpsroute/tpsroute/measure"
	"github.com/tpsroute/tpsroute/tps"
)

var start = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

func ExampleEWMA() {
	var e registry.EWMA // zero value: a half-life of 30 s
	e.Update(start, 100)
	e.Update(start.Add(30*time.Second), 40) // the 100 has halved in weight
	v, ok := e.Value()
	fmt.Printf("%.0f %v\n", v, ok)
	// Output: 60 true
}

func ExamplePeakEWMA() {
	var p registry.PeakEWMA
	p.Update(start, 0.2)
	p.Update(start.Add(time.Second), 2.0) // a slow first token: jumps at once
	v, _ := p.Value()
	fmt.Printf("after the spike: %.1f s\n", v)
	for i := 2; i < 200; i++ {
		p.Update(start.Add(time.Duration(i)*time.Second), 0.2)
	}
	v, _ = p.Value()
	fmt.Printf("after 200 s of fast calls: %.1f s\n", v)
	// Output:
	// after the spike: 2.0 s
	// after 200 s of fast calls: 0.2 s
}

func ExampleWindow() {
	w := registry.NewWindow(measure.WindowOptions{Length: time.Minute, Buckets: 6})
	for i := range 100 {
		w.Add(start.Add(time.Duration(i)*100*time.Millisecond), float64(i+1)/100) // 0.01 .. 1.00 s
	}
	now := start.Add(10 * time.Second)
	p50, _ := w.Quantile(now, 0.5)
	p99, _ := w.Quantile(now, 0.99)
	fmt.Printf("count=%d p50=%.2f p99=%.2f\n", w.Count(now), p50, p99) // the median of 0.01 .. 1.00 is 0.505
	fmt.Println("a minute later:", w.Count(now.Add(time.Minute)))
	// Output:
	// count=100 p50=0.51 p99=0.99
	// a minute later: 0
}

func ExampleWindow_Merge() {
	// Two instances measure the same deployment and share their windows.
	var a, b registry.Window
	for i := range 50 {
		a.Add(start, 1)
		b.Add(start, float64(i+1))
	}
	data, _ := b.MarshalBinary()
	var fromPeer registry.Window
	if err := fromPeer.UnmarshalBinary(data); err != nil {
		panic(err)
	}
	if err := a.Merge(&fromPeer); err != nil {
		panic(err)
	}
	p90, _ := a.Quantile(start, 0.9)
	fmt.Printf("count=%d p90=%.0f\n", a.Count(start), p90)
	// Output: count=100 p90=40
}

func ExampleRegistry() {
	k := measure.Key{Provider: "groq", Region: "us", Model: "llama-3.3-70b"}
	r := registry.New(measure.Options{
		MinSamples: 3,
		Prices:     map[measure.Key]measure.Price{k: {Input: 0.59, Output: 0.79}},
	})
	for i := range 3 {
		r.RecordAt(start.Add(time.Duration(i)*time.Second), k, tps.Sample{
			TTFT: 250 * time.Millisecond, TPS: 300, TPSOK: true,
			E2E: 2 * time.Second, InputTokens: 1000, OutputTokens: 500, Cache: tps.CacheCold,
		})
	}
	end := r.Begin(k)
	e, ok := r.Estimate(k) // quantiles are within 1% of the true values
	fmt.Printf("ok=%v ttft_p50=%.2fs tps_p50=%.0f in_flight=%d\n", ok, e.TTFTP50, e.TPSP50, e.InFlight)
	end()

	st, _ := r.SnapshotAt(start.Add(3 * time.Second)).Lookup(k)
	fmt.Printf("requests=%d cold=%d output_tokens=%d cost=$%.6f\n",
		st.Requests, st.Cold.Requests, st.OutputTokens, st.Cost)
	ttft, _ := json.Marshal(st.TTFT)
	fmt.Println(string(ttft))
	// Output:
	// ok=true ttft_p50=0.25s tps_p50=302 in_flight=1
	// requests=3 cold=3 output_tokens=1500 cost=$0.002955
	// {"count":3,"p50":0.24905131021792776,"p90":0.24905131021792776,"p95":0.24905131021792776,"p99":0.24905131021792776,"mean":0.25,"ewma":0.25}
}

func ExampleRegistry_SaveState() {
	k := measure.Key{Provider: "groq", Region: "us", Model: "llama"}
	r := registry.New(measure.Options{})
	now := start
	for range 20 {
		now = now.Add(time.Second)
		r.RecordAt(now, k, tps.Sample{TTFT: 300 * time.Millisecond, TPS: 120, TPSOK: true, OutputTokens: 200})
	}
	var file bytes.Buffer // a file, in a real program (tpsroute's Config.StateFile)
	if err := r.SaveState(&file, now); err != nil {
		panic(err)
	}

	// A new process, a minute later, restores it.
	restarted := registry.New(measure.Options{})
	info, err := restarted.RestoreState(&file, now.Add(time.Minute), nil)
	if err != nil {
		panic(err)
	}
	e, ok := restarted.Estimate(k)
	fmt.Printf("restored %d key(s): TTFT p50 %.2f s, TPS p50 %.0f, OK %v\n", info.Keys, e.TTFTP50, e.TPSP50, ok)
	// Output: restored 1 key(s): TTFT p50 0.30 s, TPS p50 120, OK true
}

// InputClass buckets prompts by size; an Estimate holds figures per warm
// class (Estimate.Input).
func ExampleInputClass() {
	for _, tokens := range []int64{100, 1_000, 100_000, 1 << 20} {
		fmt.Print(registry.InputClass(tokens), " ")
	}
	fmt.Println()
	// Output: 0 3 10 11
}

// An Estimate without a load model (LoadK 0) scales nothing; with one, a
// call that starts among more calls in flight expects a lower TPS.
func ExampleEstimate_LoadFactor() {
	e := registry.Estimate{TPSP50: 100, LoadK: 8, LoadRef: 2}
	fmt.Printf("%.2f %.2f\n", e.LoadFactor(2), e.LoadFactor(6))
	var zero registry.Estimate
	fmt.Println(zero.LoadFactor(6))
	// Output:
	// 1.00 0.71
	// 1
}
