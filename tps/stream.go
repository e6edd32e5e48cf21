package tps

import (
	"encoding/json"
	"errors"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/packages/ssestream"
	"github.com/tpsroute/tpsroute/internal/payload"
)

// Stream wraps an openai-go chat-completion stream and times it. It has the
// same pull shape as the stream it wraps (Next, Current, Err, Close) plus
// Sample. A Stream is used by one goroutine; it is not safe for concurrent
// use, except that Sample may be read by anyone once Next has returned false
// or Close has returned.
type Stream struct {
	s     *ssestream.Stream[openai.ChatCompletionChunk]
	t     timer
	c     payload.Chunk
	raw   []byte
	ended bool
}

// Wrap returns a Stream that times stream, whose request was written at
// start. Call it as soon as NewStreaming returns: openai-go returns once the
// response headers arrived, so Headers is taken as time.Now() at Wrap unless
// WithHeaders says otherwise.
//
// Each chunk is measured with the Tap's parser on its RawJSON, so a Stream and a
// Tap measure identically, including fields the typed chunk lacks
// (reasoning_content, reasoning, x_groq, timings). openai-go drops SSE
// comments and the "[DONE]" sentinel before a Stream sees them, so Comments
// stays 0 and a clean end is EndStream. An in-stream error event ends the
// stream with openai-go's *ssestream.StreamError from Err; Sample.Err is a
// *StreamError that unwraps to it. A decode error also ends the stream and
// counts in Sample.Malformed. An HTTP error status (openai-go's
// *openai.Error, before any event) is recorded with PhaseHeaders. A nil stream yields an empty, ended Stream.
func Wrap(stream *ssestream.Stream[openai.ChatCompletionChunk], start time.Time, opts ...Option) *Stream {
	s := &Stream{s: stream}
	s.t.begin(start, time.Now(), opts)
	return s
}

// Next advances to the next chunk and reports whether there is one. When it
// returns false the stream has ended (see Err) and its Sample is final.
func (s *Stream) Next() bool {
	if s.ended {
		return false
	}
	if s.s == nil || !s.s.Next() {
		s.stop(time.Now())
		return false
	}
	now := time.Now()
	s.raw = append(s.raw[:0], s.s.Current().RawJSON()...)
	if payload.ParseChunk(s.raw, &s.c) != nil {
		s.c.Reset()
		s.c.Malformed = true
	}
	s.t.observe(now, &s.c)
	return true
}

// stop records how the wrapped stream ended.
func (s *Stream) stop(now time.Time) {
	var err error
	if s.s != nil {
		err = s.s.Err()
	}
	var se *ssestream.StreamError
	switch {
	case err == nil:
	case errors.As(err, &se):
		c := &s.c
		if payload.ParseChunk(se.Event.Data, c) != nil {
			c.Reset()
		}
		if !c.Error {
			c.Error = true
			c.ErrorBody = se.Event.Data
		}
		if se.Event.Type != "" {
			c.Event = []byte(se.Event.Type)
		}
		e := newStreamError(c.ErrorBody, c.Event)
		e.cause = se
		s.t.Fail(e, PhaseNone)
		s.t.observe(now, c)
	default:
		var syn *json.SyntaxError
		var typ *json.UnmarshalTypeError
		var api *openai.Error
		phase := PhaseNone
		switch {
		case errors.As(err, &syn) || errors.As(err, &typ):
			s.t.s.Malformed++
		case errors.As(err, &api) && !s.t.firstByte:
			phase = PhaseHeaders // an HTTP error status, before any event
		}
		s.t.Fail(err, phase)
	}
	s.t.end(now, EndStream)
	s.ended = true
}

// Current returns the chunk Next advanced to.
func (s *Stream) Current() openai.ChatCompletionChunk {
	if s.s == nil {
		return openai.ChatCompletionChunk{}
	}
	return s.s.Current()
}

// Err returns the wrapped stream's error, unchanged: nil for a clean end.
func (s *Stream) Err() error {
	if s.s == nil {
		return nil
	}
	return s.s.Err()
}

// Close closes the wrapped stream. If the stream had not ended, its Sample
// ends here with EndClosed. Close is idempotent and returns the first
// close result.
func (s *Stream) Close() error {
	if !s.ended {
		s.ended = true
		s.t.Abandon(time.Now())
	}
	if s.s == nil {
		return nil
	}
	return s.s.Close()
}

// Sample returns the stream's measurement. After Next returned false or
// Close returned it is final; before, it is a provisional Sample as if the
// stream ended now (End is EndNone).
func (s *Stream) Sample() Sample {
	return s.t.Snapshot(time.Now())
}
