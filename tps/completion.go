package tps

import (
	"encoding/json"
	"maps"
	"slices"
	"strings"

	"github.com/tidwall/gjson"
)

// Accumulator builds the chat.completion a non-streaming call answers from
// the data of streamed chunks: text, reasoning, refusal and tool calls per
// choice (every choice of an n>1 request, in index order); id, model,
// created, system_fingerprint and service_tier; and the last usage object,
// passed through as the provider sent it (never summed). The zero value is
// ready to use. An Accumulator is not safe for concurrent use.
type Accumulator struct {
	id, model, fingerprint, serviceTier string
	created                             int64
	choices                             map[int64]*choiceAcc
	usage                               json.RawMessage
}

type choiceAcc struct {
	content, reasoning, refusal strings.Builder
	hasContent, hasReasoning    bool
	hasRefusal                  bool
	finish                      string
	tools                       map[int64]*toolAcc
}

type toolAcc struct {
	id, typ, name string
	args          strings.Builder
}

// Add folds in the data of one chunk (one SSE event, without "data:").
// Payloads that are not JSON objects, and [DONE], add nothing.
func (a *Accumulator) Add(data []byte) {
	// Its complexity (about 25) is one case per field of a chunk that
	// accumulates (content, reasoning, refusal, tool-call fragments, finish,
	// usage, per choice) in one scan without decoding.
	c := gjson.ParseBytes(data)
	if v := c.Get("id"); v.Str != "" && a.id == "" {
		a.id = v.Str
	}
	if v := c.Get("model"); v.Str != "" {
		a.model = v.Str
	}
	if v := c.Get("created"); v.Int() > 0 && a.created == 0 {
		a.created = v.Int()
	}
	if v := c.Get("system_fingerprint"); v.Str != "" {
		a.fingerprint = v.Str
	}
	if v := c.Get("service_tier"); v.Str != "" {
		a.serviceTier = v.Str
	}
	if u := c.Get("usage"); u.IsObject() {
		a.usage = json.RawMessage(u.Raw) // the last one wins, never summed
	}
	c.Get("choices").ForEach(func(_, ch gjson.Result) bool {
		if a.choices == nil {
			a.choices = make(map[int64]*choiceAcc)
		}
		i := ch.Get("index").Int()
		acc := a.choices[i]
		if acc == nil {
			acc = &choiceAcc{}
			a.choices[i] = acc
		}
		delta := ch.Get("delta")
		if v := delta.Get("content"); v.Type == gjson.String {
			acc.content.WriteString(v.Str)
			acc.hasContent = true
		}
		for _, k := range []string{"reasoning_content", "reasoning"} {
			if v := delta.Get(k); v.Type == gjson.String && v.Str != "" {
				acc.reasoning.WriteString(v.Str)
				acc.hasReasoning = true
			}
		}
		if v := delta.Get("refusal"); v.Type == gjson.String && v.Str != "" {
			acc.refusal.WriteString(v.Str)
			acc.hasRefusal = true
		}
		delta.Get("tool_calls").ForEach(func(j, tc gjson.Result) bool {
			if acc.tools == nil {
				acc.tools = make(map[int64]*toolAcc)
			}
			idx := j.Int()
			if v := tc.Get("index"); v.Exists() {
				idx = v.Int()
			}
			t := acc.tools[idx]
			if t == nil {
				t = &toolAcc{typ: "function"}
				acc.tools[idx] = t
			}
			if v := tc.Get("id"); v.Str != "" {
				t.id = v.Str
			}
			if v := tc.Get("type"); v.Str != "" {
				t.typ = v.Str
			}
			if v := tc.Get("function.name"); v.Str != "" {
				t.name = v.Str
			}
			t.args.WriteString(tc.Get("function.arguments").Str)
			return true
		})
		if v := ch.Get("finish_reason"); v.Type == gjson.String && v.Str != "" {
			acc.finish = v.Str
		}
		return true
	})
}

type wireToolCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

type wireMessage struct {
	Role             string         `json:"role"`
	Content          *string        `json:"content"`
	ReasoningContent *string        `json:"reasoning_content,omitempty"`
	Refusal          *string        `json:"refusal"`
	ToolCalls        []wireToolCall `json:"tool_calls,omitempty"`
}

type wireChoice struct {
	Index        int64       `json:"index"`
	Message      wireMessage `json:"message"`
	FinishReason *string     `json:"finish_reason"`
}

type wireCompletion struct {
	ID                string          `json:"id"`
	Object            string          `json:"object"`
	Created           int64           `json:"created"`
	Model             string          `json:"model"`
	SystemFingerprint string          `json:"system_fingerprint,omitempty"`
	ServiceTier       string          `json:"service_tier,omitempty"`
	Choices           []wireChoice    `json:"choices"`
	Usage             json.RawMessage `json:"usage,omitempty"`
}

// JSON returns the chat.completion accumulated so far, as JSON: a message
// per choice with "content" (null only for a tool-call-only choice),
// "reasoning_content" when any reasoning was streamed, "refusal",
// "tool_calls" and "finish_reason", and "usage" when a chunk carried one.
func (a *Accumulator) JSON() []byte {
	out := wireCompletion{ID: a.id, Object: "chat.completion", Created: a.created, Model: a.model,
		SystemFingerprint: a.fingerprint, ServiceTier: a.serviceTier, Choices: []wireChoice{}, Usage: a.usage}
	for _, i := range slices.Sorted(maps.Keys(a.choices)) {
		acc := a.choices[i]
		m := wireMessage{Role: "assistant"}
		if acc.hasContent || len(acc.tools) == 0 {
			s := acc.content.String()
			m.Content = &s
		}
		if acc.hasReasoning {
			s := acc.reasoning.String()
			m.ReasoningContent = &s
		}
		if acc.hasRefusal {
			s := acc.refusal.String()
			m.Refusal = &s
		}
		for _, j := range slices.Sorted(maps.Keys(acc.tools)) {
			t := acc.tools[j]
			var tc wireToolCall
			tc.ID, tc.Type = t.id, t.typ
			tc.Function.Name, tc.Function.Arguments = t.name, t.args.String()
			m.ToolCalls = append(m.ToolCalls, tc)
		}
		ch := wireChoice{Index: i, Message: m}
		if acc.finish != "" {
			f := acc.finish
			ch.FinishReason = &f
		}
		out.Choices = append(out.Choices, ch)
	}
	b, _ := json.Marshal(out)
	return b
}
