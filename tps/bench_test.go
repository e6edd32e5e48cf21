package tps_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/stretchr/testify/require"

	"github.com/tpsroute/tpsroute/tps"
)

// benchChunk is a typical OpenAI output chunk, obfuscation field included
// (internal/payload's BenchmarkParseChunk parses the same one).
const benchChunk = `{"id":"chatcmpl-AbCdEfGh","object":"chat.completion.chunk","created":1730000000,"model":"gpt-4o-mini-2024-07-18","system_fingerprint":"fp_0ba0d124f1","choices":[{"index":0,"delta":{"content":" token"},"logprobs":null,"finish_reason":null}],"usage":null,"obfuscation":"Xy12"}`

// BenchmarkTimerEvent is the Timer's cost per output chunk (budget: 100 ns,
// 0 allocs).
func BenchmarkTimerEvent(b *testing.B) {
	var c tps.Chunk
	require.NoError(b, tps.ParseChunk([]byte(benchChunk), &c))
	start := time.Now()
	tm := tps.NewTimer(start)
	now := start
	b.ReportAllocs()
	for b.Loop() {
		now = now.Add(time.Millisecond)
		tm.Event(now, &c)
	}
}

// eventReader returns one SSE event per Read, forever, as a network body
// delivering one event per TCP read would.
type eventReader struct{ ev []byte }

func (r eventReader) Read(p []byte) (int, error) { return copy(p, r.ev), nil }
func (eventReader) Close() error                 { return nil }

// BenchmarkTap is a Tap's cost per SSE event: framing, parsing and timing
// (budget: 2 µs and 2 allocs per event).
func BenchmarkTap(b *testing.B) {
	ev := []byte("data: " + benchChunk + "\n\n")
	tap := tps.NewTap(eventReader{ev}, time.Now(), nil)
	buf := make([]byte, 4096)
	b.SetBytes(int64(len(ev)))
	b.ReportAllocs()
	start := time.Now()
	for b.Loop() {
		if _, err := tap.Read(buf); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(time.Since(start).Nanoseconds())/float64(b.N), "ns/event")
	_ = tap.Close()
}

// BenchmarkTapStream times a whole 1,000-event stream through NewTap, read
// with 4 KiB reads (events split across reads), including the Tap's setup
// and done.
func BenchmarkTapStream(b *testing.B) {
	body := sseBody(1000)
	buf := make([]byte, 4096)
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	start := time.Now()
	for b.Loop() {
		tap := tps.NewTap(io.NopCloser(strings.NewReader(body)), time.Now(), func(tps.Sample) {})
		for {
			if _, err := tap.Read(buf); err != nil {
				break
			}
		}
	}
	b.ReportMetric(float64(time.Since(start).Nanoseconds())/float64(b.N)/1002, "ns/event")
}

// sseBody is a complete n-chunk stream: role chunk, n output chunks, a
// finish chunk, a usage chunk and [DONE].
func sseBody(n int) string {
	var sb strings.Builder
	w := func(s string) { sb.WriteString("data: " + s + "\n\n") }
	w(`{"id":"chatcmpl-AbCdEfGh","object":"chat.completion.chunk","created":1730000000,"model":"gpt-4o-mini-2024-07-18","system_fingerprint":"fp_0ba0d124f1","choices":[{"index":0,"delta":{"role":"assistant","content":"","refusal":null},"logprobs":null,"finish_reason":null}],"usage":null,"obfuscation":"Xy"}`)
	for range n {
		w(benchChunk)
	}
	w(`{"id":"chatcmpl-AbCdEfGh","object":"chat.completion.chunk","created":1730000000,"model":"gpt-4o-mini-2024-07-18","system_fingerprint":"fp_0ba0d124f1","choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"}],"usage":null}`)
	w(fmt.Sprintf(`{"id":"chatcmpl-AbCdEfGh","object":"chat.completion.chunk","created":1730000000,"model":"gpt-4o-mini-2024-07-18","system_fingerprint":"fp_0ba0d124f1","choices":[],"usage":{"prompt_tokens":12,"completion_tokens":%d,"total_tokens":%d,"prompt_tokens_details":{"cached_tokens":0},"completion_tokens_details":{"reasoning_tokens":0}}}`, n, n+12))
	sb.WriteString("data: [DONE]\n\n")
	return sb.String()
}

// sseServer serves body as a text/event-stream from 127.0.0.1.
func sseServer(tb testing.TB, body string) *httptest.Server {
	tb.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, body)
	}))
	tb.Cleanup(srv.Close)
	return srv
}

func benchClient(srv *httptest.Server) openai.Client {
	return openai.NewClient(option.WithBaseURL(srv.URL+"/v1/"), option.WithAPIKey("test"), option.WithMaxRetries(0),
		option.WithHTTPClient(srv.Client()))
}

var benchParams = openai.ChatCompletionNewParams{
	Model:    "gpt-4o-mini",
	Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
}

// BenchmarkWrap1000 compares a 1,000-chunk stream from a local server read
// through the bare openai-go stream and through tps.Wrap. The two run
// interleaved in each iteration so that machine noise hits both alike; it
// reports each one's process CPU time per stream and their ratio (budget:
// wrap/bare <= 1.03).
func BenchmarkWrap1000(b *testing.B) {
	srv := sseServer(b, sseBody(1000))
	client := benchClient(srv)
	ctx := context.Background()
	bare := func() {
		s := client.Chat.Completions.NewStreaming(ctx, benchParams)
		for s.Next() {
			_ = s.Current()
		}
		if s.Err() != nil {
			b.Fatal(s.Err())
		}
		_ = s.Close()
	}
	wrapped := func() {
		start := time.Now()
		s := tps.Wrap(client.Chat.Completions.NewStreaming(ctx, benchParams), start)
		for s.Next() {
			_ = s.Current()
		}
		if s.Err() != nil {
			b.Fatal(s.Err())
		}
		_ = s.Close()
		if s.Sample().OutputTokens != 1000 {
			b.Fatal("bad sample", s.Sample())
		}
	}
	bare()
	wrapped()
	var bareCPU, wrapCPU, bareWall, wrapWall time.Duration
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		// Alternate the order so neither always runs with a warm cache.
		first, second := bare, wrapped
		fc, sc, fw, sw := &bareCPU, &wrapCPU, &bareWall, &wrapWall
		if i%2 == 1 {
			first, second = wrapped, bare
			fc, sc, fw, sw = sc, fc, sw, fw
		}
		c0, w0 := cpuTime(), time.Now()
		first()
		c1, w1 := cpuTime(), time.Now()
		second()
		c2, w2 := cpuTime(), time.Now()
		*fc += c1 - c0
		*sc += c2 - c1
		*fw += w1.Sub(w0)
		*sw += w2.Sub(w1)
	}
	n := float64(b.N)
	b.ReportMetric(float64(bareCPU.Nanoseconds())/n, "bare-cpu-ns/stream")
	b.ReportMetric(float64(wrapCPU.Nanoseconds())/n, "wrap-cpu-ns/stream")
	if bareCPU > 0 {
		b.ReportMetric(float64(wrapCPU)/float64(bareCPU), "cpu-ratio")
	}
	b.ReportMetric(float64(wrapWall)/float64(bareWall), "wall-ratio")
}
