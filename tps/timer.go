package tps

import (
	"bytes"
	"cmp"
	"time"

	"github.com/tpsroute/tpsroute/internal/payload"
)

// timer is the measurement core: it is fed exact times and events, and
// computes every Sample field as docs/METRICS.md defines it. Tap and Stream
// drive a timer with time.Now(); tests drive it with exact times (through
// export_test.go). It is unexported since Tap and Wrap are the doors users
// measure through. A timer is not safe for concurrent use; it is driven by
// one goroutine.
type timer struct {
	opts  options
	start time.Time
	s     Sample

	headers, firstByte bool
	first, last        time.Duration // first and last output chunk, from start
	outputDeltas       int64
	firstDeltas        int64
	outBytes           int64 // Chunk.OutputBytes of the output chunks
	reasonBytes        int64 // Chunk.ReasoningBytes of the output chunks

	usage    payload.Usage
	hasUsage bool

	text     []byte // output text, kept only with a tokenizer
	firstLen int    // len(text) after the first output chunk

	finish, model, fingerprint []byte // last seen, copied
	id                         []byte // last seen response id, copied; not kept for chat
	done                       bool   // "[DONE]" seen
	ended                      bool
}

// newTimer returns a timer for a stream whose request was written at start.
// WithTokenizer is honoured; the observers and
// WithHeaders are for Tap and Stream and are ignored here.
func newTimer(start time.Time, opts ...Option) *timer {
	t := &timer{}
	t.opts = buildOptions(opts)
	t.Reset(start)
	return t
}

// Reset starts a new measurement from start, keeping the timer's options and
// buffers.
func (t *timer) Reset(start time.Time) {
	*t = timer{
		opts:        t.opts,
		start:       start,
		text:        t.text[:0],
		finish:      t.finish[:0],
		model:       t.model[:0],
		fingerprint: t.fingerprint[:0],
		id:          t.id[:0],
	}
	t.s.Start = start
}

// begin sets up a timer that a Tap or Stream embeds, for a request written
// at start whose headers arrived now, or at WithHeaders's time.
func (t *timer) begin(start, now time.Time, opts []Option) {
	t.opts = buildOptions(opts)
	t.Reset(start)
	if h := t.opts.headers; !h.IsZero() {
		now = h
	}
	t.Headers(now)
}

// Headers records that the response headers arrived at now. Only the first
// call counts.
func (t *timer) Headers(now time.Time) {
	if t.headers || t.ended {
		return
	}
	t.headers = true
	t.s.Headers = now.Sub(t.start)
}

func (t *timer) byteAt(now time.Time) {
	if !t.firstByte {
		t.firstByte = true
		t.s.FirstByte = now.Sub(t.start)
	}
}

// Comment records an SSE comment (a keep-alive) read at now. It sets
// FirstByte if nothing came before, and never counts as output, TTFT or
// progress (docs/STREAM_QUIRKS.md Q1, Q27).
func (t *timer) Comment(now time.Time) {
	if t.ended {
		return
	}
	t.byteAt(now)
	t.s.Comments++
}

// NonStandard records an SSE line whose field name is not data, event, id
// or retry (docs/STREAM_QUIRKS.md Q3). It sets FirstByte if nothing came before.
func (t *timer) NonStandard(now time.Time) {
	if t.ended {
		return
	}
	t.byteAt(now)
	t.s.NonStandard++
}

// Event records one data event read at now, as described by c: a decoded
// chunk (payload.ParseChunk), c.Done for "[DONE]", c.Malformed for undecodable data.
// A chunk with c.Error records a *StreamError as Err (the first error wins)
// with its phase. It allocates nothing for an ordinary output chunk unless a
// Tokenizer is set (then it appends the text to an internal buffer). Events
// after Finish are ignored.
func (t *timer) Event(now time.Time, c *payload.Chunk) {
	if t.ended {
		return
	}
	t.byteAt(now)
	if c.Done {
		t.done = true
		return
	}
	if c.Malformed {
		t.s.Malformed++
		return
	}
	t.s.Chunks++
	if c.Output {
		d := now.Sub(t.start)
		t.outputDeltas += int64(c.OutputDeltas)
		t.outBytes += int64(c.OutputBytes)
		t.reasonBytes += int64(c.ReasoningBytes)
		if t.s.OutputChunks == 0 {
			t.first = d
			t.firstDeltas = int64(c.OutputDeltas)
		} else {
			g := d - t.last
			if t.s.Gaps.Count == 0 || g < t.s.Gaps.Min {
				t.s.Gaps.Min = g
			}
			t.s.Gaps.Max = max(t.s.Gaps.Max, g)
			t.s.Gaps.Count++
		}
		t.last = d
		t.s.OutputChunks++
		if t.opts.tokenizer != nil {
			t.text = c.AppendText(t.text)
			if t.s.OutputChunks == 1 {
				t.firstLen = len(t.text)
			}
		}
	}
	if len(c.FinishReason) > 0 {
		t.finish = append(t.finish[:0], c.FinishReason...)
	}
	if len(c.Model) > 0 && !bytes.Equal(c.Model, t.model) {
		t.model = append(t.model[:0], c.Model...)
	}
	if len(c.SystemFingerprint) > 0 && !bytes.Equal(c.SystemFingerprint, t.fingerprint) {
		t.fingerprint = append(t.fingerprint[:0], c.SystemFingerprint...)
	}
	if len(c.ID) > 0 && t.opts.protocol != ProtocolChat && !bytes.Equal(c.ID, t.id) {
		t.id = append(t.id[:0], c.ID...)
	}
	if c.HasUsage {
		if t.opts.protocol == ProtocolMessages && t.hasUsage {
			t.usage.MergeMessages(&c.Usage) // split across message_start and message_delta
		} else {
			t.usage = c.Usage
		}
		t.hasUsage = true
	}
	if c.HasServer {
		mergeServer(&t.s.Server, (*ServerTiming)(&c.Server)) // the same fields, in the same order
	}
	if c.Error && t.s.Err == nil {
		t.fail(newStreamError(c.ErrorBody, c.Event), PhaseNone)
	}
}

// observe records the data event c with Event, then shows it to the
// observer (withObserver), as a Tap or Stream does for every data event.
func (t *timer) observe(now time.Time, c *payload.Chunk) {
	t.Event(now, c)
	if fn := t.opts.observer; fn != nil {
		fn(now, c)
	}
}

// mergeServer keeps each timing src reported over what dst held.
func mergeServer(dst, src *ServerTiming) {
	dst.Queue = cmp.Or(src.Queue, dst.Queue)
	dst.Prompt = cmp.Or(src.Prompt, dst.Prompt)
	dst.Completion = cmp.Or(src.Completion, dst.Completion)
	dst.Total = cmp.Or(src.Total, dst.Total)
	dst.PredictedPerSecond = cmp.Or(src.PredictedPerSecond, dst.PredictedPerSecond)
	dst.CacheN = cmp.Or(src.CacheN, dst.CacheN)
}

// Fail records err as the stream's failure. The first error wins; a nil
// err is ignored. phase PhaseNone means "derive it": PhaseMidStream if
// output was seen, else PhaseFirstToken. Fail does not end the timer: call
// Finish with the time the failure was seen.
func (t *timer) Fail(err error, phase Phase) {
	if t.ended || err == nil || t.s.Err != nil {
		return
	}
	t.fail(err, phase)
}

func (t *timer) fail(err error, phase Phase) {
	if phase == PhaseNone {
		phase = PhaseFirstToken
		if t.s.OutputChunks > 0 {
			phase = PhaseMidStream
		}
	}
	t.s.Err, t.s.ErrPhase = err, phase
}

// Output reports whether an output chunk has been seen: the commit point.
func (t *timer) Output() bool { return t.s.OutputChunks > 0 }

// Finish ends the measurement at now and returns the Sample. End is EndError
// if an error was recorded, EndDone if "[DONE]" was seen, else EndEOF.
// Later calls return the same Sample.
func (t *timer) Finish(now time.Time) Sample { return t.end(now, EndEOF) }

// Abandon ends the measurement at now because the consumer stopped reading
// (EndClosed, unless an error or "[DONE]" came first) and returns the Sample.
// Later calls, and later calls to Finish, return the same Sample.
func (t *timer) Abandon(now time.Time) Sample { return t.end(now, EndClosed) }

// end computes the derived fields once. end is how the stream ended unless
// an error was recorded (EndError) or "[DONE]" was seen (EndDone).
//
// It is long and branchy (complexity 30) because it derives every
// field of the Sample at one moment, with each metric's documented fallback
// (usage, tokenizer, deltas; TPS only when measurable); docs/METRICS.md is
// the list it follows.
func (t *timer) end(now time.Time, end End) Sample {
	if t.ended {
		return t.s
	}
	t.ended = true
	s := &t.s
	switch {
	case s.Err != nil:
		end = EndError
	case t.done:
		end = EndDone
	}
	s.End = end
	s.Total = now.Sub(t.start)
	s.FinishReason = string(t.finish)
	s.Model = string(t.model)
	s.SystemFingerprint = string(t.fingerprint)
	s.ID = string(t.id)

	trusted := false
	if t.hasUsage {
		u := t.usage
		s.InputTokens = u.PromptTokens
		s.CachedTokens = u.CachedTokens
		s.CacheCreationTokens = u.CacheCreationTokens
		switch {
		case u.CachedTokens > 0:
			s.Cache = CacheWarm
		case u.CachedReported:
			s.Cache = CacheCold
		}
		if u.CompletionReported {
			s.HiddenTokens, s.Implausible = t.plausible()
			trusted = s.Implausible == ImplausibleNone
		}
		if trusted || !u.CompletionReported {
			s.ReasoningTokens = u.ReasoningTokens
		}
	}
	n := s.OutputChunks
	tok := t.opts.tokenizer
	// A tokenizer sees only text; tool-call fragments have none, so a zero
	// count falls back to deltas.
	var tokAll int64
	if tok != nil && n > 0 && !trusted {
		tokAll = int64(tok.Count(string(t.text)))
	}
	switch {
	case trusted:
		s.OutputTokens, s.TokenSource = t.usage.CompletionTokens, TokenSourceUsage
	case tokAll > 0:
		s.OutputTokens, s.TokenSource = tokAll, TokenSourceTokenizer
	case n > 0:
		s.OutputTokens, s.TokenSource = t.outputDeltas, TokenSourceChunks
	}
	if n > 0 {
		s.TTFT, s.Last, s.E2E = t.first, t.last, t.last
		s.Gaps.Sum = t.last - t.first
		s.FirstChunkTokens = t.firstDeltas
		if tok != nil && t.firstLen > 0 {
			if k := int64(tok.Count(string(t.text[:t.firstLen]))); k > 0 {
				s.FirstChunkTokens = k
			}
		}
		streamed := s.OutputTokens - s.HiddenTokens
		s.FirstChunkTokens = min(s.FirstChunkTokens, streamed)
		span := t.last - t.first
		if gen := streamed - s.FirstChunkTokens; n >= 2 && span > 0 && gen > 0 {
			s.TPS = float64(gen) / span.Seconds()
			s.TPSOK = true
			if streamed > 1 {
				s.TPOT = span / time.Duration(streamed-1)
			}
		}
		if s.E2E > 0 && s.OutputTokens > 0 {
			s.E2ETPS = float64(s.OutputTokens) / s.E2E.Seconds()
		}
	}
	s.Truncated = s.Err == nil && end != EndClosed && s.FinishReason == ""
	return t.s
}

// plausible applies docs/METRICS.md's rule ("Plausible usage") to the
// reported usage, whose completion_tokens is present: it returns the
// reasoning tokens that were not streamed (hidden), and why the count
// cannot be trusted, or ImplausibleNone.
//
// A streamed token is at least one byte of output, so at most reasonBytes
// reasoning tokens were streamed and at least ReasoningTokens - reasonBytes
// were not. Those belong to the phase before the first output; the rest,
// the visible count, must fit in the output bytes streamed, plus
// usageSlack. A server that counts reasoning outside completion_tokens
// (total_tokens = prompt + completion + reasoning, as xAI does) has no
// hidden part inside it.
func (t *timer) plausible() (hidden int64, why Implausible) {
	u := &t.usage
	c, r := u.CompletionTokens, u.ReasoningTokens
	if c < 0 || r < 0 {
		return 0, ImplausibleNegative
	}
	if rest := u.TotalTokens - c; !(r > 0 && u.TotalTokens > 0 && rest >= r && rest-r == u.PromptTokens) {
		hidden = min(max(r-t.reasonBytes, 0), c)
	}
	switch visible := c - hidden; {
	case visible > t.outBytes+usageSlack:
		return 0, ImplausibleOverStreamed
	case visible == 0 && t.s.OutputChunks > 0:
		return 0, ImplausibleNoVisible
	}
	return hidden, ImplausibleNone
}

// Snapshot returns the Sample as if the stream ended at now, without ending
// the timer: End is EndNone and Truncated false while it runs. After the end
// it returns the final Sample.
func (t *timer) Snapshot(now time.Time) Sample {
	if t.ended {
		return t.s
	}
	cp := *t
	s := cp.end(now, EndNone)
	s.End, s.Truncated = EndNone, false
	return s
}
