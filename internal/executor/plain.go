package executor

import (
	"bytes"
	"io"
	"net/http"
	"strings"

	"github.com/tidwall/sjson"

	"github.com/tpsroute/tpsroute/internal/payload"
	"github.com/tpsroute/tpsroute/internal/sse"
	"github.com/tpsroute/tpsroute/route"
	"github.com/tpsroute/tpsroute/tps"
)

// This file is the plain upstream call: an attempt sent with "stream":
// false, to a deployment that cannot stream (Capabilities.NoStream) or for
// a non-streaming call that asked for it (Call.Plain), and the JSON answer
// to any attempt (a provider that ignores "stream": true). The answer is
// read whole, bounded by Limits.Answer, and handed to the tap as the stream
// that carries it (payload.AppendCompletionEvents), so that one framer times and
// checks every attempt; the Sample says Unstreamed, since its TTFT is the
// whole answer's latency and its speed was not seen (docs/CONFIG.md,
// "Plain upstream calls").

// plainOn reports whether the attempt on d is a plain upstream call: every
// embeddings call, which never streams.
func (cl *call) plainOn(d *route.Deployment) bool {
	return cl.protocol == tps.ProtocolEmbeddings || cl.protocol == tps.ProtocolChat && (d.Capabilities.NoStream || cl.plain && !cl.stream)
}

// plainBody returns body, which carries "stream": true, with "stream":
// false and without "stream_options", which providers refuse on a plain
// call.
func plainBody(body []byte) ([]byte, error) {
	b, err := sjson.SetBytes(body, "stream", false)
	if err != nil {
		return nil, err
	}
	return sjson.DeleteBytes(b, "stream_options")
}

// isJSONAnswer reports whether resp declares a JSON body rather than an
// event stream.
func isJSONAnswer(resp *http.Response) bool {
	// The media type before any parameter, compared without allocating
	// (mime.ParseMediaType builds a map on every attempt).
	mt, _, _ := strings.Cut(resp.Header.Get("Content-Type"), ";")
	return strings.EqualFold(strings.TrimSpace(mt), "application/json")
}

// unstream reads the whole JSON answer of resp, bounded by Limits.Answer,
// and replaces resp.Body with the event stream that carries it, whose
// length it returns: the stream is already in memory and bounded by
// Limits.Answer, so its events are not held to Limits.Event (an
// embeddings answer is one event of up to Limits.Answer). A read error is
// left for the tap to read, as from any stream; an answer past the limit
// fails the run with ErrTooLarge, and one that is not a JSON object with
// ErrMalformed, both after an empty stream.
func (a *run) unstream(resp *http.Response) int {
	limit := a.cl.e.opts.Limits.Answer
	b, err := readAnswer(resp, limit)
	rest := resp.Body
	switch {
	case err != nil:
		resp.Body = readCloser{errReader{err}, rest}
		return 0
	case len(b) > limit:
		a.tooLarge = true
		b = nil
	}
	var ev []byte
	switch {
	case b == nil:
	case a.cl.protocol == tps.ProtocolEmbeddings: // one event: the answer
		ev = sse.AppendEvent(nil, b)
	default:
		if ev, err = payload.AppendCompletionEvents(nil, b); err != nil {
			a.malformed = true
		}
	}
	a.plainAnswer = b
	resp.Body = readCloser{bytes.NewReader(ev), rest}
	return len(ev)
}

// readAnswer reads resp's body whole, at most limit+1 bytes (one past the
// limit, so that the caller sees it exceeded). A Content-Length within
// limit sizes the buffer once, where io.ReadAll starts at 512 bytes and
// grows it (BenchmarkNewAllocs/plainup/1000: 8 allocations and 5.4 KB
// fewer a call); a wrong one costs at most a grown or an oversized buffer,
// never more than limit.
func readAnswer(resp *http.Response, limit int) ([]byte, error) {
	r := io.LimitReader(resp.Body, int64(limit)+1)
	n := resp.ContentLength
	if n <= 0 || n > int64(limit) {
		return io.ReadAll(r)
	}
	buf := bytes.NewBuffer(make([]byte, 0, int(n)+bytes.MinRead)) // ReadFrom grows below MinRead free
	_, err := buf.ReadFrom(r)
	return buf.Bytes(), err
}

// readCloser reads from r and closes c.
type readCloser struct {
	io.Reader
	c io.Closer
}

func (r readCloser) Close() error { return r.c.Close() }

// errReader fails every read with err.
type errReader struct{ err error }

func (r errReader) Read([]byte) (int, error) { return 0, r.err }
