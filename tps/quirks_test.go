package tps_test

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3/packages/ssestream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tpsroute/tpsroute/tps"
)

const chunkHead = `{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m",`

func role() string {
	return chunkHead + `"choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}],"usage":null}`
}

func text(s string) string {
	return chunkHead + `"choices":[{"index":0,"delta":{"content":"` + s + `"},"finish_reason":null}],"usage":null}`
}

func textN(i int, s string) string {
	return chunkHead + fmt.Sprintf(`"choices":[{"index":%d,"delta":{"content":%q},"finish_reason":null}]}`, i, s)
}

func fin(reason string) string {
	return chunkHead + `"choices":[{"index":0,"delta":{},"finish_reason":"` + reason + `"}],"usage":null}`
}

func usage(prompt, completion int) string {
	return chunkHead + fmt.Sprintf(`"choices":[],"usage":{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d}}`,
		prompt, completion, prompt+completion)
}

// words is a Tokenizer that counts whitespace-separated words.
type words struct{}

func (words) Count(s string) int { return len(strings.Fields(s)) }

type quirk struct {
	name    string
	steps   []step
	readErr error
	opts    []tps.Option
	want    tps.Sample // as a Tap measures it (Start and Err excluded)
	wantErr func(t *testing.T, err error)
	wrap    func(s *tps.Sample) // how Stream differs, after the default changes
	wrapOK  bool                // Stream sees no error
}

// quirks covers every item of docs/STREAM_QUIRKS.md that touches timing or counting.
// Headers arrive at 100ms; every time is exact (synctest fake clock).
func quirks() []quirk {
	return []quirk{
		{
			name: "Q12 role-only first chunk, Q7 usage in a final choices:[] chunk",
			steps: []step{ev(200, role()), ev(300, text("Hel")), ev(400, text("lo")), ev(800, text(" there")),
				ev(900, fin("stop")), ev(950, usage(10, 5)), done(1000)},
			want: tps.Sample{Headers: 100 * ms, FirstByte: 200 * ms, TTFT: 300 * ms, Last: 800 * ms, E2E: 800 * ms, Total: 1000 * ms,
				TPS: 8, TPSOK: true, TPOT: 125 * ms, E2ETPS: 6.25,
				OutputTokens: 5, TokenSource: tps.TokenSourceUsage, FirstChunkTokens: 1, InputTokens: 10,
				Chunks: 6, OutputChunks: 3, Gaps: tps.GapStats{Count: 2, Sum: 500 * ms, Min: 100 * ms, Max: 400 * ms},
				FinishReason: "stop", Model: "m", End: tps.EndDone},
		},
		{
			name: "Q6 Q11 annotation chunks with choices:[] and without delta",
			steps: []step{
				ev(150, `{"id":"","object":"","created":0,"model":"","choices":[],"prompt_filter_results":[{"prompt_index":0,"content_filter_results":{"hate":{"filtered":false,"severity":"safe"}}}]}`),
				ev(200, role()), ev(300, text("A")), ev(550, text("B")), ev(600, fin("stop")),
				ev(700, chunkHead+`"choices":[{"index":0,"finish_reason":null,"content_filter_results":{"hate":{"filtered":false}},"content_filter_offsets":{"check_offset":0,"start_offset":0,"end_offset":2}}]}`),
				ev(720, `{"id":"x","choices":null}`), ev(730, `{"id":"y"}`),
				done(800)},
			want: tps.Sample{Headers: 100 * ms, FirstByte: 150 * ms, TTFT: 300 * ms, Last: 550 * ms, E2E: 550 * ms, Total: 800 * ms,
				TPS: 4, TPSOK: true, TPOT: 250 * ms, E2ETPS: 2 / 0.55,
				OutputTokens: 2, TokenSource: tps.TokenSourceChunks, FirstChunkTokens: 1,
				Chunks: 8, OutputChunks: 2, Gaps: tps.GapStats{Count: 1, Sum: 250 * ms, Min: 250 * ms, Max: 250 * ms},
				FinishReason: "stop", Model: "m", End: tps.EndDone},
		},
		{
			name: "Q1 Q27 keep-alive comments while queued",
			steps: []step{raw(1000, ": keep-alive\n\n"), raw(2000, ": OPENROUTER PROCESSING\n\n"), raw(2500, ":\n\n"),
				ev(3000, role()), ev(3100, text("x")), ev(3600, text("y")), ev(3700, fin("stop")), ev(3700, usage(7, 2)), done(3800)},
			want: tps.Sample{Headers: 100 * ms, FirstByte: 1000 * ms, TTFT: 3100 * ms, Last: 3600 * ms, E2E: 3600 * ms, Total: 3800 * ms,
				TPS: 2, TPSOK: true, TPOT: 500 * ms, E2ETPS: 2 / 3.6,
				OutputTokens: 2, TokenSource: tps.TokenSourceUsage, FirstChunkTokens: 1, InputTokens: 7,
				Chunks: 5, OutputChunks: 2, Comments: 3, Gaps: tps.GapStats{Count: 1, Sum: 500 * ms, Min: 500 * ms, Max: 500 * ms},
				FinishReason: "stop", Model: "m", End: tps.EndDone},
			wrap: func(s *tps.Sample) { s.FirstByte = 3000 * ms }, // openai-go drops comments
		},
		{
			name: "Q19 reasoning-first, Q15 finish with usage, Q22 DeepSeek cache miss",
			steps: []step{
				ev(200, chunkHead+`"choices":[{"index":0,"delta":{"role":"assistant","content":null,"reasoning_content":""},"finish_reason":null}]}`),
				ev(300, chunkHead+`"choices":[{"index":0,"delta":{"content":null,"reasoning_content":"Let"},"finish_reason":null}]}`),
				ev(400, chunkHead+`"choices":[{"index":0,"delta":{"reasoning":" me"},"finish_reason":null}]}`),
				ev(700, text("Hi")),
				ev(800, chunkHead+`"choices":[{"index":0,"delta":{"content":""},"finish_reason":"stop"}],"usage":{"prompt_tokens":5,"completion_tokens":20,"total_tokens":25,"completion_tokens_details":{"reasoning_tokens":2},"prompt_cache_hit_tokens":0,"prompt_cache_miss_tokens":5}}`),
				done(900)},
			want: tps.Sample{Headers: 100 * ms, FirstByte: 200 * ms, TTFT: 300 * ms, Last: 700 * ms, E2E: 700 * ms, Total: 900 * ms,
				TPS: 19 / 0.4, TPSOK: true, TPOT: 400 * ms / 19, E2ETPS: 20 / 0.7,
				OutputTokens: 20, TokenSource: tps.TokenSourceUsage, FirstChunkTokens: 1, InputTokens: 5, ReasoningTokens: 2, Cache: tps.CacheCold,
				Chunks: 5, OutputChunks: 3, Gaps: tps.GapStats{Count: 2, Sum: 400 * ms, Min: 100 * ms, Max: 300 * ms},
				FinishReason: "stop", Model: "m", End: tps.EndDone},
		},
		{
			// Five visible tokens at 50 tok/s after 500 ms of hidden
			// reasoning: the rate is the streamed tokens' (4 / 80 ms), not
			// 196 / 80 ms.
			name: "Q28 hidden reasoning (OpenAI o-series)",
			steps: []step{ev(150, role()), ev(600, text("One")), ev(620, text(" two")), ev(640, text(" three")), ev(660, text(" four")),
				ev(680, text(" five")), ev(700, fin("stop")),
				ev(710, chunkHead+`"choices":[],"usage":{"prompt_tokens":9,"completion_tokens":197,"total_tokens":206,"completion_tokens_details":{"reasoning_tokens":192}}}`),
				done(720)},
			want: tps.Sample{Headers: 100 * ms, FirstByte: 150 * ms, TTFT: 600 * ms, Last: 680 * ms, E2E: 680 * ms, Total: 720 * ms,
				TPS: 50, TPSOK: true, TPOT: 20 * ms, E2ETPS: 197 / 0.68,
				OutputTokens: 197, TokenSource: tps.TokenSourceUsage, FirstChunkTokens: 1, InputTokens: 9, ReasoningTokens: 192, HiddenTokens: 192,
				Chunks: 8, OutputChunks: 5, Gaps: tps.GapStats{Count: 4, Sum: 80 * ms, Min: 20 * ms, Max: 20 * ms},
				FinishReason: "stop", Model: "m", End: tps.EndDone},
		},
		{
			name:  "Q28 usage the stream cannot carry",
			steps: []step{ev(200, role()), ev(300, text("A")), ev(400, text("B")), ev(500, text("C")), ev(600, fin("stop")), ev(650, usage(7, 1e18)), done(700)},
			want: tps.Sample{Headers: 100 * ms, FirstByte: 200 * ms, TTFT: 300 * ms, Last: 500 * ms, E2E: 500 * ms, Total: 700 * ms,
				TPS: 10, TPSOK: true, TPOT: 100 * ms, E2ETPS: 6,
				OutputTokens: 3, TokenSource: tps.TokenSourceChunks, FirstChunkTokens: 1, InputTokens: 7, Implausible: tps.ImplausibleOverStreamed,
				Chunks: 6, OutputChunks: 3, Gaps: tps.GapStats{Count: 2, Sum: 200 * ms, Min: 100 * ms, Max: 100 * ms},
				FinishReason: "stop", Model: "m", End: tps.EndDone},
		},
		multiToken("Q13 several tokens per chunk, usage, no tokenizer", nil, 22, 1, 12, tps.TokenSourceUsage),
		multiToken("Q13 several tokens per chunk, usage, tokenizer for the first chunk", words{}, 16, 4, 12, tps.TokenSourceUsage),
		func() quirk {
			q := multiToken("Q13 several tokens per chunk, no usage, tokenizer", words{}, 10, 4, 9, tps.TokenSourceTokenizer)
			q.steps[4] = ev(850, fin("stop"))
			q.want.InputTokens = 0
			return q
		}(),
		{
			name:  "Q13 whole answer in one chunk",
			steps: []step{ev(800, chunkHead+`"choices":[{"index":0,"delta":{"role":"assistant","content":"The whole answer."},"finish_reason":null}]}`), ev(850, chunkHead+`"choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":40,"total_tokens":43}}`), done(900)},
			want: tps.Sample{Headers: 100 * ms, FirstByte: 800 * ms, TTFT: 800 * ms, Last: 800 * ms, E2E: 800 * ms, Total: 900 * ms,
				E2ETPS: 50, OutputTokens: 40, TokenSource: tps.TokenSourceUsage, FirstChunkTokens: 1, InputTokens: 3,
				Chunks: 2, OutputChunks: 1, FinishReason: "stop", Model: "m", End: tps.EndDone},
		},
		{
			name: "Q14 empty-content chunks, Q20 tool_calls:null",
			steps: []step{ev(200, role()), ev(250, text("")), ev(300, text("a")), ev(350, text("")),
				ev(400, chunkHead+`"choices":[{"index":0,"delta":{"content":"","tool_calls":null,"reasoning":null}}]}`),
				ev(500, text("b")), ev(550, text("")), ev(600, fin("stop")), done(700)},
			want: tps.Sample{Headers: 100 * ms, FirstByte: 200 * ms, TTFT: 300 * ms, Last: 500 * ms, E2E: 500 * ms, Total: 700 * ms,
				TPS: 5, TPSOK: true, TPOT: 200 * ms, E2ETPS: 4,
				OutputTokens: 2, TokenSource: tps.TokenSourceChunks, FirstChunkTokens: 1,
				Chunks: 8, OutputChunks: 2, Gaps: tps.GapStats{Count: 1, Sum: 200 * ms, Min: 200 * ms, Max: 200 * ms},
				FinishReason: "stop", Model: "m", End: tps.EndDone, Truncated: false},
		},
		{
			name: "Q8 Q9 Q22 Groq usage on the finish chunk and again, x_groq timings",
			steps: []step{ev(200, role()), ev(300, text("a")), ev(400, text("b")), ev(500, text("c")),
				ev(600, `{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"llama-3.3-70b-versatile","system_fingerprint":"fp_1","choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"}],"x_groq":{"id":"req_01","usage":{"queue_time":0.05,"prompt_tokens":10,"prompt_time":0.002,"completion_tokens":4,"completion_time":0.025,"total_time":0.027}}}`),
				ev(610, `{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"llama-3.3-70b-versatile","system_fingerprint":"fp_1","choices":[],"usage":{"queue_time":0.05,"prompt_tokens":10,"prompt_time":0.002,"completion_tokens":4,"completion_time":0.025,"total_time":0.027},"x_groq":{"id":"req_01","usage":{"queue_time":0.05,"prompt_tokens":10,"prompt_time":0.002,"completion_tokens":4,"completion_time":0.025,"total_time":0.027}}}`),
				done(700)},
			want: tps.Sample{Headers: 100 * ms, FirstByte: 200 * ms, TTFT: 300 * ms, Last: 500 * ms, E2E: 500 * ms, Total: 700 * ms,
				TPS: 15, TPSOK: true, TPOT: 200 * ms / 3, E2ETPS: 8,
				OutputTokens: 4, TokenSource: tps.TokenSourceUsage, FirstChunkTokens: 1, InputTokens: 10,
				Chunks: 6, OutputChunks: 3, Gaps: tps.GapStats{Count: 2, Sum: 200 * ms, Min: 100 * ms, Max: 100 * ms},
				FinishReason: "stop", Model: "llama-3.3-70b-versatile", SystemFingerprint: "fp_1",
				Server: tps.ServerTiming{Queue: 50 * ms, Prompt: 2 * ms, Completion: 25 * ms, Total: 27 * ms},
				End:    tps.EndDone},
		},
		{
			name: "Q9 cumulative usage on every chunk (Perplexity)",
			steps: []step{
				ev(300, chunkHead+`"choices":[{"index":0,"delta":{"role":"assistant","content":"a"}}],"usage":{"prompt_tokens":4,"completion_tokens":1}}`),
				ev(400, chunkHead+`"choices":[{"index":0,"delta":{"content":"b"}}],"usage":{"prompt_tokens":4,"completion_tokens":2}}`),
				ev(600, chunkHead+`"choices":[{"index":0,"delta":{"content":"c"},"finish_reason":"stop"}],"usage":{"prompt_tokens":4,"completion_tokens":3}}`),
				done(700)},
			want: tps.Sample{Headers: 100 * ms, FirstByte: 300 * ms, TTFT: 300 * ms, Last: 600 * ms, E2E: 600 * ms, Total: 700 * ms,
				TPS: 2 / 0.3, TPSOK: true, TPOT: 150 * ms, E2ETPS: 5,
				OutputTokens: 3, TokenSource: tps.TokenSourceUsage, FirstChunkTokens: 1, InputTokens: 4,
				Chunks: 3, OutputChunks: 3, Gaps: tps.GapStats{Count: 2, Sum: 300 * ms, Min: 100 * ms, Max: 200 * ms},
				FinishReason: "stop", Model: "m", End: tps.EndDone},
		},
		{
			name: "Q22 cached tokens (OpenAI prompt_tokens_details)",
			steps: []step{ev(200, role()), ev(300, text("a")), ev(500, text("b")), ev(600, fin("stop")),
				ev(650, chunkHead+`"choices":[],"usage":{"prompt_tokens":2000,"completion_tokens":3,"total_tokens":2003,"prompt_tokens_details":{"cached_tokens":1024,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":0}}}`),
				done(700)},
			want: tps.Sample{Headers: 100 * ms, FirstByte: 200 * ms, TTFT: 300 * ms, Last: 500 * ms, E2E: 500 * ms, Total: 700 * ms,
				TPS: 10, TPSOK: true, TPOT: 100 * ms, E2ETPS: 6,
				OutputTokens: 3, TokenSource: tps.TokenSourceUsage, FirstChunkTokens: 1, InputTokens: 2000, CachedTokens: 1024, Cache: tps.CacheWarm,
				Chunks: 5, OutputChunks: 2, Gaps: tps.GapStats{Count: 1, Sum: 200 * ms, Min: 200 * ms, Max: 200 * ms},
				FinishReason: "stop", Model: "m", End: tps.EndDone},
		},
		{
			name: "Q20 tool-call-only output",
			steps: []step{
				ev(200, chunkHead+`"choices":[{"index":0,"delta":{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"get_weather","arguments":""}}]},"finish_reason":null}]}`),
				ev(300, chunkHead+`"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"city\""}}]},"finish_reason":null}]}`),
				ev(450, chunkHead+`"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":":\"Paris\"}"}}]},"finish_reason":null}]}`),
				ev(500, fin("tool_calls")), ev(550, usage(30, 9)), done(600)},
			want: tps.Sample{Headers: 100 * ms, FirstByte: 200 * ms, TTFT: 200 * ms, Last: 450 * ms, E2E: 450 * ms, Total: 600 * ms,
				TPS: 32, TPSOK: true, TPOT: 250 * ms / 8, E2ETPS: 20,
				OutputTokens: 9, TokenSource: tps.TokenSourceUsage, FirstChunkTokens: 1, InputTokens: 30,
				Chunks: 5, OutputChunks: 3, Gaps: tps.GapStats{Count: 2, Sum: 250 * ms, Min: 100 * ms, Max: 150 * ms},
				FinishReason: "tool_calls", Model: "m", End: tps.EndDone},
		},
		{
			name: "Q21 n=2 interleaved choices (vLLM)",
			steps: []step{ev(200, chunkHead+`"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}`),
				ev(200, chunkHead+`"choices":[{"index":1,"delta":{"role":"assistant","content":""}}]}`),
				ev(300, textN(0, "a")), ev(350, textN(1, "b")), ev(400, textN(0, "c")), ev(500, textN(1, "d")),
				ev(550, chunkHead+`"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`),
				ev(560, chunkHead+`"choices":[{"index":1,"delta":{},"finish_reason":"length"}]}`),
				ev(600, usage(6, 4)), done(700)},
			want: tps.Sample{Headers: 100 * ms, FirstByte: 200 * ms, TTFT: 300 * ms, Last: 500 * ms, E2E: 500 * ms, Total: 700 * ms,
				TPS: 15, TPSOK: true, TPOT: 200 * ms / 3, E2ETPS: 8,
				OutputTokens: 4, TokenSource: tps.TokenSourceUsage, FirstChunkTokens: 1, InputTokens: 6,
				Chunks: 9, OutputChunks: 4, Gaps: tps.GapStats{Count: 3, Sum: 200 * ms, Min: 50 * ms, Max: 100 * ms},
				FinishReason: "length", Model: "m", End: tps.EndDone},
		},
		{
			name: "Q21 n=2 in one chunk counts two deltas",
			steps: []step{ev(300, chunkHead+`"choices":[{"index":0,"delta":{"content":"a"}},{"index":1,"delta":{"content":"b"}}]}`),
				ev(500, chunkHead+`"choices":[{"index":0,"delta":{"content":"c"}},{"index":1,"delta":{"content":""}}]}`),
				ev(600, chunkHead+`"choices":[{"index":0,"delta":{},"finish_reason":"stop"},{"index":1,"delta":{},"finish_reason":"stop"}]}`)},
			want: tps.Sample{Headers: 100 * ms, FirstByte: 300 * ms, TTFT: 300 * ms, Last: 500 * ms, E2E: 500 * ms, Total: 600 * ms,
				TPS: 5, TPSOK: true, TPOT: 100 * ms, E2ETPS: 6,
				OutputTokens: 3, TokenSource: tps.TokenSourceChunks, FirstChunkTokens: 2,
				Chunks: 3, OutputChunks: 2, Gaps: tps.GapStats{Count: 1, Sum: 200 * ms, Min: 200 * ms, Max: 200 * ms},
				FinishReason: "stop", Model: "m", End: tps.EndEOF},
		},
		{
			name: "Q17 mid-stream error (OpenAI shape, no [DONE])",
			steps: []step{ev(200, role()), ev(300, text("a")), ev(400, text("b")),
				ev(500, `{"error":{"message":"The server had an error while processing your request.","type":"server_error","param":null,"code":null}}`)},
			want: tps.Sample{Headers: 100 * ms, FirstByte: 200 * ms, TTFT: 300 * ms, Last: 400 * ms, E2E: 400 * ms, Total: 500 * ms,
				TPS: 10, TPSOK: true, TPOT: 100 * ms, E2ETPS: 5,
				OutputTokens: 2, TokenSource: tps.TokenSourceChunks, FirstChunkTokens: 1,
				Chunks: 4, OutputChunks: 2, Gaps: tps.GapStats{Count: 1, Sum: 100 * ms, Min: 100 * ms, Max: 100 * ms},
				Model: "m", End: tps.EndError, ErrPhase: tps.PhaseMidStream},
			wantErr: streamErr("", "The server had an error while processing your request.", "server_error", ""),
		},
		{
			name:  "Q17 error before the first token then [DONE] (vLLM, code int)",
			steps: []step{ev(200, role()), ev(300, `{"error":{"object":"error","message":"This model's maximum context length is 4096 tokens.","type":"BadRequestError","param":null,"code":400}}`), done(400)},
			want: tps.Sample{Headers: 100 * ms, FirstByte: 200 * ms, Total: 400 * ms, Chunks: 2, Model: "m",
				End: tps.EndError, ErrPhase: tps.PhaseFirstToken},
			wantErr: streamErr("400", "This model's maximum context length is 4096 tokens.", "BadRequestError", ""),
			wrap:    func(s *tps.Sample) { s.Total = 300 * ms },
		},
		{
			name: "Q17 Q18 OpenRouter error with finish_reason error, message is JSON",
			steps: []step{ev(300, text("a")), ev(400, text("b")),
				ev(500, `{"id":"gen-1","object":"chat.completion.chunk","created":1,"model":"google/gemini-2.5-pro","provider":"Google","error":{"code":502,"message":"{\"error\":{\"code\":503,\"message\":\"overloaded\"}}"},"choices":[{"index":0,"delta":{"content":""},"finish_reason":"error","native_finish_reason":"error"}]}`)},
			want: tps.Sample{Headers: 100 * ms, FirstByte: 300 * ms, TTFT: 300 * ms, Last: 400 * ms, E2E: 400 * ms, Total: 500 * ms,
				TPS: 10, TPSOK: true, TPOT: 100 * ms, E2ETPS: 5,
				OutputTokens: 2, TokenSource: tps.TokenSourceChunks, FirstChunkTokens: 1,
				Chunks: 3, OutputChunks: 2, Gaps: tps.GapStats{Count: 1, Sum: 100 * ms, Min: 100 * ms, Max: 100 * ms},
				FinishReason: "error", Model: "google/gemini-2.5-pro", End: tps.EndError, ErrPhase: tps.PhaseMidStream},
			wantErr: streamErr("502", "overloaded", "", ""), // the upstream's message, from inside OpenRouter's
		},
		{
			name:  "Q17 TGI error with http_status_code then [DONE]",
			steps: []step{ev(300, text("a")), ev(400, `{"error":{"message":"Input validation error","http_status_code":422}}`), done(500)},
			want: tps.Sample{Headers: 100 * ms, FirstByte: 300 * ms, TTFT: 300 * ms, Last: 300 * ms, E2E: 300 * ms, Total: 500 * ms,
				E2ETPS: 1 / 0.3, OutputTokens: 1, TokenSource: tps.TokenSourceChunks, FirstChunkTokens: 1,
				Chunks: 2, OutputChunks: 1, Model: "m", End: tps.EndError, ErrPhase: tps.PhaseMidStream},
			wantErr: streamErr("422", "Input validation error", "", ""),
			wrap:    func(s *tps.Sample) { s.Total = 400 * ms },
		},
		{
			name: "Q4 Q17 Groq event: error, code string",
			steps: []step{ev(300, text("a")),
				raw(400, "event: error\ndata: {\"error\":{\"message\":\"Rate limit reached\",\"type\":\"tokens\",\"code\":\"rate_limit_exceeded\"}}\n\n")},
			want: tps.Sample{Headers: 100 * ms, FirstByte: 300 * ms, TTFT: 300 * ms, Last: 300 * ms, E2E: 300 * ms, Total: 400 * ms,
				E2ETPS: 1 / 0.3, OutputTokens: 1, TokenSource: tps.TokenSourceChunks, FirstChunkTokens: 1,
				Chunks: 2, OutputChunks: 1, Model: "m", End: tps.EndError, ErrPhase: tps.PhaseMidStream},
			wantErr: streamErr("rate_limit_exceeded", "Rate limit reached", "tokens", "error"),
		},
		{
			name:  "Q18 Azure error.code as a string",
			steps: []step{ev(400, `{"error":{"code":"429","message":"Requests exceeded the rate limit."}}`)},
			want: tps.Sample{Headers: 100 * ms, FirstByte: 400 * ms, Total: 400 * ms, Chunks: 1,
				End: tps.EndError, ErrPhase: tps.PhaseFirstToken},
			wantErr: streamErr("429", "Requests exceeded the rate limit.", "", ""),
		},
		{
			name:  "Q5 no [DONE] after a finish_reason (old TGI)",
			steps: []step{ev(200, role()), ev(300, text("a")), ev(500, text("b")), ev(600, fin("eos"))},
			want: tps.Sample{Headers: 100 * ms, FirstByte: 200 * ms, TTFT: 300 * ms, Last: 500 * ms, E2E: 500 * ms, Total: 600 * ms,
				TPS: 5, TPSOK: true, TPOT: 200 * ms, E2ETPS: 4,
				OutputTokens: 2, TokenSource: tps.TokenSourceChunks, FirstChunkTokens: 1,
				Chunks: 4, OutputChunks: 2, Gaps: tps.GapStats{Count: 1, Sum: 200 * ms, Min: 200 * ms, Max: 200 * ms},
				FinishReason: "eos", Model: "m", End: tps.EndEOF},
		},
		{
			name:  "Q5 clean EOF without [DONE] or finish_reason is Truncated",
			steps: []step{ev(300, text("a")), ev(500, text("b"))},
			want: tps.Sample{Headers: 100 * ms, FirstByte: 300 * ms, TTFT: 300 * ms, Last: 500 * ms, E2E: 500 * ms, Total: 500 * ms,
				TPS: 5, TPSOK: true, TPOT: 200 * ms, E2ETPS: 4,
				OutputTokens: 2, TokenSource: tps.TokenSourceChunks, FirstChunkTokens: 1,
				Chunks: 2, OutputChunks: 2, Gaps: tps.GapStats{Count: 1, Sum: 200 * ms, Min: 200 * ms, Max: 200 * ms},
				Model: "m", End: tps.EndEOF, Truncated: true},
		},
		{
			name:    "cut connection is an error, never a success",
			steps:   []step{ev(300, text("a")), ev(400, text("b")), raw(450, "data: {\"choi")},
			readErr: io.ErrUnexpectedEOF,
			want: tps.Sample{Headers: 100 * ms, FirstByte: 300 * ms, TTFT: 300 * ms, Last: 400 * ms, E2E: 400 * ms, Total: 450 * ms,
				TPS: 10, TPSOK: true, TPOT: 100 * ms, E2ETPS: 5,
				OutputTokens: 2, TokenSource: tps.TokenSourceChunks, FirstChunkTokens: 1,
				Chunks: 2, OutputChunks: 2, Gaps: tps.GapStats{Count: 1, Sum: 100 * ms, Min: 100 * ms, Max: 100 * ms},
				Model: "m", End: tps.EndError, ErrPhase: tps.PhaseMidStream},
			wantErr: func(t *testing.T, err error) { assert.ErrorIs(t, err, io.ErrUnexpectedEOF) },
		},
		{
			name: "Q3 non-standard error: field (old llama.cpp)",
			steps: []step{raw(300, "error: {\"code\":500,\"message\":\"context shift failed\",\"type\":\"server_error\"}\n\n"),
				done(400)},
			want: tps.Sample{Headers: 100 * ms, FirstByte: 300 * ms, Total: 400 * ms, Chunks: 1, NonStandard: 1,
				End: tps.EndError, ErrPhase: tps.PhaseFirstToken},
			wantErr: streamErr("500", "context shift failed", "server_error", "error"),
			// openai-go drops the line: the stream ends clean, empty and Truncated.
			wrap: func(s *tps.Sample) {
				*s = tps.Sample{Headers: 100 * ms, Total: 400 * ms, End: tps.EndStream, Truncated: true}
			},
			wrapOK: true,
		},
		{
			name: "Q12 Q22 llama.cpp null content, timings, [DONE] without blank line",
			steps: []step{
				ev(200, `{"choices":[{"finish_reason":null,"index":0,"delta":{"role":"assistant","content":null}}],"created":1,"id":"chatcmpl-x","model":"gpt-3.5-turbo","system_fingerprint":"b6000-abc","object":"chat.completion.chunk"}`),
				ev(300, `{"choices":[{"finish_reason":null,"index":0,"delta":{"content":"A"}}],"created":1,"id":"chatcmpl-x","model":"gpt-3.5-turbo","object":"chat.completion.chunk"}`),
				ev(400, `{"choices":[{"finish_reason":null,"index":0,"delta":{"content":"B"}}],"created":1,"id":"chatcmpl-x","model":"gpt-3.5-turbo","object":"chat.completion.chunk"}`),
				ev(500, `{"choices":[{"finish_reason":"stop","index":0,"delta":{}}],"created":1,"id":"chatcmpl-x","model":"gpt-3.5-turbo","object":"chat.completion.chunk","usage":{"completion_tokens":2,"prompt_tokens":8,"total_tokens":10,"prompt_tokens_details":{"cached_tokens":4}},"timings":{"cache_n":4,"prompt_n":4,"prompt_ms":12.5,"prompt_per_token_ms":3.125,"prompt_per_second":320.0,"predicted_n":2,"predicted_ms":20.25,"predicted_per_token_ms":10.125,"predicted_per_second":98.5}}`),
				raw(600, "data: [DONE]")},
			want: tps.Sample{Headers: 100 * ms, FirstByte: 200 * ms, TTFT: 300 * ms, Last: 400 * ms, E2E: 400 * ms, Total: 600 * ms,
				TPS: 10, TPSOK: true, TPOT: 100 * ms, E2ETPS: 5,
				OutputTokens: 2, TokenSource: tps.TokenSourceUsage, FirstChunkTokens: 1, InputTokens: 8, CachedTokens: 4, Cache: tps.CacheWarm,
				Chunks: 4, OutputChunks: 2, Gaps: tps.GapStats{Count: 1, Sum: 100 * ms, Min: 100 * ms, Max: 100 * ms},
				FinishReason: "stop", Model: "gpt-3.5-turbo", SystemFingerprint: "b6000-abc",
				Server: tps.ServerTiming{Prompt: 12500 * time.Microsecond, Completion: 20250 * time.Microsecond, PredictedPerSecond: 98.5, CacheN: 4},
				End:    tps.EndDone},
		},
	}
}

// multiToken is a Mistral-style stream: several words per chunk, usage on
// the finish chunk.
func multiToken(name string, tok tps.Tokenizer, tpsWant float64, first, tokens int64, src tps.TokenSource) quirk {
	var opts []tps.Option
	if tok != nil {
		opts = append(opts, tps.WithTokenizer(tok))
	}
	return quirk{
		name: name,
		opts: opts,
		steps: []step{ev(200, role()), ev(300, text("The quick brown fox")), ev(500, text(" jumps over the")), ev(800, text(" lazy dog.")),
			ev(850, chunkHead+`"choices":[{"index":0,"delta":{"content":""},"finish_reason":"stop"}],"usage":{"prompt_tokens":9,"completion_tokens":12,"total_tokens":21}}`),
			done(900)},
		want: tps.Sample{Headers: 100 * ms, FirstByte: 200 * ms, TTFT: 300 * ms, Last: 800 * ms, E2E: 800 * ms, Total: 900 * ms,
			TPS: tpsWant, TPSOK: true, TPOT: 500 * ms / time.Duration(tokens-1), E2ETPS: float64(tokens) / 0.8,
			OutputTokens: tokens, TokenSource: src, FirstChunkTokens: first, InputTokens: 9,
			Chunks: 5, OutputChunks: 3, Gaps: tps.GapStats{Count: 2, Sum: 500 * ms, Min: 200 * ms, Max: 300 * ms},
			FinishReason: "stop", Model: "m", End: tps.EndDone},
	}
}

func streamErr(code, msg, typ, event string) func(t *testing.T, err error) {
	return func(t *testing.T, err error) {
		var se *tps.StreamError
		require.ErrorAs(t, err, &se)
		assert.Equal(t, code, se.Code, "code")
		assert.Equal(t, msg, se.Message, "message")
		assert.Equal(t, typ, se.Type, "type")
		assert.Equal(t, event, se.Event, "event")
		assert.True(t, strings.HasPrefix(se.Error(), "tps: stream error"), se.Error())
	}
}

// assertSample compares got with want exactly, rates within float rounding.
func assertSample(t *testing.T, want, got tps.Sample, wantErr func(*testing.T, error)) {
	t.Helper()
	if wantErr == nil {
		assert.NoError(t, got.Err)
	} else {
		require.Error(t, got.Err)
		wantErr(t, got.Err)
	}
	assert.InDelta(t, want.TPS, got.TPS, 1e-9, "TPS")
	assert.InDelta(t, want.E2ETPS, got.E2ETPS, 1e-9, "E2ETPS")
	want.TPS, got.TPS, want.E2ETPS, got.E2ETPS = 0, 0, 0, 0
	want.Err, got.Err = nil, nil
	assert.Equal(t, want, got)
}

func TestQuirksTap(t *testing.T) {
	for _, q := range quirks() {
		t.Run(q.name, func(t *testing.T) {
			got, out := runTap(t, q.steps, q.readErr, q.opts...)
			assert.Equal(t, body(q.steps), out, "bytes pass through unchanged")
			assertSample(t, q.want, got, q.wantErr)
		})
	}
}

func TestQuirksWrap(t *testing.T) {
	for _, q := range quirks() {
		t.Run(q.name, func(t *testing.T) {
			want := q.want
			want.Comments, want.NonStandard = 0, 0
			if want.End == tps.EndDone || want.End == tps.EndEOF {
				want.End = tps.EndStream
			}
			if q.wrap != nil {
				q.wrap(&want)
			}
			got, _ := runWrap(t, q.steps, q.readErr, q.opts...)
			wantErr := q.wantErr
			if q.wrapOK {
				wantErr = nil
			}
			assertSample(t, want, got, wantErr)
			var se *tps.StreamError
			if errors.As(got.Err, &se) {
				var ose *ssestream.StreamError
				assert.ErrorAs(t, got.Err, &ose, "unwraps to openai-go's error")
			}
		})
	}
}
