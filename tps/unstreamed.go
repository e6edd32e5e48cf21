package tps

import (
	"bytes"
	"encoding/json"
	"strconv"
)

// This file is the other direction of completion.go: the stream that
// carries a chat.completion answered in one piece, so that a plain,
// non-streaming upstream call is framed, timed and checked by the same Tap
// as a stream (docs/STREAM_QUIRKS.md, "Answers in one piece").

// AppendCompletionEvents appends to dst the SSE events of a stream that
// carries the same answer as completion, a chat.completion JSON object (a
// provider's non-streaming answer), and returns the extended slice:
//   - one chat.completion.chunk with the answer's id, created, model,
//     system_fingerprint and service_tier, and every choice with its whole
//     message as the delta (each tool call given its "index"), its logprobs
//     and its finish reason;
//   - when the answer has usage, a chunk with no choices and that usage, as
//     stream_options.include_usage gives it;
//   - "data: [DONE]".
//
// An object with a non-null "error" and no "choices" (an error answered
// with a 200) becomes one "event: error" event holding the whole object.
// Every other field of the message is kept in the delta as sent. Anything
// but a JSON object is ErrMalformed, and dst is returned unchanged.
func AppendCompletionEvents(dst, completion []byte) ([]byte, error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(completion, &top); err != nil || top == nil {
		return dst, ErrMalformed
	}
	if e, ok := top["error"]; ok && !isNull(e) && top["choices"] == nil {
		dst = append(dst, "event: error\ndata: "...)
		dst = appendCompact(dst, completion)
		return append(dst, "\n\n"...), nil
	}
	var choices []map[string]json.RawMessage
	if c, ok := top["choices"]; ok && !isNull(c) {
		if err := json.Unmarshal(c, &choices); err != nil {
			return dst, ErrMalformed
		}
	}
	start := len(dst)
	dst = appendEnvelope(dst, top)
	dst = append(dst, `"choices":[`...)
	for i, ch := range choices {
		if i > 0 {
			dst = append(dst, ',')
		}
		var err error
		if dst, err = appendChoiceDelta(dst, ch, i); err != nil {
			return dst[:start], err
		}
	}
	dst = append(dst, "]}\n\n"...)
	if u, ok := top["usage"]; ok && !isNull(u) {
		dst = appendEnvelope(dst, top)
		dst = append(dst, `"choices":[],"usage":`...)
		dst = appendCompact(dst, u)
		dst = append(dst, "}\n\n"...)
	}
	return append(dst, "data: [DONE]\n\n"...), nil
}

// appendEnvelope appends "data: " and the opening of a chunk with the
// answer's identity fields, up to the comma before "choices".
func appendEnvelope(dst []byte, top map[string]json.RawMessage) []byte {
	dst = append(dst, `data: {`...)
	for _, k := range [...]string{"id", "created", "model", "system_fingerprint", "service_tier"} {
		if v, ok := top[k]; ok {
			dst = strconv.AppendQuote(dst, k)
			dst = append(dst, ':')
			dst = appendCompact(dst, v)
			dst = append(dst, ',')
		}
	}
	return append(dst, `"object":"chat.completion.chunk",`...)
}

// appendChoiceDelta appends choice ch of an answer, the i-th, as a chunk's
// choice: its message becomes the delta.
func appendChoiceDelta(dst []byte, ch map[string]json.RawMessage, i int) ([]byte, error) {
	dst = append(dst, `{"index":`...)
	if v, ok := ch["index"]; ok && !isNull(v) {
		dst = appendCompact(dst, v)
	} else {
		dst = strconv.AppendInt(dst, int64(i), 10)
	}
	dst = append(dst, `,"delta":`...)
	msg := ch["message"]
	if isNull(msg) {
		dst = append(dst, "{}"...)
	} else {
		var fields map[string]json.RawMessage
		if err := json.Unmarshal(msg, &fields); err != nil {
			return dst, ErrMalformed
		}
		if tc, ok := fields["tool_calls"]; ok && !isNull(tc) {
			var calls []map[string]json.RawMessage
			if err := json.Unmarshal(tc, &calls); err != nil {
				return dst, ErrMalformed
			}
			for j, c := range calls {
				if _, ok := c["index"]; !ok {
					c["index"] = json.RawMessage(strconv.Itoa(j))
				}
			}
			b, err := appendJSON(nil, calls)
			if err != nil {
				return dst, ErrMalformed
			}
			fields["tool_calls"] = b
		}
		var err error
		if dst, err = appendJSON(dst, fields); err != nil {
			return dst, ErrMalformed
		}
	}
	for _, k := range [...]string{"logprobs", "finish_reason"} {
		if v, ok := ch[k]; ok {
			dst = append(dst, ',')
			dst = strconv.AppendQuote(dst, k)
			dst = append(dst, ':')
			dst = appendCompact(dst, v)
		}
	}
	return append(dst, '}'), nil
}

// appendJSON appends v as compact JSON without escaping <, > and & (which
// json.Marshal would turn into \u escapes the provider did not send).
func appendJSON(dst []byte, v any) ([]byte, error) {
	b := bytes.NewBuffer(dst)
	enc := json.NewEncoder(b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return dst, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// appendCompact appends the JSON value v with its insignificant space
// removed, so that it fits on one SSE data line.
func appendCompact(dst, v []byte) []byte {
	var b bytes.Buffer
	if json.Compact(&b, v) != nil {
		return append(dst, "null"...)
	}
	return append(dst, b.Bytes()...)
}

// isNull reports whether v is absent or the JSON null.
func isNull(v json.RawMessage) bool {
	return len(v) == 0 || string(bytes.TrimSpace(v)) == "null"
}
