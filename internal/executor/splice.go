package executor

import (
	"bytes"
	"unsafe"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"
)

// msgSplice is the splice of a Messages stream (tps.ProtocolMessages), kept
// by each run of a call that may be continued (call.keepText). It reads the
// events a run releases to the caller for what the caller has received of
// the content blocks; on a continuation it also rewrites them, so that the
// caller reads one Messages stream: the continuation's message_start is
// dropped (the caller has one), so is the content_block_start of the block
// it continues when the caller's block is still open, its block indexes
// follow the caller's, and its first text loses the whitespace the prefill
// left out as far as it repeats it (docs/STREAM_QUIRKS.md Q37). Everything
// else (ping, message_delta and its usage, message_stop) passes as the
// continuation sent it. A run's read side alone uses it.
type msgSplice struct {
	// What the caller has received, read from the released events as
	// rewritten.
	next  int  // one past the index of the last block started
	open  bool // that block has not stopped
	other bool // a block that is not text was delivered (tool_use, thinking, ...)

	// A continuation's rewrite; cont is false on a call's first run.
	cont     bool
	joined   bool   // block 0 continues the caller's open block: its start is dropped
	shift    int    // added to every block index of the continuation
	held     string // the caller's trailing whitespace the continuation may repeat, in its events
	textHeld string // the same, in the run's text (outputChunk)
}

// continued returns the splice of a continuation of the stream m has read,
// whose prefill left out held, the caller's trailing whitespace.
func (m *msgSplice) continued(held string) *msgSplice {
	n := &msgSplice{next: m.next, open: m.open, other: m.other, cont: true, held: held, textHeld: held}
	if m.open {
		n.joined, n.shift = true, m.next-1
	} else {
		n.shift = m.next
	}
	return n
}

// fresh returns a copy of m for one continuation attempt, so that a target
// that fails after reading some events leaves the next target's splice as
// it was; nil for nil.
func (m *msgSplice) fresh() *msgSplice {
	if m == nil {
		return nil
	}
	c := *m
	return &c
}

// dropHeld returns text without its leading bytes that repeat held, and what
// of held is left to match the next text: all of text matched, the rest of
// held; otherwise none, since the continuation has gone its own way.
func dropHeld(held, text string) (rest, left string) {
	k := 0
	for k < len(text) && k < len(held) && text[k] == held[k] {
		k++
	}
	if k < len(text) {
		return text[k:], ""
	}
	return "", held[k:]
}

// pass reads seg, whole events about to be released, and returns it as the
// caller is to read it, and whether that changed anything (a new slice then;
// seg itself otherwise).
func (m *msgSplice) pass(seg []byte) ([]byte, bool) {
	var out []byte // nil until an event changes
	for i := 0; i < len(seg); {
		end := eventEnd(seg, i)
		ev := seg[i:end]
		rew, keep := m.event(ev)
		if out == nil && (rew != nil || !keep) {
			out = append(make([]byte, 0, len(seg)), seg[:i]...)
		}
		if out != nil && keep {
			if rew == nil {
				rew = ev
			}
			out = append(out, rew...)
		}
		i = end
	}
	if out == nil {
		return seg, false
	}
	return out, true
}

// eventEnd returns the index past the event that starts at seg[i]: past
// its blank line, or len(seg) for a final event without one. Line ends are
// LF or CRLF (release made lone CRs LF).
func eventEnd(seg []byte, i int) int {
	for {
		j := bytes.IndexByte(seg[i:], '\n')
		if j < 0 {
			return len(seg)
		}
		k := i + j + 1
		switch {
		case k < len(seg) && seg[k] == '\n':
			return k + 1
		case k+1 < len(seg) && seg[k] == '\r' && seg[k+1] == '\n':
			return k + 2
		}
		i = k
	}
}

// event notes what ev, one whole event, tells of the content blocks and,
// on a continuation, returns it rewritten (nil when unchanged) and whether
// it is kept.
func (m *msgSplice) event(ev []byte) (rew []byte, keep bool) {
	data := eventData(ev)
	if data == nil || !m.cont && !bytes.Contains(data, blockBoundary) {
		return nil, true // a first run reads only block starts and stops
	}
	// Read in place, as DefaultBuild does: data is not modified while r
	// is read, and only rewritten copies outlive it.
	r := gjson.Parse(unsafe.String(unsafe.SliceData(data), len(data)))
	typ := r.Get("type").String()
	switch typ {
	case "content_block_start", "content_block_delta", "content_block_stop":
	case "message_start":
		return nil, !m.cont
	default:
		return nil, true
	}
	idx := int(r.Get("index").Int())
	if !m.cont {
		m.note(typ, idx, r)
		return nil, true
	}
	var text *string
	switch typ {
	case "content_block_start":
		if m.joined && idx == 0 {
			m.joined = false
			return nil, false
		}
	case "content_block_delta":
		if m.held != "" && r.Get("delta.type").String() == "text_delta" {
			var t string
			t, m.held = dropHeld(m.held, r.Get("delta.text").String())
			if t == "" {
				return nil, false // only repeated whitespace
			}
			text = &t
		}
	}
	idx += m.shift
	m.note(typ, idx, r)
	if m.shift == 0 && text == nil {
		return nil, true
	}
	nd, err := sjson.SetBytes(append([]byte(nil), data...), "index", idx)
	if err == nil && text != nil {
		nd, err = sjson.SetBytes(nd, "delta.text", *text)
	}
	if err != nil {
		return nil, true // not an object sjson can set: as sent
	}
	return withData(ev, nd), true
}

// blockBoundary is in the data of every content_block_start and
// content_block_stop event; events without it are not parsed on a first run.
var blockBoundary = []byte(`"content_block_st`)

// note records a released block event of index idx.
func (m *msgSplice) note(typ string, idx int, r gjson.Result) {
	switch typ {
	case "content_block_start":
		m.next, m.open = idx+1, true
		if r.Get("content_block.type").String() != "text" {
			m.other = true
		}
	case "content_block_stop":
		if idx == m.next-1 {
			m.open = false
		}
	}
}

// eventData returns the data of the event ev: its data lines' values, joined
// by LF as the SSE specification joins them; nil without one.
func eventData(ev []byte) []byte {
	var data []byte
	n := 0
	for line := range bytes.Lines(ev) {
		v, ok := bytes.CutPrefix(bytes.TrimRight(line, "\r\n"), []byte("data:"))
		if !ok {
			continue
		}
		v = bytes.TrimPrefix(v, []byte(" "))
		if n == 0 {
			data = v
		} else {
			if n == 1 {
				data = append([]byte(nil), data...)
			}
			data = append(append(data, '\n'), v...)
		}
		n++
	}
	return data
}

// withData returns ev with its data lines replaced by data, one data line
// per line of data, where the first of them was; its other lines (the event
// name) and line ends are kept as they were.
func withData(ev, data []byte) []byte {
	out := make([]byte, 0, len(ev)+len(data))
	done := false
	for line := range bytes.Lines(ev) {
		body := bytes.TrimRight(line, "\r\n")
		if !bytes.HasPrefix(body, []byte("data:")) {
			out = append(out, line...)
			continue
		}
		if done {
			continue
		}
		eol := line[len(body):]
		if len(eol) == 0 {
			eol = []byte("\n") // a final event without its line end
		}
		for l := range bytes.Lines(data) {
			out = append(append(append(out, "data: "...), bytes.TrimRight(l, "\n")...), eol...)
		}
		done = true
	}
	return out
}
