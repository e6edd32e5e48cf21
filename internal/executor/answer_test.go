package executor_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tpsroute/tpsroute/fallback"
	"github.com/tpsroute/tpsroute/internal/cputime"
	"github.com/tpsroute/tpsroute/internal/executor"
	"github.com/tpsroute/tpsroute/internal/payload"
	"github.com/tpsroute/tpsroute/replay"
	"github.com/tpsroute/tpsroute/route"
	"github.com/tpsroute/tpsroute/tps"
)

// assembled is what a caller reads from the Body of an assembling call.
type assembled struct {
	raw     []byte
	content string
	finish  string
	usage   map[string]any
}

// readRaw reads res's Body whole, checking it against ContentLength and
// the JSON Content-Type of an assembled answer.
func readRaw(t *testing.T, res *executor.Result) string {
	t.Helper()
	raw, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	require.NoError(t, res.Body.Close())
	assert.EqualValues(t, len(raw), res.ContentLength)
	assert.Equal(t, "application/json", res.Header.Get("Content-Type"))
	return string(raw)
}

// readAnswer reads res's Body, an assembled chat.completion, checks its
// length against ContentLength and decodes it.
func readAnswer(t *testing.T, res *executor.Result) assembled {
	t.Helper()
	raw := []byte(readRaw(t, res))
	require.True(t, json.Valid(raw), "%s", raw)
	var out struct {
		Object  string `json:"object"`
		Choices []struct {
			Message struct {
				Content string `json:"content"`
			} `json:"message"`
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
		Usage map[string]any `json:"usage"`
	}
	require.NoError(t, json.Unmarshal(raw, &out))
	assert.Equal(t, "chat.completion", out.Object)
	require.Len(t, out.Choices, 1)
	return assembled{raw: raw, content: out.Choices[0].Message.Content, finish: out.Choices[0].FinishReason, usage: out.Usage}
}

// TestAssemble: a non-streaming call with Call.Assemble gets the
// chat.completion built from the stream's chunks as its Body, timed as a
// stream (TTFT, TPS, tokens), and fails over before the end exactly as a
// buffered call: a fault before output, a cut after it, an error event or a
// malformed chunk after output all restart on the next deployment, whose
// answer alone is returned.
func TestAssemble(t *testing.T) {
	a, b := dep("a", "a-m"), dep("b", "b-m")
	for _, tc := range []struct {
		name  string
		fault []replay.Fault // on a; none: a answers
		want  string         // the deployment that answers
	}{
		{"answer", nil, "a"},
		{"502 before output", []replay.Fault{replay.Status(http.StatusBadGateway, "", nil)}, "b"},
		{"reset before headers", []replay.Fault{replay.ResetBeforeHeaders()}, "b"},
		{"cut after output", []replay.Fault{replay.CutAfter(20)}, "b"},
		{"error event after output", []replay.Fault{replay.ErrorEventAt(20, replay.OpenAI)}, "b"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				sa := replay.WithFaults(prof(40), tc.fault...)
				var samples []tps.Sample
				e := newEnv(map[string]replay.Script{"a-m": sa, "b-m": prof(40)}, fallback.Options{})
				e.fb = observing(func(_ route.Deployment, s tps.Sample) { samples = append(samples, s) })
				res, err := e.do(t, planOf(a, b), executor.Call{Stream: false, Assemble: true})
				require.NoError(t, err)
				assert.Equal(t, tc.want, res.Deployment().Provider)
				got := readAnswer(t, res)
				assert.Equal(t, replay.Text(40), got.content, "the answering deployment's text alone")
				assert.Equal(t, "stop", got.finish)
				assert.EqualValues(t, 40, got.usage["completion_tokens"])
				s := res.Sample()
				assert.Positive(t, s.TTFT, "timed as a stream")
				assert.True(t, s.TPSOK)
				assert.InDelta(t, 100, s.TPS, 10)
				assert.EqualValues(t, 40, s.OutputTokens)
				assert.Equal(t, "stop", s.FinishReason)
				require.NotEmpty(t, samples)
				assert.Equal(t, s.OutputTokens, samples[len(samples)-1].OutputTokens, "the statistics get the same sample")
			})
		})
	}
}

// TestAssembleMalformedSkipped: a malformed chunk that the policy skips is
// left out of the answer, as it is cut out of a buffered stream.
func TestAssembleMalformedSkipped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		scripts := map[string]replay.Script{"a-m": replay.WithFaults(prof(10), replay.MalformedAt(3))}
		e := newEnv(scripts, fallback.Options{})
		res, err := e.do(t, planOf(dep("a", "a-m")), executor.Call{})
		require.NoError(t, err)
		buffered := drain(t, res.Body)
		require.NoError(t, buffered.err)
		res, err = e.do(t, planOf(dep("a", "a-m")), executor.Call{Assemble: true})
		require.NoError(t, err)
		got := readAnswer(t, res)
		assert.Equal(t, buffered.text, got.content)
		assert.Equal(t, strings.Replace(replay.Text(10), "w1 ", "", 1), got.content)
	})
}

// TestAssembleIgnoredWhenStreaming: Assemble changes nothing for a
// streaming call.
func TestAssembleIgnoredWhenStreaming(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(map[string]replay.Script{"a-m": prof(10)}, fallback.Options{})
		res, err := e.do(t, planOf(dep("a", "a-m")), executor.Call{Stream: true, Assemble: true})
		require.NoError(t, err)
		assert.EqualValues(t, -1, res.ContentLength)
		d := drain(t, res.Body)
		require.NoError(t, d.err)
		assert.Equal(t, replay.Text(10), d.text)
		assert.True(t, d.done)
	})
}

// TestAssembleScrubsKey: an upstream that echoes its deployment's key in
// the answer, whole in one chunk or split across two, reaches the caller
// as REDACTED, in the content and the usage alike.
func TestAssembleScrubsKey(t *testing.T) {
	key := "sk-a-secret"
	for name, pieces := range map[string][]string{
		"whole":       {"your key is " + key + "."},
		"split":       {"your key is sk-a-", "secret."},
		"json-escape": {`your key is sk\u002da-secret.`},
	} {
		t.Run(name, func(t *testing.T) {
			var sse strings.Builder
			for _, p := range pieces {
				sse.WriteString(`data: {"id":"c","model":"m","choices":[{"index":0,"delta":{"content":"` + p + `"}}]}` + "\n\n")
			}
			sse.WriteString(`data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":{"completion_tokens":3,"note":"` + key + `"}}` + "\n\ndata: [DONE]\n\n")
			d := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.Copy(io.Discard, r.Body)
				w.Header().Set("Content-Type", "text/event-stream")
				_, _ = io.WriteString(w, sse.String())
			}))
			d.APIKey = key
			e := executor.New(fallback.Options{}, executor.Hooks{})
			res, err := e.Do(context.Background(), planOf(d), executor.Call{Body: []byte(reqBody), Assemble: true})
			require.NoError(t, err)
			got := readAnswer(t, res)
			assert.NotContains(t, string(got.raw), "secret")
			assert.Contains(t, got.content, "REDACTED")
			assert.Equal(t, "REDACTED", got.usage["note"])
		})
	}
}

// TestAssembleLimits: Limits.Answer bounds the stream an assembling call
// reads and the answer it holds; past it the attempt fails with
// ErrTooLarge and the call fails over. An answer of many chunks within it
// holds none of the stream: the bytes the call allocates follow the
// answer's text, not the stream's length.
func TestAssembleLimits(t *testing.T) {
	limits := fallback.Limits{Event: 64 << 10, Held: 128 << 10, Answer: 256 << 10}
	for name, h := range map[string]*hostileStream{
		"endless line":         {prefix: "data: {\"choices\":[", fill: "x"},
		"endless comments":     {fill: ": keep-alive\n\n"},
		"endless role chunks":  {fill: `data: {"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}` + "\n\n"},
		"endless output":       {prefix: limitChunk, fill: limitChunk},
		"endless after output": {prefix: limitChunk, fill: "x"},
	} {
		t.Run(name, func(t *testing.T) {
			bad, good := serve(t, h), serve(t, goodStream)
			e := executor.New(fallback.Options{Limits: limits}, executor.Hooks{})
			res, err := e.Do(context.Background(), planOf(bad, good), executor.Call{Body: []byte(reqBody), Assemble: true})
			require.NoError(t, err)
			assert.Equal(t, "hi ", readAnswer(t, res).content)
			atts := res.Attempts()
			require.Len(t, atts, 2)
			assert.ErrorIs(t, atts[0].Err, fallback.ErrTooLarge)
			assert.Less(t, h.written.Load(), int64(limits.Answer+16<<20))
		})
	}
}

// TestAssembleLimitsAnswer: an answer that would pass Limits.Answer while
// its stream is within it (thousands of choices of a few bytes each) fails
// with ErrTooLarge, whatever the order the choices and tool calls come in.
func TestAssembleLimitsAnswer(t *testing.T) {
	limits := fallback.Limits{Answer: 256 << 10}
	for name, event := range map[string]func(i int) string{
		"choices up":   func(i int) string { return `{"choices":[{"index":` + strconv.Itoa(i) + `}]}` },
		"choices down": func(i int) string { return `{"choices":[{"index":` + strconv.Itoa(1e6-i) + `}]}` },
		"tool calls down": func(i int) string {
			return `{"choices":[{"delta":{"tool_calls":[{"index":` + strconv.Itoa(1e6-i) + `}]}}]}`
		},
	} {
		t.Run(name, func(t *testing.T) {
			var sse bytes.Buffer
			for i := 0; sse.Len() < limits.Answer-64; i++ {
				sse.WriteString("data:" + event(i) + "\n\n")
			}
			bad := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.Copy(io.Discard, r.Body)
				w.Header().Set("Content-Type", "text/event-stream")
				_, _ = w.Write(sse.Bytes())
			}))
			e := executor.New(fallback.Options{Limits: limits}, executor.Hooks{})
			start := time.Now()
			res, err := e.Do(context.Background(), planOf(bad, serve(t, goodStream)), executor.Call{Body: []byte(reqBody), Assemble: true})
			require.NoError(t, err)
			assert.Equal(t, "hi ", readAnswer(t, res).content)
			atts := res.Attempts()
			require.Len(t, atts, 2)
			assert.ErrorIs(t, atts[0].Err, fallback.ErrTooLarge)
			assert.Less(t, time.Since(start), 5*time.Second, "linear work in the number of choices")
		})
	}
}

// sseOf returns a stream of n content chunks of text, with a finish chunk,
// usage and [DONE], as a replay-less upstream sends it.
func sseOf(n int, text string) []byte {
	var b bytes.Buffer
	const head = `data: {"id":"chatcmpl-b","object":"chat.completion.chunk","created":1700000000,"model":"m","system_fingerprint":"fp_b","choices":[`
	b.WriteString(head + `{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}],"usage":null}` + "\n\n")
	for range n {
		b.WriteString(head + `{"index":0,"delta":{"content":"` + text + `"},"logprobs":null,"finish_reason":null}],"usage":null}` + "\n\n")
	}
	b.WriteString(head + `{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"}],"usage":null}` + "\n\n")
	b.WriteString(head + `],"usage":{"prompt_tokens":8,"completion_tokens":` + strconv.Itoa(n) + `,"total_tokens":` + strconv.Itoa(n+8) + `}}` + "\n\n")
	b.WriteString("data: [DONE]\n\n")
	return b.Bytes()
}

// sseRT answers every request with body, in memory, in reads of at most
// 4 KiB (a socket's).
type sseRT struct{ body []byte }

func (t sseRT) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		req.Body.Close()
	}
	return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"text/event-stream"}},
		Body: io.NopCloser(chunked{bytes.NewReader(t.body), 4096}), Request: req}, nil
}

// chunked returns at most n bytes per Read.
type chunked struct {
	r io.Reader
	n int
}

func (c chunked) Read(p []byte) (int, error) { return c.r.Read(p[:min(len(p), c.n)]) }

// TestAssembleAllocs: the allocations of an assembling call do not grow
// with the number of chunks beyond the growth of the answer's text.
func TestAssembleAllocs(t *testing.T) {
	allocs := assembleAllocs(t, executor.Call{Body: []byte(reqBody), Assemble: true}, func(n int) []byte { return sseOf(n, "tok ") })
	assert.LessOrEqual(t, allocs[1000]-allocs[16], 12.0, "16 chunks: %v allocs, 1000 chunks: %v", allocs[16], allocs[1000])
}

// assembleAllocs returns the allocations of one call c, read to its end,
// over an in-memory upstream that answers stream(n), for n of 16 and 1,000.
func assembleAllocs(t *testing.T, c executor.Call, stream func(n int) []byte) map[int]float64 {
	allocs := map[int]float64{}
	for _, n := range []int{16, 1000} {
		ex := executor.New(fallback.Options{}, executor.Hooks{Transport: sseRT{stream(n)}})
		plan := planOf(dep("a", "a-m"))
		buf := make([]byte, 64<<10)
		allocs[n] = testing.AllocsPerRun(20, func() {
			res, err := ex.Do(context.Background(), plan, c)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := io.CopyBuffer(io.Discard, onlyReader{res.Body}, buf); err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
		})
	}
	return allocs
}

type onlyReader struct{ io.Reader }

// BenchmarkAssemble1000 measures one call of 1,000 chunks over an in-memory
// transport that returns 4 KiB per read: "direct" reads the stream through
// a tps.Tap and nothing else (what any timed call pays); "stream" through
// the executor as a streaming call; "buffered" as a non-streaming call that
// holds its stream (Call.Stream false); "assembled" as one with
// Call.Assemble, whose Body is the answer.
func BenchmarkAssemble1000(b *testing.B) {
	body := sseOf(1000, "tok ")
	plan := planOf(dep("a", "a-m"))
	buf := make([]byte, 32<<10)
	read := func(b *testing.B, r io.Reader) {
		if _, err := io.CopyBuffer(io.Discard, onlyReader{r}, buf); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("direct", func(b *testing.B) {
		b.ReportAllocs()
		defer cputime.PerOp(b)()
		for b.Loop() {
			resp, _ := sseRT{body}.RoundTrip(&http.Request{})
			tap := tps.NewTap(resp.Body, time.Now(), func(tps.Sample) {}, withObserver(func(time.Time, *payload.Chunk) {}))
			read(b, tap)
			tap.Close()
		}
	})
	for _, c := range []struct {
		name string
		call executor.Call
	}{
		{"stream", executor.Call{Stream: true}},
		{"buffered", executor.Call{}},
		{"assembled", executor.Call{Assemble: true}},
	} {
		b.Run(c.name, func(b *testing.B) {
			ex := executor.New(fallback.Options{}, executor.Hooks{Transport: sseRT{body}})
			c.call.Body = []byte(reqBody)
			b.ReportAllocs()
			defer cputime.PerOp(b)()
			for b.Loop() {
				res, err := ex.Do(context.Background(), plan, c.call)
				if err != nil {
					b.Fatal(err)
				}
				read(b, res.Body)
				res.Body.Close()
			}
		})
	}
}
