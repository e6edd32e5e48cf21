package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/tpsroute/tpsroute/replay"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestRunOffline(t *testing.T) {
	dir := t.TempDir()
	var out bytes.Buffer
	require.NoError(t, run(context.Background(), &out, dir, func(string) string { return "" }))
	assert.Contains(t, out.String(), "recording a simulated provider")
	assert.Contains(t, out.String(), "same answer, chunks and usage")
	assert.Contains(t, out.String(), `Authorization "REDACTED"`)

	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	require.NoError(t, err)
	require.Len(t, files, 1)
	b, err := os.ReadFile(files[0])
	require.NoError(t, err)
	assert.NotContains(t, string(b), "sk-demo-never-recorded", "the API key is never written")
}

// TestRunEndpoint records an endpoint given by the environment, as with a
// real provider; here it is a replay server standing in for one.
func TestRunEndpoint(t *testing.T) {
	srv := replay.NewServer(map[string]replay.Script{"my-model": &replay.Profile{TTFT: 20 * time.Millisecond, TPS: 400, OutputTokens: 8}})
	defer srv.Close()
	env := map[string]string{"OPENAI_BASE_URL": srv.URL(), "OPENAI_API_KEY": "sk-secret", "OPENAI_MODEL": "my-model"}
	dir := t.TempDir()
	var out bytes.Buffer
	require.NoError(t, run(context.Background(), &out, dir, func(k string) string { return env[k] }))
	assert.Contains(t, out.String(), "recording "+srv.URL())
	assert.Contains(t, out.String(), `"w0 w1 w2 w3 w4 w5 w6 w7"`)
	files, _ := filepath.Glob(filepath.Join(dir, "*-my-model.json"))
	require.Len(t, files, 1)
	b, err := os.ReadFile(files[0])
	require.NoError(t, err)
	assert.False(t, strings.Contains(string(b), "sk-secret"), "the API key is never written")
}

func TestRunUnreachableEndpoint(t *testing.T) {
	srv := replay.NewServer(nil)
	url := srv.URL()
	srv.Close() // nothing listens there any more
	env := map[string]string{"OPENAI_BASE_URL": url, "OPENAI_API_KEY": "k"}
	var out bytes.Buffer
	err := run(context.Background(), &out, t.TempDir(), func(k string) string { return env[k] })
	assert.ErrorIs(t, err, syscall.ECONNREFUSED)
	assert.NotContains(t, out.String(), "replayed:", "a failed recording is not replayed")
}
