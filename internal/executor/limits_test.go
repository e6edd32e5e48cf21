package executor_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tpsroute/tpsroute/fallback"
	"github.com/tpsroute/tpsroute/internal/executor"
	"github.com/tpsroute/tpsroute/route"
)

const limitChunk = `data: {"choices":[{"index":0,"delta":{"content":"hi "},"finish_reason":null}]}` + "\n\n"

// hostileStream serves an endless body: prefix, then fill repeated until the
// client stops reading. It counts the bytes it managed to write.
type hostileStream struct {
	prefix, fill string
	written      atomic.Int64
}

func (h *hostileStream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	w.Header().Set("Content-Type", "text/event-stream")
	n, err := io.WriteString(w, h.prefix)
	h.written.Add(int64(n))
	block := strings.Repeat(h.fill, max(1, 32<<10/len(h.fill)))
	for err == nil && r.Context().Err() == nil {
		n, err = io.WriteString(w, block)
		h.written.Add(int64(n))
	}
}

// goodStream answers a short stream.
var goodStream = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	w.Header().Set("Content-Type", "text/event-stream")
	_, _ = io.WriteString(w, limitChunk+`data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`+"\n\ndata: [DONE]\n\n")
})

func serve(t *testing.T, h http.Handler) route.Deployment {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	d := dep(strings.TrimPrefix(srv.URL, "http://"), "m")
	d.BaseURL = srv.URL + "/v1"
	return d
}

// serveSSE serves body as an event stream to every request.
func serveSSE(t *testing.T, body string) route.Deployment {
	return serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, body)
	}))
}

// TestLimitsFailOverBeforeOutput: an upstream that sends an endless line, or
// endless comments or empty chunks before any output, is left at the limit
// for the next deployment; the caller never sees it.
func TestLimitsFailOverBeforeOutput(t *testing.T) {
	limits := fallback.Limits{Event: 64 << 10, Held: 128 << 10, Answer: 256 << 10}
	for name, h := range map[string]*hostileStream{
		"endless line":         {prefix: "data: {\"choices\":[", fill: "x"},
		"endless data lines":   {fill: "data: {\"a\":1}\n"},
		"endless comments":     {fill: ": keep-alive\n\n"},
		"endless role chunks":  {fill: `data: {"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}` + "\n\n"},
		"endless after output": {prefix: limitChunk, fill: "x"}, // a non-streaming call holds it all
	} {
		for _, stream := range []bool{true, false} {
			if name == "endless after output" && stream {
				continue // TestLimitsAfterOutput
			}
			t.Run(fmt.Sprintf("%s/stream=%v", name, stream), func(t *testing.T) {
				bad, good := serve(t, h), serve(t, goodStream)
				e := executor.New(fallback.Options{Limits: limits}, executor.Hooks{})
				res, err := e.Do(context.Background(), planOf(bad, good), executor.Call{Body: []byte(reqBody), Stream: stream})
				require.NoError(t, err)
				d := drain(t, res.Body)
				require.NoError(t, d.err)
				assert.Equal(t, "hi ", d.text)
				atts := res.Attempts()
				require.Len(t, atts, 2)
				assert.ErrorIs(t, atts[0].Err, fallback.ErrTooLarge)
				assert.Equal(t, good.Key(), atts[1].Key)
				// What the bad upstream got out is the limit plus what the
				// sockets buffer, never the stream.
				assert.Less(t, h.written.Load(), int64(limits.Answer+16<<20))
			})
		}
	}
}

// TestLimitsLargeFirstChunk: a first output chunk larger than Held but
// within Event (a provider that sends its whole answer as one chunk) is not
// refused: Held bounds whole events held back, Event the one arriving.
func TestLimitsLargeFirstChunk(t *testing.T) {
	text := strings.Repeat("z", 128<<10)
	big := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, `data: {"choices":[{"index":0,"delta":{"content":"`+text+`"},"finish_reason":"stop"}]}`+"\n\ndata: [DONE]\n\n")
	})
	e := executor.New(fallback.Options{Limits: fallback.Limits{Event: 256 << 10, Held: 64 << 10}}, executor.Hooks{})
	for _, stream := range []bool{true, false} {
		res, err := e.Do(context.Background(), planOf(serve(t, big)), executor.Call{Body: []byte(reqBody), Stream: stream})
		require.NoError(t, err)
		d := drain(t, res.Body)
		require.NoError(t, d.err)
		assert.Equal(t, len(text), len(d.text))
	}
}

// TestLimitsAfterOutput: past the first output chunk, a line that never ends
// fails the stream at the event limit with a typed mid-stream error, not at
// its end.
func TestLimitsAfterOutput(t *testing.T) {
	h := &hostileStream{prefix: limitChunk, fill: "y"}
	e := executor.New(fallback.Options{Limits: fallback.Limits{Event: 64 << 10}, MidStream: fallback.MidStreamError}, executor.Hooks{})
	res, err := e.Do(context.Background(), planOf(serve(t, h)), executor.Call{Body: []byte(reqBody), Stream: true})
	require.NoError(t, err)
	d := drain(t, res.Body)
	assert.Equal(t, "hi ", d.text)
	require.Error(t, d.err)
	assert.ErrorIs(t, d.err, fallback.ErrTooLarge)
	assert.ErrorIs(t, d.err, fallback.ErrMidStream)
}

// TestLimitsBoundHeap: 100 calls in flight, each against an upstream that
// would send gigabytes before its first token, hold no more than 100 times
// the limit plus a fixed base at any time.
func TestLimitsBoundHeap(t *testing.T) {
	if testing.Short() {
		t.Skip("moves about 250 MB over loopback")
	}
	if raceEnabled {
		t.Skip("a heap budget of the production build: the race detector's own allocations pass it (294 MB measured)")
	}
	const calls = 100
	limits := fallback.Limits{Held: 1 << 20} // the default, named for the budget
	h := &hostileStream{fill: ": keep-alive\n\n"}
	srv := httptest.NewUnstartedServer(h)
	srv.Start()
	t.Cleanup(srv.Close)
	tr := &http.Transport{MaxConnsPerHost: calls, MaxIdleConnsPerHost: calls}
	t.Cleanup(tr.CloseIdleConnections)
	d := dep("hostile", "m")
	d.BaseURL = srv.URL + "/v1"
	e := executor.New(fallback.Options{Limits: limits, AttemptsPerDeployment: 1}, executor.Hooks{Transport: tr})

	runtime.GC()
	var base runtime.MemStats
	runtime.ReadMemStats(&base)
	var peak atomic.Uint64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		var m runtime.MemStats
		for {
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
			runtime.ReadMemStats(&m)
			if m.HeapInuse > peak.Load() {
				peak.Store(m.HeapInuse)
			}
		}
	}()
	var wg sync.WaitGroup
	var tooLarge atomic.Int64
	for range calls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := e.Do(context.Background(), planOf(d), executor.Call{Body: []byte(reqBody), Stream: true})
			if errors.Is(err, fallback.ErrTooLarge) {
				tooLarge.Add(1)
			}
		}()
	}
	wg.Wait()
	close(stop)
	<-sampled
	assert.Equal(t, int64(calls), tooLarge.Load(), "every call failed at its limit")
	// The read buffer doubles, so one call holds at most twice the limit.
	budget := uint64(calls)*2*uint64(limits.Held) + 64<<20
	grew := peak.Load() - min(peak.Load(), base.HeapInuse)
	t.Logf("peak heap growth %d MiB for %d calls (budget %d MiB)", grew>>20, calls, budget>>20)
	assert.Less(t, grew, budget)
}

// TestLimitsExactBounds: a non-streaming call holds its whole stream; one
// whose whole events come to exactly Held bytes, or past Held to exactly
// Answer, is answered, and one byte less of Answer fails with ErrTooLarge.
func TestLimitsExactBounds(t *testing.T) {
	body := limitChunk + `data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}` + "\n\ndata: [DONE]\n\n"
	n := len(body)
	for _, tt := range []struct {
		name   string
		limits fallback.Limits
		ok     bool
	}{
		{"held exactly", fallback.Limits{Held: n, Answer: 1}, true},
		{"answer exactly", fallback.Limits{Held: 1, Answer: n}, true},
		{"answer one byte short", fallback.Limits{Held: 1, Answer: n - 1}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := executor.New(fallback.Options{Limits: tt.limits}, executor.Hooks{})
			res, err := e.Do(context.Background(), planOf(serve(t, goodStream)), executor.Call{Body: []byte(reqBody)})
			if !tt.ok {
				require.Error(t, err)
				assert.ErrorIs(t, err, fallback.ErrTooLarge)
				return
			}
			require.NoError(t, err)
			d := drain(t, res.Body)
			require.NoError(t, d.err)
			assert.Equal(t, "hi ", d.text)
		})
	}
}
