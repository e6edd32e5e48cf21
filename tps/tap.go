package tps

import (
	"bytes"
	"cmp"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/tpsroute/tpsroute/internal/payload"
	"github.com/tpsroute/tpsroute/internal/sse"
)

// maxEvent is the default of WithMaxEvent, 4 MiB (internal/sse.MaxEvent):
// the longest SSE line, and the most data one event may gather, in bytes,
// that a Tap parses. Real chunks are under 10 KiB; a provider that sends its
// whole answer as one chunk (docs/STREAM_QUIRKS.md Q13) stays well under
// 1 MiB even for a 32k-token answer with logprobs.
const maxEvent = sse.MaxEvent

// ErrEventTooLarge means an SSE line, or the data of one event, passed the
// cap of the framer that read it (a Client's Stream returns it).
var ErrEventTooLarge = sse.ErrEventTooLarge

// NewTap returns an io.ReadCloser that passes body's bytes through unchanged
// and times the Server-Sent Events stream they carry. It reads only when its
// caller reads, no further than the caller asked (no read-ahead), and parses
// only the bytes already returned, keeping a partial line until the rest
// arrives.
//
// start is when the request was written. Headers is taken as time.Now() at
// NewTap (the Tap is created when the response headers arrived) unless
// WithHeaders says otherwise. Every other time is time.Now() when the Read
// that returned the bytes came back.
//
// done, if not nil, is called exactly once with the Sample: at EOF, at a read
// error (Sample.Err wraps it; a cut connection is never a success), or at
// Close if neither came first. It runs on the goroutine that made that call,
// after the Tap's lock is released.
//
// Framing follows the SSE specification and docs/STREAM_QUIRKS.md Q1-Q5: LF,
// CR and CRLF line ends, comments, "data:" with or without a space,
// multi-line data, "event: error" (its data is an error), stray blank lines,
// a final event without its blank line (flushed at EOF), a missing "[DONE]",
// and non-standard field names (counted; "error:" is an error). A data event
// that is not a JSON object counts in Sample.Malformed and is otherwise
// ignored.
//
// A line longer than the event cap (WithMaxEvent, default 4 MiB), or an
// event whose data lines together pass it, is counted as malformed (and
// shown to the module's chunk observer, with Malformed and Unframed set) the
// moment the cap is passed,
// not at its end, which may never come: a caller such as fallback stops
// reading there. The Tap's own buffers never hold more than the cap; the
// rest of such a line still passes through and is otherwise ignored.
//
// A nil body reads as empty. Read must be called by one goroutine at a time;
// Close may be called concurrently with Read, for example to abort it.
func NewTap(body io.ReadCloser, start time.Time, done func(Sample), opts ...Option) io.ReadCloser {
	t := &tap{body: body, done: done}
	t.t.begin(start, time.Now(), opts)
	t.maxEvent = cmp.Or(t.t.opts.maxEvent, maxEvent)
	return t
}

type tap struct {
	body io.ReadCloser
	done func(Sample)

	mu       sync.Mutex
	finished bool
	t        timer
	c        payload.Chunk

	line     []byte // carried partial line
	over     bool   // the current line or event passed the cap; drop it
	maxEvent int    // the cap on a line and on an event's data
	skipLF   bool   // the last byte fed was CR; a leading LF ends nothing
	sawLine  bool   // the first line was seen (BOM stripped)
	data     []byte // data buffer of the event being built, LF-joined
	hasData  bool
	event    []byte // event type of the event being built
	errField bool   // a non-standard "error:" field contributed data
	pos      int64  // body bytes fed before the current feed
	at       int64  // body offset just after the line being processed
	evStart  int64  // body offset just after the last blank line
}

// Read reads from the body and times the bytes it returns.
func (t *tap) Read(p []byte) (int, error) {
	if t.body == nil {
		t.after(nil, io.EOF)
		return 0, io.EOF
	}
	n, err := t.body.Read(p)
	if n < 0 || n > len(p) { // a broken Reader; do not parse garbage
		n = 0
	}
	if n > 0 || err != nil {
		t.after(p[:n], err)
	}
	return n, err
}

func (t *tap) after(b []byte, err error) {
	now := time.Now()
	t.mu.Lock()
	if t.finished {
		t.mu.Unlock()
		return
	}
	t.feed(now, b)
	if err == nil {
		t.mu.Unlock()
		return
	}
	if err == io.EOF {
		t.flush(now)
	} else {
		t.t.Fail(fmt.Errorf("tps: reading stream: %w", err), PhaseNone)
	}
	t.finished = true
	s := t.t.Finish(now)
	t.mu.Unlock()
	if t.done != nil {
		t.done(s)
	}
}

// Close closes the body. If the stream had not ended, the Sample ends here
// (EndClosed, or EndDone when "[DONE]" was already read) and done is called.
func (t *tap) Close() error {
	now := time.Now()
	t.mu.Lock()
	fire := !t.finished
	var s Sample
	if fire {
		t.finished = true
		s = t.t.Abandon(now)
	}
	t.mu.Unlock()
	var err error
	if t.body != nil {
		err = t.body.Close()
	}
	if fire && t.done != nil {
		t.done(s)
	}
	return err
}

// feed splits b into lines, carrying a trailing partial line.
func (t *tap) feed(now time.Time, b []byte) {
	base, total := t.pos, int64(len(b))
	defer func() { t.pos = base + total }()
	for len(b) > 0 {
		if t.skipLF {
			t.skipLF = false
			if b[0] == '\n' {
				b = b[1:]
				continue
			}
		}
		if len(t.line) == 0 && !t.hasData && !t.over && t.sawLine {
			if n := t.dataEvent(now, b, base+total-int64(len(b))); n > 0 {
				b = b[n:]
				continue
			}
		}
		i := sse.LineEnd(b)
		if i < 0 {
			t.carry(now, b, base+total)
			return
		}
		seg := b[:i]
		n, pendingLF := sse.Terminator(b, i)
		if pendingLF {
			t.skipLF = true
		}
		b = b[i+n:]
		t.at = base + total - int64(len(b))
		switch {
		case t.over: // reported when the cap was passed
		case len(t.line) > 0:
			if len(t.line)+len(seg) > t.maxEvent {
				t.overlong(now)
			} else {
				t.line = append(t.line, seg...)
				t.processLine(now, t.line)
			}
		default:
			if len(seg) > t.maxEvent {
				t.overlong(now)
			} else {
				t.processLine(now, seg)
			}
		}
		t.line = t.line[:0]
		t.over = false
	}
}

// carry keeps b, the start of a line, until its end arrives; past the cap
// it reports the line at once and drops it.
// end is the body offset just after b.
func (t *tap) carry(now time.Time, b []byte, end int64) {
	switch {
	case t.over:
	case len(t.line)+len(b) > t.maxEvent:
		t.at = end
		t.overlong(now)
		t.over = true
		t.line = t.line[:0]
	default:
		t.line = append(t.line, b...)
	}
}

// overlong counts a dropped over-long line or event as a malformed event and
// drops the event being built.
func (t *tap) overlong(now time.Time) {
	t.data = t.data[:0]
	t.hasData = false
	t.event = t.event[:0]
	t.errField = false
	t.c.Reset()
	t.c.Malformed = true
	t.c.Unframed = true
	t.c.Start, t.c.End = t.evStart, t.at
	t.t.observe(now, &t.c)
}

func (t *tap) processLine(now time.Time, line []byte) {
	if !t.sawLine {
		t.sawLine = true
		line = bytes.TrimPrefix(line, []byte("\xEF\xBB\xBF")) // UTF-8 BOM
	}
	if len(line) == 0 {
		t.dispatch(now)
		return
	}
	if line[0] == ':' {
		t.t.Comment(now)
		if fn := t.t.opts.comment; fn != nil {
			fn(now, line[1:])
		}
		return
	}
	name, value := sse.SplitField(line)
	switch string(name) {
	case "data":
		if len(t.data)+len(value) >= t.maxEvent { // many data lines, no blank line
			t.overlong(now)
			return
		}
		t.data = append(append(t.data, value...), '\n')
		t.hasData = true
	case "event":
		t.event = append(t.event[:0], value...)
	case "id", "retry":
	default:
		t.t.NonStandard(now)
		if string(name) == "error" { // old llama.cpp (docs/STREAM_QUIRKS.md Q3)
			t.data = append(append(t.data, value...), '\n')
			t.hasData = true
			t.errField = true
		}
	}
}

// dataEvent frames the commonest event at once: at the start of a line,
// with no data gathered, b opens with one "data:" line ended by LF, after
// at most one "event:" line ended by LF (the Responses and Messages APIs
// name every event), and the blank line (LF) that ends the event. It
// dispatches that event with its data read in place, as processLine and
// dispatch would have after copying it, and returns the bytes it took; 0,
// having done nothing, for anything else (TestTapReadSizesAgree,
// FuzzTapReadSizes). at is the body offset of b.
func (t *tap) dataEvent(now time.Time, b []byte, at int64) int {
	var name []byte
	skip := 0
	if len(b) > 6 && string(b[:6]) == "event:" {
		i := bytes.IndexByte(b, '\n')
		if i < 0 || i > t.maxEvent || bytes.IndexByte(b[:i], '\r') >= 0 {
			return 0
		}
		name = b[6:i]
		if len(name) > 0 && name[0] == ' ' {
			name = name[1:]
		}
		skip = i + 1
	}
	d := b[skip:]
	if len(d) < 7 || string(d[:5]) != "data:" {
		return 0
	}
	i := bytes.IndexByte(d, '\n')
	if i < 0 || i+1 >= len(d) || d[i+1] != '\n' || bytes.IndexByte(d[:i], '\r') >= 0 {
		return 0
	}
	data := d[5:i]
	if len(data) > 0 && data[0] == ' ' {
		data = data[1:]
	}
	if i > t.maxEvent || len(data) >= t.maxEvent {
		return 0 // overlong: the general path reports it
	}
	if skip > 0 {
		t.event = append(t.event[:0], name...)
	}
	n := skip + i + 2
	t.at = at + int64(n)
	t.dispatchData(now, data)
	return n
}

// dispatch ends the event being built, if it has data.
func (t *tap) dispatch(now time.Time) {
	if !t.hasData {
		t.event = t.event[:0]
		t.errField = false
		t.evStart = t.at
		return
	}
	t.dispatchData(now, t.data[:len(t.data)-1])
	t.data = t.data[:0]
	t.hasData = false
}

// dispatchData ends the event being built, whose data (LF-joined, without
// the last LF) is data, ending at t.at.
func (t *tap) dispatchData(now time.Time, data []byte) {
	c := &t.c
	isErr := t.errField || string(t.event) == "error"
	switch {
	case len(data) >= 6 && string(data[:6]) == "[DONE]": // as openai-go matches it
		c.Reset()
		c.Done = true
	case t.t.opts.protocol.parse(data, c) != nil:
		c.Reset()
		c.Malformed = !isErr
	}
	if isErr {
		c.Error = true
		c.Event = []byte("error")
		if c.ErrorBody == nil {
			c.ErrorBody = data
		}
		c.Done = false
	} else if len(t.event) > 0 {
		c.Event = t.event
	}
	c.Start, c.End = t.evStart, t.at
	t.evStart = t.at
	t.t.observe(now, c)
	t.event = t.event[:0]
	t.errField = false
}

// flush ends a final line and event that had no terminator
// (docs/STREAM_QUIRKS.md Q4).
func (t *tap) flush(now time.Time) {
	t.at = t.pos
	if t.over {
		t.overlong(now)
	} else if len(t.line) > 0 {
		t.processLine(now, t.line)
	}
	t.line = t.line[:0]
	t.over = false
	t.dispatch(now)
}
