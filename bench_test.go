package tpsroute

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/tpsroute/tpsroute/replay"
	"github.com/tpsroute/tpsroute/route"
)

// benchServerEnv makes the test binary serve a replay server for benchmarks
// (see serveBench) instead of running tests, so that the benchmarks measure
// the client's CPU alone.
const benchServerEnv = "TPSROUTE_BENCH_SERVER"

const benchChunks = 1000

// serveBench runs a replay server answering benchChunks chunks at once,
// prints its URL and serves until stdin closes.
func serveBench() {
	s := replay.NewServer(map[string]replay.Script{
		"m":   &replay.Profile{OutputTokens: benchChunks},
		"m16": &replay.Profile{OutputTokens: 16}, // BenchmarkNewAllocs
		// BenchmarkResponses1000: a Responses API stream of 1,000 deltas.
		"mresp": &replay.Profile{OutputTokens: benchChunks, Style: replay.Responses},
		// "slow" sends its first chunk at once and the next after 1,000 s:
		// streams that stay in flight (BenchmarkMemoryInFlight).
		"slow": &replay.Profile{OutputTokens: 3, TPS: 0.001},
	})
	fmt.Println(s.URL())
	_, _ = io.Copy(io.Discard, os.Stdin)
	s.Close()
}

// benchServer starts the replay server in a child process and returns its URL.
func benchServer(b *testing.B) string {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), benchServerEnv+"=1")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { stdin.Close(); _ = cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		b.Fatal(err)
	}
	return strings.TrimSpace(line)
}

// cpuTime returns the process's user+system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func drainOpenAI(b *testing.B, s interface {
	Next() bool
	Current() openai.ChatCompletionChunk
	Err() error
	Close() error
}) {
	n := 0
	for s.Next() {
		if len(s.Current().Choices) > 0 && s.Current().Choices[0].Delta.Content != "" {
			n++
		}
	}
	if err := s.Err(); err != nil {
		b.Fatal(err)
	}
	_ = s.Close()
	if n != benchChunks {
		b.Fatalf("%d content chunks, want %d", n, benchChunks)
	}
}

// drainDelta reads a routed stream through its text path, Delta, without
// ever calling Current.
func drainDelta(b *testing.B, s *Stream) {
	n := 0
	for s.Next() {
		if len(s.Delta().Content) > 0 {
			n++
		}
	}
	if err := s.Err(); err != nil {
		b.Fatal(err)
	}
	_ = s.Close()
	if n != benchChunks {
		b.Fatalf("%d content chunks, want %d", n, benchChunks)
	}
}

// BenchmarkStream1000 compares the client CPU of one streaming call of 1,000
// chunks from a replay server in another process (no delays): plain openai-go
// reading Current, the routed Client reading Current, the routed Client
// reading only Delta (the text path), and openai-go over Client.Transport.
// The kinds of call are interleaved so that drift affects them alike; each
// reports its CPU µs per call and its ratio to plain openai-go.
func BenchmarkStream1000(b *testing.B) {
	url := benchServer(b)
	tr := &http.Transport{MaxIdleConnsPerHost: 4}
	b.Cleanup(tr.CloseIdleConnections)
	hc := &http.Client{Transport: tr}
	plain := openai.NewClient(option.WithBaseURL(url), option.WithAPIKey("k"), option.WithHTTPClient(hc), option.WithMaxRetries(0))
	c, err := New(Config{HTTPClient: hc, Deployments: []route.Deployment{
		{Provider: "local", Model: "m", BaseURL: url, APIKey: "k"},
	}})
	if err != nil {
		b.Fatal(err)
	}
	viaTransport := openai.NewClient(option.WithBaseURL("http://caller.invalid/v1"), option.WithAPIKey("k"),
		option.WithHTTPClient(&http.Client{Transport: c.Transport()}), option.WithMaxRetries(0))
	params := userParams("m", "hi")
	params.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
	ctx := context.Background()

	runs := []struct {
		name string
		call func()
	}{
		{"plain", func() { drainOpenAI(b, plain.Chat.Completions.NewStreaming(ctx, params)) }},
		{"client", func() { drainOpenAI(b, c.Chat.Completions.NewStreaming(ctx, params)) }},
		{"transport", func() { drainOpenAI(b, viaTransport.Chat.Completions.NewStreaming(ctx, params)) }},
		{"delta", func() { drainDelta(b, c.Chat.Completions.NewStreaming(ctx, params)) }},
	}
	for _, r := range runs { // warm connections and statistics
		r.call()
	}
	var cpu [4]time.Duration
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		for i, r := range runs {
			t0 := cpuTime()
			r.call()
			cpu[i] += cpuTime() - t0
		}
	}
	b.StopTimer()
	n := float64(b.N)
	b.ReportMetric(float64(cpu[0].Microseconds())/n, "plain-cpu-µs/call")
	b.ReportMetric(float64(cpu[1].Microseconds())/n, "client-cpu-µs/call")
	b.ReportMetric(float64(cpu[2].Microseconds())/n, "transport-cpu-µs/call")
	b.ReportMetric(float64(cpu[1])/float64(cpu[0]), "client/plain")
	b.ReportMetric(float64(cpu[2])/float64(cpu[0]), "transport/plain")
	b.ReportMetric(float64(cpu[3].Microseconds())/n, "delta-cpu-µs/call")
	b.ReportMetric(float64(cpu[3])/float64(cpu[0]), "delta/plain")
}

// BenchmarkCall16 measures the per-call cost of routing on a short answer
// (16 chunks) from an in-memory replay handler, where per-call work (plan,
// body rewrite, executor, bookkeeping) dominates: ns/op and allocations of
// plain openai-go, the routed Client and openai-go over Client.Transport.
func BenchmarkCall16(b *testing.B) {
	h := replay.NewHandler(map[string]replay.Script{"m": &replay.Profile{OutputTokens: 16}})
	hc := &http.Client{Transport: h.Transport()}
	plain := openai.NewClient(option.WithBaseURL("http://mem/v1"), option.WithAPIKey("k"), option.WithHTTPClient(hc), option.WithMaxRetries(0))
	c, err := New(Config{HTTPClient: hc, Deployments: []route.Deployment{
		{Provider: "local", Model: "m", BaseURL: "http://mem/v1", APIKey: "k"},
	}})
	if err != nil {
		b.Fatal(err)
	}
	viaTransport := openai.NewClient(option.WithBaseURL("http://caller.invalid/v1"), option.WithAPIKey("k"),
		option.WithHTTPClient(&http.Client{Transport: c.Transport()}), option.WithMaxRetries(0))
	params := userParams("m", "hi")
	params.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
	ctx := context.Background()
	type streamer interface {
		Next() bool
		Err() error
		Close() error
	}
	drain16 := func(s streamer) { // reads one 16-chunk stream to its end
		for s.Next() {
		}
		if err := s.Err(); err != nil {
			b.Fatal(err)
		}
		_ = s.Close()
	}
	for _, path := range []struct {
		name string
		open func() streamer
	}{
		{"plain", func() streamer { return plain.Chat.Completions.NewStreaming(ctx, params) }},
		{"client", func() streamer { return c.Chat.Completions.NewStreaming(ctx, params) }},
		{"transport", func() streamer { return viaTransport.Chat.Completions.NewStreaming(ctx, params) }},
	} {
		b.Run(path.name, func(b *testing.B) {
			b.ReportAllocs()
			t0 := cpuTime()
			for b.Loop() {
				drain16(path.open())
			}
			b.ReportMetric(float64(cpuTime()-t0)/float64(b.N), "cpu-ns/op")
		})
	}
}
