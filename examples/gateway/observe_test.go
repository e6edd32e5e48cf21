package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tpsroute/tpsroute/internal/telemetry"
)

// startDemo runs the real command in -demo mode on a loopback port and
// returns its base URL; the gateway stops when the test ends.
func startDemo(t *testing.T, extra ...string) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan string, 1)
	done := make(chan error, 1)
	args := append([]string{"-demo", "-addr", "127.0.0.1:0", "-drain", "1s"}, extra...)
	go func() { done <- run(ctx, args, io.Discard, func(string) (string, bool) { return "", false }, ready) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
	})
	select {
	case addr := <-ready:
		return "http://" + addr
	case err := <-done:
		t.Fatalf("run ended early: %v", err)
	}
	return ""
}

// demoTraffic sends n waves of streamed calls, each wave at once, and reads
// them to the end: both demo models routed freely, and calls that put each
// provider first, so that every deployment gets traffic and the vLLM
// deployment, down for the demo's first 20 s, fails over.
func demoTraffic(t *testing.T, base string, n int) {
	t.Helper()
	calls := []struct{ model, provider string }{
		{"llama-3.3-70b", ""}, {"gpt-4.1-mini", ""},
		{"llama-3.3-70b", "vllm"}, {"llama-3.3-70b", "together"}, {"gpt-4.1-mini", "openai"},
	}
	for i := range n {
		var wg sync.WaitGroup
		for _, c := range calls {
			wg.Go(func() {
				body := fmt.Sprintf(`{"model":%q,"stream":true,"messages":[{"role":"user","content":"hi %d"}]`, c.model, i)
				if c.provider != "" {
					body += fmt.Sprintf(`,"provider":{"order":[%q]}`, c.provider)
				}
				resp, err := http.Post(base+"/v1/chat/completions", "application/json", strings.NewReader(body+"}"))
				if !assert.NoError(t, err) {
					return
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			})
		}
		wg.Wait()
	}
}

// TestMetricsEndpoint scrapes GET /metrics after some demo traffic and parses
// it with Prometheus's own text parser: the GenAI histograms are there with
// the conventions' bucket boundaries, in seconds, with bounded labels.
func TestMetricsEndpoint(t *testing.T) {
	base := startDemo(t)
	demoTraffic(t, base, 3)

	resp, err := http.Get(base + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, 200, resp.StatusCode)
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	require.NoError(t, err)

	for name, buckets := range map[string][]float64{
		"gen_ai_client_operation_duration_seconds":              telemetry.DurationBuckets,
		"gen_ai_client_operation_time_to_first_chunk_seconds":   telemetry.DurationBuckets,
		"gen_ai_client_operation_time_per_output_chunk_seconds": telemetry.ChunkBuckets,
		"gen_ai_client_token_usage":                             telemetry.TokenBuckets,
		"tpsroute_attempt_time_to_first_chunk_seconds":          telemetry.DurationBuckets,
	} {
		f, ok := fams[name]
		require.True(t, ok, "family %s; have %v", name, keys(fams))
		assert.Equal(t, "HISTOGRAM", f.GetType().String(), name)
		require.NotEmpty(t, f.Metric, name)
		var les []float64
		for _, b := range f.Metric[0].GetHistogram().GetBucket() {
			les = append(les, b.GetUpperBound())
		}
		assert.Equal(t, append(append([]float64(nil), buckets...), math.Inf(1)), les, name)
	}
	providers := map[string]bool{}
	var calls uint64
	for _, m := range fams["gen_ai_client_operation_duration_seconds"].Metric {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		assert.Equal(t, "chat", labels["gen_ai_operation_name"])
		assert.Contains(t, []string{"llama-3.3-70b", "gpt-4.1-mini"}, labels["gen_ai_request_model"])
		providers[labels["gen_ai_provider_name"]] = true
		calls += m.GetHistogram().GetSampleCount()
	}
	assert.EqualValues(t, 15, calls, "one duration per call")
	for p := range providers {
		assert.Contains(t, []string{"groq", "together", "vllm", "openai"}, p)
	}
	for _, name := range []string{"tpsroute_attempts_total", "tpsroute_route_decisions_total", "tpsroute_breaker_state", "tpsroute_inflight", "tpsroute_generation_tps_per_second", "tpsroute_cost_USD_total"} {
		assert.Contains(t, fams, name)
	}
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// chromium returns the path of a Chromium binary. Without one the test fails
// in CI (CI is set) and is skipped elsewhere.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatal("chromium is not installed; .ci/run installs it with apt-get install -y chromium")
	}
	t.Skip("chromium is not installed (apt-get install -y chromium); the debug page test needs a real browser")
	return ""
}

// headless runs Chromium headless on url with a fresh profile and returns
// its stdout; args add the mode (--dump-dom, --screenshot=...).
func headless(t *testing.T, bin, url string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	all := append([]string{
		"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--disable-dev-shm-usage", "--user-data-dir=" + t.TempDir(),
		"--virtual-time-budget=6000", "--window-size=1280,760",
	}, args...)
	cmd := exec.CommandContext(ctx, bin, append(all, url)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "chromium: %s", stderr.String())
	return string(out)
}

// TestDebugPageInBrowser loads /debug/tpsroute/ui in headless Chromium
// against a -demo gateway that has served traffic, lets its script run, and
// asserts on the DOM it rendered: one row per deployment with three
// sparklines, breaker states, and the failovers the demo's faults caused.
// With TPSROUTE_SCREENSHOT=path it also writes a screenshot there.
func TestDebugPageInBrowser(t *testing.T) {
	bin := chromium(t)
	base := startDemo(t)
	demoTraffic(t, base, 4)

	dom := headless(t, bin, base+"/debug/tpsroute/ui", "--dump-dom")
	require.Contains(t, dom, `data-ready="1"`, "the script filled the page")
	rows := regexp.MustCompile(`<tr data-deployment="([^"]+)">(.*?)</tr>`).FindAllStringSubmatch(dom, -1)
	got := map[string]string{}
	for _, r := range rows {
		got[r[1]] = r[2]
	}
	for _, d := range []string{"groq/us-east-1/llama-3.3-70b", "together/us-west-2/llama-3.3-70b", "openai/eu/gpt-4.1-mini"} {
		require.Contains(t, got, d, "a row per deployment; DOM:\n%s", dom)
		row := got[d]
		assert.Equal(t, 3, strings.Count(row, "<svg"), "share, TTFT and TPS sparklines in %s", d)
		assert.Regexp(t, `class="breaker (closed|half-open|open)"`, row)
	}
	assert.Contains(t, dom, "<polyline", "sparklines have data")
	assert.Regexp(t, `\d+(\.\d)?%`, got["openai/eu/gpt-4.1-mini"], "a traffic share")
	assert.Regexp(t, `\d+ ms`, got["openai/eu/gpt-4.1-mini"], "a TTFT")
	assert.Regexp(t, `\d+ tok/s`, got["openai/eu/gpt-4.1-mini"], "a TPS")
	assert.Contains(t, dom, `<tr class="failover">`, "the demo's down vLLM shows as failovers")
	assert.NotContains(t, dom, "cannot reach the gateway")

	if path := os.Getenv("TPSROUTE_SCREENSHOT"); path != "" {
		abs, err := filepath.Abs(path)
		require.NoError(t, err)
		headless(t, bin, base+"/debug/tpsroute/ui", "--screenshot="+abs, "--hide-scrollbars")
		_, err = os.Stat(abs)
		require.NoError(t, err)
	}
}
