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

// memRT answers every request with benchSSE, in memory.
type memRT struct{}

func (memRT) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		req.Body.Close()
	}
	return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"text/event-stream"}},
		Body: io.NopCloser(bytes.NewReader(benchSSE)), Request: req}, nil
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
		resp, err := memRT{}.RoundTrip(req)
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
		ex := executor.New(fallback.Options{}, executor.Hooks{Transport: memRT{}})
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
			ex := executor.New(fallback.Options{}, executor.Hooks{Transport: memRT{}})
			c := executor.Call{Body: body, Stream: stream}
			b.ReportAllocs()
			defer cputime.PerOp(b)()
			for b.Loop() {
				viaExecutor(b, ex, c)
			}
		})
	}
}
