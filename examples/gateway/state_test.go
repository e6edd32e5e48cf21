package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tpsroute/tpsroute"
	"github.com/tpsroute/tpsroute/internal/registry"
	"github.com/tpsroute/tpsroute/measure"
	"github.com/tpsroute/tpsroute/replay"
)

// stateScripts are three deployments of "m" listed slowest first.
func stateScripts() map[string]replay.Script {
	p := func(ttft time.Duration, tps float64) replay.Script {
		return &replay.Profile{TTFT: ttft, TPS: tps, OutputTokens: 40}
	}
	return map[string]replay.Script{
		"slow-m": p(400*time.Millisecond, 30),
		"mid-m":  p(200*time.Millisecond, 90),
		"fast-m": p(100*time.Millisecond, 300),
	}
}

// stateGatewayConfig is testConfig with cold probes on (a cold gateway
// measures each deployment in turn) and a state file.
func stateGatewayConfig(file string) tpsroute.Config {
	cfg := testConfig(dep("slow", "us", "m"), dep("mid", "us", "m"), dep("fast", "us", "m"))
	cfg.Route.ColdProbes = 0
	cfg.Measure.MinSamples = 3
	cfg.StateFile = file
	return cfg
}

// picks sends n streaming calls through the gateway's handler, one a
// second, and returns the deployment that answered each.
func picks(t *testing.T, g *gateway, n int) []string {
	t.Helper()
	var out []string
	for range n {
		w := serveRecorded(g, req("m", true, ""))
		s := readSSE(t, w.Code, w.Header(), w.Body)
		require.Equal(t, 200, s.status, s.rawBody)
		out = append(out, s.header.Get("X-Tpsroute-Deployment"))
		time.Sleep(time.Second)
	}
	return out
}

// TestStateWarmStart: a gateway learns three deployments and stops (its
// Client's Close writes the state file, as run does after draining); a new
// gateway started from that file, with its clock started again as a new
// process's is, routes call for call as the stopped one would have, while a
// cold one probes the slow deployments first.
func TestStateWarmStart(t *testing.T) {
	file := filepath.Join(t.TempDir(), "state")
	const next = 10
	var stopped []string
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, stateScripts(), stateGatewayConfig(file), options{})
		learned := picks(t, e.g, 30)
		require.Equal(t, []string{"fast/us/m", "fast/us/m", "fast/us/m"}, learned[27:], "%v", learned)
		require.NoError(t, e.c.Close())
		stopped = picks(t, e.g, next) // what it would have done next
	})
	synctest.Test(t, func(t *testing.T) {
		warm := newEnv(t, stateScripts(), stateGatewayConfig(file), options{})
		assert.Equal(t, stopped, picks(t, warm.g, next), "the restarted gateway routes like the stopped one")
		require.NoError(t, warm.c.Close())
		cold := newEnv(t, stateScripts(), stateGatewayConfig(""), options{})
		got := picks(t, cold.g, next)
		assert.NotEqual(t, stopped, got)
		assert.Contains(t, got, "slow/us/m", "a cold gateway measures the slow deployment too")
	})
}

// TestRunStateFlag runs the command twice with -state: the first run writes
// the file when it shuts down, the second restores it at start.
func TestRunStateFlag(t *testing.T) {
	file := filepath.Join(t.TempDir(), "gateway.state")
	runOnce := func(calls int) string {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		var logs lockedBuffer
		ready := make(chan string, 1)
		done := make(chan error, 1)
		go func() {
			done <- run(ctx, []string{"-demo", "-addr", "127.0.0.1:0", "-drain", "5s", "-v", "-state", file}, &logs,
				func(string) (string, bool) { return "", false }, ready)
		}()
		var addr string
		select {
		case addr = <-ready:
		case err := <-done:
			t.Fatalf("run ended early: %v", err)
		}
		for range calls {
			s := stream(t, "http://"+addr, `{"model":"gpt-4.1-mini","stream":true,"messages":[{"role":"user","content":"hi"}],"provider":{"only":["openai"]}}`)
			require.Equal(t, 200, s.status)
		}
		cancel()
		select {
		case err := <-done:
			require.NoError(t, err)
		case <-time.After(20 * time.Second):
			t.Fatal("run did not return")
		}
		return logs.String()
	}
	logs := runOnce(2)
	assert.Contains(t, logs, "no state file yet")
	fh, err := os.Open(file)
	require.NoError(t, err, "written at shutdown")
	r := registry.New(measure.Options{})
	_, err = r.RestoreState(fh, time.Now(), nil)
	fh.Close()
	require.NoError(t, err)
	st, ok := r.Snapshot().Lookup(measure.Key{Provider: "openai", Region: "eu", Model: "gpt-4.1-mini"})
	require.True(t, ok)
	assert.Equal(t, int64(2), st.Requests)

	logs = runOnce(1)
	line := ""
	for l := range strings.Lines(logs) {
		if strings.Contains(l, "statistics restored") {
			line = l
		}
	}
	assert.Contains(t, line, "keys=1", logs)
}
