package tps

import (
	"cmp"
	"strconv"

	"github.com/tpsroute/tpsroute/internal/payload"
)

// StreamError is an error a provider reported inside an HTTP 200 stream: a
// payload with a top-level "error" key (OpenAI, vLLM, SGLang, OpenRouter, TGI,
// Groq), an SSE "event: error" frame (Groq), or a non-standard "error:" SSE
// field (old llama.cpp). A StreamError is immutable and safe for concurrent
// use.
type StreamError struct {
	// Message is error.message, decoded: the upstream's own message when
	// OpenRouter wraps the upstream error as JSON text in it; the event's
	// text when it is not JSON. Empty when absent.
	Message string
	// Code is error.code as text, whether the provider sent an int (400) or
	// a string ("429", "server_error"); falls back to error.http_status_code
	// (TGI). Empty when absent.
	Code string
	// Type is error.type (error_type beside a text error), empty when
	// absent.
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
// data, read by internal/payload's ParseErrorBody. It runs only on the error path and may
// allocate.
func newStreamError(body, event []byte) *StreamError {
	eb := payload.ParseErrorBody(body)
	code := eb.Code
	if code == "" && eb.Status != 0 {
		code = strconv.Itoa(eb.Status)
	}
	return &StreamError{Message: eb.Message, Code: code, Type: eb.Type, Event: string(event), Body: append([]byte(nil), body...)}
}
