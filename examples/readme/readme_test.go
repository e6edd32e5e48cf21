package readme

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// expectation is what one README command must do.
type expectation struct {
	extra []string       // flags appended to keep the run short (flags the README documents)
	code  int            // exit status of the program
	last  *regexp.Regexp // the last line of its standard output
	doc   string         // the README line documenting that last line
}

// offline lists every `go run` command of README.md's code blocks that runs
// without network or keys, with what it must do. skipped lists the others,
// with why. A README command in neither list fails the test.
var (
	offline = map[string]expectation{
		"go run ./examples/quickstart": {
			extra: []string{"-duration", "6s"},
			last:  regexp.MustCompile(`^calls: \d+  answered: \d+  lost: 0  failed over: \d+  retried: \d+  continued: \d+$`),
			doc:   "calls: 277  answered: 277  lost: 0  failed over: 16  retried: 0  continued: 2",
		},
		"go run ./cmd/tpsbench compare --demo -cache both -concurrency 4 -slo ttft=300ms,tps=60 -o out/": {
			code: 3, // the README explains: the demo misses this SLO on purpose
			last: regexp.MustCompile(`^SLO ttft=300ms,tps=60,p=95: goodput is the share of requests meeting every target \(TTFT and E2E from the scheduled send\); \* = missed$`),
			doc:  "SLO ttft=300ms,tps=60,p=95: goodput is the share of requests meeting every target (TTFT and E2E from the scheduled send); * = missed",
		},
	}
	skipped = map[string]string{
		"go run ./examples/openai -config tpsroute.json -model llama-3.3-70b": "needs real providers and keys",
		"go run . -demo":                "the gateway (after cd examples/gateway), a server: runs until interrupted (examples/gateway tests it)",
		"go run . -config gateway.json": "the gateway (after cd examples/gateway): needs real providers and keys",
	}
)

func TestREADMECommands(t *testing.T) {
	if os.Getenv("TPSROUTE_README_CHECK") == "" {
		t.Skip("set TPSROUTE_README_CHECK=1 to run the README's commands (about two minutes)")
	}
	readme, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	for _, cmd := range goRunCommands(string(readme)) {
		if why, ok := skipped[cmd]; ok {
			t.Logf("skipped %q: %s", cmd, why)
			continue
		}
		want, ok := offline[cmd]
		if !assert.True(t, ok, "README command %q is in neither list of this test", cmd) {
			continue
		}
		t.Run(cmd, func(t *testing.T) {
			require.Contains(t, string(readme), want.doc, "the documented last line")
			assert.Regexp(t, want.last, want.doc, "the documented line matches what the test accepts")
			args := append(strings.Fields(cmd)[1:], want.extra...)
			if out := outDir(args); out != "" {
				args[slices(args, out)] = filepath.Join(t.TempDir(), "out")
			}
			code, last := run(t, "../..", args...)
			assert.Equal(t, want.code, code)
			assert.Regexp(t, want.last, last)
		})
	}
	t.Run("the Go program of \"A routed call in Go\"", func(t *testing.T) {
		src := regexp.MustCompile("(?s)## A routed call in Go.*?```go\n(.*?)```").FindStringSubmatch(string(readme))
		require.NotNil(t, src)
		dir := t.TempDir()
		root, err := filepath.Abs("../..")
		require.NoError(t, err)
		gomod, err := os.ReadFile(filepath.Join(root, "go.mod"))
		require.NoError(t, err)
		gosum, err := os.ReadFile(filepath.Join(root, "go.sum"))
		require.NoError(t, err)
		// The program in a module of its own that uses this checkout, with
		// this module's requirements (so nothing is downloaded).
		mod := strings.Replace(string(gomod), "module github.com/tpsroute/tpsroute", "module readmeprogram", 1) +
			"\nrequire github.com/tpsroute/tpsroute v0.0.0\nreplace github.com/tpsroute/tpsroute => " + root + "\n"
		require.NoError(t, os.WriteFile(filepath.Join(dir, "go.mod"), []byte(mod), 0o644))
		require.NoError(t, os.WriteFile(filepath.Join(dir, "go.sum"), gosum, 0o644))
		require.NoError(t, os.WriteFile(filepath.Join(dir, "main.go"), []byte(src[1]), 0o644))
		code, last := run(t, dir, "run", ".")
		assert.Equal(t, 0, code)
		line := regexp.MustCompile(`^(fast|slow)//llama\s+\d+ calls\s+p50\s+\d+ tokens/s$`)
		assert.Regexp(t, line, last)
		assert.Contains(t, string(readme), "slow//llama   9 calls  p50    60 tokens/s")
	})
}

// goRunCommands returns the `go run` lines of the README's sh code blocks,
// without comments, environment assignments or continuation.
func goRunCommands(readme string) []string {
	var out []string
	for _, block := range regexp.MustCompile("(?s)```sh\n(.*?)```").FindAllStringSubmatch(readme, -1) {
		for line := range strings.SplitSeq(block[1], "\n") {
			line, _, _ = strings.Cut(line, "#")
			fields := strings.Fields(line)
			for len(fields) > 0 && strings.Contains(fields[0], "=") {
				fields = fields[1:] // KEY=… go run …
			}
			if len(fields) >= 2 && fields[0] == "go" && fields[1] == "run" {
				out = append(out, strings.Join(fields, " "))
			}
		}
	}
	return out
}

// outDir returns the value of -o in args, if any.
func outDir(args []string) string {
	if i := slices(args, "-o"); i >= 0 && i+1 < len(args) {
		return args[i+1]
	}
	return ""
}

// slices returns the index of v in args, or -1.
func slices(args []string, v string) int {
	for i, a := range args {
		if a == v {
			return i
		}
	}
	return -1
}

// run builds the go command's target first (so that its exit status is the
// program's, not go run's 1) and runs it in dir, returning the exit status
// and the last line of standard output.
func run(t *testing.T, dir string, args ...string) (int, string) {
	t.Helper()
	require.Equal(t, "run", args[0])
	bin := filepath.Join(t.TempDir(), "prog")
	build := exec.Command("go", "build", "-o", bin, args[1])
	build.Dir = dir
	b, err := build.CombinedOutput()
	require.NoError(t, err, "%s", b)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args[2:]...)
	cmd.Dir = dir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else {
		require.NoError(t, err)
	}
	lines := strings.Split(strings.TrimRight(stdout.String(), "\n"), "\n")
	t.Logf("%s: exit %d; stderr tail: %s", strings.Join(args, " "), code, tail(stderr.String()))
	return code, lines[len(lines)-1]
}

func tail(s string) string {
	if len(s) > 300 {
		return s[len(s)-300:]
	}
	return s
}
