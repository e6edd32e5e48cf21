package tpsroute

import (
	"context"
	"net/http"
	"os"
	"runtime"
	"runtime/pprof"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/tpsroute/tpsroute/route"
)

// memStreams is how many streams BenchmarkMemoryInFlight holds open at once.
const memStreams = 5000

// BenchmarkMemoryInFlight opens memStreams streams at once against a replay
// server in another process whose answers send one chunk and then stall, and
// reads each to its first content chunk: first with plain openai-go, then
// with the routed Client reading Current, then with the Client reading only
// Delta. It reports the live heap plus goroutine stacks per in-flight stream
// (after a GC) of plain openai-go and the Client, the Client's excess
// (added-KiB/stream; delta-added-KiB/stream for Delta readers), and the
// goroutines each stream adds. Run it alone; it needs about 2×5,000
// loopback connections: go test -run '^$' -bench MemoryInFlight -benchtime 1x .
// With TPSROUTE_BENCH_HEAPPROFILE=path it writes the heap profiles taken with
// the streams in flight to path.plain, path.current and path.delta.
func BenchmarkMemoryInFlight(b *testing.B) {
	url := benchServer(b)
	params := userParams("slow", "hi")
	params.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
	ctx := context.Background()
	type stream interface {
		Next() bool
		Current() openai.ChatCompletionChunk
		Close() error
	}
	// measure opens memStreams streams and returns the memory and goroutines
	// they hold per stream.
	measure := func(name string, open func() stream, text func(stream) bool) (kib, goroutines float64) {
		held := make([]stream, 0, memStreams)
		var m0, m1 runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&m0)
		g0 := runtime.NumGoroutine()
		for range memStreams {
			s := open()
			for s.Next() && !text(s) {
			}
			held = append(held, s)
		}
		runtime.GC()
		runtime.ReadMemStats(&m1)
		g1 := runtime.NumGoroutine()
		if path := os.Getenv("TPSROUTE_BENCH_HEAPPROFILE"); path != "" {
			// the heap while the streams are in flight, for go tool pprof
			if f, err := os.Create(path + "." + name); err == nil {
				_ = pprof.WriteHeapProfile(f)
				_ = f.Close()
			}
		}
		used := float64(m1.HeapAlloc+m1.StackInuse) - float64(m0.HeapAlloc+m0.StackInuse)
		for _, s := range held {
			_ = s.Close()
		}
		return used / 1024 / memStreams, float64(g1-g0) / memStreams
	}
	current := func(s stream) bool {
		ch := s.Current().Choices
		return len(ch) > 0 && ch[0].Delta.Content != ""
	}
	var plainKiB, clientKiB, deltaKiB, plainG, clientG float64
	for b.Loop() {
		trPlain := &http.Transport{MaxIdleConnsPerHost: memStreams}
		plain := openai.NewClient(option.WithBaseURL(url), option.WithAPIKey("k"),
			option.WithHTTPClient(&http.Client{Transport: trPlain}), option.WithMaxRetries(0))
		k, g := measure("plain", func() stream { return plain.Chat.Completions.NewStreaming(ctx, params) }, current)
		plainKiB, plainG = plainKiB+k, plainG+g
		trPlain.CloseIdleConnections()

		trClient := &http.Transport{MaxIdleConnsPerHost: memStreams}
		c, err := New(Config{HTTPClient: &http.Client{Transport: trClient}, Deployments: []route.Deployment{
			{Provider: "local", Model: "slow", BaseURL: url, APIKey: "k"},
		}})
		if err != nil {
			b.Fatal(err)
		}
		k, g = measure("current", func() stream { return c.Chat.Completions.NewStreaming(ctx, params) }, current)
		clientKiB, clientG = clientKiB+k, clientG+g
		k, _ = measure("delta", func() stream { return c.Chat.Completions.NewStreaming(ctx, params) },
			func(s stream) bool { return len(s.(*Stream).Delta().Content) > 0 })
		deltaKiB += k
		trClient.CloseIdleConnections()
	}
	n := float64(b.N)
	b.ReportMetric(plainKiB/n, "plain-KiB/stream")
	b.ReportMetric(clientKiB/n, "client-KiB/stream")
	b.ReportMetric((clientKiB-plainKiB)/n, "added-KiB/stream")
	b.ReportMetric((deltaKiB-plainKiB)/n, "delta-added-KiB/stream")
	b.ReportMetric(plainG/n, "plain-goroutines/stream")
	b.ReportMetric(clientG/n, "client-goroutines/stream")
}
