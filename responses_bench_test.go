package tpsroute

import (
	"context"
	"io"
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

// BenchmarkResponsesNew1000 is BenchmarkNew1000 for the Responses API: the
// CPU of one non-streaming call whose answer has 1,000 output deltas, from
// the replay server in another process, which answers plain openai-go's
// call with one response object and every routed attempt with the stream.
// The doors are plain openai-go's client.Responses.New, the routed
// Client.Responses.New, Do with "stream": false read to its end, and
// openai-go's Responses.New over Client.Transport; each reports its CPU µs a
// call and its ratio to plain openai-go (runDoors). The budget is issue 35's:
// at most 2x.
func BenchmarkResponsesNew1000(b *testing.B) {
	url := benchServer(b)
	tr := &http.Transport{MaxIdleConnsPerHost: 4}
	b.Cleanup(tr.CloseIdleConnections)
	plain := openai.NewClient(option.WithBaseURL(url), option.WithAPIKey("k"),
		option.WithHTTPClient(&http.Client{Transport: tr}), option.WithMaxRetries(0))
	c, err := New(Config{Deployments: []route.Deployment{
		{Provider: "local", Model: "mresp", BaseURL: url, APIKey: "k", APIs: []route.API{route.APIResponses}},
	}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = c.Close() })
	viaTransport := openai.NewClient(option.WithBaseURL("http://caller.invalid/v1"), option.WithAPIKey("k"),
		option.WithHTTPClient(&http.Client{Transport: c.Transport()}), option.WithMaxRetries(0))
	params := responses.ResponseNewParams{Model: "mresp", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hi")}}
	body := []byte(`{"model":"mresp","input":"hi"}`)
	ctx := context.Background()
	check := func(r *responses.Response, err error) {
		if err != nil {
			b.Fatal(err)
		}
		if r.Status != "completed" || r.Usage.OutputTokens != benchChunks || len(r.OutputText()) < 3*benchChunks {
			b.Fatalf("answer %q, %d output tokens, %d bytes of text", r.Status, r.Usage.OutputTokens, len(r.OutputText()))
		}
	}
	buf := make([]byte, 64<<10)
	doors := []door{
		{name: "plain", call: func() { check(plain.Responses.New(ctx, params)) }},
		{name: "client", call: func() { check(c.Responses.New(ctx, params)) }},
		{name: "do", call: func() {
			r, err := c.DoAPI(ctx, route.APIResponses, body)
			if err != nil {
				b.Fatal(err)
			}
			n, err := io.CopyBuffer(io.Discard, onlyReader{r.Body}, buf)
			_ = r.Body.Close()
			if err != nil || n < 3*benchChunks {
				b.Fatalf("DoAPI: %d bytes, %v", n, err)
			}
		}},
		{name: "transport", call: func() { check(viaTransport.Responses.New(ctx, params)) }},
	}
	runDoors(b, doors)
}
