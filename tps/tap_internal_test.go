package tps

import (
	"io"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// TestTapDataEventInPlace pins which bytes the tap frames in place (a whole
// "data:" line followed by its blank line, within the cap) and which it
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
		{"data: {}\n", 0},                                // no blank line yet
		{"data: {}\ndata: {}\n\n", 0},                    // two data lines
		{"data: {}\r\n\r\n", 0},                          // CRLF: the line path
		{"event: x\ndata: {}\n\n", 0},                    // another field first
		{"data\n\n", 0},                                  // shorter than a data line
		{"data:" + strings.Repeat("x", 21) + "\n\n", 0},  // a line over the cap
		{"data:" + strings.Repeat("x", 20) + "\n\n", 27}, // a line at the cap
	} {
		tp := NewTap(io.NopCloser(strings.NewReader("")), time.Now(), nil, WithMaxEvent(25)).(*tap)
		assert.Equal(t, tt.want, tp.dataEvent(time.Now(), []byte(tt.in), 0), "%q", tt.in)
	}
}
