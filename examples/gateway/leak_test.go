package main

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tpsroute/tpsroute/internal/redact"
)

// TestGatewayRelaysNoUpstreamKey: an upstream that echoes its own key, raw
// or JSON-escaped, in an error object's fields, in X-Request-Id and other
// headers, in a comment, an id line, an unknown field, an error event or an
// extra chunk field, gets none of it to the gateway's caller, its log, its
// debug page or its history.
func TestGatewayRelaysNoUpstreamKey(t *testing.T) {
	const key = "sk-gw-hostile-0123456789"
	forms := map[string]string{"raw": key, "escaped": `sk\u002dgw-hostile-0123456789`, "all": `\u0073\u006b-gw-hostile-0123456789`}
	chunk := func(extra, content string) string {
		return `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"` + content + `"},"finish_reason":null}]` + extra + "}\n\n"
	}
	cases := map[string]struct {
		status int
		body   string
	}{
		"error-400": {400, `{"error":{"message":"bad %s","type":"%s","param":"%s","code":"%s"}}`},
		"error-429": {429, `{"error":{"message":"slow %s","type":"%s","param":"%s","code":"%s"}}`},
		"error-500": {500, `{"error":{"message":"%s","type":"%s","param":"%s","code":"%s"}}`},
		"stream": {200, ": %s\n\nid: %s\nfoo: %s\n" + chunk(`,"x":"%s"`, "hi") +
			`data: {"type":"error","detail":"%s"}` + "\n\n" + chunk("", "there") + "data: [DONE]\n\n"},
		"mid-stream-error": {200, chunk("", "hi") + `data: {"error":{"message":"%s","type":"%s","code":"%s","param":"%s"}}` + "\n\n"},
	}
	var mu sync.Mutex
	var cur struct {
		status int
		body   string
	}
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		mu.Lock()
		status, body := cur.status, cur.body
		mu.Unlock()
		w.Header().Set("X-Request-Id", key)
		w.Header().Set("X-Debug-Echo", "Bearer "+key)
		if status == 200 {
			w.Header().Set("Content-Type", "text/event-stream")
		} else {
			w.Header().Set("Content-Type", "application/json")
		}
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}))
	t.Cleanup(up.Close)
	d := dep("evil", "us", "m")
	d.ProviderModel, d.BaseURL, d.APIKey = "", up.URL+"/v1", key
	var logs bytes.Buffer
	var logMu sync.Mutex
	logger := slog.New(slog.NewTextHandler(&lockedWriter{w: &logs, mu: &logMu}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	sc := redact.NewScrubber(d)
	for cname, tc := range cases {
		for fname, form := range forms {
			for _, streamed := range []bool{true, false} {
				t.Run(fmt.Sprintf("%s/%s/stream=%v", cname, fname, streamed), func(t *testing.T) {
					mu.Lock()
					cur.status, cur.body = tc.status, strings.ReplaceAll(tc.body, "%s", form)
					mu.Unlock()
					cfg := testConfig(d)
					cfg.Logger = logger
					c, err := newClient(cfg, up.Client().Transport)
					require.NoError(t, err)
					srv := httptest.NewServer(newGateway(c, options{Logger: logger}))
					defer srv.Close()
					resp := post(t, srv.URL, req("m", streamed, ""))
					var out bytes.Buffer
					for k, vs := range resp.Header {
						fmt.Fprintf(&out, "%s: %s\n", k, strings.Join(vs, ","))
					}
					_, _ = io.Copy(&out, resp.Body)
					resp.Body.Close()
					for _, path := range []string{"/debug/tpsroute", "/debug/tpsroute/history", "/v1/models"} {
						if r, err := http.Get(srv.URL + path); err == nil {
							_, _ = io.Copy(&out, r.Body)
							r.Body.Close()
						}
					}
					assert.False(t, sc.Contains(out.Bytes()), "the key reached the caller:\n%s", out.String())
				})
			}
		}
	}
	logMu.Lock()
	defer logMu.Unlock()
	assert.False(t, sc.Contains(logs.Bytes()), "the key reached the log:\n%s", logs.String())
}

// lockedWriter serialises writes to w.
type lockedWriter struct {
	w  io.Writer
	mu *sync.Mutex
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
