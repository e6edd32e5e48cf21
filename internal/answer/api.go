package answer

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/tpsroute/tpsroute/internal/payload"
	"github.com/tpsroute/tpsroute/internal/sse"
)

// This file folds a buffered Responses or Messages stream into the answer
// the API gives a call that did not ask for a stream: replay's non-streamed
// playback uses both, the Client's non-streaming Messages calls the second
// (a Responses call's answer is kept by the executor as the tap scans it).

// errNoAnswer is returned for a stream that holds no final answer.
var errNoAnswer = errors.New("answer: the stream holds no final answer")

// ResponsesAnswer returns the response object of a Responses stream's
// response.completed (or response.incomplete) event: the object the API
// answers a non-streaming call with, as the chunk parser finds it
// (payload.Chunk.Answer), the one rule the executor keeps it by too. stream
// is SSE bytes, read with ForEachData; a stream without either event as
// valid JSON is an error.
func ResponsesAnswer(stream []byte) ([]byte, error) {
	var out []byte
	var c payload.Chunk
	sse.ForEachData(stream, func(data []byte) {
		if payload.ParseResponsesEvent(data, &c) == nil && c.Answer != nil {
			out = append(out[:0], c.Answer...)
		}
	})
	if out == nil {
		return nil, errNoAnswer
	}
	return out, nil
}

// MessagesAnswer folds a Messages stream (SSE bytes, read with ForEachData)
// into the message the API answers a non-streaming call with:
// message_start's message, each content block (content_block_start) with
// its deltas joined (text, thinking and its signature, a tool_use's
// partial_json as its input), and message_delta's stop_reason,
// stop_sequence and usage. A stream without message_start, with blocks out
// of order or a tool input that is not JSON is an error.
func MessagesAnswer(stream []byte) ([]byte, error) {
	var msg map[string]json.RawMessage
	type block struct {
		head      map[string]json.RawMessage
		text      strings.Builder
		thinking  strings.Builder
		signature strings.Builder
		input     strings.Builder
	}
	var blocks []*block
	var bad error
	sse.ForEachData(stream, func(data []byte) {
		if bad != nil {
			return
		}
		ev := gjson.ParseBytes(data)
		switch ev.Get("type").Str {
		case "message_start":
			bad = json.Unmarshal([]byte(ev.Get("message").Raw), &msg)
		case "content_block_start":
			b := &block{}
			if bad = json.Unmarshal([]byte(ev.Get("content_block").Raw), &b.head); bad != nil {
				return
			}
			i := int(ev.Get("index").Int())
			if i < 0 || i > len(blocks) {
				bad = fmt.Errorf("answer: content block %d out of order", i)
				return
			}
			blocks = append(blocks[:i], b)
		case "content_block_delta":
			i := int(ev.Get("index").Int())
			if i < 0 || i >= len(blocks) {
				bad = fmt.Errorf("answer: delta for content block %d that did not start", i)
				return
			}
			b, d := blocks[i], ev.Get("delta")
			switch d.Get("type").Str {
			case "text_delta":
				b.text.WriteString(d.Get("text").Str)
			case "thinking_delta":
				b.thinking.WriteString(d.Get("thinking").Str)
			case "signature_delta":
				b.signature.WriteString(d.Get("signature").Str)
			case "input_json_delta":
				b.input.WriteString(d.Get("partial_json").Str)
			}
		case "message_delta":
			if msg == nil {
				bad = errNoAnswer
				return
			}
			for _, k := range []string{"stop_reason", "stop_sequence"} {
				if v := ev.Get("delta." + k); v.Exists() {
					msg[k] = json.RawMessage(v.Raw)
				}
			}
			if u := ev.Get("usage"); u.IsObject() {
				var usage map[string]json.RawMessage
				_ = json.Unmarshal([]byte(msg["usage"]), &usage)
				if usage == nil {
					usage = map[string]json.RawMessage{}
				}
				u.ForEach(func(k, v gjson.Result) bool {
					usage[k.Str] = json.RawMessage(v.Raw) // totals: replace, never add
					return true
				})
				msg["usage"], _ = json.Marshal(usage)
			}
		}
	})
	if bad != nil {
		return nil, bad
	}
	if msg == nil {
		return nil, errNoAnswer
	}
	content := make([]map[string]json.RawMessage, len(blocks))
	for i, b := range blocks {
		h := b.head
		set := func(k, v string) { h[k] = payload.AppendQuoted(nil, v) }
		switch string(bytes.Trim(h["type"], `"`)) {
		case "text":
			set("text", jsonString(h["text"])+b.text.String())
		case "thinking":
			set("thinking", jsonString(h["thinking"])+b.thinking.String())
			set("signature", jsonString(h["signature"])+b.signature.String())
		case "tool_use", "server_tool_use":
			if in := strings.TrimSpace(b.input.String()); in != "" {
				if !json.Valid([]byte(in)) {
					return nil, fmt.Errorf("answer: content block %d: tool input is not JSON", i)
				}
				h["input"] = json.RawMessage(in)
			}
		}
		content[i] = h
	}
	msg["content"], _ = json.Marshal(content)
	return json.Marshal(msg)
}

// jsonString returns the string raw holds, or "".
func jsonString(raw json.RawMessage) string {
	var s string
	_ = json.Unmarshal(raw, &s)
	return s
}
