package tpsroute

import (
	"bytes"
	"compress/gzip"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tpsroute/tpsroute/route"
)

// gzipBomb is 256 MiB of valid output chunks gzipped to about 0.8 MB: one
// member holding 1 MiB of them, repeated (a gzip stream may hold many
// members, and net/http's reader reads them all).
var gzipBomb = sync.OnceValue(func() []byte {
	var b bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&b, gzip.BestCompression)
	chunk := []byte(`data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"` +
		strings.Repeat("a", 900) + `"},"finish_reason":null}]}` + "\n\n")
	for n := 0; n < 1<<20; n += len(chunk) {
		_, _ = zw.Write(chunk)
	}
	_ = zw.Close()
	return bytes.Repeat(b.Bytes(), 256)
})

// TestNoTransparentDecompression: an upstream that answers with a gzip bomb
// (whatever the request asked for) is read as the bytes it sent. Before,
// net/http asked for gzip and inflated the answer out of sight of every
// limit: about 0.8 MB on the wire became 256 MiB of stream here (3.1 GiB in
// the run), through the default transport or the caller's own.
func TestNoTransparentDecompression(t *testing.T) {
	bomb := gzipBomb()
	var mu sync.Mutex
	var asked []string
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		asked = append(asked, r.Header.Get("Accept-Encoding"))
		mu.Unlock()
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("Content-Encoding", "gzip")
		_, _ = w.Write(bomb)
	}))
	defer up.Close()
	for _, tc := range []struct {
		name   string
		client *http.Client
	}{
		{"default transport", nil},
		{"caller's transport", &http.Client{Transport: &http.Transport{}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := mustNew(t, Config{HTTPClient: tc.client, Deployments: []route.Deployment{dep("bomb", "", "m", up.URL+"/v1")}})
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			read := 0
			resp, err := c.Do(context.Background(), []byte(`{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`))
			if err == nil {
				var n int64
				n, err = io.Copy(io.Discard, resp.Body)
				read = int(n)
				resp.Body.Close()
			}
			runtime.ReadMemStats(&after)
			assert.Error(t, err, "a compressed answer is not a stream")
			assert.Less(t, read, len(bomb), "bytes of stream delivered")
			assert.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(64<<20), "bytes allocated by the call")
		})
	}
	mu.Lock()
	defer mu.Unlock()
	require.NotEmpty(t, asked)
	for _, a := range asked {
		assert.Equal(t, "identity", a, "the Accept-Encoding of every attempt")
	}
}
