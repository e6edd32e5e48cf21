package tpsroute

import (
	"context"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/ssestream"
	"github.com/openai/openai-go/v3/responses"

	"github.com/tpsroute/tpsroute/route"
)

// BenchmarkResponses1000 compares the client CPU of one Responses API stream
// of 1,000 output deltas from a replay server in another process: plain
// openai-go's client.Responses.NewStreaming, the routed Client.Responses and
// openai-go over Client.Transport, interleaved; each reports its CPU µs per
// call and its ratio to plain openai-go (issue 30's budget: the Client at
// most 1.05x).
func BenchmarkResponses1000(b *testing.B) {
	url := benchServer(b)
	tr := &http.Transport{MaxIdleConnsPerHost: 4}
	b.Cleanup(tr.CloseIdleConnections)
	hc := &http.Client{Transport: tr}
	plain := openai.NewClient(option.WithBaseURL(url), option.WithAPIKey("k"), option.WithHTTPClient(hc), option.WithMaxRetries(0))
	c, err := New(Config{HTTPClient: hc, Deployments: []route.Deployment{
		{Provider: "local", Model: "mresp", BaseURL: url, APIKey: "k", APIs: []route.API{route.APIResponses}},
	}})
	if err != nil {
		b.Fatal(err)
	}
	viaTransport := openai.NewClient(option.WithBaseURL("http://caller.invalid/v1"), option.WithAPIKey("k"),
		option.WithHTTPClient(&http.Client{Transport: c.Transport()}), option.WithMaxRetries(0))
	params := responses.ResponseNewParams{Model: "mresp", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hi")}}
	ctx := context.Background()
	drain := func(s *ssestream.Stream[responses.ResponseStreamEventUnion]) {
		n := 0
		for s.Next() {
			if s.Current().Type == "response.output_text.delta" {
				n++
			}
		}
		if err := s.Err(); err != nil {
			b.Fatal(err)
		}
		_ = s.Close()
		if n != benchChunks {
			b.Fatalf("%d deltas, want %d", n, benchChunks)
		}
	}
	runs := []func(){
		func() { drain(plain.Responses.NewStreaming(ctx, params)) },
		func() { drain(c.Responses.NewStreaming(ctx, params)) },
		func() { drain(viaTransport.Responses.NewStreaming(ctx, params)) },
	}
	for _, r := range runs {
		r()
	}
	var cpu [3]time.Duration
	var clientRatios, transportRatios []float64
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		var round [3]time.Duration
		for i, r := range runs {
			t0 := cpuTime()
			r()
			round[i] = cpuTime() - t0
			cpu[i] += round[i]
		}
		clientRatios = append(clientRatios, float64(round[1])/float64(round[0]))
		transportRatios = append(transportRatios, float64(round[2])/float64(round[0]))
	}
	b.StopTimer()
	n := float64(b.N)
	b.ReportMetric(float64(cpu[0].Microseconds())/n, "plain-cpu-µs/call")
	b.ReportMetric(float64(cpu[1].Microseconds())/n, "client-cpu-µs/call")
	b.ReportMetric(float64(cpu[1])/float64(cpu[0]), "client/plain")
	b.ReportMetric(float64(cpu[2])/float64(cpu[0]), "transport/plain")
	// The median of the rounds' ratios as well: one round that another
	// process slowed moves the ratio of the sums, not the median.
	b.ReportMetric(medianOf(clientRatios), "client/plain-median")
	b.ReportMetric(medianOf(transportRatios), "transport/plain-median")
}

// medianOf returns the median of v, which it sorts.
func medianOf(v []float64) float64 {
	slices.Sort(v)
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}
