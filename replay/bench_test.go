package replay

import (
	"context"
	"math"
	"net/http"
	"slices"
	"testing"
	"time"
)

// BenchmarkPlaybackTiming replays cassettes with their original timing, in
// real time, over TCP (a Server) and through the in-memory transport, and
// compares each event's arrival, measured by a raw SSE client from just
// before the request, with the cassette's at_ms. It reports the mean, p95 and
// max absolute error in ms, the max error as a percentage of the event's
// offset, and the share of events outside the budget of 2 ms + 2%.
func BenchmarkPlaybackTiming(b *testing.B) {
	for _, name := range []string{"vllm", "openai-usage"} {
		c, err := Bundled(name)
		if err != nil {
			b.Fatal(err)
		}
		want := c.plan(nil).events
		b.Run(name+"/tcp", func(b *testing.B) {
			srv := NewServer(map[string]Script{"m": c})
			defer srv.Close()
			client := &http.Client{Transport: &http.Transport{}}
			defer client.CloseIdleConnections()
			playbackTiming(b, client, srv.URL(), want)
		})
		b.Run(name+"/memory", func(b *testing.B) {
			h := NewHandler(map[string]Script{"m": c})
			playbackTiming(b, memClient(h), "http://replay.invalid/v1", want)
		})
	}
}

func playbackTiming(b *testing.B, client *http.Client, url string, want []event) {
	var errs []float64 // ms
	var worstRel float64
	over := 0
	for b.Loop() {
		r := rawCall(context.Background(), client, url, chatBody("m", true, nil))
		if r.err != nil || len(r.events) != len(want)-strayBlanks(&plan{events: want}) {
			b.Fatalf("playback: %v, %d events", r.err, len(r.events))
		}
		for i, e := range r.events {
			w := want[i].at
			d := math.Abs(float64(e.at - w))
			errs = append(errs, d/float64(time.Millisecond))
			if w > 0 {
				worstRel = max(worstRel, 100*d/float64(w))
			}
			if d > float64(2*time.Millisecond)+0.02*float64(w) {
				over++
			}
		}
	}
	slices.Sort(errs)
	sum := 0.0
	for _, e := range errs {
		sum += e
	}
	b.ReportMetric(sum/float64(len(errs)), "mean-err-ms")
	b.ReportMetric(errs[int(float64(len(errs)-1)*0.95)], "p95-err-ms")
	b.ReportMetric(errs[len(errs)-1], "max-err-ms")
	b.ReportMetric(worstRel, "max-err-%")
	b.ReportMetric(100*float64(over)/float64(len(errs)), "%-over-budget") // budget: 2 ms + 2% of the offset
}

// BenchmarkProfileStream measures the cost of one tiny synthetic stream
// (16 tokens, no delays) through the in-memory transport.
func BenchmarkProfileStream(b *testing.B) {
	h := NewHandler(map[string]Script{"m": &Profile{OutputTokens: 16}})
	client := memClient(h)
	for b.Loop() {
		if r := rawCall(context.Background(), client, "http://x/v1", chatBody("m", true, nil)); r.err != nil {
			b.Fatal(r.err)
		}
	}
}
