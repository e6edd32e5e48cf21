package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestUsage(t *testing.T) {
	tests := []struct {
		name string
		args []string
		code int
		err  string
	}{
		{name: "no args", args: nil, code: exitUsage, err: "Examples:"},
		{name: "help", args: []string{"-h"}, code: exitOK, err: "tpsbench compare --demo"},
		{name: "subcommand help", args: []string{"run", "-h"}, code: exitOK, err: "Exit codes"},
		{name: "compare help is compare's", args: []string{"compare", "-h"}, code: exitOK, err: "Usage: tpsbench compare [flags]"},
		{name: "report help is report's", args: []string{"report", "-h"}, code: exitOK, err: "Usage: tpsbench report FILE"},
		{name: "unknown command", args: []string{"bogus"}, code: exitUsage, err: `unknown command "bogus"`},
		{name: "no config", args: []string{"run"}, code: exitUsage, err: "-config FILE or --demo"},
		{name: "too few", args: []string{"run", "--demo", "-n", "5"}, code: exitUsage, err: "set Force"},
		{name: "unknown target", args: []string{"compare", "--demo", "-targets", "nobody"}, code: exitUsage, err: "invalid config"},
		{name: "sweep one level", args: []string{"sweep", "--demo", "-concurrency", "4"}, code: exitUsage, err: "at least two"},
		{name: "run two levels", args: []string{"run", "--demo", "-concurrency", "1,4"}, code: exitUsage, err: "sweep command"},
		{name: "bad cache", args: []string{"run", "--demo", "-cache", "hot"}, code: exitUsage, err: "cache mode"},
		{name: "bad slo", args: []string{"run", "--demo", "-slo", "ttft=fast"}, code: exitUsage, err: "slo"},
		{name: "missing config file", args: []string{"run", "-config", "/nonexistent.json"}, code: exitUsage, err: "no such file"},
		{name: "key env unset", args: []string{"run", "-config", writeConfig(t)}, code: exitUsage, err: "TPSBENCH_TEST_UNSET_KEY"},
		{name: "report without file", args: []string{"report"}, code: exitUsage, err: "needs a FILE"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			code := run(tt.args, &out, &errb)
			assert.Equal(t, tt.code, code, errb.String())
			assert.Contains(t, errb.String(), tt.err)
		})
	}
}

// writeConfig writes a config whose key variable is not set.
func writeConfig(t *testing.T) string {
	p := filepath.Join(t.TempDir(), "c.json")
	require.NoError(t, os.WriteFile(p, []byte(`{"deployments":[{"provider":"p","model":"m","base_url":"http://127.0.0.1:1/v1","api_key_env":"TPSBENCH_TEST_UNSET_KEY"}]}`), 0o600))
	return p
}

func TestDemoRunAndReport(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the demo in real time")
	}
	dir := t.TempDir()
	var out, errb bytes.Buffer
	code := run([]string{"compare", "--demo", "-demo-tokens", "8", "-n", "20", "-warmup", "0", "-concurrency", "20",
		"-targets", "swiftai/us-east,steadyml", "-cache", "both", "-o", dir}, &out, &errb)
	require.Equal(t, exitOK, code, errb.String())
	table := out.String()
	for _, want := range []string{"cold c=20", "warm c=20", "swiftai/us-east/llama-3.3-70b", "steadyml/eu-west/llama-3.3-70b", "TTFT p50"} {
		assert.Contains(t, table, want)
	}
	assert.NotContains(t, table, "swiftai/eu-west", "-targets filters")
	assert.NotContains(t, errb.String(), "\033[", "no ANSI codes when stderr is not a TTY")
	assert.Contains(t, errb.String(), "[120/120]", "progress reports the end")
	for _, f := range []string{"report.json", "results.csv", "report.html"} {
		st, err := os.Stat(filepath.Join(dir, f))
		require.NoError(t, err)
		assert.Positive(t, st.Size())
	}

	t.Run("report re-renders", func(t *testing.T) {
		var out2, errb2 bytes.Buffer
		dir2 := t.TempDir()
		code := run([]string{"report", filepath.Join(dir, "report.json"), "-o", dir2}, &out2, &errb2)
		require.Equal(t, exitOK, code, errb2.String())
		assert.Equal(t, table, out2.String())
		b, err := os.ReadFile(filepath.Join(dir2, "report.html"))
		require.NoError(t, err)
		assert.Equal(t, 2*2+1, strings.Count(string(b), "<svg "), "2 CDFs per configuration (cold, warm) and a timeline")
	})
	t.Run("report with an unmeetable SLO exits 3", func(t *testing.T) {
		var out3, errb3 bytes.Buffer
		code := run([]string{"report", filepath.Join(dir, "report.json"), "-slo", "ttft=1ms"}, &out3, &errb3)
		assert.Equal(t, exitSLOMissed, code)
		assert.Contains(t, out3.String(), "* = missed")
		assert.Contains(t, errb3.String(), "tpsbench: SLO ttft=1ms missed by the rows marked *; exit status 3", "the status is explained")
	})
}

func TestSim(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "tiny.json")
	require.NoError(t, os.WriteFile(file, []byte(`{"name":"tiny","duration":"1s","workload":{"rate":10,"output_tokens":[20]},
		"deployments":[{"provider":"a","ttft":"10ms","tps":2000},{"provider":"b","ttft":"10ms","tps":1000}]}`), 0o644))
	var stdout, stderr bytes.Buffer
	code := run([]string{"sim", "-policies", "tpsroute,oracle,round-robin,pinned-1", "-o", dir, file}, &stdout, &stderr)
	require.Equal(t, exitOK, code, stderr.String())
	assert.Contains(t, stdout.String(), "scenario tiny")
	assert.Contains(t, stdout.String(), "round-robin")
	assert.Contains(t, stdout.String(), "pinned-1")
	html, err := os.ReadFile(filepath.Join(dir, "report.html"))
	require.NoError(t, err)
	assert.Contains(t, string(html), "<svg")
	assert.NotContains(t, string(html), "<script")
	_, err = os.Stat(filepath.Join(dir, "report.json"))
	require.NoError(t, err)

	assert.Equal(t, exitUsage, run([]string{"sim"}, &stdout, &stderr))
	assert.Equal(t, exitUsage, run([]string{"sim", "-policies", "nope", file}, &stdout, &stderr))
	assert.Equal(t, exitUsage, run([]string{"sim", "no-such-scenario"}, &stdout, &stderr))
}

// "tpsbench sim -random N" scores generated fleets in virtual time and
// prints the distribution; a bad class is a usage error.
func TestSimRandom(t *testing.T) {
	var stdout, stderr bytes.Buffer
	require.Equal(t, exitOK, run([]string{"sim", "-random", "2", "-class", "steps", "-calls", "20"}, &stdout, &stderr), stderr.String())
	assert.Contains(t, stdout.String(), "steps  tpsroute")
	assert.Contains(t, stdout.String(), "mean10")
	assert.Equal(t, exitUsage, run([]string{"sim", "-random", "1", "-class", "nope"}, &stdout, &stderr))
	assert.Contains(t, stderr.String(), `unknown class "nope"`)
}
