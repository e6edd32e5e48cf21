package replaytest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tpsroute/tpsroute/replay"
)

// RecordOnce returns a base URL on 127.0.0.1, ending in /v1 like
// replay.Server.URL, for the client under test to use for one chat
// completion, and closes what it started when t ends.
//
// When the cassette file at path exists and rerecord is false, the URL is a
// replay.Server playing it, with its recorded timing, for the model the
// cassette was recorded with; nothing leaves the machine. Otherwise the URL
// is a loopback proxy to baseURL (the real provider's base URL, such as
// "https://api.openai.com/v1") that passes the call through, with the
// client's own headers (its API key included), and records it with a
// replay.Recorder: Authorization, Api-Key, X-Api-Key and cookies are always
// redacted, and opts can name more headers and JSON fields. When t ends, a
// recording of one call that answered 200 and ended cleanly replaces the
// file (its directory is created); anything else (no call, several calls, an
// error status, a cut stream) fails the test and leaves the file as it was.
//
// A cassette holds one call: use one path per call.
func RecordOnce(t testing.TB, path, baseURL string, rerecord bool, opts ...replay.RecorderOption) string {
	t.Helper()
	if !rerecord {
		c, err := replay.LoadCassette(path)
		switch {
		case err == nil:
			return serve(t, path, c)
		case !errors.Is(err, fs.ErrNotExist):
			t.Fatalf("replaytest: %v", err)
		}
	}
	return record(t, path, baseURL, opts)
}

// serve plays c for the model it was recorded with.
func serve(t testing.TB, path string, c *replay.Cassette) string {
	t.Helper()
	var req struct {
		Model string `json:"model"`
	}
	if err := json.Unmarshal(c.Request.Body, &req); err != nil || req.Model == "" {
		t.Fatalf("replaytest: %s: the recorded request names no model", path)
	}
	srv := replay.NewServer(map[string]replay.Script{req.Model: c})
	t.Cleanup(srv.Close)
	return srv.URL()
}

// upstreamGrace is how long record keeps reading the upstream's answer after
// the caller hung up.
const upstreamGrace = time.Second

// record proxies to baseURL through a Recorder writing into a temporary
// directory, and moves the one cassette to path when t ends.
//
// It is long (about 90 lines) because the proxy handler and the cleanup
// that moves the cassette share the recording's lock, directory and path.
func record(t testing.TB, path, baseURL string, opts []replay.RecorderOption) string {
	t.Helper()
	tmp := t.TempDir()
	rec := replay.NewRecorder(http.DefaultTransport, tmp, append(opts,
		replay.RecorderNaming(func(int, *http.Request, string) string { return filepath.Base(path) }))...)
	var (
		mu    sync.Mutex
		calls int
	)
	upstream := strings.TrimSuffix(baseURL, "/")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		calls++
		mu.Unlock()
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, "replaytest: "+err.Error(), http.StatusBadRequest)
			return
		}
		// The caller hangs up as soon as it has read [DONE], which can be
		// before the upstream's end of body reaches this proxy; tied to the
		// caller's context, that race recorded a clean answer as a reset.
		// The upstream read outlives the caller by a grace second instead.
		ctx, cancel := context.WithCancel(context.WithoutCancel(r.Context()))
		defer cancel()
		defer context.AfterFunc(r.Context(), func() { time.AfterFunc(upstreamGrace, cancel) })()
		out, err := http.NewRequestWithContext(ctx, r.Method, upstream+strings.TrimPrefix(r.URL.Path, "/v1"), bytes.NewReader(body))
		if err != nil {
			http.Error(w, "replaytest: "+err.Error(), http.StatusBadGateway)
			return
		}
		out.Header = r.Header.Clone()
		resp, err := rec.RoundTrip(out)
		if err != nil {
			http.Error(w, "replaytest: "+err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		for k, v := range resp.Header {
			if k != "Content-Length" {
				w.Header()[k] = v
			}
		}
		w.WriteHeader(resp.StatusCode)
		fl, _ := w.(http.Flusher)
		buf := make([]byte, 32<<10)
		for {
			n, err := resp.Body.Read(buf)
			if n > 0 {
				if _, werr := w.Write(buf[:n]); werr != nil {
					return
				}
				if fl != nil {
					fl.Flush()
				}
			}
			if err != nil {
				return
			}
		}
	}))
	t.Cleanup(func() {
		srv.Close() // waits for the handler, so the Recorder has written
		if err := rec.Err(); err != nil {
			t.Errorf("replaytest: recording %s: %v", path, err)
			return
		}
		files := rec.Files()
		if calls != 1 || len(files) != 1 {
			t.Errorf("replaytest: %s: a cassette holds one call; this test made %d", path, calls)
			return
		}
		c, err := replay.LoadCassette(files[0])
		if err != nil {
			t.Errorf("replaytest: %v", err)
			return
		}
		if c.Response.Status != http.StatusOK || (c.Response.End != "" && c.Response.End != "eof") {
			t.Errorf("replaytest: %s not written: the recorded call answered %d and ended %q", path, c.Response.Status, c.Response.End)
			return
		}
		b, err := os.ReadFile(files[0])
		if err == nil {
			err = os.MkdirAll(filepath.Dir(path), 0o755)
		}
		if err == nil {
			err = os.WriteFile(path, b, 0o644)
		}
		if err != nil {
			t.Errorf("replaytest: %v", err)
		}
	})
	return srv.URL + "/v1"
}
