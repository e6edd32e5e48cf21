package executor

import (
	"io"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestIsJSONAnswer: the media type decides, whatever its case, space and
// parameters; a near name is not JSON.
func TestIsJSONAnswer(t *testing.T) {
	for ct, want := range map[string]bool{
		"application/json":                 true,
		"Application/JSON; charset=utf-8":  true,
		" application/json ;charset=utf-8": true,
		"text/event-stream":                false,
		"application/jsonl":                false,
		"application/json-seq":             false,
		"":                                 false,
	} {
		assert.Equal(t, want, isJSONAnswer(&http.Response{Header: http.Header{"Content-Type": {ct}}}), ct)
	}
}

// TestIsJSONAnswerAllocatesNothing: the check runs on every attempt.
func TestIsJSONAnswerAllocatesNothing(t *testing.T) {
	resp := &http.Response{Header: http.Header{"Content-Type": {"text/event-stream; charset=utf-8"}}}
	assert.Zero(t, testing.AllocsPerRun(100, func() { isJSONAnswer(resp) }))
}

// TestReadAnswer: the body is read whole and exactly whatever the
// Content-Length says (right, absent, too small, too large, past the
// limit), one byte past the limit at most; a right one takes one
// allocation of the buffer.
func TestReadAnswer(t *testing.T) {
	body := strings.Repeat(`{"x":"abcdefgh"}`, 1000) // 16,000 bytes
	const limit = 20000
	for _, c := range []struct {
		name   string
		length int64
		body   string
		want   int // bytes read
	}{
		{"right length", int64(len(body)), body, len(body)},
		{"no length", -1, body, len(body)},
		{"length too small", 100, body, len(body)},
		{"length too large", limit, body, len(body)},
		{"length past the limit", limit + 1, body, len(body)},
		{"body past the limit", int64(len(body)), body + body, limit + 1},
		{"empty", 0, "", 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			resp := &http.Response{Body: io.NopCloser(strings.NewReader(c.body)), ContentLength: c.length}
			b, err := readAnswer(resp, limit)
			require.NoError(t, err)
			assert.Equal(t, c.want, len(b))
			assert.Equal(t, (c.body + c.body)[:c.want], string(b))
		})
	}
	t.Run("a read error is returned", func(t *testing.T) {
		resp := &http.Response{Body: io.NopCloser(iotest.ErrReader(io.ErrUnexpectedEOF)), ContentLength: 10}
		_, err := readAnswer(resp, limit)
		assert.ErrorIs(t, err, io.ErrUnexpectedEOF)
	})
	t.Run("a length far past the limit allocates no more than the limit", func(t *testing.T) {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		b, err := readAnswer(&http.Response{Body: io.NopCloser(strings.NewReader(body)), ContentLength: 1000 * limit}, limit)
		runtime.ReadMemStats(&after)
		require.NoError(t, err)
		assert.Len(t, b, len(body))
		assert.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(8*limit))
	})
	t.Run("one buffer for a right length", func(t *testing.T) {
		for _, b := range []string{body, strings.Repeat("x", limit)} { // the limit itself included
			r := strings.NewReader(b)
			allocs := testing.AllocsPerRun(20, func() {
				r.Reset(b)
				if _, err := readAnswer(&http.Response{Body: io.NopCloser(r), ContentLength: int64(len(b))}, limit); err != nil {
					t.Fatal(err)
				}
			})
			assert.LessOrEqual(t, allocs, 3.0, "the buffer, the bytes.Buffer and the LimitReader, for %d bytes", len(b))
		}
	})
}
