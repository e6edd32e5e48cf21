package payload_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tpsroute/tpsroute/internal/payload"
)

func TestParseChunk(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want func(t *testing.T, c *payload.Chunk)
	}{
		{"content", `{"choices":[{"index":0,"delta":{"content":"Hi"}}]}`, func(t *testing.T, c *payload.Chunk) {
			assert.True(t, c.Output)
			assert.Equal(t, 1, c.OutputDeltas)
			assert.Equal(t, "Hi", string(c.Content))
			assert.False(t, c.Reasoning)
			assert.Equal(t, 2, c.OutputBytes)
			assert.Zero(t, c.ReasoningBytes)
		}},
		{"role only with empty content", `{"choices":[{"delta":{"role":"assistant","content":""}}]}`, func(t *testing.T, c *payload.Chunk) {
			assert.False(t, c.Output)
			assert.Nil(t, c.Content)
		}},
		{"role only with null content", `{"choices":[{"delta":{"role":"assistant","content":null}}]}`, func(t *testing.T, c *payload.Chunk) {
			assert.False(t, c.Output)
		}},
		{"reasoning_content and content joined", `{"choices":[{"delta":{"reasoning_content":"think ","content":"say"}}]}`, func(t *testing.T, c *payload.Chunk) {
			assert.True(t, c.Output)
			assert.True(t, c.Reasoning)
			assert.Equal(t, "think say", string(c.AppendText(nil)))
			assert.Equal(t, 9, c.OutputBytes)
			assert.Equal(t, 6, c.ReasoningBytes)
		}},
		{"refusal", `{"choices":[{"delta":{"refusal":"no"}}]}`, func(t *testing.T, c *payload.Chunk) {
			assert.True(t, c.Output)
			assert.False(t, c.Reasoning)
		}},
		{"typed content array (magistral)", `{"choices":[{"delta":{"content":[{"type":"thinking","thinking":[{"type":"text","text":"hm"}]}]}}]}`, func(t *testing.T, c *payload.Chunk) {
			assert.True(t, c.Output)
			n := len(`[{"type":"thinking","thinking":[{"type":"text","text":"hm"}]}]`)
			assert.Equal(t, n, c.OutputBytes, "the array's JSON, whole")
			assert.Equal(t, n, c.ReasoningBytes, "it may hold reasoning")
		}},
		{"empty content array", `{"choices":[{"delta":{"content":[]}}]}`, func(t *testing.T, c *payload.Chunk) {
			assert.False(t, c.Output)
		}},
		{"tool call", `{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{"}}]}}]}`, func(t *testing.T, c *payload.Chunk) {
			assert.True(t, c.Output)
			assert.True(t, c.ToolCall)
			assert.Equal(t, len(`[{"index":0,"function":{"arguments":"{"}}]`), c.OutputBytes)
		}},
		{"empty tool_calls", `{"choices":[{"delta":{"tool_calls":[]}}]}`, func(t *testing.T, c *payload.Chunk) {
			assert.False(t, c.Output)
			assert.Zero(t, c.OutputBytes)
		}},
		{"legacy function_call", `{"choices":[{"delta":{"function_call":{"name":"f"}}}]}`, func(t *testing.T, c *payload.Chunk) {
			assert.True(t, c.ToolCall)
			assert.Equal(t, len(`{"name":"f"}`), c.OutputBytes)
		}},
		{"choices null, missing key, numbers as strings", `{"choices":null,"usage":{"prompt_tokens":"x","completion_tokens":7.0}}`, func(t *testing.T, c *payload.Chunk) {
			assert.False(t, c.Output)
			require.True(t, c.HasUsage)
			assert.Equal(t, int64(0), c.Usage.PromptTokens)
			assert.Equal(t, int64(7), c.Usage.CompletionTokens)
		}},
		{"usage null is no usage", `{"choices":[],"usage":null}`, func(t *testing.T, c *payload.Chunk) {
			assert.False(t, c.HasUsage)
		}},
		{"usage beats x_groq.usage in either order", `{"x_groq":{"usage":{"completion_tokens":1}},"usage":{"completion_tokens":2}}`, func(t *testing.T, c *payload.Chunk) {
			assert.Equal(t, int64(2), c.Usage.CompletionTokens)
		}},
		{"x_groq.usage when usage is null", `{"usage":null,"x_groq":{"id":"req","usage":{"completion_tokens":3,"queue_time":0.5}}}`, func(t *testing.T, c *payload.Chunk) {
			require.True(t, c.HasUsage)
			assert.Equal(t, int64(3), c.Usage.CompletionTokens)
			assert.True(t, c.HasServer)
			assert.Equal(t, "500ms", c.Server.Queue.String())
		}},
		{"cached tokens details null", `{"usage":{"completion_tokens":1,"prompt_tokens_details":null}}`, func(t *testing.T, c *payload.Chunk) {
			assert.False(t, c.Usage.CachedReported)
		}},
		{"cached tokens zero is reported", `{"usage":{"completion_tokens":1,"prompt_tokens_details":{"cached_tokens":0}}}`, func(t *testing.T, c *payload.Chunk) {
			assert.True(t, c.Usage.CachedReported)
		}},
		{"big seed and unknown fields", `{"seed":123456789012345678901234567890,"obfuscation":"x","citations":["a"],"sglext":{"a":[1,{"b":null}]},"choices":[{"delta":{"content":"x"},"stop_reason":null,"token_id":5}]}`, func(t *testing.T, c *payload.Chunk) {
			assert.True(t, c.Output)
		}},
		{"error null is no error", `{"error":null,"choices":[]}`, func(t *testing.T, c *payload.Chunk) {
			assert.False(t, c.Error)
		}},
		{"error object", `{"error": {"message":"m"} }`, func(t *testing.T, c *payload.Chunk) {
			assert.True(t, c.Error)
			assert.Equal(t, `{"message":"m"}`, string(c.ErrorBody))
		}},
		{"finish_reason last non-null", `{"choices":[{"index":0,"finish_reason":"stop"},{"index":1,"finish_reason":null}]}`, func(t *testing.T, c *payload.Chunk) {
			assert.Equal(t, "stop", string(c.FinishReason))
		}},
		{"system_fingerprint null", `{"system_fingerprint":null,"model":"m"}`, func(t *testing.T, c *payload.Chunk) {
			assert.Nil(t, c.SystemFingerprint)
			assert.Equal(t, "m", string(c.Model))
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var c payload.Chunk
			require.NoError(t, payload.ParseChunk([]byte(tt.in), &c))
			tt.want(t, &c)
		})
	}
}

func TestParseChunkMalformed(t *testing.T) {
	for _, in := range []string{
		``, ` `, `[]`, `"x"`, `null`, `{`, `{"a"}`, `{"a":}`, `{"a":1,}`, `{"a":1}x`, `{"a":tru}`,
		`{"a":"\x"}`, `{"a":"\u12g4"}`, "{\"a\":\"\x01\"}", `{"a":01}`, `{"a":1.}`, `{"a":-}`, `{"a":1e}`,
		`{"choices":[{"delta":{"content":"a"}]}`, `{"a":[1,]}`, `{"a" 1}`, `{a:1}`,
		`{"a":` + strings.Repeat("[", 300) + strings.Repeat("]", 300) + `}`,
	} {
		t.Run(in, func(t *testing.T) {
			var c payload.Chunk
			assert.ErrorIs(t, payload.ParseChunk([]byte(in), &c), payload.ErrMalformed)
		})
	}
}

func TestParseChunkReuseDoesNotAllocate(t *testing.T) {
	data := []byte(`{"id":"c","object":"chat.completion.chunk","created":1,"model":"gpt-4o","system_fingerprint":"fp","choices":[{"index":0,"delta":{"reasoning_content":"a","content":"b"},"logprobs":null,"finish_reason":null}],"usage":null}`)
	var c payload.Chunk
	require.NoError(t, payload.ParseChunk(data, &c))
	allocs := testing.AllocsPerRun(100, func() { _ = payload.ParseChunk(data, &c) })
	assert.Zero(t, allocs)
}

// TestParseChunkFloats checks that server timings are read as encoding/json
// reads them, correctly rounded (the last digit of 508.54739767602643 used
// to be lost), and without allocating.
func TestParseChunkFloats(t *testing.T) {
	data := []byte(`{"choices":[],"timings":{"predicted_ms":20.25,"predicted_per_second":508.54739767602643},"x_groq":{"usage":{"queue_time":1.5e-3,"total_time":2E0}}}`)
	var c payload.Chunk
	require.NoError(t, payload.ParseChunk(data, &c))
	assert.Equal(t, 508.54739767602643, c.Server.PredictedPerSecond)
	assert.Equal(t, 20250*time.Microsecond, c.Server.Completion)
	assert.Equal(t, 1500*time.Microsecond, c.Server.Queue)
	assert.Equal(t, 2*time.Second, c.Server.Total)
	allocs := testing.AllocsPerRun(100, func() { _ = payload.ParseChunk(data, &c) })
	assert.Zero(t, allocs)
}

// FuzzParseChunk checks ParseChunk never panics, agrees with
// encoding/json on which payloads are well formed, and counts output bytes
// (the bound of docs/METRICS.md, "Plausible usage") only for output, within
// the payload.
func FuzzParseChunk(f *testing.F) {
	for _, s := range []string{
		`{"choices":[{"delta":{"content":"a\u00e9"}}],"usage":{"completion_tokens":1}}`,
		`{"error":{"code":400}}`, `{"x_groq":{"usage":{"queue_time":1e-3}}}`, `{"a":[1,-2.5e+3,true,false,null,"s"]}`,
		`{"choices":[{"delta":{"content":"a\\\"b\\\\","reasoning":"\\"}}],"model":"\\\\"}`,
		`{"choices":[{"delta":{"content":[{"type":"thinking","thinking":[{"type":"text","text":"hm"}]}]}},{"index":1,"delta":{"reasoning_content":"x","refusal":"no"}}]}`,
		`{"choices":[{"delta":{"tool_calls":[null,{"index":0,"function":{"name":"f","arguments":"{}"}}],"function_call":{"name":"g"}}}]}`,
		`{"id":"c","created":1,"choices":[{"logprobs":{"content":[ {"token":"a","top_logprobs":[]} ],"refusal":[ ]}}],"usage":{"total_tokens":1}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var c payload.Chunk
		err := payload.ParseChunk(data, &c)
		if err == nil && !json.Valid(data) {
			t.Fatalf("accepted invalid JSON %q", data)
		}
		trimmed := strings.TrimLeft(string(data), " \t\r\n")
		nesting := strings.Count(string(data), "[") + strings.Count(string(data), "{")
		if err != nil && json.Valid(data) && strings.HasPrefix(trimmed, "{") && nesting < 200 {
			t.Fatalf("rejected valid JSON object %q", data)
		}
		if err == nil && (c.Output != (c.OutputBytes > 0) || c.ReasoningBytes < 0 || c.ReasoningBytes > c.OutputBytes || c.OutputBytes > len(data)) {
			t.Fatalf("output %v, %d output bytes, %d reasoning bytes, for %d bytes: %q", c.Output, c.OutputBytes, c.ReasoningBytes, len(data), data)
		}
		if err == nil && (c.HasUsage != (c.UsageRaw != nil) || c.UsageRaw != nil && !json.Valid(c.UsageRaw)) {
			t.Fatalf("usage %v with raw %q", c.HasUsage, c.UsageRaw)
		}
		for _, ch := range c.Choices {
			for _, e := range [][]byte{ch.LogprobsContent, ch.LogprobsRefusal} {
				if err == nil && e != nil && !json.Valid([]byte("["+string(e)+"]")) {
					t.Fatalf("logprobs elements %q", e)
				}
			}
		}
		_ = c.AppendText(nil)
	})
}

// TestParseChunkSkipsLogprobsOfAnotherType: logprobs that are not an
// object are skipped, as ParseChunk's contract says of every value of an
// unexpected type, not taken for a malformed chunk (FuzzAppendCompletionEvents
// found `"logprobs":""` refused).
func TestParseChunkSkipsLogprobsOfAnotherType(t *testing.T) {
	for _, v := range []string{`""`, `1`, `[]`, `true`, `null`} {
		var c payload.Chunk
		require.NoError(t, payload.ParseChunk([]byte(`{"choices":[{"index":0,"delta":{"content":"a"},"logprobs":`+v+`}]}`), &c), v)
		assert.False(t, c.Choices[0].Logprobs, v)
		assert.Equal(t, "a", string(c.Content), v)
	}
}

// TestParseChunkAnswerFields: ParseChunk reads what internal/answer's Accumulator needs
// besides the text: id, created, service_tier, the usage object as sent,
// logprobs elements, and a tool call's position when it has no index.
func TestParseChunkAnswerFields(t *testing.T) {
	var c payload.Chunk
	require.NoError(t, payload.ParseChunk([]byte(`{"id":"c-1","created":17,"service_tier":"flex","choices":[{"index":0,"logprobs":{"content":[ {"token":"a"}, {"token":"b"} ],"refusal":null},"delta":{"tool_calls":[{"id":"x","function":{"name":"f"}},{"id":"y","function":{"name":"g"}}]}}],"usage":{"total_tokens":3, "cost":0.1}}`), &c))
	assert.Equal(t, "c-1", string(c.ID))
	assert.EqualValues(t, 17, c.Created)
	assert.Equal(t, "flex", string(c.ServiceTier))
	assert.Equal(t, `{"total_tokens":3, "cost":0.1}`, string(c.UsageRaw))
	require.Len(t, c.Choices, 1)
	assert.True(t, c.Choices[0].Logprobs)
	assert.Equal(t, `{"token":"a"}, {"token":"b"}`, string(c.Choices[0].LogprobsContent))
	assert.Nil(t, c.Choices[0].LogprobsRefusal)
	require.Len(t, c.ToolCalls, 2)
	assert.EqualValues(t, 0, c.ToolCalls[0].Index)
	assert.EqualValues(t, 1, c.ToolCalls[1].Index, "its position, without an index")

	require.NoError(t, payload.ParseChunk([]byte(`{"choices":[{"logprobs":{"content":[]}}],"usage":null}`), &c))
	assert.NotNil(t, c.Choices[0].LogprobsContent, "an empty array is not null")
	assert.Empty(t, c.Choices[0].LogprobsContent)
	assert.Nil(t, c.UsageRaw)
}
