package tps

import (
	"cmp"
	"strconv"
)

// StreamError is an error a provider reported inside an HTTP 200 stream: a
// payload with a top-level "error" key (OpenAI, vLLM, SGLang, OpenRouter, TGI,
// Groq), an SSE "event: error" frame (Groq), or a non-standard "error:" SSE
// field (old llama.cpp). A StreamError is immutable and safe for concurrent
// use.
type StreamError struct {
	// Message is error.message, decoded; it may itself be JSON (OpenRouter
	// wrapping Gemini). Empty when absent.
	Message string
	// Code is error.code as text, whether the provider sent an int (400) or
	// a string ("429", "server_error"); falls back to error.http_status_code
	// (TGI). Empty when absent.
	Code string
	// Type is error.type, empty when absent.
	Type string
	// Event is the SSE event type or non-standard field name that carried
	// the error ("error"), empty for a plain data event.
	Event string
	// Body is the raw JSON of the error value, or the whole event data when
	// it had no "error" key.
	Body []byte

	cause error
}

// Error returns "tps: stream error" followed by the code and message.
func (e *StreamError) Error() string {
	msg := "tps: stream error"
	if e.Code != "" {
		msg += " (code " + e.Code + ")"
	}
	if detail := cmp.Or(e.Message, string(e.Body)); detail != "" {
		msg += ": " + detail
	}
	return msg
}

// Unwrap returns the error the transport library reported for the same
// event (openai-go's *ssestream.StreamError in a Stream), or nil.
func (e *StreamError) Unwrap() error { return e.cause }

// newStreamError builds a StreamError from an error value or whole event
// data. It runs only on the error path and may allocate.
func newStreamError(body, event []byte) *StreamError {
	e := &StreamError{Body: append([]byte(nil), body...), Event: string(event)}
	s := scanner{b: body}
	if s.peek() == '"' { // "error": "some text" (TGI pre-stream shape)
		e.Message = string(appendUnescaped(nil, s.str()))
		return e
	}
	if s.peek() != '{' {
		return e
	}
	s.i++
	var status string
	for n := 0; s.more(n, '}'); n++ {
		switch string(s.key()) {
		case "error":
			// Whole event data: look inside the error value.
			if s.peek() == '{' || s.peek() == '"' {
				start := s.i
				s.skip(1)
				if !s.bad {
					inner := newStreamError(s.b[start:s.i], event)
					inner.Body = e.Body
					return inner
				}
			} else {
				s.skip(1)
			}
		case "message":
			if v := s.optStr(); v != nil {
				e.Message = string(appendUnescaped(nil, v))
			}
		case "type":
			if v := s.optStr(); v != nil {
				e.Type = string(appendUnescaped(nil, v))
			}
		case "code":
			e.Code = scalarText(&s)
		case "http_status_code", "status_code", "status":
			status = scalarText(&s)
		default:
			s.skip(1)
		}
	}
	e.Code = cmp.Or(e.Code, status)
	return e
}

// scalarText reads a string or number as text; other values read as "".
func scalarText(s *scanner) string {
	switch c := s.peek(); {
	case c == '"':
		return string(appendUnescaped(nil, s.str()))
	case c == '-' || (c >= '0' && c <= '9'):
		raw := s.num()
		if f := parseFloat(raw); f == float64(int64(f)) {
			return strconv.FormatInt(int64(f), 10)
		}
		return string(raw)
	default:
		s.skip(1)
		return ""
	}
}
