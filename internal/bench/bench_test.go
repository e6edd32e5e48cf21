package bench

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

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tpsroute/tpsroute"
	"github.com/tpsroute/tpsroute/replay"
	"github.com/tpsroute/tpsroute/route"
)

// benchmarkHarness runs b.N streams of 100 chunks through the harness in
// compare mode, closed loop with 64 workers, and reports streams/s.
func benchmarkHarness(b *testing.B, rt http.RoundTripper, url string) {
	cfg := Config{
		Router: tpsroute.Config{
			Deployments: []route.Deployment{{Provider: "local", Region: "lo", Model: "m", BaseURL: url}},
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
	// CPU time of this process per stream: on a shared machine streams/s
	// reflects the CPU share the processes got, while cores / cpu-µs is what
	// the process could sustain on cores of its own.
	cpu := time.Duration(after.Utime.Nano()+after.Stime.Nano()-before.Utime.Nano()-before.Stime.Nano()) / time.Duration(cfg.Requests)
	b.ReportMetric(float64(cpu.Microseconds()), "cpu-µs/stream")
}

// BenchmarkHarnessLoopback measures the harness against a replay server on
// 127.0.0.1 that answers 100 chunks with no delay. The server runs in a
// child process (this test binary, in TestReplayServerProcess), so
// cpu-µs/stream is the harness's own cost: the harness, the router and the
// HTTP client, without the fake provider.
func BenchmarkHarnessLoopback(b *testing.B) {
	cmd := exec.Command(os.Args[0], "-test.run=^TestReplayServerProcess$")
	cmd.Env = append(os.Environ(), "BENCH_REPLAY_SERVER=1")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() {
		_ = stdin.Close() // the child stops when its stdin closes
		_ = cmd.Wait()
	}()
	url, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		b.Fatal(err)
	}
	benchmarkHarness(b, nil, strings.TrimSpace(url))
}

// TestReplayServerProcess is the child process of BenchmarkHarnessLoopback:
// it serves 100-chunk streams with no delay on 127.0.0.1, prints the URL and
// runs until its stdin closes. Run directly, it checks the server answers.
func TestReplayServerProcess(t *testing.T) {
	srv := replay.NewServer(map[string]replay.Script{"m": &replay.Profile{OutputTokens: 100}})
	defer srv.Close()
	if os.Getenv("BENCH_REPLAY_SERVER") != "1" {
		res, err := http.Post(srv.URL()+"/chat/completions", "application/json",
			strings.NewReader(`{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`))
		require.NoError(t, err)
		body, err := io.ReadAll(res.Body)
		require.NoError(t, err)
		require.NoError(t, res.Body.Close())
		assert.Equal(t, 100, strings.Count(string(body), `"content":"w`), "100 content chunks")
		return
	}
	fmt.Println(srv.URL())
	_, _ = io.Copy(io.Discard, os.Stdin)
}

// BenchmarkHarnessInMemory measures the harness against replay's in-memory
// transport: no sockets, so it is closer to the harness's own cost.
func BenchmarkHarnessInMemory(b *testing.B) {
	h := replay.NewHandler(map[string]replay.Script{"m": &replay.Profile{OutputTokens: 100}})
	benchmarkHarness(b, h.Transport(), "http://local.invalid/v1")
}
