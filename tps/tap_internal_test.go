package tps

import (
	"io"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// TestTapDataEventInPlace pins which bytes the tap frames in place (a whole
// "data:" line followed by its blank line, within the cap, after at most
// one "event:" line) and which it
// leaves to the line-by-line path: TestTapReadSizesAgree shows the two
// agree, so only this test sees that the fast path is taken at all.
func TestTapDataEventInPlace(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want int
	}{
		{"data: {}\n\n", 10},
		{"data:{}\n\nnext", 9},
		{"data: [DONE]\n\ndata: {}\n\n", 14},
		{"data: {}\n", 0},                                            // no blank line yet
		{"data: {}\ndata: {}\n\n", 0},                                // two data lines
		{"data: {}\r\n\r\n", 0},                                      // CRLF: the line path
		{"event: x\ndata: {}\n\n", 19},                               // one "event:" line first
		{"event:x\ndata: {}\n\n", 18},                                // without the space
		{"event: x\nevent: y\ndata: {}\n\n", 0},                      // two
		{"id: x\ndata: {}\n\n", 0},                                   // another field first
		{"event: x\r\ndata: {}\n\n", 0},                              // a CR in the event line
		{"event: x\n\n", 0},                                          // no data
		{"event: x\ndata: {}\n", 0},                                  // no blank line yet
		{"event: " + strings.Repeat("x", 19) + "\ndata: {}\n\n", 0},  // an event line over the cap
		{"event: " + strings.Repeat("x", 18) + "\ndata: {}\n\n", 36}, // at the cap
		{"data\n\n", 0},                                              // shorter than a data line
		{"data:" + strings.Repeat("x", 21) + "\n\n", 0},              // a line over the cap
		{"data:" + strings.Repeat("x", 20) + "\n\n", 27},             // a line at the cap
	} {
		tp := NewTap(io.NopCloser(strings.NewReader("")), time.Now(), nil, WithMaxEvent(25)).(*tap)
		assert.Equal(t, tt.want, tp.dataEvent(time.Now(), []byte(tt.in), 0), "%q", tt.in)
	}
}

// reads returns its slices one Read at a time, then io.EOF.
type reads [][]byte

func (r *reads) Read(p []byte) (int, error) {
	if len(*r) == 0 {
		return 0, io.EOF
	}
	n := copy(p, (*r)[0])
	(*r)[0] = (*r)[0][n:]
	if len((*r)[0]) == 0 {
		*r = (*r)[1:]
	}
	return n, nil
}

// TestTapInPlaceOnlyAtALineStart: a read that starts with "data:" in the
// middle of a line (here the line "xdata: {}", an unknown field) is not an
// event; only a read that starts a line may be framed in place.
func TestTapInPlaceOnlyAtALineStart(t *testing.T) {
	events := 0
	r := &reads{[]byte("data: {}\n\nx"), []byte("data: {}\n\n")}
	tp := NewTap(io.NopCloser(r), time.Now(), nil, WithObserver(func(time.Time, *Chunk) { events++ }))
	_, err := io.ReadAll(tp)
	assert.NoError(t, err)
	assert.Equal(t, 1, events, "the first event only")
}

// TestTapFullRead: a Read that fills the caller's buffer exactly is timed
// and returned whole; only a broken Reader's count is dropped.
func TestTapFullRead(t *testing.T) {
	body := []byte("data: {}\n\n")
	events := 0
	tp := NewTap(io.NopCloser(&reads{append([]byte(nil), body...)}), time.Now(), nil, WithObserver(func(time.Time, *Chunk) { events++ }))
	p := make([]byte, len(body))
	n, err := tp.Read(p)
	assert.NoError(t, err)
	assert.Equal(t, len(body), n)
	assert.Equal(t, 1, events)
}
