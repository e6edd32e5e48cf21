package payload

import (
	"strconv"
)

// This file is the other direction of completion.go: the stream that
// carries a chat.completion answered in one piece, so that a plain,
// non-streaming upstream call is framed, timed and checked by the same Tap
// as a stream (docs/STREAM_QUIRKS.md Q36). It reads the answer with the
// scanner ParseChunk uses, one pass, and copies the values it keeps as
// sent, without decoding them.

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
// Every other field of the message is kept in the delta as sent, space
// outside strings removed so that each event is one line. Anything but a
// JSON object, or choices, a message or tool calls of another type than
// the API's, is ErrMalformed, and dst is returned unchanged.
func AppendCompletionEvents(dst, completion []byte) ([]byte, error) {
	var top answerFields
	s := scanner{b: completion}
	if s.peek() != '{' {
		return dst, ErrMalformed
	}
	s.i++
	for n := 0; s.more(n, '}'); n++ {
		k := s.key()
		v := s.value()
		switch string(k) {
		case "id":
			top.id = v
		case "created":
			top.created = v
		case "model":
			top.model = v
		case "system_fingerprint":
			top.fp = v
		case "service_tier":
			top.tier = v
		case "choices":
			top.choices = v
		case "usage":
			top.usage = v
		case "error":
			top.err = v
		}
	}
	if !s.end() {
		return dst, ErrMalformed
	}
	if !isNullRaw(top.err) && top.choices == nil {
		dst = append(dst, "event: error\ndata: "...)
		dst = appendCompactRaw(dst, completion)
		return append(dst, "\n\n"...), nil
	}
	start := len(dst)
	dst = top.appendEnvelope(dst)
	dst = append(dst, `"choices":[`...)
	if !isNullRaw(top.choices) {
		cs := scanner{b: top.choices}
		if cs.peek() != '[' {
			return dst[:start], ErrMalformed
		}
		cs.i++
		for i := 0; cs.more(i, ']'); i++ {
			if i > 0 {
				dst = append(dst, ',')
			}
			var ok bool
			if dst, ok = appendChoiceDelta(dst, &cs, i); !ok {
				return dst[:start], ErrMalformed
			}
		}
	}
	dst = append(dst, "]}\n\n"...)
	if !isNullRaw(top.usage) {
		dst = top.appendEnvelope(dst)
		dst = append(dst, `"choices":[],"usage":`...)
		dst = appendCompactRaw(dst, top.usage)
		dst = append(dst, "}\n\n"...)
	}
	return append(dst, "data: [DONE]\n\n"...), nil
}

// answerFields are the raw values of a chat.completion's members that
// AppendCompletionEvents uses; nil when absent.
type answerFields struct {
	id, created, model, fp, tier, choices, usage, err []byte
}

// appendEnvelope appends "data: " and the opening of a chunk with the
// answer's identity fields, up to the comma before "choices".
func (f *answerFields) appendEnvelope(dst []byte) []byte {
	dst = append(dst, `data: {`...)
	for _, m := range [...]struct {
		key string
		v   []byte
	}{{`"id":`, f.id}, {`"created":`, f.created}, {`"model":`, f.model}, {`"system_fingerprint":`, f.fp}, {`"service_tier":`, f.tier}} {
		if m.v != nil {
			dst = append(dst, m.key...)
			dst = appendCompactRaw(dst, m.v)
			dst = append(dst, ',')
		}
	}
	return append(dst, `"object":"chat.completion.chunk",`...)
}

// appendChoiceDelta appends the choice at s, an answer's i-th, as a
// chunk's choice whose delta is the choice's message, its members in the
// order sent. It reports false for a choice or message that is not an
// object (or null), or tool calls that are not an array of objects.
func appendChoiceDelta(dst []byte, s *scanner, i int) ([]byte, bool) {
	if s.peek() != '{' {
		return dst, false
	}
	s.i++
	dst = append(dst, '{')
	hasIndex, first := false, true
	member := func(key string) {
		if !first {
			dst = append(dst, ',')
		}
		first = false
		dst = append(dst, key...)
	}
	for n := 0; s.more(n, '}'); n++ {
		switch string(s.key()) {
		case "index":
			if v := s.value(); !isNullRaw(v) {
				member(`"index":`)
				dst = appendCompactRaw(dst, v)
				hasIndex = true
			}
		case "message":
			member(`"delta":`)
			if s.null() {
				dst = append(dst, "{}"...)
				continue
			}
			var ok bool
			if dst, ok = appendMessageDelta(dst, s); !ok {
				return dst, false
			}
		case "logprobs":
			member(`"logprobs":`)
			dst = appendCompactRaw(dst, s.value())
		case "finish_reason":
			member(`"finish_reason":`)
			dst = appendCompactRaw(dst, s.value())
		default:
			s.skip(1)
		}
	}
	if !hasIndex {
		member(`"index":`)
		dst = strconv.AppendInt(dst, int64(i), 10)
	}
	return append(dst, '}'), !s.bad
}

// appendMessageDelta appends the message object at s, each tool call
// given its "index" when it has none.
func appendMessageDelta(dst []byte, s *scanner) ([]byte, bool) {
	if s.peek() != '{' {
		return dst, false
	}
	s.i++
	dst = append(dst, '{')
	for n := 0; s.more(n, '}'); n++ {
		k := s.key()
		if n > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, '"')
		dst = append(dst, k...)
		dst = append(dst, `":`...)
		v := s.value()
		if string(k) != "tool_calls" || isNullRaw(v) {
			dst = appendCompactRaw(dst, v)
			continue
		}
		var ok bool
		if dst, ok = appendToolCalls(dst, v); !ok {
			return dst, false
		}
	}
	return append(dst, '}'), !s.bad
}

// appendToolCalls appends calls, an array of tool-call objects, with an
// "index" first in each that has none: its position.
func appendToolCalls(dst, calls []byte) ([]byte, bool) {
	s := scanner{b: calls}
	if s.peek() != '[' {
		return dst, false
	}
	s.i++
	dst = append(dst, '[')
	for j := 0; s.more(j, ']'); j++ {
		call := s.value()
		c := scanner{b: call}
		if c.peek() != '{' {
			return dst, false
		}
		c.i++
		hasIndex := false
		for n := 0; c.more(n, '}'); n++ {
			if string(c.key()) == "index" {
				hasIndex = true
			}
			c.skip(1)
		}
		if j > 0 {
			dst = append(dst, ',')
		}
		if hasIndex {
			dst = appendCompactRaw(dst, call)
			continue
		}
		dst = append(dst, `{"index":`...)
		dst = strconv.AppendInt(dst, int64(j), 10)
		if rest := appendCompactRaw(nil, call)[1:]; len(rest) > 1 { // after '{'
			dst = append(dst, ',')
			dst = append(dst, rest...)
		} else {
			dst = append(dst, '}')
		}
	}
	return append(dst, ']'), true
}

// value reads one value of any type and returns its raw bytes, or nil after
// an error.
func (s *scanner) value() []byte {
	s.ws()
	start := s.i
	s.skip(1)
	if s.bad {
		return nil
	}
	return s.b[start:s.i]
}

// appendCompactRaw appends v, JSON the scanner has read, with the space
// outside its strings removed; strings are copied whole.
func appendCompactRaw(dst, v []byte) []byte {
	for i := 0; i < len(v); {
		switch c := v[i]; {
		case c == '"':
			j := stringEnd(v, i+1)
			dst = append(dst, v[i:j]...)
			i = j
		case isSpace(c):
			i++
		default:
			dst = append(dst, c)
			i++
		}
	}
	return dst
}

// stringEnd returns the index after the closing quote of the string whose
// contents start at v[i], or len(v).
func stringEnd(v []byte, i int) int {
	for {
		i = nextSpecial(v, i)
		switch {
		case i >= len(v):
			return len(v)
		case v[i] == '"':
			return i + 1
		case v[i] == '\\':
			i += 2
		default: // a control character, which the scanner has refused
			i++
		}
	}
}

// isNullRaw reports whether v, a raw value, is absent or null.
func isNullRaw(v []byte) bool {
	return v == nil || string(v) == "null"
}
