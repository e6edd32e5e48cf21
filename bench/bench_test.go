package bench

import (
	"context"
	"net/http"
	"syscall"
	"testing"
	"time"

	"github.com/tpsroute/tpsroute"
	"github.com/tpsroute/tpsroute/replay"
	"github.com/tpsroute/tpsroute/route"
)

// benchmarkHarness runs b.N streams of 100 chunks through the harness in
// compare mode, closed loop with 64 workers, and reports streams/s.
func benchmarkHarness(b *testing.B, rt http.RoundTripper, url string) {
	cfg := Config{
		Router: tpsroute.Config{
			Deployments: []route.Deployment{{Provider: "local", Region: "lo", Model: "m", BaseURL: url,
				Capabilities: route.Capabilities{IncludeUsage: true}}},
		},
		Workload:    Workload{InputTokens: []int{16}},
		Concurrency: []int{64},
		Requests:    max(b.N, 1),
		Force:       true,
	}
	if rt != nil {
		cfg.Router.HTTPClient = &http.Client{Transport: rt}
	}
	b.ReportAllocs()
	var before, after syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &before)
	b.ResetTimer()
	rep, err := Run(context.Background(), cfg)
	b.StopTimer()
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &after)
	if err != nil {
		b.Fatal(err)
	}
	s := rep.Summaries[0]
	if s.OK != cfg.Requests {
		b.Fatalf("%d of %d streams failed: %v", cfg.Requests-s.OK, cfg.Requests, s.Errors)
	}
	if s.OutputTokens != int64(100*cfg.Requests) {
		b.Fatalf("output tokens %d, want %d", s.OutputTokens, 100*cfg.Requests)
	}
	b.ReportMetric(float64(cfg.Requests)/b.Elapsed().Seconds(), "streams/s")
	// CPU time of the whole process (harness, router and replay server) per
	// stream: on a loaded machine streams/s reflects the CPU share this
	// process got, and cores/cpu-µs is what an idle machine would sustain.
	cpu := time.Duration(after.Utime.Nano()+after.Stime.Nano()-before.Utime.Nano()-before.Stime.Nano()) / time.Duration(cfg.Requests)
	b.ReportMetric(float64(cpu.Microseconds()), "cpu-µs/stream")
}

// BenchmarkHarnessLoopback measures the harness against a replay server on
// 127.0.0.1 that answers 100 chunks with no delay: the server, the kernel's
// loopback and the harness share the machine.
func BenchmarkHarnessLoopback(b *testing.B) {
	srv := replay.NewServer(map[string]replay.Script{"m": &replay.Profile{OutputTokens: 100}})
	defer srv.Close()
	benchmarkHarness(b, nil, srv.URL())
}

// BenchmarkHarnessInMemory measures the harness against replay's in-memory
// transport: no sockets, so it is closer to the harness's own cost.
func BenchmarkHarnessInMemory(b *testing.B) {
	h := replay.NewHandler(map[string]replay.Script{"m": &replay.Profile{OutputTokens: 100}})
	benchmarkHarness(b, h.Transport(), "http://local.invalid/v1")
}
