package tps_test

import (
	"bytes"
	"io"
	"testing"
	"time"

	"github.com/tpsroute/tpsroute/tps"
)

// chunked returns at most n bytes per Read (n >= 1).
type chunked struct {
	r io.Reader
	n int
}

func (c chunked) Read(p []byte) (int, error) {
	if len(p) > c.n {
		p = p[:c.n]
	}
	return c.r.Read(p)
}

// FuzzTap checks that for any body and any read size a Tap never panics,
// passes the bytes through unchanged, and calls done exactly once.
func FuzzTap(f *testing.F) {
	for _, seed := range []string{
		"data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\ndata: [DONE]\n\n",
		": keep-alive\r\n\r\ndata:{\"choices\":[{\"delta\":{\"reasoning\":\"r\"}}],\"usage\":{\"completion_tokens\":2}}\r\n\r\n",
		"event: error\ndata: {\"error\":{\"code\":\"429\",\"message\":\"slow down\"}}\n\n",
		"error: {\"code\":500}\n\ndata: [DONE]",
		"data: {\"choices\":[\ndata: {\"x\":1}\n\n\r\r\ndata: \xEF\xBB\xBF\n\n",
		"\xEF\xBB\xBFdata: {\"error\":\"plain\"}\n\n",
		"data: {\"choices\":[{\"delta\":{\"content\":\"\\ud83d\\ude00\\u00\"}}]}\n\n",
	} {
		for _, n := range []uint8{0, 1, 7} {
			f.Add([]byte(seed), n)
		}
	}
	f.Fuzz(func(t *testing.T, in []byte, n uint8) {
		calls := 0
		var r io.Reader = bytes.NewReader(in)
		if n > 0 {
			r = chunked{r, int(n)}
		}
		tap := tps.NewTap(io.NopCloser(r), time.Now(), func(tps.Sample) { calls++ },
			tps.WithObserver(func(_ time.Time, c *tps.Chunk) { _ = c.AppendText(nil) }))
		out, err := io.ReadAll(tap)
		if err != nil {
			t.Fatal(err)
		}
		if err := tap.Close(); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(in, out) {
			t.Fatalf("bytes changed: %q -> %q", in, out)
		}
		if calls != 1 {
			t.Fatalf("done called %d times", calls)
		}
	})
}
