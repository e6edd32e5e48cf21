package tps

import (
	"bytes"
	"io"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tpsroute/tpsroute/internal/sse"
)

// TestEventCapBoundary: the EventReader and the Tap apply the one cap the
// same way, at its exact boundary: a line of max bytes passes and one more
// fails; an event's data lines pass while their data, joined with LFs,
// stays under max; whole or cut across reads.
func TestEventCapBoundary(t *testing.T) {
	const max = 64
	x := func(n int) string { return strings.Repeat("x", n) }
	for _, tt := range []struct {
		name string
		in   string
		want []string // nil: past the cap
	}{
		{"a line of max bytes", "data: " + x(max-6) + "\n\n", []string{x(max - 6)}},
		{"a line of max+1 bytes", "data: " + x(max-5) + "\n\n", nil},
		{"data of max-1 bytes", "data: " + x(31) + "\ndata: " + x(31) + "\n\n", []string{x(31) + "\n" + x(31)}},
		{"data of max bytes", "data: " + x(31) + "\ndata: " + x(32) + "\n\n", nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			for _, r := range []func() io.Reader{
				func() io.Reader { return strings.NewReader(tt.in) },
				func() io.Reader { return iotest.OneByteReader(strings.NewReader(tt.in)) },
				func() io.Reader { return halves(tt.in) },
			} {
				got, err := readEvents(r(), max)
				var unframed, events int
				tap := NewTap(io.NopCloser(r()), time.Now(), nil, WithMaxEvent(max), WithObserver(func(_ time.Time, c *Chunk) {
					events++
					if c.Unframed {
						unframed++
					}
				}))
				_, copyErr := io.Copy(io.Discard, tap)
				require.NoError(t, copyErr)
				if tt.want == nil {
					assert.ErrorIs(t, err, sse.ErrEventTooLarge, "EventReader")
					assert.Equal(t, 1, unframed, "Tap")
					continue
				}
				require.NoError(t, err, "EventReader")
				assert.Equal(t, tt.want, got, "EventReader")
				assert.Zero(t, unframed, "Tap")
				assert.Equal(t, 1, events, "Tap: one event, read whole")
			}
		})
	}
}

// readEvents reads r with an sse.EventReader capped at max, as the root's
// Stream does, and returns the data of its events, [DONE] and empty data
// left out as sse.ForEachData leaves them out.
func readEvents(r io.Reader, max int) ([]string, error) {
	var d sse.EventReader
	d.Reset(r, max)
	var got []string
	for d.Next() {
		if len(d.Data()) > 0 && !bytes.Equal(d.Data(), []byte("[DONE]")) {
			got = append(got, string(d.Data()))
		}
	}
	return got, d.Err()
}

// halves reads its string in two parts, split at the middle.
func halves(s string) io.Reader {
	return io.MultiReader(strings.NewReader(s[:len(s)/2]), strings.NewReader(s[len(s)/2:]))
}
