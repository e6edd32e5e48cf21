package replay

import (
	"context"
	"math"
	"net/http"
	"testing"
	"time"
)

// BenchmarkPlaybackTiming replays a cassette over TCP with its original
// timing and compares each event's arrival, measured by a raw SSE client from
// just before the request, with the cassette's at_ms. It reports the mean and
// max absolute error in ms, the max error as a percentage of the event's
// offset, and the share of events outside the budget of 2 ms + 2%.
func BenchmarkPlaybackTiming(b *testing.B) {
	for _, name := range []string{"vllm", "openai-usage"} {
		b.Run(name, func(b *testing.B) {
			c, err := Bundled(name)
			if err != nil {
				b.Fatal(err)
			}
			want := c.plan(nil).events
			srv := NewServer(map[string]Script{"m": c})
			defer srv.Close()
			client := &http.Client{Transport: &http.Transport{}}
			defer client.CloseIdleConnections()
			var sum, worst, worstRel float64
			n, over := 0, 0
			for b.Loop() {
				r := rawCall(context.Background(), client, srv.URL(), chatBody("m", true, nil))
				if r.err != nil || len(r.events) != len(want)-strayBlanks(&plan{events: want}) {
					b.Fatalf("playback: %v, %d events", r.err, len(r.events))
				}
				for i, e := range r.events {
					w := want[i].at
					errMS := math.Abs(float64(e.at-w)) / float64(time.Millisecond)
					sum += errMS
					worst = max(worst, errMS)
					if w > 0 {
						worstRel = max(worstRel, 100*math.Abs(float64(e.at-w))/float64(w))
					}
					if math.Abs(float64(e.at-w)) > float64(2*time.Millisecond)+0.02*float64(w) {
						over++
					}
					n++
				}
			}
			b.ReportMetric(sum/float64(n), "mean-err-ms")
			b.ReportMetric(worst, "max-err-ms")
			b.ReportMetric(worstRel, "max-err-%")
			b.ReportMetric(float64(over)/float64(n)*100, "%-over-budget") // budget: 2 ms + 2% of the offset
		})
	}
}

// BenchmarkProfileStream measures the cost of one tiny synthetic stream
// through the in-memory transport (no delays).
func BenchmarkProfileStream(b *testing.B) {
	h := NewHandler(map[string]Script{"m": &Profile{OutputTokens: 16}})
	client := memClient(h)
	for b.Loop() {
		if r := rawCall(context.Background(), client, "http://x/v1", chatBody("m", true, nil)); r.err != nil {
			b.Fatal(r.err)
		}
	}
}
