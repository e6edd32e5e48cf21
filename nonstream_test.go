package tpsroute

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tpsroute/tpsroute/replay"
	"github.com/tpsroute/tpsroute/route"
)

// bothWays is a provider that answers as real ones do: the SSE stream when
// the request streams, the one chat.completion JSON body otherwise, for the
// same answer. It records whether each request asked for a stream.
type bothWays struct {
	sse    []string // data payloads, [DONE] added
	answer string   // the non-streaming answer

	mu      sync.Mutex
	streams []bool
}

func (p *bothWays) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var req struct {
		Stream bool `json:"stream"`
	}
	_ = json.Unmarshal(body, &req)
	p.mu.Lock()
	p.streams = append(p.streams, req.Stream)
	p.mu.Unlock()
	if !req.Stream {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, p.answer)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	for _, d := range p.sse {
		_, _ = io.WriteString(w, "data: "+d+"\n\n")
	}
	_, _ = io.WriteString(w, "data: [DONE]\n\n")
}

// shapeCases are answers of real providers' shapes, each as its stream and
// as the provider's own non-streaming answer (without OpenAI's
// message.annotations, which a stream does not carry).
var shapeCases = []struct {
	name   string
	params func(p *openai.ChatCompletionNewParams)
	sse    []string
	answer string
}{
	{
		name: "text with logprobs (OpenAI)",
		params: func(p *openai.ChatCompletionNewParams) {
			p.Logprobs = openai.Bool(true)
			p.TopLogprobs = openai.Int(1)
		},
		sse: []string{
			`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"model":"gpt-4o-2024-08-06","service_tier":"default","system_fingerprint":"fp_a1","choices":[{"index":0,"delta":{"role":"assistant","content":"","refusal":null},"logprobs":{"content":[],"refusal":null},"finish_reason":null}],"usage":null}`,
			`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"model":"gpt-4o-2024-08-06","service_tier":"default","system_fingerprint":"fp_a1","choices":[{"index":0,"delta":{"content":"Hello"},"logprobs":{"content":[{"token":"Hello","logprob":-0.0009,"bytes":[72,101,108,108,111],"top_logprobs":[{"token":"Hello","logprob":-0.0009,"bytes":[72,101,108,108,111]}]}],"refusal":null},"finish_reason":null}],"usage":null}`,
			`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"model":"gpt-4o-2024-08-06","service_tier":"default","system_fingerprint":"fp_a1","choices":[{"index":0,"delta":{"content":", \"world\" \u00e9!"},"logprobs":{"content":[{"token":", \"world\" \u00e9!","logprob":-1.5,"bytes":[44],"top_logprobs":[{"token":",","logprob":-0.2,"bytes":[44]}]}],"refusal":null},"finish_reason":null}],"usage":null}`,
			`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"model":"gpt-4o-2024-08-06","service_tier":"default","system_fingerprint":"fp_a1","choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"}],"usage":null}`,
			`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"model":"gpt-4o-2024-08-06","service_tier":"default","system_fingerprint":"fp_a1","choices":[],"usage":{"prompt_tokens":9,"completion_tokens":2,"total_tokens":11,"prompt_tokens_details":{"cached_tokens":0,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":0,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}}}`,
		},
		answer: `{"id":"chatcmpl-1","object":"chat.completion","created":1700000000,"model":"gpt-4o-2024-08-06","choices":[{"index":0,"message":{"role":"assistant","content":"Hello, \"world\" \u00e9!","refusal":null},"logprobs":{"content":[{"token":"Hello","logprob":-0.0009,"bytes":[72,101,108,108,111],"top_logprobs":[{"token":"Hello","logprob":-0.0009,"bytes":[72,101,108,108,111]}]},{"token":", \"world\" \u00e9!","logprob":-1.5,"bytes":[44],"top_logprobs":[{"token":",","logprob":-0.2,"bytes":[44]}]}],"refusal":null},"finish_reason":"stop"}],"usage":{"prompt_tokens":9,"completion_tokens":2,"total_tokens":11,"prompt_tokens_details":{"cached_tokens":0,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":0,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}},"service_tier":"default","system_fingerprint":"fp_a1"}`,
	},
	{
		name: "tool calls (OpenAI)",
		sse: []string{
			`{"id":"chatcmpl-2","object":"chat.completion.chunk","created":1700000001,"model":"gpt-4o","system_fingerprint":"fp_b2","choices":[{"index":0,"delta":{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"get_weather","arguments":""}}],"refusal":null},"logprobs":null,"finish_reason":null}],"usage":null}`,
			`{"id":"chatcmpl-2","object":"chat.completion.chunk","created":1700000001,"model":"gpt-4o","system_fingerprint":"fp_b2","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"city\": "}}]},"logprobs":null,"finish_reason":null}],"usage":null}`,
			`{"id":"chatcmpl-2","object":"chat.completion.chunk","created":1700000001,"model":"gpt-4o","system_fingerprint":"fp_b2","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"\"Paris\"}"}}]},"logprobs":null,"finish_reason":null}],"usage":null}`,
			`{"id":"chatcmpl-2","object":"chat.completion.chunk","created":1700000001,"model":"gpt-4o","system_fingerprint":"fp_b2","choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"call_b","type":"function","function":{"name":"get_time","arguments":""}}]},"logprobs":null,"finish_reason":null}],"usage":null}`,
			`{"id":"chatcmpl-2","object":"chat.completion.chunk","created":1700000001,"model":"gpt-4o","system_fingerprint":"fp_b2","choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"function":{"arguments":"{\"tz\":\"CET\"}"}}]},"logprobs":null,"finish_reason":null}],"usage":null}`,
			`{"id":"chatcmpl-2","object":"chat.completion.chunk","created":1700000001,"model":"gpt-4o","system_fingerprint":"fp_b2","choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"tool_calls"}],"usage":null}`,
			`{"id":"chatcmpl-2","object":"chat.completion.chunk","created":1700000001,"model":"gpt-4o","system_fingerprint":"fp_b2","choices":[],"usage":{"prompt_tokens":80,"completion_tokens":30,"total_tokens":110}}`,
		},
		answer: `{"id":"chatcmpl-2","object":"chat.completion","created":1700000001,"model":"gpt-4o","choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[{"id":"call_a","type":"function","function":{"name":"get_weather","arguments":"{\"city\": \"Paris\"}"}},{"id":"call_b","type":"function","function":{"name":"get_time","arguments":"{\"tz\":\"CET\"}"}}],"refusal":null},"logprobs":null,"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":80,"completion_tokens":30,"total_tokens":110},"system_fingerprint":"fp_b2"}`,
	},
	{
		name: "refusal (OpenAI structured outputs)",
		sse: []string{
			`{"id":"chatcmpl-3","object":"chat.completion.chunk","created":1700000002,"model":"gpt-4o","system_fingerprint":"fp_c3","choices":[{"index":0,"delta":{"role":"assistant","content":null,"refusal":""},"logprobs":null,"finish_reason":null}],"usage":null}`,
			`{"id":"chatcmpl-3","object":"chat.completion.chunk","created":1700000002,"model":"gpt-4o","system_fingerprint":"fp_c3","choices":[{"index":0,"delta":{"refusal":"I'm sorry, "},"logprobs":null,"finish_reason":null}],"usage":null}`,
			`{"id":"chatcmpl-3","object":"chat.completion.chunk","created":1700000002,"model":"gpt-4o","system_fingerprint":"fp_c3","choices":[{"index":0,"delta":{"refusal":"I can't help with that."},"logprobs":null,"finish_reason":null}],"usage":null}`,
			`{"id":"chatcmpl-3","object":"chat.completion.chunk","created":1700000002,"model":"gpt-4o","system_fingerprint":"fp_c3","choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":20,"completion_tokens":9,"total_tokens":29}}`,
		},
		answer: `{"id":"chatcmpl-3","object":"chat.completion","created":1700000002,"model":"gpt-4o","choices":[{"index":0,"message":{"role":"assistant","content":null,"refusal":"I'm sorry, I can't help with that."},"logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":20,"completion_tokens":9,"total_tokens":29},"system_fingerprint":"fp_c3"}`,
	},
	{
		name: "reasoning (DeepSeek)",
		sse: []string{
			`{"id":"ds-4","object":"chat.completion.chunk","created":1700000003,"model":"deepseek-reasoner","system_fingerprint":"fp_d4","choices":[{"index":0,"delta":{"role":"assistant","content":null,"reasoning_content":""},"logprobs":null,"finish_reason":null}]}`,
			`{"id":"ds-4","object":"chat.completion.chunk","created":1700000003,"model":"deepseek-reasoner","system_fingerprint":"fp_d4","choices":[{"index":0,"delta":{"content":null,"reasoning_content":"The user greets; "},"logprobs":null,"finish_reason":null}]}`,
			`{"id":"ds-4","object":"chat.completion.chunk","created":1700000003,"model":"deepseek-reasoner","system_fingerprint":"fp_d4","choices":[{"index":0,"delta":{"content":null,"reasoning_content":"answer kindly."},"logprobs":null,"finish_reason":null}]}`,
			`{"id":"ds-4","object":"chat.completion.chunk","created":1700000003,"model":"deepseek-reasoner","system_fingerprint":"fp_d4","choices":[{"index":0,"delta":{"content":"Hi!","reasoning_content":null},"logprobs":null,"finish_reason":null}]}`,
			`{"id":"ds-4","object":"chat.completion.chunk","created":1700000003,"model":"deepseek-reasoner","system_fingerprint":"fp_d4","choices":[{"index":0,"delta":{"content":"","reasoning_content":null},"logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":6,"completion_tokens":12,"total_tokens":18,"prompt_tokens_details":{"cached_tokens":0},"completion_tokens_details":{"reasoning_tokens":10},"prompt_cache_hit_tokens":0,"prompt_cache_miss_tokens":6}}`,
		},
		answer: `{"id":"ds-4","object":"chat.completion","created":1700000003,"model":"deepseek-reasoner","choices":[{"index":0,"message":{"role":"assistant","content":"Hi!","reasoning_content":"The user greets; answer kindly."},"logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":6,"completion_tokens":12,"total_tokens":18,"prompt_tokens_details":{"cached_tokens":0},"completion_tokens_details":{"reasoning_tokens":10},"prompt_cache_hit_tokens":0,"prompt_cache_miss_tokens":6},"system_fingerprint":"fp_d4"}`,
	},
	{
		name:   "two choices (n=2)",
		params: func(p *openai.ChatCompletionNewParams) { p.N = openai.Int(2) },
		sse: []string{
			`{"id":"chatcmpl-5","object":"chat.completion.chunk","created":1700000004,"model":"gpt-4o-mini","system_fingerprint":"fp_e5","choices":[{"index":0,"delta":{"role":"assistant","content":"","refusal":null},"logprobs":null,"finish_reason":null}],"usage":null}`,
			`{"id":"chatcmpl-5","object":"chat.completion.chunk","created":1700000004,"model":"gpt-4o-mini","system_fingerprint":"fp_e5","choices":[{"index":1,"delta":{"role":"assistant","content":"","refusal":null},"logprobs":null,"finish_reason":null}],"usage":null}`,
			`{"id":"chatcmpl-5","object":"chat.completion.chunk","created":1700000004,"model":"gpt-4o-mini","system_fingerprint":"fp_e5","choices":[{"index":1,"delta":{"content":"Bonjour"},"logprobs":null,"finish_reason":null}],"usage":null}`,
			`{"id":"chatcmpl-5","object":"chat.completion.chunk","created":1700000004,"model":"gpt-4o-mini","system_fingerprint":"fp_e5","choices":[{"index":0,"delta":{"content":"Hello"},"logprobs":null,"finish_reason":null}],"usage":null}`,
			`{"id":"chatcmpl-5","object":"chat.completion.chunk","created":1700000004,"model":"gpt-4o-mini","system_fingerprint":"fp_e5","choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"}],"usage":null}`,
			`{"id":"chatcmpl-5","object":"chat.completion.chunk","created":1700000004,"model":"gpt-4o-mini","system_fingerprint":"fp_e5","choices":[{"index":1,"delta":{},"logprobs":null,"finish_reason":"length"}],"usage":null}`,
			`{"id":"chatcmpl-5","object":"chat.completion.chunk","created":1700000004,"model":"gpt-4o-mini","system_fingerprint":"fp_e5","choices":[],"usage":{"prompt_tokens":5,"completion_tokens":2,"total_tokens":7}}`,
		},
		answer: `{"id":"chatcmpl-5","object":"chat.completion","created":1700000004,"model":"gpt-4o-mini","choices":[{"index":0,"message":{"role":"assistant","content":"Hello","refusal":null},"logprobs":null,"finish_reason":"stop"},{"index":1,"message":{"role":"assistant","content":"Bonjour","refusal":null},"logprobs":null,"finish_reason":"length"}],"usage":{"prompt_tokens":5,"completion_tokens":2,"total_tokens":7},"system_fingerprint":"fp_e5"}`,
	},
}

// shapeOf is what TestNonStreamShape compares of a chat.completion, field
// by field: the top-level fields, and for each choice its index, message
// (role, content, refusal, reasoning_content, tool_calls), logprobs and
// finish reason. Absent and null read alike (nil).
func shapeOf(t *testing.T, raw []byte) map[string]any {
	t.Helper()
	require.True(t, json.Valid(raw), "%s", raw)
	var m map[string]any
	require.NoError(t, json.Unmarshal(raw, &m))
	out := map[string]any{}
	for _, k := range []string{"id", "object", "created", "model", "system_fingerprint", "service_tier", "usage"} {
		out[k] = m[k]
	}
	choices, _ := m["choices"].([]any)
	for i, c := range choices {
		ch, _ := c.(map[string]any)
		msg, _ := ch["message"].(map[string]any)
		for _, k := range []string{"role", "content", "refusal", "reasoning_content", "tool_calls"} {
			out[key(i, "message."+k)] = msg[k]
		}
		for _, k := range []string{"index", "logprobs", "finish_reason"} {
			out[key(i, k)] = ch[k]
		}
	}
	out["choices"] = len(choices)
	return out
}

func key(i int, field string) string { return "choices." + string(rune('0'+i)) + "." + field }

// TestNonStreamShape: a non-streaming call through each door (the Client's
// New, Do and the Transport with "stream": false) streams underneath and
// answers the same fields, with the same values, as the provider's own
// non-streaming answer to the same request: content, refusal, tool calls
// with their arguments, reasoning, logprobs, finish reason, usage, id,
// model, created, system_fingerprint and service_tier; RawJSON of the
// openai-go object is valid JSON.
func TestNonStreamShape(t *testing.T) {
	for _, tc := range shapeCases {
		t.Run(tc.name, func(t *testing.T) {
			p := &bothWays{sse: tc.sse, answer: tc.answer}
			srv := httptest.NewServer(p)
			t.Cleanup(srv.Close)
			params := userParams("m", "hi")
			if tc.params != nil {
				tc.params(&params)
			}
			ctx := context.Background()

			plain := openai.NewClient(option.WithBaseURL(srv.URL+"/v1"), option.WithAPIKey("k"), option.WithHTTPClient(srv.Client()), option.WithMaxRetries(0))
			want, err := plain.Chat.Completions.New(ctx, params)
			require.NoError(t, err)
			require.Equal(t, []bool{false}, p.streams, "the reference is the plain call")
			wantShape := shapeOf(t, []byte(want.RawJSON()))

			c := mustNew(t, Config{HTTPClient: srv.Client(), Deployments: []route.Deployment{
				{Provider: "p", Model: "m", BaseURL: srv.URL + "/v1", APIKey: "k"},
			}})
			viaTransport := openai.NewClient(option.WithBaseURL("http://caller.invalid/v1"), option.WithAPIKey("x"),
				option.WithHTTPClient(&http.Client{Transport: c.Transport()}), option.WithMaxRetries(0))
			body, err := json.Marshal(params)
			require.NoError(t, err)

			doors := map[string]func(t *testing.T) []byte{
				"New": func(t *testing.T) []byte {
					got, err := c.Chat.Completions.New(ctx, params)
					require.NoError(t, err)
					assertSameCompletion(t, want, got)
					return []byte(got.RawJSON())
				},
				"Do": func(t *testing.T) []byte {
					r, err := c.Do(ctx, body)
					require.NoError(t, err)
					raw, err := io.ReadAll(r.Body)
					require.NoError(t, err)
					require.NoError(t, r.Body.Close())
					assert.False(t, r.Stream)
					assert.Equal(t, "application/json", r.Header.Get("Content-Type"))
					assert.Equal(t, strconv.Itoa(len(raw)), r.Header.Get("Content-Length"))
					return raw
				},
				"Transport": func(t *testing.T) []byte {
					got, err := viaTransport.Chat.Completions.New(ctx, params)
					require.NoError(t, err)
					assertSameCompletion(t, want, got)
					return []byte(got.RawJSON())
				},
			}
			for name, door := range doors {
				t.Run(name, func(t *testing.T) {
					p.mu.Lock()
					p.streams = nil
					p.mu.Unlock()
					raw := door(t)
					assert.Equal(t, wantShape, shapeOf(t, raw))
					assert.Equal(t, []bool{true}, p.streams, "the routed call streams underneath")
				})
			}
		})
	}
}

// assertSameCompletion compares what openai-go decoded of the provider's
// own answer and of the routed one, field by field.
func assertSameCompletion(t *testing.T, want, got *openai.ChatCompletion) {
	t.Helper()
	assert.True(t, json.Valid([]byte(got.RawJSON())), "RawJSON is valid")
	assert.Equal(t, want.ID, got.ID)
	assert.Equal(t, want.Model, got.Model)
	assert.Equal(t, want.Created, got.Created)
	assert.Equal(t, want.ServiceTier, got.ServiceTier)
	assert.Equal(t, want.Usage, withoutJSON(got.Usage, want.Usage))
	require.Len(t, got.Choices, len(want.Choices))
	for i := range want.Choices {
		w, g := want.Choices[i], got.Choices[i]
		assert.Equal(t, w.Index, g.Index)
		assert.Equal(t, w.FinishReason, g.FinishReason)
		assert.Equal(t, w.Message.Content, g.Message.Content)
		assert.Equal(t, w.Message.Refusal, g.Message.Refusal)
		assert.Equal(t, w.Message.JSON.Content.Valid(), g.Message.JSON.Content.Valid(), "content null alike")
		require.Len(t, g.Message.ToolCalls, len(w.Message.ToolCalls))
		for j := range w.Message.ToolCalls {
			assert.Equal(t, w.Message.ToolCalls[j].ID, g.Message.ToolCalls[j].ID)
			assert.Equal(t, w.Message.ToolCalls[j].Function.Name, g.Message.ToolCalls[j].Function.Name)
			assert.Equal(t, w.Message.ToolCalls[j].Function.Arguments, g.Message.ToolCalls[j].Function.Arguments)
		}
		assert.Equal(t, w.Message.JSON.ExtraFields["reasoning_content"].Raw(), g.Message.JSON.ExtraFields["reasoning_content"].Raw())
		require.Len(t, g.Logprobs.Content, len(w.Logprobs.Content))
		for j := range w.Logprobs.Content {
			wl, gl := w.Logprobs.Content[j], g.Logprobs.Content[j]
			assert.Equal(t, wl.Token, gl.Token)
			assert.Equal(t, wl.Logprob, gl.Logprob)
			assert.Equal(t, wl.Bytes, gl.Bytes)
			assert.Equal(t, len(wl.TopLogprobs), len(gl.TopLogprobs))
		}
	}
}

// withoutJSON returns got with the JSON metadata of want, so that two
// usages compare by their values alone.
func withoutJSON(got, want openai.CompletionUsage) openai.CompletionUsage {
	got.JSON = want.JSON
	got.PromptTokensDetails.JSON = want.PromptTokensDetails.JSON
	got.CompletionTokensDetails.JSON = want.CompletionTokensDetails.JSON
	return got
}

// TestNonStreamDoorsFailOver: through every door, a non-streaming call
// that fails before its first output fails over, and one cut after it
// restarts on the next deployment; the caller gets the next deployment's
// whole answer, and the call is timed as a stream (TTFT, TPS, tokens).
func TestNonStreamDoorsFailOver(t *testing.T) {
	for _, fault := range []struct {
		name string
		f    replay.Fault
	}{
		{"502 before output", replay.Status(http.StatusBadGateway, "", nil)},
		{"cut after output", replay.CutAfter(20)},
	} {
		for _, door := range []string{"New", "Do", "Transport"} {
			t.Run(fault.name+"/"+door, func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					f := newMemFleet()
					profile := func() *replay.Profile {
						return &replay.Profile{TTFT: 200 * time.Millisecond, TPS: 100, OutputTokens: 40}
					}
					a := dep("a", "", "m", f.add("a", map[string]replay.Script{"m": replay.WithFaults(profile(), fault.f)}))
					b := dep("b", "", "m", f.add("b", map[string]replay.Script{"m": profile()}))
					c := mustNew(t, Config{HTTPClient: &http.Client{Transport: f}, Deployments: []route.Deployment{a, b}})
					var rep Outcome
					opts := []CallOption{WithPin("a", ""), WithOutcome(&rep)}
					var content string
					switch door {
					case "New":
						got, err := c.Chat.Completions.New(context.Background(), userParams("m", "hi"), opts...)
						require.NoError(t, err)
						content = got.Choices[0].Message.Content
					case "Do":
						r, err := c.Do(context.Background(), []byte(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`), opts...)
						require.NoError(t, err)
						raw, err := io.ReadAll(r.Body)
						require.NoError(t, err)
						require.NoError(t, r.Body.Close())
						var out openai.ChatCompletion
						require.NoError(t, json.Unmarshal(raw, &out))
						content = out.Choices[0].Message.Content
					case "Transport":
						oc := openai.NewClient(option.WithBaseURL("http://caller.invalid/v1"), option.WithAPIKey("x"), option.WithMaxRetries(0),
							option.WithHTTPClient(&http.Client{Transport: c.Transport()}))
						ctx := ContextWithOptions(context.Background(), opts...)
						got, err := oc.Chat.Completions.New(ctx, userParams("m", "hi"))
						require.NoError(t, err)
						content = got.Choices[0].Message.Content
					}
					assert.Equal(t, replay.Text(40), content, "b's whole answer")
					assert.Equal(t, "b", rep.Deployment.Provider)
					require.GreaterOrEqual(t, len(rep.Attempts), 2)
					assert.Equal(t, "a", rep.Attempts[0].Key.Provider)
					assert.Equal(t, "b", rep.Attempts[len(rep.Attempts)-1].Key.Provider)
					s := rep.Sample
					assert.InDelta(t, 200*time.Millisecond, s.TTFT, float64(20*time.Millisecond), "timed as a stream")
					assert.True(t, s.TPSOK)
					assert.InDelta(t, 100, s.TPS, 10)
					assert.EqualValues(t, 40, s.OutputTokens)
				})
			})
		}
	}
}

// TestPlainUpstreamDoors: a non-streaming call WithPlainUpstream, through
// the Client's New and the Transport (ContextWithOptions), and any call to
// a deployment that declares NoStream, reach the provider as plain calls
// and get its own answer, byte for byte; a streaming call to a NoStream
// deployment gets that answer as a stream. WithPlainUpstream changes
// nothing for a streaming call.
func TestPlainUpstreamDoors(t *testing.T) {
	tc := shapeCases[0]
	p := &bothWays{sse: tc.sse, answer: tc.answer}
	srv := httptest.NewServer(p)
	t.Cleanup(srv.Close)
	ctx := context.Background()
	params := userParams("m", "hi")
	c := mustNew(t, Config{HTTPClient: srv.Client(), Deployments: []route.Deployment{
		{Provider: "p", Model: "m", BaseURL: srv.URL + "/v1", APIKey: "k"},
		{Provider: "q", Model: "n", BaseURL: srv.URL + "/v1", APIKey: "k", Capabilities: route.Capabilities{NoStream: true}},
	}})
	viaTransport := openai.NewClient(option.WithBaseURL("http://caller.invalid/v1"), option.WithAPIKey("x"),
		option.WithHTTPClient(&http.Client{Transport: c.Transport()}), option.WithMaxRetries(0))
	nParams := userParams("n", "hi")
	for name, door := range map[string]struct {
		call       func(t *testing.T) string // the answer's raw JSON, or the streamed text
		wantStream bool
	}{
		"New WithPlainUpstream": {call: func(t *testing.T) string {
			var rep Outcome
			got, err := c.Chat.Completions.New(ctx, params, WithPlainUpstream(), WithOutcome(&rep))
			require.NoError(t, err)
			assert.True(t, rep.Sample.Unstreamed)
			return got.RawJSON()
		}},
		"Transport WithPlainUpstream": {call: func(t *testing.T) string {
			got, err := viaTransport.Chat.Completions.New(ContextWithOptions(ctx, WithPlainUpstream()), params)
			require.NoError(t, err)
			return got.RawJSON()
		}},
		"New to NoStream": {call: func(t *testing.T) string {
			got, err := c.Chat.Completions.New(ctx, nParams)
			require.NoError(t, err)
			return got.RawJSON()
		}},
		"NewStreaming to NoStream": {call: func(t *testing.T) string {
			s := c.Chat.Completions.NewStreaming(ctx, nParams)
			var text strings.Builder
			for s.Next() {
				for _, ch := range s.Current().Choices {
					text.WriteString(ch.Delta.Content)
				}
			}
			require.NoError(t, s.Err())
			return text.String()
		}},
		"NewStreaming WithPlainUpstream": {wantStream: true, call: func(t *testing.T) string {
			s := c.Chat.Completions.NewStreaming(ctx, params, WithPlainUpstream())
			var text strings.Builder
			for s.Next() {
				for _, ch := range s.Current().Choices {
					text.WriteString(ch.Delta.Content)
				}
			}
			require.NoError(t, s.Err())
			return text.String()
		}},
	} {
		t.Run(name, func(t *testing.T) {
			p.mu.Lock()
			p.streams = nil
			p.mu.Unlock()
			got := door.call(t)
			assert.Equal(t, []bool{door.wantStream}, p.streams)
			if strings.HasPrefix(name, "NewStreaming") {
				var want openai.ChatCompletion
				require.NoError(t, json.Unmarshal([]byte(tc.answer), &want))
				assert.Equal(t, want.Choices[0].Message.Content, got)
				return
			}
			assert.JSONEq(t, tc.answer, got, "the provider's own answer")
		})
	}
}
