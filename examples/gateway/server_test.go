package main

import (
	"context"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"

	"github.com/tpsroute/tpsroute/replay"
)

func get(t *testing.T, url string, hdr ...string) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	require.NoError(t, err)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, resp.Header, string(b)
}

func TestDebugEndpoints(t *testing.T) {
	a, b := dep("a", "us", "m"), dep("b", "eu", "m")
	wild := dep("w", "eu", "*")
	wild.ProviderModel = ""
	cfg := testConfig(a, b, wild)
	cfg.Fallback.Breaker.ConsecutiveFailures = 1
	cfg.Fallback.AttemptsPerDeployment = 1
	hist := newHistory()
	cfg.OnAttempt = hist.attempt
	e := newEnv(t, map[string]replay.Script{
		"a-m": prof(answer),
		"b-m": replay.WithFaults(prof(answer), replay.Status(500, "", nil)),
		"x":   prof(answer),
	}, cfg, options{History: hist})
	base := e.serve(t)
	for range 3 {
		require.Equal(t, 200, stream(t, base, req("m", true, `"provider":{"order":["a"]}`)).status)
	}
	require.Equal(t, 200, stream(t, base, req("x", true, "")).status, "the wildcard serves x")
	require.Equal(t, 500, stream(t, base, req("m", true, `"provider":{"only":["b"]}`)).status)

	t.Run("json", func(t *testing.T) {
		code, h, body := get(t, base+"/debug/tpsroute")
		require.Equal(t, 200, code)
		assert.Equal(t, "application/json", h.Get("Content-Type"))
		rows := map[string]gjson.Result{}
		gjson.Get(body, "deployments").ForEach(func(_, r gjson.Result) bool {
			rows[r.Get("key.provider").Str+"/"+r.Get("key.region").Str+"/"+r.Get("key.model").Str] = r
			return true
		})
		require.Contains(t, rows, "a/us/m")
		require.Contains(t, rows, "b/eu/m")
		require.Contains(t, rows, "w/eu/x", "wildcard statistics are kept per model requested")
		assert.NotContains(t, rows, "w/eu/*")
		ra, rb := rows["a/us/m"], rows["b/eu/m"]
		assert.Equal(t, int64(3), ra.Get("requests").Int())
		assert.InDelta(t, 0.6, ra.Get("traffic_share").Float(), 0.001)
		assert.Positive(t, ra.Get("ttft_p50_s").Float())
		assert.Equal(t, "closed", ra.Get("breaker").Str)
		assert.Equal(t, "open", rb.Get("breaker").Str)
		assert.InDelta(t, 1.0, rb.Get("error_rate").Float(), 0.001)
		assert.Equal(t, int64(0), ra.Get("in_flight").Int())
		assert.True(t, gjson.Get(body, "snapshot").Exists())
		assert.Equal(t, int64(5), gjson.Get(body, "route.picks").Int())
		assert.True(t, gjson.Get(body, "route.no_deployment").Exists(), "route counters are snake_case")
		assert.False(t, gjson.Get(body, "route.Picks").Exists())
		assert.True(t, gjson.Get(body, "refused_models").Exists())
		assert.NotContains(t, body, "secret")
	})
	t.Run("ui", func(t *testing.T) {
		code, h, body := get(t, base+"/debug/tpsroute/ui")
		require.Equal(t, 200, code)
		assert.True(t, strings.HasPrefix(h.Get("Content-Type"), "text/html"))
		assert.Contains(t, h.Get("Content-Security-Policy"), "script-src 'self'")
		for _, col := range []string{"traffic share", "TTFT p50", "TPS p50", "breaker", "error rate", "in-flight"} {
			assert.Contains(t, body, "<th>"+col+"</th>")
		}
		assert.Contains(t, body, `<script src="/debug/tpsroute/ui.js"></script>`, "redrawn by its script, not reloaded")
		assert.NotContains(t, body, "http-equiv=\"refresh\"")
		assert.NotContains(t, body, "http://", "no external asset")
		code, h, js := get(t, base+"/debug/tpsroute/ui.js")
		require.Equal(t, 200, code)
		assert.True(t, strings.HasPrefix(h.Get("Content-Type"), "text/javascript"))
		assert.Contains(t, js, "/debug/tpsroute/history")
	})
	t.Run("history", func(t *testing.T) {
		code, _, body := get(t, base+"/debug/tpsroute/history")
		require.Equal(t, 200, code)
		rows := map[string]gjson.Result{}
		for _, r := range gjson.Get(body, "deployments").Array() {
			rows[r.Get("deployment").Str] = r
		}
		require.Contains(t, rows, "a/us/m")
		require.Contains(t, rows, "b/eu/m")
		ra, rb := rows["a/us/m"], rows["b/eu/m"]
		assert.InDelta(t, 0.6, ra.Get("share_total").Float(), 0.001)
		assert.Equal(t, "open", rb.Get("breaker").Str)
		require.NotEmpty(t, ra.Get("share").Array(), "one sample at least")
		assert.InDelta(t, 0.6, ra.Get("share").Array()[0].Float(), 0.001, "the first sample covers every attempt so far")
		assert.Positive(t, ra.Get("ttft_s").Array()[0].Float())
		assert.Len(t, ra.Get("tps").Array(), len(ra.Get("share").Array()))
		assert.Equal(t, float64(2), gjson.Get(body, "interval_s").Float())
		assert.NotEmpty(t, gjson.Get(body, "failovers").Array(), "b's failures moved the calls on")
		assert.NotContains(t, body, "secret")
	})
	t.Run("models", func(t *testing.T) {
		code, _, body := get(t, base+"/v1/models")
		require.Equal(t, 200, code)
		assert.Equal(t, "list", gjson.Get(body, "object").Str)
		assert.Equal(t, `["m"]`, gjson.Get(body, "data.#.id").Raw, "logical models only, no wildcard")
		// The gateway serves the root Transport's list, byte for byte.
		r, err := http.NewRequest(http.MethodGet, "http://x/v1/models", nil)
		require.NoError(t, err)
		resp, err := e.c.Transport().RoundTrip(r)
		require.NoError(t, err)
		defer resp.Body.Close()
		want, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		assert.Equal(t, string(want), body)
	})
	t.Run("healthz", func(t *testing.T) {
		code, _, body := get(t, base+"/healthz")
		require.Equal(t, 200, code)
		assert.JSONEq(t, `{"status":"ok"}`, body)
		e.g.draining.Store(true)
		defer e.g.draining.Store(false)
		code, _, _ = get(t, base+"/healthz")
		assert.Equal(t, 503, code)
	})
	t.Run("unknown_endpoint", func(t *testing.T) {
		code, _, body := get(t, base+"/v1/completions")
		require.Equal(t, 404, code)
		errorOf(t, []byte(body))
	})
	t.Run("wrong_method", func(t *testing.T) {
		code, h, body := get(t, base+"/v1/chat/completions")
		require.Equal(t, http.StatusMethodNotAllowed, code)
		assert.Equal(t, "POST", h.Get("Allow"))
		assert.Equal(t, "method_not_allowed", errorOf(t, []byte(body)).Get("code").Str)
		req, err := http.NewRequest(http.MethodDelete, base+"/v1/models", nil)
		require.NoError(t, err)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode)
		assert.Equal(t, "GET, HEAD", resp.Header.Get("Allow"))
	})
}

func TestSecurity(t *testing.T) {
	a := dep("a", "us", "m")
	e := newEnv(t, map[string]replay.Script{"a-m": prof(4)}, testConfig(a), options{Tokens: []string{"tok-1", "tok-2"}, MaxBody: 1024})
	base := e.serve(t)
	tests := []struct {
		name   string
		method string
		path   string
		body   string
		auth   string
		status int
	}{
		{name: "no_token", method: "POST", path: "/v1/chat/completions", body: req("m", false, ""), status: 401},
		{name: "wrong_token", method: "POST", path: "/v1/chat/completions", body: req("m", false, ""), auth: "Bearer tok-3", status: 401},
		{name: "not_bearer", method: "POST", path: "/v1/chat/completions", body: req("m", false, ""), auth: "tok-1", status: 401},
		{name: "first_token", method: "POST", path: "/v1/chat/completions", body: req("m", false, ""), auth: "Bearer tok-1", status: 200},
		{name: "second_token", method: "POST", path: "/v1/chat/completions", body: req("m", false, ""), auth: "Bearer tok-2", status: 200},
		{name: "debug_needs_token", method: "GET", path: "/debug/tpsroute", status: 401},
		{name: "ui_needs_token", method: "GET", path: "/debug/tpsroute/ui", status: 401},
		{name: "models_needs_token", method: "GET", path: "/v1/models", status: 401},
		{name: "healthz_is_open", method: "GET", path: "/healthz", status: 200},
		{name: "too_large", method: "POST", path: "/v1/chat/completions", auth: "Bearer tok-1",
			body: req("m", false, `"pad":"`+strings.Repeat("x", 2048)+`"`), status: 413},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := http.NewRequest(tt.method, base+tt.path, strings.NewReader(tt.body))
			require.NoError(t, err)
			if tt.auth != "" {
				r.Header.Set("Authorization", tt.auth)
			}
			resp, err := http.DefaultClient.Do(r)
			require.NoError(t, err)
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			require.Equal(t, tt.status, resp.StatusCode, string(body))
			if tt.status >= 400 {
				errorOf(t, body)
			}
			assert.NotContains(t, string(body), "secret")
		})
	}
	for _, r := range e.cap.all() {
		assert.NotContains(t, r.header.Get("Authorization"), "tok-", "the inbound token is never forwarded")
	}
}

// TestRunDemoDrainsOnShutdown starts the real command in -demo mode, starts
// a stream, shuts the gateway down while the stream is in flight, and checks
// that the stream still ends cleanly.
func TestRunDemoDrainsOnShutdown(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ready := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"-demo", "-addr", "127.0.0.1:0", "-drain", "20s"}, io.Discard, func(string) (string, bool) { return "", false }, ready)
	}()
	var addr string
	select {
	case addr = <-ready:
	case err := <-done:
		t.Fatalf("run ended early: %v", err)
	}
	resp := post(t, "http://"+addr, `{"model":"gpt-4.1-mini","stream":true,"messages":[{"role":"user","content":"hi"}],"provider":{"only":["openai"]}}`)
	require.Equal(t, 200, resp.StatusCode)
	cancel() // SIGINT
	s := readSSE(t, resp.StatusCode, resp.Header, resp.Body)
	resp.Body.Close()
	assert.True(t, s.done, "the in-flight stream drained to its end")
	assert.Equal(t, replay.Text(120), s.text)
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(20 * time.Second):
		t.Fatal("run did not return after draining")
	}
	_, err := http.Get("http://" + addr + "/healthz")
	assert.Error(t, err, "no longer listening")
}

func TestFlags(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{name: "nothing", args: nil, want: "give -config FILE or -demo"},
		{name: "both", args: []string{"-demo", "-config", "x.json"}, want: "exclude each other"},
		{name: "extra_arg", args: []string{"-demo", "x"}, want: "unexpected argument"},
		{name: "max_body", args: []string{"-demo", "-max-body", "0"}, want: "-max-body"},
		{name: "missing_config", args: []string{"-config", "/nonexistent/gateway.json"}, want: "no such file"},
		{name: "auth_env_unset", args: []string{"-demo", "-auth-token-env", "GW_TOKENS"}, want: "GW_TOKENS"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := run(context.Background(), tt.args, io.Discard, func(string) (string, bool) { return "", false }, nil)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
}

// TestRunWithConfigFile runs the command on a config file of the shared
// schema, with a key from the environment, against a provider on loopback.
func TestRunWithConfigFile(t *testing.T) {
	up := replay.NewServer(map[string]replay.Script{"wire-m": prof(5)})
	defer up.Close()
	cfg := `{
  "deployments": [
    {"provider": "local", "region": "lo", "model": "m", "provider_model": "wire-m",
     "base_url": "` + up.URL() + `", "api_key_env": "LOCAL_KEY",
     "capabilities": {"include_usage": true}}
  ],
  "fallback": {"mid_stream": "error"}
}`
	path := t.TempDir() + "/gateway.json"
	require.NoError(t, os.WriteFile(path, []byte(cfg), 0o600))
	env := map[string]string{"LOCAL_KEY": "sk-local-secret", "GW_TOKENS": "t1"}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"-config", path, "-addr", "127.0.0.1:0", "-auth-token-env", "GW_TOKENS"}, io.Discard, lookup, ready)
	}()
	addr := <-ready
	s := stream(t, "http://"+addr, req("m", true, ""), "Authorization", "Bearer t1")
	require.Equal(t, 200, s.status, s.rawBody)
	assert.Equal(t, "local/lo/m", s.header.Get("X-Tpsroute-Deployment"))
	assert.Equal(t, replay.Text(5), s.text)
	at := up.Attempts()
	require.Len(t, at, 1)
	assert.Equal(t, "wire-m", at[0].Model)
	assert.NotEmpty(t, at[0].Header.Get("Authorization"), "the key from LOCAL_KEY was sent (the log redacts it)")
	assert.NotContains(t, s.rawBody, "sk-local-secret")
	cancel()
	require.NoError(t, <-done)
}
