package tps

import (
	"io"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestTapHoldsNoMoreThanTheCap: whatever arrives, in whatever pieces, the
// Tap's own buffers (the carried line, the event's data) never hold more
// than the event cap, as NewTap promises: an over-long line is dropped the
// moment the cap is passed, not when it ends.
func TestTapHoldsNoMoreThanTheCap(t *testing.T) {
	const max = 256
	for name, in := range map[string]string{
		"one long line":   "data: " + strings.Repeat("x", 3*max) + "\n\n",
		"many data lines": strings.Repeat("data: "+strings.Repeat("y", 20)+"\n", 3*max/20) + "\n",
		"a long comment":  ": " + strings.Repeat("k", 3*max) + "\n\n",
	} {
		for _, piece := range []int{1, 7, 64} {
			var unframed int
			rc := NewTap(io.NopCloser(strings.NewReader(in)), time.Now(), nil, WithMaxEvent(max), WithObserver(func(_ time.Time, c *Chunk) {
				if c.Unframed {
					unframed++
				}
			}))
			tp := rc.(*tap)
			r := iotest.HalfReader(rc)
			buf := make([]byte, piece)
			for {
				_, err := r.Read(buf)
				require.LessOrEqual(t, len(tp.line), max, "%s, %d-byte reads: the carried line", name, piece)
				require.LessOrEqual(t, len(tp.data), max, "%s, %d-byte reads: the event's data", name, piece)
				if err != nil {
					break
				}
			}
			assert.Positive(t, unframed, "%s, %d-byte reads: reported", name, piece)
		}
	}
}
