package sdk_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/tpsroute/tpsroute"
	"github.com/tpsroute/tpsroute/internal/telemetry"
	"github.com/tpsroute/tpsroute/replay"
	"github.com/tpsroute/tpsroute/route"
)

// benchServerEnv makes the test binary serve a replay server for the
// benchmark instead of running tests, so that the benchmark measures the
// client's CPU alone.
const benchServerEnv = "TPSROUTE_SDK_BENCH_SERVER"

const benchChunks = 1000

func TestMain(m *testing.M) {
	if os.Getenv(benchServerEnv) != "" {
		s := replay.NewServer(map[string]replay.Script{"m": &replay.Profile{OutputTokens: benchChunks}})
		fmt.Println(s.URL())
		_, _ = io.Copy(io.Discard, os.Stdin)
		s.Close()
		return
	}
	os.Exit(m.Run())
}

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

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// discard is a span exporter that drops every span: the SDK does all its
// work (sampling, recording, batching) but nothing leaves the process.
type discard struct{}

func (discard) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (discard) Shutdown(context.Context) error                             { return nil }

// BenchmarkRoutedStream1000 is the cost of telemetry on the routed Client's
// 1,000-chunk stream from a replay server in another process (no delays):
// "off" has no-op providers (the floor), "global" leaves the providers nil
// with no SDK installed (what a program gets by default), "sdk" records every
// metric through the SDK (a periodic-less ManualReader, collected every 100
// calls) and every span through the SDK's batch processor. The three are
// interleaved so that drift affects them alike; each reports CPU µs per call
// and its ratio to "off".
func BenchmarkRoutedStream1000(b *testing.B) {
	url := benchServer(b)
	tr := &http.Transport{MaxIdleConnsPerHost: 4}
	b.Cleanup(tr.CloseIdleConnections)
	hc := &http.Client{Transport: tr}
	deps := []route.Deployment{{Provider: "local", Model: "m", BaseURL: url, APIKey: "k"}}
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(discard{}))
	b.Cleanup(func() { _ = mp.Shutdown(context.Background()); _ = tp.Shutdown(context.Background()) })
	clients := map[string]tpsroute.Config{
		"off":    {MeterProvider: metricnoop.NewMeterProvider(), TracerProvider: tracenoop.NewTracerProvider()},
		"global": {},
		"sdk":    {MeterProvider: mp, TracerProvider: tp},
	}
	names := []string{"off", "global", "sdk"}
	cs := make([]*tpsroute.Client, len(names))
	for i, n := range names {
		cfg := clients[n]
		cfg.HTTPClient, cfg.Deployments = hc, deps
		c, err := tpsroute.New(cfg)
		if err != nil {
			b.Fatal(err)
		}
		cs[i] = c
	}
	params := openai.ChatCompletionNewParams{Model: "m", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}}
	ctx := context.Background()
	call := func(c *tpsroute.Client) {
		s := c.Chat.Completions.NewStreaming(ctx, params)
		n := 0
		for s.Next() {
			if ch := s.Current(); len(ch.Choices) > 0 && ch.Choices[0].Delta.Content != "" {
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
	for _, c := range cs { // warm connections and statistics
		call(c)
	}
	var cpu [3]time.Duration
	var ratios [2][]float64 // per round: global/off, sdk/off
	calls := 0
	b.ReportAllocs()
	b.ResetTimer()
	for round := 0; b.Loop(); round++ {
		var this [3]time.Duration
		for j := range cs {
			i := (j + round) % len(cs) // rotate the order too
			c := cs[i]
			t0 := cpuTime()
			call(c)
			if i == 2 {
				if calls++; calls%100 == 0 { // a scrape now and then, as Prometheus would
					var rm metricdata.ResourceMetrics
					_ = reader.Collect(ctx, &rm)
				}
			}
			this[i] = cpuTime() - t0
			cpu[i] += this[i]
		}
		ratios[0] = append(ratios[0], float64(this[1])/float64(this[0]))
		ratios[1] = append(ratios[1], float64(this[2])/float64(this[0]))
	}
	b.StopTimer()
	n := float64(b.N)
	b.ReportMetric(float64(cpu[0].Microseconds())/n, "off-cpu-µs/call")
	b.ReportMetric(float64(cpu[1].Microseconds())/n, "global-cpu-µs/call")
	b.ReportMetric(float64(cpu[2].Microseconds())/n, "sdk-cpu-µs/call")
	b.ReportMetric(float64(cpu[1])/float64(cpu[0]), "global/off")
	b.ReportMetric(float64(cpu[2])/float64(cpu[0]), "sdk/off")
	// The median of the per-round ratios resists bursts of load from other
	// processes better than the ratio of sums.
	b.ReportMetric(median(ratios[0]), "median-global/off")
	b.ReportMetric(median(ratios[1]), "median-sdk/off")
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}

// BenchmarkOutputGap is the per-chunk work of telemetry through the SDK: one
// time_per_output_chunk record with the attempt's precomputed attributes, in
// a call whose span is sampled (so the SDK also offers an exemplar).
func BenchmarkOutputGap(b *testing.B) {
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(discard{}))
	b.Cleanup(func() { _ = mp.Shutdown(context.Background()); _ = tp.Shutdown(context.Background()) })
	d := route.Deployment{Provider: "local", Region: "eu", Model: "m", BaseURL: "http://local.test/v1"}
	tel, err := telemetry.New(telemetry.Options{MeterProvider: mp, TracerProvider: tp, Deployments: []route.Deployment{d}})
	if err != nil {
		b.Fatal(err)
	}
	_, call := tel.Start(context.Background(), "m", true)
	call.Plan(route.Plan{Deployments: []route.Candidate{{Deployment: &d}}})
	b.ReportAllocs()
	t0 := cpuTime()
	for b.Loop() {
		call.OutputGap(0, 20*time.Millisecond)
	}
	b.ReportMetric(float64(cpuTime()-t0)/float64(b.N), "cpu-ns/op")
	call.End(nil)
}
