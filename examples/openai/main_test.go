package main

import (
	"bytes"
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/tpsroute/tpsroute/replay"
	"github.com/tpsroute/tpsroute/route"
	"github.com/tpsroute/tpsroute/tps"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestRunOffline(t *testing.T) {
	var out bytes.Buffer
	require.NoError(t, run(context.Background(), &out, "", "llama-3.3-70b"))
	s := out.String()
	// The first call meets groq's 503 and is answered elsewhere, invisibly.
	assert.Regexp(t, `attempt: groq/us-east/llama-3.3-70b: .*503`, s)
	assert.Contains(t, s, "w0 w1 w2")
	// WithRegion keeps the non-streaming call in eu-west.
	assert.Contains(t, s, "answered by nebius/eu-west")
	assert.Regexp(t, `groq/us-east/llama-3.3-70b\s+\d+`, s)
}

// TestRunConfigFile runs the example the way a newcomer runs it against their
// own providers: a config file whose api_key_env names a variable.
func TestRunConfigFile(t *testing.T) {
	srv := replay.NewServer(map[string]replay.Script{"my-model-v1": &replay.Profile{TTFT: 10 * time.Millisecond, TPS: 500, OutputTokens: 5}})
	defer srv.Close()
	t.Setenv("EXAMPLE_KEY", "sk-test")
	path := filepath.Join(t.TempDir(), "tpsroute.json")
	require.NoError(t, os.WriteFile(path, []byte(`{"deployments": [{
		"provider": "mine", "region": "eu-west", "model": "my-model", "provider_model": "my-model-v1",
		"base_url": "`+srv.URL()+`", "api_key_env": "EXAMPLE_KEY", "capabilities": {"include_usage": true}}]}`), 0o600))

	var out bytes.Buffer
	require.NoError(t, run(context.Background(), &out, path, "my-model"))
	assert.Contains(t, out.String(), "answered by mine/eu-west")
	for _, a := range srv.Attempts() {
		assert.Equal(t, "my-model-v1", a.Model)
	}
}

func TestRunErrors(t *testing.T) {
	tests := []struct {
		name, config, model string
		want                error
	}{
		{"missing config file", filepath.Join(t.TempDir(), "none.json"), "llama-3.3-70b", fs.ErrNotExist},
		{"unknown model", "", "gpt-9", route.ErrNoDeployment},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := run(context.Background(), &bytes.Buffer{}, tt.config, tt.model)
			assert.ErrorIs(t, err, tt.want)
		})
	}
}

func TestDescribe(t *testing.T) {
	d := route.Deployment{Provider: "groq", Region: "us-east"}
	tests := []struct {
		name string
		s    tps.Sample
		want string
	}{
		{"measured", tps.Sample{TTFT: 150 * time.Millisecond, TPS: 399.6, TPSOK: true, OutputTokens: 40},
			"answered by groq/us-east: TTFT 150ms, 400 tokens/s after the first token, 40 tokens"},
		{"one chunk has no speed", tps.Sample{TTFT: 90 * time.Millisecond, OutputTokens: 1},
			"answered by groq/us-east: TTFT 90ms, n/a tokens/s after the first token, 1 tokens"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { assert.Equal(t, tt.want, describe(d, tt.s)) })
	}
}
