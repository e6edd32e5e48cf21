package tps_test

import (
	"bytes"
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tpsroute/tpsroute/tps"
)

// observed reads body through a Tap, at most n bytes per Read (n <= 0:
// everything in one Read), and returns a copy of every Chunk its observer
// saw and the Sample's counts.
func observed(tb testing.TB, body []byte, n int, opts ...tps.Option) ([]tps.Chunk, [5]int64) {
	tb.Helper()
	var seen []tps.Chunk
	obs := tps.WithObserver(func(_ time.Time, c *tps.Chunk) {
		v := *c // slices copied: the Tap's buffers and the reader's are reused
		v.Content = bytes.Clone(c.Content)
		v.ErrorBody = bytes.Clone(c.ErrorBody)
		v.Event = bytes.Clone(c.Event)
		v.UsageRaw, v.ID, v.Model = bytes.Clone(c.UsageRaw), bytes.Clone(c.ID), bytes.Clone(c.Model)
		v.FinishReason, v.SystemFingerprint, v.ServiceTier = bytes.Clone(c.FinishReason), bytes.Clone(c.SystemFingerprint), bytes.Clone(c.ServiceTier)
		v.Choices, v.ToolCalls = nil, nil
		for _, ch := range c.Choices {
			ch.Content, ch.Reasoning, ch.Refusal = bytes.Clone(ch.Content), bytes.Clone(ch.Reasoning), bytes.Clone(ch.Refusal)
			ch.FinishReason = bytes.Clone(ch.FinishReason)
			ch.LogprobsContent, ch.LogprobsRefusal = bytes.Clone(ch.LogprobsContent), bytes.Clone(ch.LogprobsRefusal)
			v.Choices = append(v.Choices, ch)
		}
		for _, tc := range c.ToolCalls {
			tc.ID, tc.Type, tc.Name, tc.Arguments = bytes.Clone(tc.ID), bytes.Clone(tc.Type), bytes.Clone(tc.Name), bytes.Clone(tc.Arguments)
			v.ToolCalls = append(v.ToolCalls, tc)
		}
		seen = append(seen, exported(v))
	})
	var r io.Reader = bytes.NewReader(body)
	if n > 0 {
		r = chunked{r, n}
	}
	var s tps.Sample
	tap := tps.NewTap(io.NopCloser(r), time.Now(), func(got tps.Sample) { s = got }, append(opts, obs)...)
	buf := make([]byte, len(body)+1)
	for {
		if _, err := tap.Read(buf); err != nil {
			break
		}
	}
	require.NoError(tb, tap.Close())
	if bytes.IndexByte(body, '\r') >= 0 {
		// A CRLF split across two reads ends its line at the CR, so the
		// bounds of the event it ends depend on the reads.
		for i := range seen {
			seen[i].Start, seen[i].End = 0, 0
		}
	}
	return seen, [5]int64{s.Chunks, s.OutputChunks, s.Malformed, s.Comments, s.NonStandard}
}

// readSizeSeeds are bodies whose events a Tap frames in place when a Read
// holds a whole "data:" line and its blank line, and line by line otherwise.
var readSizeSeeds = []string{
	"data: " + benchChunk + "\n\ndata: " + benchChunk + "\n\ndata: [DONE]\n\n",
	"data:{\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\ndata: {\"choices\":[\n\ndata: x\r\n\r\ndata: y\n\n",
	"event: error\ndata: {\"error\":{\"message\":\"m\"}}\n\n: c\n\ndata: {}\n\n\n\ndata: a\ndata: b\n\n",
	"\xEF\xBB\xBFdata: {}\n\ndata: {\"id\":\"x\"}\r\rdata: {}\n\rdata: \n\ndata:\n\nerror: {}\n\ndata: {}\n",
	// One chunk in two data lines, neither JSON alone: a read that starts
	// at the second line must not frame it as an event of its own.
	"data: {\"choices\":[{\"delta\":{\"content\":\ndata: \"hi\"}}]}\n\ndata: [DONE]\n\n",
	// Named events, as the Responses and Messages APIs send them, and
	// "event:" lines that the fast path must leave to the general one: no
	// data after them, a CR, a comment or a second name between the name
	// and the data, two data lines, a name with no space.
	"event: content_block_delta\ndata: {\"a\":1}\n\nevent:ping\ndata: {}\n\nevent: a\n\nevent: b\r\ndata: {}\n\n" +
		"event: c\n: note\ndata: {}\n\nevent: d\nevent: e\ndata: {}\n\nevent: f\ndata: 1\ndata: 2\n\nevent: error\ndata: {}\n\n",
}

// TestTapReadSizesAgree: a Tap sees the same events, with the same bounds,
// whatever the size of the reads that bring them.
func TestTapReadSizesAgree(t *testing.T) {
	lf, all := []byte(sseBody(20)), []byte(sseBody(20))
	for _, s := range readSizeSeeds {
		if !bytes.Contains([]byte(s), []byte("\r")) {
			lf = append(lf, s...)
		}
		all = append(all, s...)
	}
	for _, body := range [][]byte{lf, all} { // bounds compared in lf only
		want, wantCounts := observed(t, body, 1)
		require.NotEmpty(t, want)
		for _, n := range []int{0, 2, 7, 64, 300, 4096} {
			got, counts := observed(t, body, n)
			assert.Equal(t, want, got, "%d bytes per read", n)
			assert.Equal(t, wantCounts, counts, "%d bytes per read", n)
		}
	}
	body := all
	for _, n := range []int{0, 7} {
		want, _ := observed(t, body, 1, tps.WithMaxEvent(100))
		got, _ := observed(t, body, n, tps.WithMaxEvent(100))
		require.True(t, untilUnframed(want)[len(untilUnframed(want))-1].Unframed, "the cap is passed")
		assert.Equal(t, untilUnframed(want), untilUnframed(got), "%d bytes per read, with a cap that some events pass", n)
	}
}

// untilUnframed returns the events up to the first one past the event cap,
// whose end is zeroed: the Tap reports it where the read that passed the
// cap ended, and framing after it is not reliable (tps.Chunk.Unframed).
func untilUnframed(seen []tps.Chunk) []tps.Chunk {
	for i := range seen {
		if seen[i].Unframed {
			seen[i].End = 0
			return seen[:i+1]
		}
	}
	return seen
}

// FuzzTapReadSizes checks the same for any body and read size.
func FuzzTapReadSizes(f *testing.F) {
	for _, s := range readSizeSeeds {
		f.Add([]byte(s), uint8(0), uint16(0))
		f.Add([]byte(s), uint8(3), uint16(40))
	}
	f.Fuzz(func(t *testing.T, body []byte, n uint8, maxEvent uint16) {
		var opts []tps.Option
		if maxEvent > 0 {
			opts = append(opts, tps.WithMaxEvent(int(maxEvent)))
		}
		want, wantCounts := observed(t, body, 1, opts...)
		got, counts := observed(t, body, int(n), opts...)
		if w, g := untilUnframed(want), untilUnframed(got); len(w) < len(want) || len(g) < len(got) {
			want, got, counts = w, g, wantCounts // past the cap, only what came before compares
		}
		if !assert.ObjectsAreEqual(want, got) || wantCounts != counts {
			t.Fatalf("%d bytes per read: %+v %v\none byte per read: %+v %v", n, got, counts, want, wantCounts)
		}
	})
}
