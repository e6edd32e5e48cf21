package sse

import (
	"bytes"
	"io"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSSEFraming is the table of the one SSE framer: where the first and the
// last complete event blocks end, and what ParseEvent and ForEachData read,
// for LF, CRLF and CR line ends and the quirks providers send.
func TestSSEFraming(t *testing.T) {
	tests := []struct {
		name  string
		b     string
		first int      // EventEnd
		last  int      // LastEventEnd(b, -1)
		data  []string // ForEachData
	}{
		{"lf", "data: a\n\ndata: b", 9, 9, []string{"a", "b"}},
		{"crlf", "data: a\r\n\r\ndata: b", 11, 11, []string{"a", "b"}},
		{"cr", "data: a\r\rdata: b", 9, 9, []string{"a", "b"}},
		{"mixed", "data: a\r\n\ndata: b\r\r", 10, 19, []string{"a", "b"}},
		{"none", "data: a\ndata: b", -1, -1, []string{"a\nb"}},
		{"two", "data: a\n\ndata: b\n\n", 9, 18, []string{"a", "b"}},
		{"no space, done", "data:a\n\ndata: [DONE]\n\n", 8, 22, []string{"a"}},
		{"stray blank line joins the next block", "\ndata: a\n\n", 10, 10, []string{"a"}},
		{"comment then data", ": ping\n\ndata: a\n\n", 8, 17, []string{"a"}},
		{"cr at the end of the buffer ends the line", "data: a\r\n\r", 10, 10, []string{"a"}},
		{"crlf inside an event", "data: a\r\ndata: b\r\n\r\n", 20, 20, []string{"a\nb"}},
		{"empty", "", -1, -1, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.first, EventEnd([]byte(tt.b)), "EventEnd")
			assert.Equal(t, tt.last, LastEventEnd([]byte(tt.b), -1), "LastEventEnd")
			var got []string
			ForEachData([]byte(tt.b), func(d []byte) { got = append(got, string(d)) })
			assert.Equal(t, tt.data, got, "ForEachData")
			for _, r := range []io.Reader{strings.NewReader(tt.b), iotest.OneByteReader(strings.NewReader(tt.b))} {
				got, err := readEvents(r, 0)
				require.NoError(t, err)
				assert.Equal(t, tt.data, got, "EventReader")
			}
		})
	}

	events := []struct {
		name  string
		block string
		want  Event
	}{
		{"data", "data: {\"x\":1}\n\n", Event{Data: `{"x":1}`, HasData: true}},
		{"named, multi-line, crlf", "event: error\r\ndata: a\r\ndata:b\r\n\r\n", Event{Name: "error", Data: "a\nb", HasData: true}},
		{"cr only", "data: a\rdata: b\r\r", Event{Data: "a\nb", HasData: true}},
		{"comments only", ": ping\n:pong\n\n", Event{Comment: "ping\npong", OnlyComment: true}},
		{"comment beside data", ": ping\ndata: a\n\n", Event{Data: "a", HasData: true}},
		{"id and retry ignored", "id: 7\nretry: 10\n\n", Event{}},
		{"done is data", "data: [DONE]\n\n", Event{Data: "[DONE]", HasData: true}},
	}
	for _, tt := range events {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, ParseEvent([]byte(tt.block)))
		})
	}
}

// readEvents reads r with an EventReader and returns the data of its events,
// [DONE] and empty data left out as ForEachData leaves them out.
func readEvents(r io.Reader, max int) ([]string, error) {
	var d EventReader
	d.Reset(r, max)
	var got []string
	for d.Next() {
		if len(d.Data()) > 0 && !bytes.Equal(d.Data(), []byte("[DONE]")) {
			got = append(got, string(d.Data()))
		}
	}
	return got, d.Err()
}

func TestEventReader(t *testing.T) {
	t.Run("names and lone CR split across reads", func(t *testing.T) {
		var d EventReader
		d.Reset(iotest.HalfReader(strings.NewReader("event: a\rdata: 1\r\r\ndata: 2\r\n\r\nevent: b\ndata:3")), 0)
		var got []string
		for d.Next() {
			got = append(got, string(d.Name())+"="+string(d.Data()))
		}
		require.NoError(t, d.Err())
		assert.Equal(t, []string{"a=1", "=2", "b=3"}, got)
	})
	t.Run("limit on a line", func(t *testing.T) {
		_, err := readEvents(strings.NewReader("data: "+strings.Repeat("x", 5000)), 1024)
		assert.ErrorIs(t, err, ErrEventTooLarge)
	})
	t.Run("limit on an event's data lines", func(t *testing.T) {
		_, err := readEvents(strings.NewReader(strings.Repeat("data: 0123456789\n", 200)), 1024)
		assert.ErrorIs(t, err, ErrEventTooLarge)
	})
	t.Run("read error", func(t *testing.T) {
		boom := io.ErrClosedPipe
		_, err := readEvents(iotest.ErrReader(boom), 0)
		assert.ErrorIs(t, err, boom)
	})
	t.Run("zero value reads nothing", func(t *testing.T) {
		var d EventReader
		assert.False(t, d.Next())
		assert.NoError(t, d.Err())
	})
	t.Run("allocates nothing once warm", func(t *testing.T) {
		body := []byte(strings.Repeat("data: {\"choices\":[{\"delta\":{\"content\":\"hi\"}}]}\n\n", 50))
		var d EventReader
		var r bytes.Reader
		allocs := testing.AllocsPerRun(20, func() {
			r.Reset(body)
			d.Reset(&r, 0)
			for d.Next() {
			}
		})
		assert.Zero(t, allocs)
	})
}

// FuzzEventReader holds the one rule set: the pull reader reads, from any
// bytes and however they arrive, the events ForEachData reads from the whole
// buffer.
func FuzzEventReader(f *testing.F) {
	for _, s := range []string{"data: a\n\ndata: b", "data: a\r\rdata:b\r\n\r\n", ": c\n\nevent: e\ndata: x\ndata: y\n\n", "\r\n\r", "data\n\n", "data: [DONE]\n\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		var want []string
		ForEachData([]byte(in), func(d []byte) { want = append(want, string(d)) })
		for _, r := range []io.Reader{strings.NewReader(in), iotest.OneByteReader(strings.NewReader(in)), iotest.HalfReader(strings.NewReader(in))} {
			got, err := readEvents(r, 0)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(want) {
				t.Fatalf("%q: EventReader %q, ForEachData %q", in, got, want)
			}
			for i := range got {
				if got[i] != want[i] {
					t.Fatalf("%q: EventReader %q, ForEachData %q", in, got, want)
				}
			}
		}
	})
}

// TestEventReaderBoundedMemory: the read buffer holds the partial line, not
// the stream: 20,000 events leave it at its first size.
func TestEventReaderBoundedMemory(t *testing.T) {
	ev := "data: {\"choices\":[{\"delta\":{\"content\":\"hi\"}}]}\n\n"
	var d EventReader
	d.Reset(strings.NewReader(strings.Repeat(ev, 20000)), 0)
	n := 0
	for d.Next() {
		n++
	}
	require.NoError(t, d.Err())
	assert.Equal(t, 20000, n)
	assert.Len(t, d.buf, eventReaderBuf)
}

// brokenReader reads r, but its second and third reads claim one byte more
// than they were given and fewer than none.
type brokenReader struct {
	calls int
	r     io.Reader
}

func (b *brokenReader) Read(p []byte) (int, error) {
	b.calls++
	switch b.calls {
	case 2:
		return len(p) + 1, nil
	case 3:
		return -5, nil
	}
	return b.r.Read(p)
}

// TestEventReaderBrokenReader: a Reader that reports an impossible count,
// with part of a line already read or not, is read as having read nothing.
func TestEventReaderBrokenReader(t *testing.T) {
	for _, r := range []io.Reader{
		strings.NewReader("data: ok\n\n"),
		io.MultiReader(strings.NewReader("data: o"), strings.NewReader("k\n\n")), // a partial line before the broken reads
	} {
		got, err := readEvents(&brokenReader{r: r}, 0)
		require.NoError(t, err)
		assert.Equal(t, []string{"ok"}, got)
	}
}

// TestTerminator: the bytes a line end takes, and a CR that ends the bytes
// read so far, whose LF may come with the next read.
func TestTerminator(t *testing.T) {
	for _, tt := range []struct {
		b         string
		n         int
		pendingLF bool
	}{
		{"a\nb", 1, false},
		{"a\r\nb", 2, false},
		{"a\rb", 1, false},
		{"a\r", 1, true},
		{"a\n", 1, false},
		{"a\r\n", 2, false},
	} {
		n, pending := Terminator([]byte(tt.b), LineEnd([]byte(tt.b)))
		assert.Equal(t, tt.n, n, "%q", tt.b)
		assert.Equal(t, tt.pendingLF, pending, "%q", tt.b)
	}
}
