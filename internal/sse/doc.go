// Package sse is the library's one Server-Sent Events framer, in its buffer
// and reader forms: where an event block ends in a buffer (EventEnd) or at
// the last complete block of one (LastEventEnd), what a block holds
// (ParseEvent, ForEachData), the events of a stream read one at a time
// (EventReader), and one payload framed as an event (AppendEvent).
//
// # Rules
//
// Line ends are LF, CRLF or a lone CR, as the SSE specification allows; one
// space after a field's colon is dropped; data lines are joined with "\n";
// comments and fields other than data and event are skipped; a final event
// without its blank line is flushed at EOF (docs/STREAM_QUIRKS.md Q4).
// tps's streaming Tap frames line by line with the same rules (LineEnd,
// SplitField) and the same cap (MaxEvent).
//
// # Users
//
// tps's Tap; the root's Stream (an EventReader); internal/executor, which
// releases whole events with LastEventEnd and frames an embeddings answer
// with AppendEvent; replay's recorder and player (EventEnd, ParseEvent,
// ForEachData). The package is internal: callers time streams with tps and
// never frame events themselves.
//
// Functions are pure and safe for concurrent use; an EventReader is for one
// goroutine.
package sse
