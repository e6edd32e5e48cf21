//go:build linux

package main

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/tpsroute/tpsroute/replay"
)

// nonStreamChunks is the answer's length in BenchmarkGatewayNonStream*: the
// 1,000 tokens of the root's BenchmarkNew1000.
const nonStreamChunks = 1000

// bodyRecorder is a ResponseWriter that keeps the status and counts what is
// written and flushed.
type bodyRecorder struct {
	h       http.Header
	status  int
	n       int
	tail    []byte
	flushes int
}

func (w *bodyRecorder) Header() http.Header { return w.h }
func (w *bodyRecorder) Write(p []byte) (int, error) {
	w.n += len(p)
	w.tail = append(w.tail[:0], p[max(0, len(p)-16):]...)
	return len(p), nil
}
func (w *bodyRecorder) WriteHeader(s int) { w.status = s }
func (w *bodyRecorder) Flush()            { w.flushes++ }

// BenchmarkGatewayNonStreamInProcess runs the gateway's handler over an
// in-memory upstream that returns one SSE event per Read (a 1,000-token
// answer), into a discarding ResponseWriter, for the same answer asked for
// with "stream": true and with "stream": false, alternately: the gateway's
// own user-space CPU per call of each (no network, no kernel time) and
// their ratio, which the budget holds to at most 1. allocs/op are those of
// one call of each.
func BenchmarkGatewayNonStreamInProcess(b *testing.B) {
	evs := nonStreamEvents(nonStreamChunks)
	d := dep("p", "us", "m")
	d.ProviderModel, d.BaseURL = "m-wire", "http://p.test/v1"
	c, err := newClient(testConfig(d), eventTransport{evs})
	if err != nil {
		b.Fatal(err)
	}
	gw := newGateway(c, options{})
	serve := func(stream bool) {
		body := `{"model":"m","stream":` + map[bool]string{true: "true", false: "false"}[stream] + `,` + hi + `}`
		w := &bodyRecorder{h: http.Header{}}
		gw.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/v1/chat/completions", strings.NewReader(body)))
		ok := w.status == http.StatusOK
		if stream {
			ok = ok && w.flushes >= nonStreamChunks && bytes.HasSuffix(w.tail, []byte("[DONE]\n\n"))
		} else {
			ok = ok && w.h.Get("Content-Type") == "application/json" && w.h.Get("Content-Length") != "" && bytes.HasSuffix(w.tail, []byte("}"))
		}
		if !ok {
			b.Fatalf("stream=%v: status %d, %d bytes, %d flushes, ends %q", stream, w.status, w.n, w.flushes, w.tail)
		}
	}
	for range 20 {
		serve(true)
		serve(false)
	}
	var t [2]time.Duration
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		for i, stream := range []bool{true, false} {
			t0 := cpuTime(b)
			serve(stream)
			t[i] += cpuTime(b) - t0
		}
	}
	n := float64(b.N)
	b.ReportMetric(float64(t[0].Microseconds())/n, "stream-cpu-µs/call")
	b.ReportMetric(float64(t[1].Microseconds())/n, "nonstream-cpu-µs/call")
	b.ReportMetric(float64(t[1])/float64(t[0]), "nonstream/stream")
}

// nonStreamEvents is an upstream answer of n content chunks, one event per
// Read: a role chunk, the content, a finish chunk, a usage chunk and [DONE].
func nonStreamEvents(n int) [][]byte {
	const head = `data: {"id":"chatcmpl-b","object":"chat.completion.chunk","created":1700000000,"model":"m-wire","choices":[`
	evs := [][]byte{[]byte(head + `{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}],"usage":null}` + "\n\n")}
	for range n {
		evs = append(evs, []byte(head+`{"index":0,"delta":{"content":"tok "},"finish_reason":null}],"usage":null}`+"\n\n"))
	}
	return append(evs,
		[]byte(head+`{"index":0,"delta":{},"finish_reason":"stop"}],"usage":null}`+"\n\n"),
		[]byte(head+`],"usage":{"prompt_tokens":8,"completion_tokens":1000,"total_tokens":1008}}`+"\n\n"),
		[]byte("data: [DONE]\n\n"))
}

// BenchmarkGatewayNonStreamCPU runs the gateway as a separate process (this
// test binary, re-executed) in front of a replay provider on loopback, and
// asks it for the same 1,000-token answer with "stream": true and with
// "stream": false, alternately, one call at a time: the gateway process's
// CPU per call of each (user+system, from its CPU clock) and their ratio.
func BenchmarkGatewayNonStreamCPU(b *testing.B) {
	up := replay.NewServer(map[string]replay.Script{"m-wire": &replay.Profile{OutputTokens: nonStreamChunks}})
	defer up.Close()
	ch := startChild(b, up.URL(), false)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4, DisableCompression: true}}
	defer client.CloseIdleConnections()
	call := func(stream bool) {
		body := `{"model":"m","stream":` + map[bool]string{true: "true", false: "false"}[stream] + `,` + hi + `}`
		resp, err := client.Post(ch.url, "application/json", strings.NewReader(body))
		if err != nil {
			b.Fatal(err)
		}
		raw, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		end := []byte("data: [DONE]\n\n")
		if !stream {
			end = []byte("}")
		}
		if err != nil || resp.StatusCode != http.StatusOK || !bytes.HasSuffix(raw, end) {
			b.Fatalf("stream=%v: status %d, err %v, body ends %q", stream, resp.StatusCode, err, raw[max(0, len(raw)-40):])
		}
	}
	for range 10 {
		call(true)
		call(false)
	}
	var t [2]time.Duration
	b.ResetTimer()
	for range b.N {
		for i, stream := range []bool{true, false} {
			c0 := procClock(b, ch.pid)
			call(stream)
			t[i] += procClock(b, ch.pid) - c0
		}
	}
	n := float64(b.N)
	b.ReportMetric(float64(t[0].Microseconds())/n, "gw-stream-cpu-µs/call")
	b.ReportMetric(float64(t[1].Microseconds())/n, "gw-nonstream-cpu-µs/call")
	b.ReportMetric(float64(t[1])/float64(t[0]), "nonstream/stream")
}
