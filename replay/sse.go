package replay

import (
	"bufio"
	"bytes"
	"io"
	"strings"
)

// sseReader splits an SSE body into raw event blocks without interpreting
// them, so framing quirks survive byte-exact.
type sseReader struct {
	r *bufio.Reader
}

func newSSEReader(r io.Reader) *sseReader {
	return &sseReader{r: bufio.NewReaderSize(r, 16<<10)}
}

// next returns the bytes of the next event block, including the blank line
// that ends it. At the end of the body it returns any trailing bytes of an
// unterminated block with the read error (io.EOF for a clean end).
func (s *sseReader) next() ([]byte, error) {
	var block []byte
	for {
		line, err := s.r.ReadBytes('\n')
		block = append(block, line...)
		if err != nil {
			return block, err
		}
		if len(line) == 1 || (len(line) == 2 && line[0] == '\r') {
			if len(block) == len(line) {
				// A stray blank line between events: keep it with the next block.
				continue
			}
			return block, nil
		}
	}
}

// sseEvent is a parsed event block.
type sseEvent struct {
	name    string // "event:" field
	data    string // data lines joined with "\n"
	hasData bool
	comment string
	isComm  bool // the block is only comment lines
}

// parseSSE parses one event block per the SSE rules (an optional space after
// the colon; CRLF tolerated).
func parseSSE(block []byte) sseEvent {
	var ev sseEvent
	var data []string
	var comments []string
	others := 0
	for line := range strings.SplitSeq(strings.TrimRight(string(block), "\r\n"), "\n") {
		line = strings.TrimSuffix(line, "\r")
		if line == "" {
			continue
		}
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "":
			comments = append(comments, value)
		case "data":
			data = append(data, value)
			ev.hasData = true
		case "event":
			ev.name = value
			others++
		default:
			others++
		}
	}
	ev.data = strings.Join(data, "\n")
	if !ev.hasData && others == 0 && len(comments) > 0 {
		ev.isComm = true
		ev.comment = strings.Join(comments, "\n")
	}
	return ev
}

// canonical returns the cassette event for block: data or comment when
// rendering it reproduces the block byte for byte, raw otherwise.
func canonical(block []byte) (kind eventKind, name, data string) {
	ev := parseSSE(block)
	switch {
	case ev.isComm:
		e := event{kind: eventComment, data: ev.comment}
		if bytes.Equal(e.bytes(), block) {
			return eventComment, "", ev.comment
		}
	case ev.hasData:
		e := event{kind: eventData, name: ev.name, data: ev.data}
		if bytes.Equal(e.bytes(), block) {
			return eventData, ev.name, ev.data
		}
	}
	return eventRaw, "", string(block)
}
