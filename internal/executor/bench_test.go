package executor_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/tpsroute/tpsroute/internal/cputime"

	"github.com/tpsroute/tpsroute/fallback"
	"github.com/tpsroute/tpsroute/internal/executor"
	"github.com/tpsroute/tpsroute/tps"
)

// benchSSE is a 16-token OpenAI-style stream with usage.
var benchSSE = func() []byte {
	var b bytes.Buffer
	b.WriteString(`data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}],"usage":null}` + "\n\n")
	for i := range 16 {
		fmt.Fprintf(&b, `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"w%d "},"finish_reason":null}],"usage":null}`+"\n\n", i)
	}
	b.WriteString(`data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":null}` + "\n\n")
	b.WriteString(`data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":8,"completion_tokens":16,"total_tokens":24}}` + "\n\n")
	b.WriteString("data: [DONE]\n\n")
	return b.Bytes()
}()

// memRT answers every request with its stream, in memory.
type memRT []byte

func (m memRT) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		req.Body.Close()
	}
	return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"text/event-stream"}},
		Body: io.NopCloser(bytes.NewReader(m)), Request: req}, nil
}

// BenchmarkExecutor measures one call end to end over an in-memory transport
// (a 16-token stream with usage, 19 SSE events). "direct" is the baseline
// without the executor: DefaultBuild, the round trip, and reading the stream
// through a tps.Tap, which any caller pays. The executor's own CPU per call is
// the cpu-ns/op of executor minus that of direct.
func BenchmarkExecutor(b *testing.B) {
	body := []byte(`{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`)
	d := dep("a", "a-m")
	plan := planOf(d, dep("b", "b-m"))
	buf := make([]byte, 4096)
	direct := func(b *testing.B) {
		req, err := executor.DefaultBuild(context.Background(), d, body)
		if err != nil {
			b.Fatal(err)
		}
		resp, err := memRT(benchSSE).RoundTrip(req)
		if err != nil {
			b.Fatal(err)
		}
		tap := tps.NewTap(resp.Body, time.Now(), func(tps.Sample) {})
		for {
			if _, err := tap.Read(buf); err != nil {
				break
			}
		}
		tap.Close()
	}
	viaExecutor := func(b *testing.B, ex *executor.Executor, c executor.Call) {
		res, err := ex.Do(context.Background(), plan, c)
		if err != nil {
			b.Fatal(err)
		}
		for {
			if _, err := res.Body.Read(buf); err != nil {
				if err != io.EOF {
					b.Fatal(err)
				}
				break
			}
		}
		res.Body.Close()
	}
	b.Run("direct", func(b *testing.B) {
		b.ReportAllocs()
		defer cputime.PerOp(b)()
		for b.Loop() {
			direct(b)
		}
	})
	b.Run("executor/stream=true/prefill_plan", func(b *testing.B) {
		// The default policy keeps the delivered text when the plan holds a
		// same-model deployment that declares assistant prefill.
		pd := dep("b", "b-m")
		pd.Capabilities.AssistantPrefill = true
		pplan := planOf(d, pd)
		ex := executor.New(fallback.Options{}, executor.Hooks{Transport: memRT(benchSSE)})
		c := executor.Call{Body: body, Stream: true}
		b.ReportAllocs()
		defer cputime.PerOp(b)()
		for b.Loop() {
			res, err := ex.Do(context.Background(), pplan, c)
			if err != nil {
				b.Fatal(err)
			}
			for {
				if _, err := res.Body.Read(buf); err != nil {
					break
				}
			}
			res.Body.Close()
		}
	})
	for _, stream := range []bool{true, false} {
		b.Run(fmt.Sprintf("executor/stream=%v", stream), func(b *testing.B) {
			ex := executor.New(fallback.Options{}, executor.Hooks{Transport: memRT(benchSSE)})
			c := executor.Call{Body: body, Stream: stream}
			b.ReportAllocs()
			defer cputime.PerOp(b)()
			for b.Loop() {
				viaExecutor(b, ex, c)
			}
		})
	}
}

// benchMsgSSE is a 16-token Messages stream (22 SSE events).
var benchMsgSSE = func() []byte {
	var b bytes.Buffer
	b.WriteString(msgStart + msgPing + "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n")
	for i := range 16 {
		fmt.Fprintf(&b, "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"w%d \"}}\n\n", i)
	}
	b.WriteString("event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n" + msgEnd)
	return b.Bytes()
}()

// BenchmarkExecutorMessages is one streaming Messages call through the
// executor: "no_prefill_plan" keeps no text, "prefill_plan" may continue,
// so its runs keep the text and read the released events for the splice
// (msgSplice); the difference is what continuability costs a Messages call
// that is not cut.
func BenchmarkExecutorMessages(b *testing.B) {
	buf := make([]byte, 4096)
	call := executor.Call{Body: []byte(msgBody), Stream: true, Protocol: tps.ProtocolMessages, Build: apiBuild("messages")}
	for _, prefill := range []bool{false, true} {
		name := "no_prefill_plan"
		if prefill {
			name = "prefill_plan"
		}
		b.Run(name, func(b *testing.B) {
			pd := dep("b", "b-m")
			pd.Capabilities.AssistantPrefill = prefill
			plan := planOf(dep("a", "a-m"), pd)
			ex := executor.New(fallback.Options{}, executor.Hooks{Transport: memRT(benchMsgSSE)})
			b.ReportAllocs()
			defer cputime.PerOp(b)()
			for b.Loop() {
				res, err := ex.Do(context.Background(), plan, call)
				if err != nil {
					b.Fatal(err)
				}
				for {
					if _, err := res.Body.Read(buf); err != nil {
						break
					}
				}
				res.Body.Close()
			}
		})
	}
}
