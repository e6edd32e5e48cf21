package replay

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tpsroute/tpsroute/internal/redact"
	"github.com/tpsroute/tpsroute/route"
)

func TestRecorderRedactsSecrets(t *testing.T) {
	const secret = "sk-PLANTED-SECRET-4242"
	srv := NewServer(map[string]Script{"m": &Profile{OutputTokens: 3}})
	defer srv.Close()
	dir := t.TempDir()
	rec := NewRecorder(http.DefaultTransport, dir, RedactRecordedHeaders("X-Custom-Token"), RedactRecordedFields("user", "api_key"))
	hc := &http.Client{Transport: rec}
	for _, stream := range []bool{true, false} {
		body := chatBody("m", stream, map[string]any{"user": secret, "metadata": map[string]any{"api_key": secret, "note": "keep"}})
		b := bytes.NewReader(mustJSON(t, body))
		req, _ := http.NewRequest(http.MethodPost, srv.URL()+"/chat/completions?key="+secret, b)
		for _, h := range []string{"Authorization", "api-key", "X-Api-Key", "Cookie", "X-Custom-Token"} {
			req.Header.Set(h, "Bearer "+secret)
		}
		resp, err := hc.Do(req)
		require.NoError(t, err)
		_, _ = io.ReadAll(resp.Body)
		require.NoError(t, resp.Body.Close())
	}
	require.NoError(t, rec.Err())
	files := rec.Files()
	require.Len(t, files, 2)
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, entries, 2)
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		require.NoError(t, err)
		assert.NotContains(t, string(b), secret, e.Name())
		assert.NotContains(t, string(b), "PLANTED", e.Name())
		assert.Contains(t, string(b), `"note": "keep"`)
		assert.Contains(t, string(b), "REDACTED")
		_, err = LoadCassette(filepath.Join(dir, e.Name()))
		require.NoError(t, err)
	}
	// The attempt log redacts too.
	for _, a := range srv.Attempts() {
		assert.Equal(t, "REDACTED", a.Header.Get("Authorization"))
		assert.Equal(t, "REDACTED", a.Header.Get("Api-Key"))
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := jsonMarshal(v)
	require.NoError(t, err)
	return b
}

// TestRecordReplayRoundTrip records streams from a quirky fake provider and
// checks that replaying the cassettes gives the same bytes with the same
// timing, in fake time.
func TestRecordReplayRoundTrip(t *testing.T) {
	scripts := map[string]Script{}
	for _, name := range BundledNames() {
		c, err := Bundled(name)
		require.NoError(t, err)
		scripts[name] = c
	}
	scripts["profile"] = WithFaults(&Profile{TTFT: 300 * time.Millisecond, TPS: 50, OutputTokens: 6, Style: KeepAlives}, StallAfter(3, time.Second))
	scripts["cut"] = WithFaults(&Profile{TTFT: 100 * time.Millisecond, TPS: 10, OutputTokens: 6}, CutAfter(3))
	scripts["429"] = WithFaults(&Profile{}, RetryAfterMS(1500))
	scripts["reset"] = WithFaults(&Profile{}, ResetBeforeHeaders())
	for model := range scripts {
		t.Run(model, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				dir := t.TempDir()
				orig := NewHandler(scripts)
				rec := NewRecorder(orig.Transport(), dir)
				first := rawCall(t.Context(), &http.Client{Transport: rec}, "http://x/v1", chatBody(model, true, nil))
				synctest.Wait()
				require.NoError(t, rec.Err())
				require.Len(t, rec.Files(), 1)
				c, err := LoadCassette(rec.Files()[0])
				require.NoError(t, err)

				again := rawCall(t.Context(), memClient(NewHandler(map[string]Script{model: c})), "http://x/v1", chatBody(model, true, nil))
				assert.Equal(t, first.status, again.status)
				assert.Equal(t, first.body, again.body)
				assert.Equal(t, first.err != nil, again.err != nil, "%v vs %v", first.err, again.err)
				require.Len(t, again.events, len(first.events))
				for i := range first.events {
					assert.Equal(t, first.events[i].block, again.events[i].block)
					assert.Equal(t, first.events[i].at, again.events[i].at)
				}
				if first.status == 429 {
					assert.Equal(t, "1500", again.header.Get("retry-after-ms"))
				}
			})
		})
	}
}

func TestRecorderOpenAIClient(t *testing.T) {
	srv := NewServer(map[string]Script{"m": &Profile{OutputTokens: 4, Style: ReasoningFirst}})
	defer srv.Close()
	dir := t.TempDir()
	rec := NewRecorder(nil, dir)
	c := openai.NewClient(option.WithBaseURL(srv.URL()), option.WithAPIKey("sk-x"), option.WithMaxRetries(0), option.WithHTTPClient(&http.Client{Transport: rec}))
	s := c.Chat.Completions.NewStreaming(context.Background(), openai.ChatCompletionNewParams{
		Model: "m", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
	})
	for s.Next() {
	}
	require.NoError(t, s.Err())
	require.NoError(t, s.Close())
	require.Len(t, rec.Files(), 1)
	cas, err := LoadCassette(rec.Files()[0])
	require.NoError(t, err)
	assert.Equal(t, "eof", cas.Response.End)
	assert.Equal(t, "[DONE]", *cas.Response.Events[len(cas.Response.Events)-1].Data)
	assert.Equal(t, []string{"REDACTED"}, cas.Request.Headers["Authorization"])
	assert.Equal(t, "0001-m", cas.Name)
}

func TestRecorderEarlyClose(t *testing.T) {
	srv := NewServer(map[string]Script{"m": &Profile{OutputTokens: 100, TPS: 1000}})
	defer srv.Close()
	rec := NewRecorder(nil, t.TempDir())
	req, _ := http.NewRequest(http.MethodPost, srv.URL()+"/chat/completions", strings.NewReader(`{"model":"m","stream":true}`))
	resp, err := (&http.Client{Transport: rec}).Do(req)
	require.NoError(t, err)
	buf := make([]byte, 64)
	_, _ = resp.Body.Read(buf)
	require.NoError(t, resp.Body.Close())
	c, err := LoadCassette(rec.Files()[0])
	require.NoError(t, err)
	assert.Equal(t, "reset", c.Response.End, "a stream closed before [DONE] must not replay as a clean end")
}

// TestRecorderRedactsResponseBodies plants a secret in the response, where
// a provider echoes a field: a JSON body, read in small pieces, and an SSE
// stream whose last event has no blank line after it.
func TestRecorderRedactsResponseBodies(t *testing.T) {
	const secret = "sk-PLANTED-RESPONSE-SECRET"
	tests := []struct {
		name        string
		contentType string
		body        string
	}{
		{"JSON body", "application/json", `{"id":"x","object":"chat.completion","metadata":{"api_key":"` + secret + `"},"choices":[]}`},
		{"SSE with an unterminated last event", "text/event-stream", "data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\ndata: {\"api_key\":\"" + secret + "\"}"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.Copy(io.Discard, r.Body)
				w.Header().Set("Content-Type", tt.contentType)
				// Write in pieces so the secret spans several reads.
				for rest := tt.body; rest != ""; {
					n := min(len(rest), 7)
					_, _ = io.WriteString(w, rest[:n])
					w.(http.Flusher).Flush()
					rest = rest[n:]
				}
			}))
			defer up.Close()
			rec := NewRecorder(nil, t.TempDir(), RedactRecordedFields("api_key"))
			req, err := http.NewRequest(http.MethodPost, up.URL+"/v1/chat/completions", strings.NewReader(`{"model":"m"}`))
			require.NoError(t, err)
			resp, err := (&http.Client{Transport: rec}).Do(req)
			require.NoError(t, err)
			got, err := io.ReadAll(resp.Body)
			require.NoError(t, err)
			require.NoError(t, resp.Body.Close())
			assert.Equal(t, tt.body, string(got), "the caller gets the bytes unchanged")
			require.NoError(t, rec.Err())
			require.Len(t, rec.Files(), 1)
			b, err := os.ReadFile(rec.Files()[0])
			require.NoError(t, err)
			assert.NotContains(t, string(b), "PLANTED")
			assert.Contains(t, string(b), "REDACTED")
			_, err = LoadCassette(rec.Files()[0])
			require.NoError(t, err)
		})
	}
}

// TestRecorderScrubsEchoedKey: whatever the upstream echoes of the key the
// request carried (raw, JSON-escaped, percent-encoded; in a header, an error
// body, a comment, an id line, a chunk's extra field, a body cut across
// reads), no cassette byte holds it.
func TestRecorderScrubsEchoedKey(t *testing.T) {
	const key = "sk-rec-0123456789abcdef"
	forms := []string{key, `sk\u002drec-0123456789abcdef`, "%73k-rec-0123456789abcdef", `sk-rec-0123456789abc\u0064ef`}
	sse := func(f string) string {
		return ": " + f + "\n\nid: " + f + "\n" +
			`data: {"choices":[{"index":0,"delta":{"content":"` + f + `"}}],"x":"` + f + `"}` + "\n\n" +
			`data: {"error":{"message":"` + f + `","type":"` + f + `"}}` + "\n\ndata: [DONE]\n\n"
	}
	for i, f := range forms {
		for _, streamed := range []bool{true, false} {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("X-Request-Id", f)
				if streamed {
					w.Header().Set("Content-Type", "text/event-stream")
					_, _ = io.WriteString(w, sse(f))
					return
				}
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusUnauthorized)
				body := `{"error":{"message":"Incorrect API key provided: ` + f + `","code":"` + f + `"}}`
				half := len(body) - 20 // the key straddles two reads
				_, _ = io.WriteString(w, body[:half])
				w.(http.Flusher).Flush()
				_, _ = io.WriteString(w, body[half:])
			}))
			dir := t.TempDir()
			rec := NewRecorder(srv.Client().Transport, dir)
			req, err := http.NewRequest(http.MethodPost, srv.URL+"/v1/chat/completions?api_key="+key, strings.NewReader(`{"model":"m","stream":true}`))
			require.NoError(t, err)
			req.Header.Set("Authorization", "Bearer "+key)
			resp, err := rec.RoundTrip(req)
			require.NoError(t, err)
			_, _ = io.ReadAll(resp.Body)
			require.NoError(t, resp.Body.Close())
			srv.Close()
			require.NoError(t, rec.Err())
			files := rec.Files()
			require.Len(t, files, 1)
			raw, err := os.ReadFile(files[0])
			require.NoError(t, err)
			sc := redact.NewScrubber(route.Deployment{APIKey: key})
			assert.False(t, sc.Contains(raw), "form %d, streamed %v:\n%s", i, streamed, raw)
			_, err = LoadCassette(files[0])
			require.NoError(t, err, "the scrubbed cassette still loads")
		}
	}
}
