package answer_test

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tpsroute/tpsroute/internal/answer"
	"github.com/tpsroute/tpsroute/internal/payload"
)

// completion is the part of a chat.completion the Accumulator tests read.
type completion struct {
	ID                string `json:"id"`
	Object            string `json:"object"`
	Created           int64  `json:"created"`
	Model             string `json:"model"`
	SystemFingerprint string `json:"system_fingerprint"`
	ServiceTier       string `json:"service_tier"`
	Choices           []struct {
		Index   int64 `json:"index"`
		Message struct {
			Role             string  `json:"role"`
			Content          *string `json:"content"`
			ReasoningContent *string `json:"reasoning_content"`
			Refusal          *string `json:"refusal"`
			ToolCalls        []struct {
				ID       string `json:"id"`
				Type     string `json:"type"`
				Function struct {
					Name      string `json:"name"`
					Arguments string `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"message"`
		Logprobs     json.RawMessage `json:"logprobs"`
		FinishReason *string         `json:"finish_reason"`
	} `json:"choices"`
	Usage json.RawMessage `json:"usage"`
}

func accumulate(t *testing.T, chunks ...string) (completion, []byte) {
	t.Helper()
	var a answer.Accumulator
	for _, c := range chunks {
		a.Add([]byte(c))
	}
	raw := a.JSON()
	require.True(t, json.Valid(raw), "%s", raw)
	assert.LessOrEqual(t, len(raw), a.Size())
	var out completion
	require.NoError(t, json.Unmarshal(raw, &out))
	return out, raw
}

func TestAccumulator(t *testing.T) {
	const head = `{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"model":"gpt-4o","system_fingerprint":"fp_1","service_tier":"default","choices":[`
	t.Run("text, finish and usage", func(t *testing.T) {
		out, _ := accumulate(t,
			head+`{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}`,
			head+`{"index":0,"delta":{"content":"Hel"},"finish_reason":null}]}`,
			head+`{"index":0,"delta":{"content":"lo \"x\"\n\u00e9"},"finish_reason":null}]}`,
			head+`{"index":0,"delta":{},"finish_reason":"stop"}]}`,
			head+`],"usage":{"prompt_tokens":9,"completion_tokens":3,"total_tokens":12,"prompt_tokens_details":{"cached_tokens":0,"audio_tokens":0}}}`,
			`[DONE]`)
		assert.Equal(t, "chatcmpl-1", out.ID)
		assert.Equal(t, "chat.completion", out.Object)
		assert.EqualValues(t, 1700000000, out.Created)
		assert.Equal(t, "gpt-4o", out.Model)
		assert.Equal(t, "fp_1", out.SystemFingerprint)
		assert.Equal(t, "default", out.ServiceTier)
		require.Len(t, out.Choices, 1)
		ch := out.Choices[0]
		assert.Equal(t, "assistant", ch.Message.Role)
		require.NotNil(t, ch.Message.Content)
		assert.Equal(t, "Hello \"x\"\né", *ch.Message.Content)
		assert.Nil(t, ch.Message.Refusal)
		assert.Nil(t, ch.Message.ReasoningContent)
		assert.JSONEq(t, `null`, string(ch.Logprobs))
		require.NotNil(t, ch.FinishReason)
		assert.Equal(t, "stop", *ch.FinishReason)
		assert.JSONEq(t, `{"prompt_tokens":9,"completion_tokens":3,"total_tokens":12,"prompt_tokens_details":{"cached_tokens":0,"audio_tokens":0}}`, string(out.Usage),
			"usage passes through whole")
	})
	t.Run("reasoning and refusal", func(t *testing.T) {
		out, _ := accumulate(t,
			head+`{"index":0,"delta":{"reasoning_content":"think "}}]}`,
			head+`{"index":0,"delta":{"reasoning":"more"}}]}`,
			head+`{"index":0,"delta":{"reasoning_content":"","reasoning":""}}]}`,
			head+`{"index":0,"delta":{"refusal":"I can"}}]}`,
			head+`{"index":0,"delta":{"refusal":"not."},"finish_reason":"stop"}]}`)
		m := out.Choices[0].Message
		require.NotNil(t, m.ReasoningContent)
		assert.Equal(t, "think more", *m.ReasoningContent)
		require.NotNil(t, m.Refusal)
		assert.Equal(t, "I cannot.", *m.Refusal)
		assert.Nil(t, m.Content, "no content string was streamed: null beside a refusal")
	})
	t.Run("tool calls", func(t *testing.T) {
		out, _ := accumulate(t,
			head+`{"index":0,"delta":{"role":"assistant","content":null,"tool_calls":[{"index":1,"id":"call_b","type":"function","function":{"name":"g","arguments":""}}]}}]}`,
			head+`{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"f","arguments":"{\"q\":"}}]}}]}`,
			head+`{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"\"\u00e9\"}"}},{"index":1,"function":{"arguments":"{}"}}]}}]}`,
			head+`{"index":0,"delta":{},"finish_reason":"tool_calls"}]}`)
		ch := out.Choices[0]
		assert.Nil(t, ch.Message.Content, "a tool-call-only choice has null content")
		require.Len(t, ch.Message.ToolCalls, 2, "ordered by index")
		a, b := ch.Message.ToolCalls[0], ch.Message.ToolCalls[1]
		assert.Equal(t, "call_a", a.ID)
		assert.Equal(t, "function", a.Type)
		assert.Equal(t, "f", a.Function.Name)
		assert.Equal(t, `{"q":"é"}`, a.Function.Arguments)
		assert.Equal(t, "call_b", b.ID)
		assert.Equal(t, "g", b.Function.Name)
		assert.Equal(t, `{}`, b.Function.Arguments)
		assert.Equal(t, "tool_calls", *ch.FinishReason)
	})
	t.Run("logprobs", func(t *testing.T) {
		lp := func(tok string) string {
			return `{"token":"` + tok + `","logprob":-0.5,"bytes":[72],"top_logprobs":[{"token":"` + tok + `","logprob":-0.5,"bytes":[72]}]}`
		}
		out, _ := accumulate(t,
			head+`{"index":0,"delta":{"role":"assistant","content":""},"logprobs":{"content":[],"refusal":null}}]}`,
			head+`{"index":0,"delta":{"content":"A"},"logprobs":{"content":[`+lp("A")+`],"refusal":null}}]}`,
			head+`{"index":0,"delta":{"content":"BC"},"logprobs":{"content":[ `+lp("B")+`, `+lp("C")+` ],"refusal":null}}]}`,
			head+`{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"}]}`)
		assert.JSONEq(t, `{"content":[`+lp("A")+`,`+lp("B")+`,`+lp("C")+`],"refusal":null}`, string(out.Choices[0].Logprobs))
	})
	t.Run("logprobs of a refusal", func(t *testing.T) {
		out, _ := accumulate(t,
			head+`{"index":0,"delta":{"refusal":"No"},"logprobs":{"content":null,"refusal":[{"token":"No","logprob":0,"bytes":[78],"top_logprobs":[]}]}}]}`)
		assert.JSONEq(t, `{"content":null,"refusal":[{"token":"No","logprob":0,"bytes":[78],"top_logprobs":[]}]}`, string(out.Choices[0].Logprobs))
	})
	t.Run("n=2 interleaved", func(t *testing.T) {
		out, _ := accumulate(t,
			head+`{"index":1,"delta":{"content":"b"}}]}`,
			head+`{"index":0,"delta":{"content":"a"}}]}`,
			head+`{"index":1,"delta":{"content":"B"},"finish_reason":"length"},{"index":0,"delta":{"content":"A"},"finish_reason":"stop"}]}`)
		require.Len(t, out.Choices, 2)
		assert.EqualValues(t, 0, out.Choices[0].Index)
		assert.Equal(t, "aA", *out.Choices[0].Message.Content)
		assert.Equal(t, "stop", *out.Choices[0].FinishReason)
		assert.EqualValues(t, 1, out.Choices[1].Index)
		assert.Equal(t, "bB", *out.Choices[1].Message.Content)
		assert.Equal(t, "length", *out.Choices[1].FinishReason)
	})
	t.Run("surrogate pair split across chunks", func(t *testing.T) {
		out, _ := accumulate(t,
			head+`{"index":0,"delta":{"content":"\ud83d"}}]}`,
			head+`{"index":0,"delta":{"content":"\ude00!"}}]}`)
		assert.Equal(t, "😀!", *out.Choices[0].Message.Content, "joined as sent, decoded whole")
	})
	t.Run("groq usage", func(t *testing.T) {
		out, _ := accumulate(t,
			head+`{"index":0,"delta":{"content":"x"},"finish_reason":"stop"}],"x_groq":{"id":"req_1","usage":{"queue_time":0.01,"prompt_tokens":5,"completion_tokens":1,"total_tokens":6}}}`)
		assert.JSONEq(t, `{"queue_time":0.01,"prompt_tokens":5,"completion_tokens":1,"total_tokens":6}`, string(out.Usage))
	})
	t.Run("nothing", func(t *testing.T) {
		_, raw := accumulate(t, `[DONE]`, `not json`)
		assert.JSONEq(t, `{"id":"","object":"chat.completion","created":0,"model":"","choices":[]}`, string(raw))
	})
}

// TestAccumulatorAllocs: a chunk costs no allocation once the buffers have
// grown; a 1,000-chunk answer allocates for the growth of its text only.
func TestAccumulatorAllocs(t *testing.T) {
	chunks := make([][]byte, 1000)
	for i := range chunks {
		chunks[i] = []byte(`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"model":"gpt-4o","system_fingerprint":"fp_1","choices":[{"index":0,"delta":{"content":"tok` + strconv.Itoa(i) + ` "},"logprobs":null,"finish_reason":null}],"usage":null}`)
	}
	var c payload.Chunk
	allocs := testing.AllocsPerRun(20, func() {
		var a answer.Accumulator
		for _, data := range chunks {
			_ = payload.ParseChunk(data, &c)
			a.AddChunk(&c)
		}
	})
	assert.LessOrEqual(t, allocs, 24.0, "the text's growth (about log2 of its length), the model, id and fingerprint, one choice")
}

// TestAccumulatorReset: an Accumulator Reset between answers builds each
// one byte for byte as a fresh Accumulator does, whatever the answer before
// it held (more choices, tool calls, logprobs, usage, a service tier), and
// once its buffers have grown an answer of the same size allocates nothing.
func TestAccumulatorReset(t *testing.T) {
	const head = `{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"model":"gpt-4o","system_fingerprint":"fp_1","service_tier":"default","choices":[`
	answers := []struct {
		name   string
		chunks []string
	}{
		{"two choices with tool calls, logprobs and usage", []string{
			head + `{"index":1,"delta":{"tool_calls":[{"index":0,"id":"c1","type":"function","function":{"name":"f","arguments":"{\"a\""}}]}}]}`,
			head + `{"index":0,"delta":{"content":"hi","refusal":"no"},"logprobs":{"content":[{"token":"hi"}],"refusal":null}}]}`,
			head + `{"index":1,"delta":{"tool_calls":[{"index":0,"function":{"arguments":":1}"}}]},"finish_reason":"tool_calls"},{"index":0,"delta":{},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":2}}`,
		}},
		{"one choice, nothing else", []string{
			`{"id":"x","created":2,"model":"m","choices":[{"index":0,"delta":{"content":"a"}}]}`,
		}},
		{"three choices out of order, reasoning", []string{
			`{"id":"y","created":3,"model":"m2","choices":[{"index":2,"delta":{"reasoning_content":"r"}},{"index":0,"delta":{"content":"z"}}]}`,
			`{"choices":[{"index":1,"delta":{"content":""},"finish_reason":"length"}]}`,
		}},
		{"nothing", []string{`[DONE]`}},
	}
	var reused answer.Accumulator
	for range 2 {
		for _, ans := range answers {
			var fresh answer.Accumulator
			reused.Reset()
			for _, c := range ans.chunks {
				fresh.Add([]byte(c))
				reused.Add([]byte(c))
			}
			assert.Equal(t, string(fresh.JSON()), string(reused.JSON()), ans.name)
			assert.Equal(t, fresh.Size(), reused.Size(), ans.name)
		}
	}

	chunks := make([][]byte, 1000)
	for i := range chunks {
		chunks[i] = []byte(head + `{"index":0,"delta":{"content":"tok` + strconv.Itoa(i) + ` "},"logprobs":null,"finish_reason":null}],"usage":null}`)
	}
	var c payload.Chunk
	fill := func() {
		reused.Reset()
		for _, data := range chunks {
			_ = payload.ParseChunk(data, &c)
			reused.AddChunk(&c)
		}
	}
	fill()
	assert.Zero(t, testing.AllocsPerRun(5, fill), "the buffers of the answer before serve again")
}

// FuzzAccumulator checks that whatever chunks it is given (one per line of
// the input), the Accumulator never panics, its JSON is valid and within
// Size, and each choice's content is the chunks' content joined.
func FuzzAccumulator(f *testing.F) {
	for _, s := range []string{
		`{"id":"a","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"a\u00e9"}}]}` + "\n" +
			`{"choices":[{"index":0,"delta":{"content":"\ud83d"},"finish_reason":"stop"}],"usage":{"completion_tokens":1}}`,
		`{"choices":[{"index":3,"delta":{"tool_calls":[{"function":{"arguments":"{\"a\""}},{"id":"x","type":"t","function":{"name":"f"}}]}}]}` + "\n" +
			`{"choices":[{"index":3,"delta":{"tool_calls":[{"index":0,"function":{"arguments":":1}"}}]}}]}`,
		`{"choices":[{"logprobs":{"content":[ {"token":"a"} ],"refusal":[]},"delta":{"refusal":"no"}}],"x_groq":{"usage":{"queue_time":1}}}` + "\n[DONE]\n{",
		`{"choices":[{"index":-1,"delta":{"reasoning":"r","reasoning_content":"s"}}],"service_tier":"flex","system_fingerprint":null}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		var a answer.Accumulator
		want := map[int64]string{}
		var c payload.Chunk
		for line := range strings.SplitSeq(in, "\n") {
			a.Add([]byte(line))
			if payload.ParseChunk([]byte(line), &c) == nil {
				for _, ch := range c.Choices {
					want[ch.Index] += string(ch.Content)
				}
			}
		}
		raw := a.JSON()
		if !json.Valid(raw) {
			t.Fatalf("invalid JSON %q from %q", raw, in)
		}
		if len(raw) > a.Size() {
			t.Fatalf("%d bytes of JSON, Size %d", len(raw), a.Size())
		}
		var out completion
		if err := json.Unmarshal(raw, &out); err != nil {
			t.Fatal(err)
		}
		for _, ch := range out.Choices {
			var w string
			if err := json.Unmarshal([]byte(`"`+want[ch.Index]+`"`), &w); err != nil {
				t.Fatal(err)
			}
			if ch.Message.Content != nil && *ch.Message.Content != w {
				t.Fatalf("choice %d content %q, want %q", ch.Index, *ch.Message.Content, w)
			}
		}
	})
}

// TestAccumulatorRefusalContent: a refusal streamed after a role chunk
// whose content is null answers content null, as the provider's own
// answer does; one after content "" answers "".
func TestAccumulatorRefusalContent(t *testing.T) {
	out, _ := accumulate(t,
		`{"choices":[{"index":0,"delta":{"role":"assistant","content":null,"refusal":""}}]}`,
		`{"choices":[{"index":0,"delta":{"refusal":"No."},"finish_reason":"stop"}]}`)
	assert.Nil(t, out.Choices[0].Message.Content)
	assert.Equal(t, "No.", *out.Choices[0].Message.Refusal)
	out, _ = accumulate(t,
		`{"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}`,
		`{"choices":[{"index":0,"delta":{"refusal":"No."},"finish_reason":"stop"}]}`)
	require.NotNil(t, out.Choices[0].Message.Content)
	assert.Equal(t, "", *out.Choices[0].Message.Content)
}
