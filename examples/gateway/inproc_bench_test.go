//go:build linux

package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"
)

// eventBody is an upstream answer that returns one SSE event per Read, as a
// provider that flushes each event and is read as it arrives: what a proxy
// reads from a real provider, without the network.
type eventBody struct {
	evs [][]byte
	i   int
}

func (b *eventBody) Read(p []byte) (int, error) {
	if b.i == len(b.evs) {
		return 0, io.EOF
	}
	n := copy(p, b.evs[b.i])
	b.i++
	return n, nil
}

func (b *eventBody) Close() error { return nil }

// perEventEvents is perEventUpstream's answer: a role chunk, benchChunks
// content chunks, a finish chunk, a usage chunk and [DONE].
func perEventEvents() [][]byte {
	const head = `data: {"id":"chatcmpl-b","object":"chat.completion.chunk","created":1700000000,"model":"m-wire","choices":[`
	evs := [][]byte{[]byte(head + `{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}],"usage":null}` + "\n\n")}
	for i := range benchChunks {
		evs = append(evs, []byte(head+`{"index":0,"delta":{"content":"t`+strconv.Itoa(1e9+i)+` "},"finish_reason":null}],"usage":null}`+"\n\n"))
	}
	return append(evs,
		[]byte(head+`{"index":0,"delta":{},"finish_reason":"stop"}],"usage":null}`+"\n\n"),
		[]byte(head+`],"usage":{"prompt_tokens":8,"completion_tokens":`+strconv.Itoa(benchChunks)+`,"total_tokens":`+strconv.Itoa(benchChunks+8)+`}}`+"\n\n"),
		[]byte("data: [DONE]\n\n"))
}

// eventTransport answers every request with a fresh eventBody of evs.
type eventTransport struct{ evs [][]byte }

func (t eventTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	_, _ = io.Copy(io.Discard, r.Body)
	r.Body.Close()
	return &http.Response{StatusCode: 200, Status: "200 OK", Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: http.Header{"Content-Type": {"text/event-stream"}}, Body: &eventBody{evs: t.evs}, ContentLength: -1, Request: r}, nil
}

// flushRecorder is a ResponseWriter that discards what is written and counts
// flushes.
type flushRecorder struct {
	h       http.Header
	n       int
	flushes int
}

func (w *flushRecorder) Header() http.Header         { return w.h }
func (w *flushRecorder) Write(p []byte) (int, error) { w.n += len(p); return len(p), nil }
func (w *flushRecorder) WriteHeader(int)             {}
func (w *flushRecorder) Flush()                      { w.flushes++ }

// BenchmarkProxyInProcess runs the gateway's handler and a bare relay's over
// an in-memory upstream that returns one event per Read, into a discarding
// ResponseWriter: the proxies' own user-space work per stream of benchChunks
// chunks, with no network and no kernel time. Each iteration streams one
// answer through each, alternately; ns/chunk is what each spent per chunk,
// process CPU (garbage collection included).
func BenchmarkProxyInProcess(b *testing.B) {
	evs := perEventEvents()
	d := dep("p", "us", "m")
	d.ProviderModel, d.BaseURL = "m-wire", "http://p.test/v1"
	c, err := newClient(testConfig(d), eventTransport{evs})
	if err != nil {
		b.Fatal(err)
	}
	gw := newGateway(c, options{})
	relay := bareRelay("http://p.test/v1/chat/completions", eventTransport{evs})
	body := `{"model":"m","stream":true,` + hi + `}`
	serve := func(h http.Handler) {
		w := &flushRecorder{h: http.Header{}}
		r := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", strings.NewReader(body))
		h.ServeHTTP(w, r)
		if w.flushes < benchChunks {
			b.Fatalf("%d flushes", w.flushes)
		}
	}
	for range 50 {
		serve(gw)
		serve(relay)
	}
	var t [2]time.Duration
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		for i, h := range []http.Handler{gw, relay} {
			t0 := cpuTime(b)
			serve(h)
			t[i] += cpuTime(b) - t0
		}
	}
	chunks := float64(b.N * benchChunks)
	b.ReportMetric(float64(t[0].Nanoseconds())/chunks, "gw-ns/chunk")
	b.ReportMetric(float64(t[1].Nanoseconds())/chunks, "relay-ns/chunk")
	b.ReportMetric(float64((t[0]-t[1]).Nanoseconds())/chunks, "added-ns/chunk")
}
