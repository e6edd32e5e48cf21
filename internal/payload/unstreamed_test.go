package payload_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tpsroute/tpsroute/internal/answer"
	"github.com/tpsroute/tpsroute/internal/payload"
)

// plainAnswers are non-streaming answers as providers send them.
var plainAnswers = map[string]string{
	"text": `{"id":"chatcmpl-1","object":"chat.completion","created":1730000000,"model":"gpt-4o-mini","system_fingerprint":"fp_1","service_tier":"default",
		"choices":[{"index":0,"message":{"role":"assistant","content":"Hi <b> & \"you\"\n","refusal":null,"annotations":[]},"logprobs":null,"finish_reason":"stop"}],
		"usage":{"prompt_tokens":9,"completion_tokens":5,"total_tokens":14,"prompt_tokens_details":{"cached_tokens":4},"completion_tokens_details":{"reasoning_tokens":0}}}`,
	"tools": `{"id":"c2","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":null,
		"tool_calls":[{"id":"call_a","type":"function","function":{"name":"f","arguments":"{\"x\":1}"}},{"id":"call_b","type":"function","function":{"name":"g","arguments":"{}"}}]},"finish_reason":"tool_calls"}],
		"usage":{"prompt_tokens":3,"completion_tokens":20,"total_tokens":23}}`,
	"refusal": `{"id":"c3","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":null,"refusal":"I can't."},"finish_reason":"stop"}]}`,
	"reasoning": `{"id":"c4","object":"chat.completion","created":1,"model":"deepseek-r1","choices":[{"index":0,"message":{"role":"assistant","content":"42","reasoning_content":"think"},"finish_reason":"stop"}],
		"usage":{"prompt_tokens":1,"completion_tokens":9,"total_tokens":10,"completion_tokens_details":{"reasoning_tokens":7}}}`,
	"n2":       `{"id":"c5","object":"chat.completion","created":1,"model":"m","choices":[{"index":1,"message":{"role":"assistant","content":"b"},"finish_reason":"length"},{"index":0,"message":{"role":"assistant","content":"a"},"finish_reason":"stop"}]}`,
	"logprobs": `{"id":"c6","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"a"},"logprobs":{"content":[{"token":"a","logprob":-0.1,"bytes":[97],"top_logprobs":[]}],"refusal":null},"finish_reason":"stop"}]}`,
}

// events splits SSE text into the data of its events, and the event types.
func events(t *testing.T, sse []byte) (data [][]byte, types []string) {
	t.Helper()
	for _, ev := range bytes.Split(bytes.TrimSuffix(sse, []byte("\n\n")), []byte("\n\n")) {
		typ := ""
		for _, line := range bytes.Split(ev, []byte("\n")) {
			switch {
			case bytes.HasPrefix(line, []byte("event: ")):
				typ = string(line[len("event: "):])
			case bytes.HasPrefix(line, []byte("data: ")):
				data = append(data, line[len("data: "):])
				types = append(types, typ)
			default:
				t.Fatalf("unexpected line %q", line)
			}
		}
	}
	return data, types
}

// answerFields is what a chat.completion says, decoded, for comparison:
// the fields a non-streaming caller reads.
func answerFields(t *testing.T, b []byte) map[string]any {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal(b, &m), "%s", b)
	out := map[string]any{}
	for _, k := range []string{"id", "created", "model", "system_fingerprint", "service_tier", "usage"} {
		out[k] = m[k]
	}
	byIndex := map[float64]any{}
	for _, c := range m["choices"].([]any) {
		c := c.(map[string]any)
		msg := c["message"].(map[string]any)
		keep := map[string]any{"finish_reason": c["finish_reason"], "logprobs": c["logprobs"]}
		for _, k := range []string{"content", "refusal", "reasoning_content", "tool_calls"} {
			if v := msg[k]; v != nil {
				keep[k] = v
			}
		}
		byIndex[c["index"].(float64)] = keep
	}
	out["choices"] = byIndex
	return out
}

// TestCompletionEventsRoundTrip: the events of an answer, accumulated
// again, give the same answer, and the Tap reads them as a finished stream.
func TestCompletionEventsRoundTrip(t *testing.T) {
	for name, body := range plainAnswers {
		t.Run(name, func(t *testing.T) {
			sse, err := payload.AppendCompletionEvents([]byte("prefix"), []byte(body))
			require.NoError(t, err)
			require.True(t, bytes.HasPrefix(sse, []byte("prefix")))
			sse = sse[len("prefix"):]
			data, types := events(t, sse)
			require.Equal(t, "[DONE]", string(data[len(data)-1]))
			var acc answer.Accumulator
			for i, d := range data {
				assert.Empty(t, types[i])
				acc.Add(d)
			}
			assert.Equal(t, answerFields(t, []byte(body)), answerFields(t, acc.JSON()))
		})
	}
}

// TestCompletionEventsKeepText: the text keeps the provider's own escapes
// (no \u003c for <), so a streaming caller reads what was sent.
func TestCompletionEventsKeepText(t *testing.T) {
	sse, err := payload.AppendCompletionEvents(nil, []byte(plainAnswers["text"]))
	require.NoError(t, err)
	assert.Contains(t, string(sse), `"content":"Hi <b> & \"you\"\n"`)
	assert.Contains(t, string(sse), `"annotations":[]`, "message fields beyond the text are kept")
	data, _ := events(t, sse)
	require.Len(t, data, 3, "the answer, the usage, [DONE]")
	var c payload.Chunk
	require.NoError(t, payload.ParseChunk(data[1], &c))
	assert.True(t, c.HasUsage)
	assert.Equal(t, int64(4), c.Usage.CachedTokens)
	assert.Empty(t, c.Choices)
}

// TestCompletionEventsError: an error answered with a 200 is an error
// event; what is not a JSON object is ErrMalformed and appends nothing.
func TestCompletionEventsError(t *testing.T) {
	sse, err := payload.AppendCompletionEvents(nil, []byte("{\"error\":{\"message\":\"overloaded\",\n\"code\":529}}"))
	require.NoError(t, err)
	assert.Equal(t, "event: error\ndata: {\"error\":{\"message\":\"overloaded\",\"code\":529}}\n\n", string(sse))
	for _, bad := range []string{"", "null", "[]", `"x"`, "{", `{"choices":{}}`, `{"choices":[{"message":[]}]}`, `{"choices":[{"message":{"tool_calls":{}}}]}`, `{"choices":[{"message":{"tool_calls":[1]}}]}`} {
		got, err := payload.AppendCompletionEvents([]byte("kept"), []byte(bad))
		assert.ErrorIs(t, err, payload.ErrMalformed, bad)
		assert.Equal(t, "kept", string(got), bad)
	}
}

// FuzzAppendCompletionEvents: whatever the answer, the events are one line
// of data each, and each data that is not [DONE] is a chunk ParseChunk
// reads (or an error event's JSON object).
func FuzzAppendCompletionEvents(f *testing.F) {
	for _, a := range plainAnswers {
		f.Add([]byte(a))
	}
	f.Add([]byte(`{"error":"x"}`))
	f.Fuzz(func(t *testing.T, in []byte) {
		out, err := payload.AppendCompletionEvents(nil, in)
		if err != nil {
			if len(out) != 0 {
				t.Fatalf("error with output %q", out)
			}
			return
		}
		data, _ := events(t, out)
		for _, d := range data {
			if string(d) == "[DONE]" {
				continue
			}
			var c payload.Chunk
			if err := payload.ParseChunk(d, &c); err != nil {
				t.Fatalf("event %q of %q: %v", d, in, err)
			}
			if !json.Valid(d) {
				t.Fatalf("event %q of %q is not valid JSON", d, in)
			}
		}
	})
}

// BenchmarkAppendCompletionEvents is the cost of reading a plain answer of
// 1,000 tokens (about 6 KB) as a stream.
func BenchmarkAppendCompletionEvents(b *testing.B) {
	answer := []byte(`{"id":"chatcmpl-1","object":"chat.completion","created":1730000000,"model":"gpt-4o-mini","system_fingerprint":"fp_1","choices":[{"index":0,"message":{"role":"assistant","content":"` +
		strings.Repeat(" token", 1000) + `","refusal":null,"annotations":[]},"logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":9,"completion_tokens":1000,"total_tokens":1009}}`)
	var dst []byte
	b.SetBytes(int64(len(answer)))
	b.ReportAllocs()
	for b.Loop() {
		var err error
		if dst, err = payload.AppendCompletionEvents(dst[:0], answer); err != nil {
			b.Fatal(err)
		}
	}
}

// TestCompletionEventsKeepSpaceAtTheEnd: the space inside a string is the
// text's, wherever it stands, also right before the closing quote; the
// space outside strings goes.
func TestCompletionEventsKeepSpaceAtTheEnd(t *testing.T) {
	sse, err := payload.AppendCompletionEvents(nil, []byte("{ \"choices\" : [ { \"message\" : { \"content\" : \"a \" } } ] }"))
	require.NoError(t, err)
	data, _ := events(t, sse)
	assert.Equal(t, `{"object":"chat.completion.chunk","choices":[{"delta":{"content":"a "},"index":0}]}`, string(data[0]))
}

// TestCompletionEventsToolCallIndex: each tool call of the delta carries
// the "index" a streaming client needs: its position when it has none, its
// own when it has one (wherever it stands), and an empty call is still an
// object.
func TestCompletionEventsToolCallIndex(t *testing.T) {
	answer := `{"choices":[{"index":0,"message":{"role":"assistant","tool_calls":[` +
		`{"id":"a","type":"function","function":{"name":"f","arguments":"{}"}},` +
		`{"id":"b","index":7,"type":"function"},` +
		`{}]},"finish_reason":"tool_calls"}]}`
	sse, err := payload.AppendCompletionEvents(nil, []byte(answer))
	require.NoError(t, err)
	data, _ := events(t, sse)
	require.True(t, json.Valid(data[0]), "%s", data[0])
	assert.Contains(t, string(data[0]), `"tool_calls":[{"index":0,"id":"a","type":"function","function":{"name":"f","arguments":"{}"}},{"id":"b","index":7,"type":"function"},{"index":2}]`)
}
