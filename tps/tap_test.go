package tps_test

import (
	"errors"
	"io"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/tpsroute/tpsroute/tps"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// oneByte returns at most one byte per Read, to split every line and CRLF.
type oneByte struct{ r io.Reader }

func (o oneByte) Read(p []byte) (int, error) {
	if len(p) > 1 {
		p = p[:1]
	}
	return o.r.Read(p)
}

// tapAll reads s through a Tap, whole or one byte per Read, and returns the
// Sample and every observed event.
func tapAll(t *testing.T, s string, byteWise bool, opts ...tps.Option) (tps.Sample, []string) {
	t.Helper()
	var events []string
	obs := tps.WithObserver(func(_ time.Time, c *tps.Chunk) {
		switch {
		case c.Done:
			events = append(events, "[DONE]")
		case c.Malformed:
			events = append(events, "malformed")
		case c.Error:
			events = append(events, "error:"+string(c.ErrorBody))
		default:
			events = append(events, "text:"+string(c.AppendText(nil)))
		}
	})
	var r io.Reader = strings.NewReader(s)
	if byteWise {
		r = oneByte{r}
	}
	var got tps.Sample
	calls := 0
	tap := tps.NewTap(io.NopCloser(r), time.Now(), func(s tps.Sample) { got = s; calls++ }, append(opts, obs)...)
	out, err := io.ReadAll(tap)
	require.NoError(t, err)
	require.NoError(t, tap.Close())
	require.Equal(t, s, string(out))
	require.Equal(t, 1, calls)
	return got, events
}

func TestTapFraming(t *testing.T) {
	a := `{"choices":[{"delta":{"content":"a"}}]}`
	b := `{"choices":[{"delta":{"content":"b"}}]}`
	tests := []struct {
		name        string
		in          string
		events      []string
		comments    int64
		nonStandard int64
		malformed   int64
		end         tps.End
	}{
		{"LF", "data: " + a + "\n\ndata: " + b + "\n\ndata: [DONE]\n\n", []string{"text:a", "text:b", "[DONE]"}, 0, 0, 0, tps.EndDone},
		{"CRLF", "data: " + a + "\r\n\r\ndata: " + b + "\r\n\r\ndata: [DONE]\r\n\r\n", []string{"text:a", "text:b", "[DONE]"}, 0, 0, 0, tps.EndDone},
		{"CR only", "data: " + a + "\r\rdata: [DONE]\r\r", []string{"text:a", "[DONE]"}, 0, 0, 0, tps.EndDone},
		{"no space after colon (TGI)", "data:" + a + "\n\ndata:[DONE]\n\n", []string{"text:a", "[DONE]"}, 0, 0, 0, tps.EndDone},
		{"multi-line data", "data: {\"choices\":[{\"delta\":\ndata: {\"content\":\"ml\"}}]}\n\n", []string{"text:ml"}, 0, 0, 0, tps.EndEOF},
		{"comments", ": keep-alive\n\n:\n: OPENROUTER PROCESSING\n\ndata: " + a + "\n\n", []string{"text:a"}, 3, 0, 0, tps.EndEOF},
		{"stray blank lines", "\n\n\ndata: " + a + "\n\n\n\n\ndata: " + b + "\n\n\n", []string{"text:a", "text:b"}, 0, 0, 0, tps.EndEOF},
		{"[DONE] without trailing blank line", "data: " + a + "\n\ndata: [DONE]", []string{"text:a", "[DONE]"}, 0, 0, 0, tps.EndDone},
		{"last event without blank line", "data: " + a + "\n\ndata: " + b + "\n", []string{"text:a", "text:b"}, 0, 0, 0, tps.EndEOF},
		{"missing [DONE]", "data: " + a + "\n\n", []string{"text:a"}, 0, 0, 0, tps.EndEOF},
		{"event: error with non-JSON data", "event: error\ndata: upstream exploded\n\n", []string{"error:upstream exploded"}, 0, 0, 0, tps.EndError},
		{"error: field (Q3)", "error: {\"message\":\"x\"}\n\ndata: [DONE]\n\n", []string{"error:{\"message\":\"x\"}", "[DONE]"}, 0, 1, 0, tps.EndError},
		{"id, retry and unknown fields", "id: 7\nretry: 10\nfoo: bar\ndata: " + a + "\n\n", []string{"text:a"}, 0, 1, 0, tps.EndEOF},
		{"event type other than error", "event: message\ndata: " + a + "\n\n", []string{"text:a"}, 0, 0, 0, tps.EndEOF},
		{"malformed data keeps going", "data: {\"choices\":[\n\ndata: not json\n\ndata: " + a + "\n\n", []string{"malformed", "malformed", "text:a"}, 0, 0, 2, tps.EndEOF},
		{"empty data field", "data:\n\ndata: " + a + "\n\n", []string{"malformed", "text:a"}, 0, 0, 1, tps.EndEOF},
		{"blank line without data dispatches nothing", "event: error\n\ndata: " + a + "\n\n", []string{"text:a"}, 0, 0, 0, tps.EndEOF},
		{"UTF-8 BOM", "\xEF\xBB\xBFdata: " + a + "\n\n", []string{"text:a"}, 0, 0, 0, tps.EndEOF},
		{"escapes decoded by AppendText", `data: {"choices":[{"delta":{"content":"\"q\" \u00e9 \ud83d\ude00 \n"}}]}` + "\n\n", []string{"text:\"q\" é 😀 \n"}, 0, 0, 0, tps.EndEOF},
		{"empty body", "", nil, 0, 0, 0, tps.EndEOF},
	}
	for _, tt := range tests {
		for _, byteWise := range []bool{false, true} {
			name := tt.name
			if byteWise {
				name += "/one byte per read"
			}
			t.Run(name, func(t *testing.T) {
				got, events := tapAll(t, tt.in, byteWise)
				assert.Equal(t, tt.events, events)
				assert.Equal(t, tt.comments, got.Comments, "comments")
				assert.Equal(t, tt.nonStandard, got.NonStandard, "non-standard fields")
				assert.Equal(t, tt.malformed, got.Malformed, "malformed")
				assert.Equal(t, tt.end, got.End, "end")
			})
		}
	}
}

func TestTapOverlongLine(t *testing.T) {
	long := "data: " + strings.Repeat("x", tps.MaxEvent) + "\n\ndata: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\n"
	got, events := tapAll(t, long, false)
	assert.Equal(t, []string{"malformed", "text:a"}, events)
	assert.Equal(t, int64(1), got.Malformed)
	assert.Equal(t, int64(1), got.OutputChunks)
}

// TestTapReportsOverlongAtTheCap: a line or an event that passes the cap is
// reported the moment it does, so a reader can stop before an end that may
// never come; the Tap buffers no more than the cap meanwhile.
func TestTapReportsOverlongAtTheCap(t *testing.T) {
	const capBytes = 1024
	next := "data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\n"
	for name, in := range map[string]string{
		"one line":         "data: " + strings.Repeat("x", 3*capBytes),
		"many data lines":  strings.Repeat("data: "+strings.Repeat("y", 100)+"\n", 3*capBytes/100),
		"crlf lines":       strings.Repeat("data: "+strings.Repeat("z", 100)+"\r\n", 3*capBytes/100),
		"a comment line":   ": " + strings.Repeat("k", 3*capBytes),
		"an unknown field": "foo: " + strings.Repeat("k", 3*capBytes),
	} {
		t.Run(name, func(t *testing.T) {
			var read int64
			var atReport, end int64 = -1, -1
			pr, pw := io.Pipe()
			tap := tps.NewTap(pr, time.Now(), nil, tps.WithMaxEvent(capBytes), tps.WithObserver(func(_ time.Time, c *tps.Chunk) {
				if c.Malformed && c.Unframed && atReport < 0 {
					atReport, end = read, c.End
				}
			}))
			go func() {
				for i := 0; i < len(in); i += 64 { // the line never ends while it is read
					_, _ = pw.Write([]byte(in[i:min(i+64, len(in))]))
				}
				_, _ = pw.Write([]byte("\n\n" + next))
				pw.Close()
			}()
			buf := make([]byte, 64)
			for {
				n, err := tap.Read(buf)
				read += int64(n)
				if err != nil {
					break
				}
			}
			require.NoError(t, tap.Close())
			require.GreaterOrEqual(t, atReport, int64(0), "the overlong event was reported")
			assert.LessOrEqual(t, atReport, int64(capBytes*3/2), "reported near the cap, not at the end of the 3x-cap line")
			// It ends where the read that crossed the cap ended: past the
			// cap, within that read.
			assert.GreaterOrEqual(t, end, int64(capBytes), "the event's end")
			assert.LessOrEqual(t, end, atReport+int64(len(buf)), "the event's end")
		})
	}
}

func TestTapCommentObserver(t *testing.T) {
	var comments []string
	got, _ := tapAll(t, ": keep-alive\n:\n", true, tps.WithCommentObserver(func(_ time.Time, text []byte) {
		comments = append(comments, string(text))
	}))
	assert.Equal(t, []string{" keep-alive", ""}, comments)
	assert.Equal(t, int64(2), got.Comments)
	assert.True(t, got.Truncated, "nothing but comments is not a finished answer")
}

func TestTapWithHeaders(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		time.Sleep(time.Second)
		var got tps.Sample
		tap := tps.NewTap(io.NopCloser(strings.NewReader("")), start, func(s tps.Sample) { got = s },
			tps.WithHeaders(start.Add(250*ms)))
		_, err := io.ReadAll(tap)
		require.NoError(t, err)
		assert.Equal(t, 250*ms, got.Headers)
		assert.Equal(t, time.Second, got.Total)
	})
}

// blockingBody blocks Read until Close, like a network body.
type blockingBody struct {
	first  string
	once   sync.Once
	closed chan struct{}
}

func (b *blockingBody) Read(p []byte) (int, error) {
	if b.first != "" {
		n := copy(p, b.first)
		b.first = b.first[n:]
		return n, nil
	}
	<-b.closed
	return 0, errors.New("use of closed body")
}

func (b *blockingBody) Close() error {
	b.once.Do(func() { close(b.closed) })
	return nil
}

func TestTapLifecycle(t *testing.T) {
	t.Run("Close before the end ends the Sample once", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			start := time.Now()
			var got []tps.Sample
			tap := tps.NewTap(&blockingBody{first: "data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\n", closed: make(chan struct{})},
				start, func(s tps.Sample) { got = append(got, s) })
			buf := make([]byte, 512)
			_, err := tap.Read(buf)
			require.NoError(t, err)
			time.Sleep(2 * time.Second)
			readDone := make(chan error)
			go func() {
				_, err := tap.Read(buf)
				readDone <- err
			}()
			synctest.Wait()
			require.NoError(t, tap.Close()) // from another goroutine than the reader
			require.Error(t, <-readDone)
			require.NoError(t, tap.Close())
			require.Len(t, got, 1)
			assert.Equal(t, tps.EndClosed, got[0].End)
			assert.NoError(t, got[0].Err)
			assert.False(t, got[0].Truncated)
			assert.Equal(t, 2*time.Second, got[0].Total)
			assert.Equal(t, int64(1), got[0].OutputChunks)
		})
	})
	t.Run("Close after [DONE] but before EOF is EndDone", func(t *testing.T) {
		var got []tps.Sample
		tap := tps.NewTap(io.NopCloser(strings.NewReader("data: {\"choices\":[{\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n")),
			time.Now(), func(s tps.Sample) { got = append(got, s) })
		buf := make([]byte, 4096)
		_, err := tap.Read(buf)
		require.NoError(t, err)
		require.NoError(t, tap.Close())
		require.Len(t, got, 1)
		assert.Equal(t, tps.EndDone, got[0].End)
		assert.False(t, got[0].Truncated)
	})
	t.Run("nil body and nil done", func(t *testing.T) {
		tap := tps.NewTap(nil, time.Now(), nil)
		n, err := tap.Read(make([]byte, 8))
		assert.Equal(t, 0, n)
		assert.ErrorIs(t, err, io.EOF)
		assert.NoError(t, tap.Close())
	})
	t.Run("read error after EOF-less data is an error with its phase", func(t *testing.T) {
		boom := errors.New("connection reset")
		var got tps.Sample
		tap := tps.NewTap(io.NopCloser(io.MultiReader(strings.NewReader(": ping\n\n"), errReader{boom})), time.Now(),
			func(s tps.Sample) { got = s })
		_, err := io.ReadAll(tap)
		require.ErrorIs(t, err, boom)
		assert.ErrorIs(t, got.Err, boom)
		assert.Equal(t, "tps: reading stream: connection reset", got.Err.Error())
		assert.Equal(t, tps.PhaseFirstToken, got.ErrPhase)
		assert.Equal(t, tps.EndError, got.End)
	})
}

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

// TestTapEventBounds: Chunk.Start and Chunk.End locate each event in the
// body, whatever the read boundaries; comment blocks between events belong to
// no event, and a final event without its blank line ends at EOF.
func TestTapEventBounds(t *testing.T) {
	a := "data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\n"
	bad := "data: {\"choi\n\n"
	b := "event: error\ndata: {\"error\":{\"message\":\"x\"}}\n\n"
	last := "data: [DONE]"
	body := ": keep-alive\n\n" + a + bad + ":\n\n" + b + last
	o1 := len(": keep-alive\n\n")
	o2 := o1 + len(a)
	o3 := o2 + len(bad)
	o4 := o3 + len(":\n\n")
	want := [][2]int{{o1, o2}, {o2, o3}, {o4, o4 + len(b)}, {o4 + len(b), len(body)}}
	for _, byteWise := range []bool{false, true} {
		var got [][2]int
		obs := tps.WithObserver(func(_ time.Time, c *tps.Chunk) {
			got = append(got, [2]int{int(c.Start), int(c.End)})
		})
		var r io.Reader = strings.NewReader(body)
		if byteWise {
			r = oneByte{r}
		}
		tap := tps.NewTap(io.NopCloser(r), time.Now(), nil, obs)
		_, err := io.Copy(io.Discard, tap)
		require.NoError(t, err)
		require.NoError(t, tap.Close())
		assert.Equal(t, want, got, "one byte per read: %v", byteWise)
	}
}
