package sse

import (
	"bytes"
	"errors"
	"io"
	"strings"
)

// This file is the library's one SSE framer: where an event block ends, in a
// buffer (EventEnd) or at the last complete block of one (LastEventEnd), what
// a block holds (ParseEvent, ForEachData), and the events of a stream read
// one at a time (EventReader). Line ends are LF, CRLF or a lone CR, as the
// SSE specification allows; a final event without its blank line is flushed
// at EOF (docs/STREAM_QUIRKS.md Q4). tps's streaming Tap frames line by line
// with the same rules (LineEnd, SplitField). The executor releases whole
// events with LastEventEnd; the root's Stream reads them with an
// EventReader; replay's recorder splits and re-reads events with EventEnd and
// ParseEvent; the root and replay read buffered answers with ForEachData.

// MaxEvent is the default cap, in bytes, on one SSE line and on the data of
// one event: an EventReader's when its limit is zero, and tps's Tap's
// (tps.WithMaxEvent's default).
const MaxEvent = 4 << 20

// ErrEventTooLarge means an SSE line, or the data of one event, passed an
// EventReader's limit. tps.ErrEventTooLarge is this error, the one callers
// match: the root's Stream returns it. Its message keeps the "tps: "
// prefix for that reason: users meet it as tps's.
var ErrEventTooLarge = errors.New("tps: SSE event larger than the limit")

// EventReader reads the events of an SSE stream one at a time by this
// file's rules: comments and fields other than data and event are skipped,
// data lines are joined with "\n", an event is dispatched at a blank line
// when it has data, and a final one without its blank line at EOF. Its
// buffers are reused: after the first events it allocates nothing. Memory is
// bounded by its limit: a line or an event's data past it ends the stream
// with ErrEventTooLarge.
//
// The zero EventReader reads nothing; Reset gives it a reader. An
// EventReader is for one goroutine.
type EventReader struct {
	r      io.Reader
	max    int
	buf    []byte
	off, n int // buf[off:n] is read and not yet framed
	skipLF bool
	eof    bool
	err    error

	data    []byte
	name    []byte
	hasData bool
}

// eventReaderBuf is an EventReader's first read buffer: a typical chunk line
// (200-600 bytes) fits; a longer line grows it.
const eventReaderBuf = 1024

// Reset makes d read from r, with max the limit on one line and on one
// event's data, in bytes (MaxEvent when max <= 0). Its buffers are kept.
func (d *EventReader) Reset(r io.Reader, max int) {
	if max <= 0 {
		max = MaxEvent
	}
	if d.buf == nil {
		d.buf = make([]byte, eventReaderBuf)
	}
	*d = EventReader{r: r, max: max, buf: d.buf, data: d.data[:0], name: d.name[:0]}
}

// Next advances to the next event that has data and reports whether there is
// one; at the end of the stream, after a read error or past the limit it
// returns false, and Err says which.
func (d *EventReader) Next() bool {
	d.data, d.name, d.hasData = d.data[:0], d.name[:0], false
	if d.r == nil {
		return false
	}
	for {
		line, ok := d.readLine()
		if !ok {
			return d.err == nil && d.dispatch() // a final event at EOF
		}
		if len(line) == 0 {
			if d.dispatch() {
				return true
			}
			d.name = d.name[:0]
			continue
		}
		if line[0] == ':' {
			continue
		}
		name, value := SplitField(line)
		switch string(name) {
		case "data":
			if len(d.data)+len(value) >= d.max {
				d.err = ErrEventTooLarge
				return false
			}
			d.data = append(append(d.data, value...), '\n')
			d.hasData = true
		case "event":
			d.name = append(d.name[:0], value...)
		}
	}
}

// dispatch ends the event being built: true, with its data's last LF
// dropped, when it has data.
func (d *EventReader) dispatch() bool {
	if !d.hasData {
		return false
	}
	d.data = d.data[:len(d.data)-1]
	d.hasData = false
	return true
}

// Data returns the current event's data lines joined with "\n". It is valid
// until the next call of Next.
func (d *EventReader) Data() []byte { return d.data }

// Name returns the current event's "event:" field, empty if it had none. It
// is valid until the next call of Next.
func (d *EventReader) Name() []byte { return d.name }

// Err returns the error that ended the stream: nil at a clean EOF,
// ErrEventTooLarge past the limit, or the reader's error.
func (d *EventReader) Err() error { return d.err }

// readLine returns the next line without its end, reading more as needed. A
// CR as the last byte read ends its line; an LF that then opens the next read
// completes it. The line is valid until the next call.
func (d *EventReader) readLine() ([]byte, bool) {
	for {
		if d.skipLF && d.off < d.n {
			d.skipLF = false
			if d.buf[d.off] == '\n' {
				d.off++
			}
		}
		b := d.buf[d.off:d.n]
		if i := LineEnd(b); i >= 0 {
			if i > d.max { // whole in one read, but past the limit all the same
				d.err = ErrEventTooLarge
				return nil, false
			}
			n, pendingLF := Terminator(b, i)
			if pendingLF {
				d.skipLF = true
			}
			d.off += i + n
			return b[:i], true
		}
		if len(b) > d.max {
			d.err = ErrEventTooLarge
			return nil, false
		}
		if d.eof || d.err != nil {
			if len(b) == 0 || d.err != nil {
				return nil, false
			}
			d.off = d.n
			return b, true // a final line without its end
		}
		if d.off > 0 { // the partial line to the front
			d.n = copy(d.buf, b)
			d.off = 0
		}
		if d.n == len(d.buf) {
			nb := make([]byte, 2*len(d.buf))
			copy(nb, d.buf[:d.n])
			d.buf = nb
		}
		m, err := d.r.Read(d.buf[d.n:])
		if m < 0 || m > len(d.buf)-d.n { // a broken Reader
			m = 0
		}
		d.n += m
		switch {
		case err == io.EOF:
			d.eof = true
		case err != nil:
			d.err = err
		}
	}
}

// EventEnd returns the length of the first complete event block of b: the
// bytes through the blank line that ends it, with any blank lines before it
// (a stray blank line belongs to the next block). It returns -1 when b holds
// no complete block. A CR as the last byte of b ends its line; an LF that
// follows it in later bytes then opens the next block as a stray blank line.
func EventEnd(b []byte) int {
	content := false // the block has a non-blank line
	for i := 0; i < len(b); {
		j := LineEnd(b[i:])
		if j < 0 {
			return -1
		}
		end := i + j + 1
		if b[i+j] == '\r' && end < len(b) && b[end] == '\n' {
			end++
		}
		if j == 0 && content {
			return end
		}
		content = content || j > 0
		i = end
	}
	return -1
}

// LastEventEnd returns the index just after the last blank line ending an
// event in b, searching no earlier than index from, or -1: everything before
// it is whole events, safe to hand on. It scans backwards, so its cost is the
// length of the last partial event, not of b.
func LastEventEnd(b []byte, from int) int {
	for j := len(b) - 1; j > from && j > 0; j-- {
		if b[j] != '\n' && b[j] != '\r' {
			continue
		}
		p := b[j-1]
		if p == '\n' || (p == '\r' && b[j] == '\r') {
			return j + 1
		}
		if p == '\r' && j >= 2 && b[j-2] == '\n' {
			return j + 1
		}
	}
	return -1
}

// Event is one parsed SSE event block. It is a plain value.
type Event struct {
	Name    string // the "event:" field; empty if absent
	Data    string // the "data:" lines joined with "\n"
	HasData bool   // the block has at least one "data:" line
	// Comment is the block's comment lines (": ..."), joined with "\n",
	// when the block holds only comments; empty otherwise.
	Comment     string
	OnlyComment bool // the block holds comment lines and nothing else
}

// ParseEvent parses one event block per the SSE rules: an optional space
// after the colon, LF, CRLF or CR line ends, fields other than data and event
// ignored. It does not interpret the data ("[DONE]" is data).
func ParseEvent(block []byte) Event {
	var ev Event
	var data, comments []string
	others := 0
	for len(block) > 0 {
		var line []byte
		line, block = nextLine(block)
		if len(line) == 0 {
			continue
		}
		field, value, _ := strings.Cut(string(line), ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "":
			comments = append(comments, value)
		case "data":
			data = append(data, value)
			ev.HasData = true
		case "event":
			ev.Name = value
			others++
		default:
			others++
		}
	}
	ev.Data = strings.Join(data, "\n")
	if !ev.HasData && others == 0 && len(comments) > 0 {
		ev.OnlyComment = true
		ev.Comment = strings.Join(comments, "\n")
	}
	return ev
}

// ForEachData calls fn with the data of every complete or final SSE event in
// b, except [DONE]. It accepts "data:" with or without a space, LF, CRLF or CR line ends
// and multi-line data (joined with "\n"); comments and other fields are
// skipped. fn's argument may alias b and is valid only during the call.
func ForEachData(b []byte, fn func(data []byte)) {
	var data []byte
	multi := false
	flush := func() {
		if len(data) > 0 && !bytes.Equal(data, []byte("[DONE]")) {
			fn(data)
		}
		data, multi = nil, false
	}
	for len(b) > 0 {
		var line []byte
		line, b = nextLine(b)
		if len(line) == 0 {
			flush()
			continue
		}
		name, v := SplitField(line)
		if string(name) != "data" {
			continue
		}
		if data == nil {
			data = v
		} else {
			if !multi {
				data = append([]byte(nil), data...)
				multi = true
			}
			data = append(append(data, '\n'), v...)
		}
	}
	flush()
}

// SplitField splits a non-comment line into its field name and value: the
// name runs to the first colon (the whole line without one), and one space
// after the colon is dropped.
func SplitField(line []byte) (name, value []byte) {
	name, value, _ = bytes.Cut(line, []byte(":"))
	if len(value) > 0 && value[0] == ' ' {
		value = value[1:]
	}
	return name, value
}

// nextLine returns the first line of b without its end (LF, CRLF or CR) and
// the bytes after it.
func nextLine(b []byte) (line, rest []byte) {
	j := LineEnd(b)
	if j < 0 {
		return b, nil
	}
	n, _ := Terminator(b, j)
	return b[:j], b[j+n:]
}

// LineEnd returns the index of the first CR or LF in b, or -1.
func LineEnd(b []byte) int {
	i := bytes.IndexByte(b, '\n')
	if i < 0 {
		return bytes.IndexByte(b, '\r')
	}
	if j := bytes.IndexByte(b[:i], '\r'); j >= 0 {
		return j
	}
	return i
}

// Terminator returns how many bytes the line end at b[i], a CR or LF that
// LineEnd found, takes: 2 for CRLF, 1 otherwise. pendingLF reports a CR
// that ends b: the LF that may complete it is the next read's first byte,
// which a streaming reader then skips.
func Terminator(b []byte, i int) (n int, pendingLF bool) {
	switch {
	case b[i] != '\r':
		return 1, false
	case i+1 == len(b):
		return 1, true
	case b[i+1] == '\n':
		return 2, false
	}
	return 1, false
}

// AppendEvent appends data framed as one SSE event ("data: " before each of
// its lines, a blank line after), so that tps's Tap reads data back with its
// line ends (LF, CRLF or a lone CR) made LF: a JSON answer read whole (an
// embeddings answer) is timed and checked by the one framer.
func AppendEvent(dst, data []byte) []byte {
	dst = append(dst, "data: "...)
	for i, b := range data {
		switch {
		case b == '\n', b == '\r' && (i+1 == len(data) || data[i+1] != '\n'):
			dst = append(dst, "\ndata: "...)
		case b == '\r':
		default:
			dst = append(dst, b)
		}
	}
	return append(dst, "\n\n"...)
}
