package replay

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tpsroute/tpsroute/internal/sse"
)

// recWrite is one Write a Handler made, with its virtual time offset.
type recWrite struct {
	at   time.Duration
	data string
}

// recWriter is an http.ResponseWriter that logs every Write, Flush and abort
// with its time offset, so a test can see how events were grouped.
type recWriter struct {
	start   time.Time
	header  http.Header
	mu      sync.Mutex
	writes  []recWrite
	flushes []time.Duration
	aborted time.Duration // -1 when not aborted
}

func newRecWriter() *recWriter {
	return &recWriter{start: time.Now(), header: http.Header{}, aborted: -1}
}

func (w *recWriter) Header() http.Header { return w.header }
func (w *recWriter) WriteHeader(int)     {}

func (w *recWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.writes = append(w.writes, recWrite{at: time.Since(w.start), data: string(b)})
	return len(b), nil
}

func (w *recWriter) Flush() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.flushes = append(w.flushes, time.Since(w.start))
}

// abort implements aborter, so a cut is logged instead of panicking.
func (w *recWriter) abort() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.aborted = time.Since(w.start)
}

// groupCassette has six chunks: three due at once, two at 50 ms, one at
// 120 ms, then [DONE] at 120 ms.
func groupCassette(t *testing.T) *Cassette {
	t.Helper()
	ev := func(ms int, s string) string { return fmt.Sprintf(`{"at_ms":%d,"data":%q}`, ms, s) }
	chunk := func(i int) string {
		return fmt.Sprintf(`{"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"w%d "}}]}`, i)
	}
	events := []string{ev(0, chunk(1)), ev(0, chunk(2)), ev(0, chunk(3)), ev(50, chunk(4)), ev(50, chunk(5)), ev(120, chunk(6)), ev(120, "[DONE]")}
	src := `{"version":1,"name":"groups","request":{"method":"POST","path":"/v1/chat/completions"},
"response":{"status":200,"headers":{"Content-Type":["text/event-stream"]},"headers_ms":0,"events":[` + strings.Join(events, ",") + `]}}`
	c, err := ParseCassette(strings.NewReader(src), "groups")
	require.NoError(t, err)
	return c
}

// chunkNumbers returns the "wN" contents of the chunks in one write, in order,
// with "D" for [DONE] and "M" for a malformed chunk.
func chunkNumbers(data string) string {
	var out []string
	for _, blk := range strings.Split(strings.TrimSuffix(data, "\n\n"), "\n\n") {
		ev := sse.ParseEvent([]byte(blk + "\n\n"))
		switch {
		case ev.Data == "[DONE]":
			out = append(out, "D")
		case strings.Contains(ev.Data, `"content":"w`):
			i := strings.Index(ev.Data, `"content":"w`) + len(`"content":"`)
			out = append(out, ev.Data[i:i+2])
		default:
			out = append(out, "M")
		}
	}
	return strings.Join(out, ",")
}

// TestWritesGroupDueEvents checks that events already due leave in one write,
// flushed once before the handler sleeps or ends, and that every write still
// happens at its events' time and every fault acts at its exact event.
func TestWritesGroupDueEvents(t *testing.T) {
	type write struct {
		at     time.Duration
		chunks string
	}
	ms := time.Millisecond
	tests := []struct {
		name    string
		faults  []Fault
		writes  []write
		aborted time.Duration // -1: not aborted
		outcome string
		chunks  int
	}{
		{"no faults", nil, []write{{0, "w1,w2,w3"}, {50 * ms, "w4,w5"}, {120 * ms, "w6,D"}}, -1, "ok", 6},
		{"stall after 2", []Fault{StallAfter(2, 30*ms)},
			[]write{{0, "w1,w2"}, {30 * ms, "w3"}, {80 * ms, "w4,w5"}, {150 * ms, "w6,D"}}, -1, "ok", 6},
		{"cut after 2", []Fault{CutAfter(2)}, []write{{0, "w1,w2"}}, 0, "cut", 2},
		{"cut after 4", []Fault{CutAfter(4)}, []write{{0, "w1,w2,w3"}, {50 * ms, "w4"}}, 50 * ms, "cut", 4},
		{"malformed at 2", []Fault{MalformedAt(2)}, []write{{0, "w1,M,w3"}, {50 * ms, "w4,w5"}, {120 * ms, "w6,D"}}, -1, "ok", 6},
		{"error event at 5", []Fault{ErrorEventAt(5, OpenAI)}, []write{{0, "w1,w2,w3"}, {50 * ms, "w4,M"}}, -1, "error_event", 5},
		{"no done", []Fault{NoDone()}, []write{{0, "w1,w2,w3"}, {50 * ms, "w4,w5"}, {120 * ms, "w6"}}, -1, "ok", 6},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var s Script = groupCassette(t)
				if tc.faults != nil {
					s = WithFaults(s, tc.faults...)
				}
				h := NewHandler(map[string]Script{"m": s})
				w := newRecWriter()
				req, err := http.NewRequest(http.MethodPost, "http://x/v1/chat/completions",
					strings.NewReader(`{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`))
				require.NoError(t, err)
				h.ServeHTTP(w, req)

				var got []write
				for _, wr := range w.writes {
					got = append(got, write{wr.at, chunkNumbers(wr.data)})
				}
				assert.Equal(t, tc.writes, got)
				// One flush per write: headers go out with the first group.
				flushAt := make([]time.Duration, len(tc.writes))
				for i, wr := range tc.writes {
					flushAt[i] = wr.at
				}
				assert.Equal(t, flushAt, w.flushes)
				assert.Equal(t, tc.aborted, w.aborted)
				a := h.Attempts()
				require.Len(t, a, 1)
				assert.Equal(t, tc.outcome, a[0].Outcome)
				assert.Equal(t, tc.chunks, a[0].Chunks)
			})
		})
	}
}

// TestWritesHeadersBeforeWait checks that headers are flushed on their own
// when the first event is not yet due, and that a stream longer than
// flushSize with no delays is written in pieces of at least flushSize.
func TestWritesHeadersBeforeWait(t *testing.T) {
	t.Run("headers flushed before the first-token wait", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			h := NewHandler(map[string]Script{"m": &Profile{TTFT: 200 * time.Millisecond, OutputTokens: 3}})
			w := newRecWriter()
			req, err := http.NewRequest(http.MethodPost, "http://x/v1/chat/completions",
				strings.NewReader(`{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`))
			require.NoError(t, err)
			h.ServeHTTP(w, req)
			require.NotEmpty(t, w.flushes)
			require.NotEmpty(t, w.writes)
			assert.Less(t, w.flushes[0], 200*time.Millisecond, "headers are flushed before the wait")
			last := w.writes[len(w.writes)-1]
			assert.Equal(t, 200*time.Millisecond, last.at, "all tokens are due at once at TTFT")
			assert.Contains(t, last.data, "data: [DONE]\n\n")
		})
	})
	t.Run("long stream without delays", func(t *testing.T) {
		h := NewHandler(map[string]Script{"m": &Profile{OutputTokens: 2000}})
		w := newRecWriter()
		req, err := http.NewRequest(http.MethodPost, "http://x/v1/chat/completions",
			strings.NewReader(`{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`))
		require.NoError(t, err)
		h.ServeHTTP(w, req)
		require.Greater(t, len(w.writes), 1)
		var all strings.Builder
		for i, wr := range w.writes {
			if i < len(w.writes)-1 {
				assert.GreaterOrEqual(t, len(wr.data), flushSize, "write %d", i)
			}
			all.WriteString(wr.data)
		}
		assert.Equal(t, len(w.writes), len(w.flushes))
		assert.Equal(t, 2000, strings.Count(all.String(), `"content":"w`))
		assert.True(t, strings.HasSuffix(all.String(), "data: [DONE]\n\n"))
	})
}

// TestNoDelayFaultsOverTransports checks, over TCP and in memory, that a
// stream with no delays still delivers exactly the planned events before a
// cut, and all of them otherwise.
func TestNoDelayFaultsOverTransports(t *testing.T) {
	profile := func() *Profile { return &Profile{OutputTokens: 50} }
	tests := []struct {
		name   string
		script Script
		chunks int // data events other than [DONE] that arrive
		done   bool
		cut    bool
	}{
		{"whole stream", profile(), 52, true, false}, // role chunk + 50 + finish chunk
		{"cut after 7", WithFaults(profile(), CutAfter(7)), 7, false, true},
		{"cut after 0", WithFaults(profile(), CutAfter(0)), 0, false, true},
		{"malformed at 3", WithFaults(profile(), MalformedAt(3)), 52, true, false},
	}
	for _, tc := range tests {
		h := NewHandler(map[string]Script{"m": tc.script})
		srv := NewServer(map[string]Script{"m": tc.script})
		tcp := &http.Client{Transport: &http.Transport{}}
		for _, tr := range []struct {
			name   string
			client *http.Client
			url    string
		}{{"memory", memClient(h), "http://replay.invalid/v1"}, {"tcp", tcp, srv.URL()}} {
			t.Run(tc.name+"/"+tr.name, func(t *testing.T) {
				r := rawCall(context.Background(), tr.client, tr.url, chatBody("m", true, nil))
				require.Equal(t, http.StatusOK, r.status)
				n, done := 0, false
				for _, d := range r.data() {
					if d == "[DONE]" {
						done = true
					} else {
						n++
					}
				}
				assert.Equal(t, tc.chunks, n)
				assert.Equal(t, tc.done, done)
				if tc.cut {
					assert.ErrorIs(t, r.err, io.ErrUnexpectedEOF)
				} else {
					assert.NoError(t, r.err)
				}
			})
		}
		tcp.CloseIdleConnections()
		srv.Close()
	}
}
