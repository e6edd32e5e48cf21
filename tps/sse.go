package tps

import (
	"bytes"
	"strings"
)

// This file is the library's one SSE framer: where an event block ends, in a
// buffer (EventEnd) or at the last complete block of one (LastEventEnd), and
// what a block holds (ParseEvent, ForEachData). Line ends are LF, CRLF or a
// lone CR, as the SSE specification allows. The streaming Tap frames
// line by line with the same rules (tap.go). fallback releases whole events
// with LastEventEnd; replay's recorder splits and re-reads events with
// EventEnd and ParseEvent; the root and replay read buffered answers with
// ForEachData.

// EventEnd returns the length of the first complete event block of b: the
// bytes through the blank line that ends it, with any blank lines before it
// (a stray blank line belongs to the next block). It returns -1 when b holds
// no complete block. A CR as the last byte of b ends its line; an LF that
// follows it in later bytes then opens the next block as a stray blank line.
func EventEnd(b []byte) int {
	content := false // the block has a non-blank line
	for i := 0; i < len(b); {
		j := lineEnd(b[i:])
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
		v, ok := bytes.CutPrefix(line, []byte("data:"))
		if !ok {
			continue
		}
		v = bytes.TrimPrefix(v, []byte(" "))
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

// nextLine returns the first line of b without its end (LF, CRLF or CR) and
// the bytes after it.
func nextLine(b []byte) (line, rest []byte) {
	j := lineEnd(b)
	if j < 0 {
		return b, nil
	}
	line, rest = b[:j], b[j+1:]
	if b[j] == '\r' && len(rest) > 0 && rest[0] == '\n' {
		rest = rest[1:]
	}
	return line, rest
}
