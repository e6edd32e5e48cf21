package replay

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/tpsroute/tpsroute/internal/payload"
	"github.com/tpsroute/tpsroute/internal/redact"
	"github.com/tpsroute/tpsroute/internal/sse"
	"github.com/tpsroute/tpsroute/route"
)

// RecorderOption configures a Recorder at construction. Options are pure
// functions of their arguments, safe for concurrent use.
type RecorderOption func(*Recorder)

// RedactRecordedHeaders adds header names (case-insensitive) whose values are
// written as "REDACTED", in requests and responses, besides every credential
// header (route.IsCredentialName: Authorization, Api-Key, X-Goog-Api-Key,
// Cookie, Set-Cookie, any name with auth, key, token, secret, password,
// signature or credential in it).
func RedactRecordedHeaders(names ...string) RecorderOption {
	return func(r *Recorder) {
		r.headers = append(r.headers, names...)
	}
}

// RedactRecordedFields names JSON object keys (exact match, at any depth)
// whose values are written as "REDACTED" in the request body, in response
// data events and in a non-streamed JSON response body. A response event is
// rewritten only when it holds such a key, so other events stay byte-exact;
// a JSON body holding one is recorded as a single event at its last read.
func RedactRecordedFields(names ...string) RecorderOption {
	return func(r *Recorder) {
		for _, n := range names {
			r.fields[n] = true
		}
	}
}

// RecorderNaming sets the cassette file name (inside the Recorder's dir) for
// the seq-th call (from 1). The default is "%04d-<model>.json", with the
// model sanitised for file names.
func RecorderNaming(name func(seq int, req *http.Request, model string) string) RecorderOption {
	return func(r *Recorder) { r.name = name }
}

// Recorder is an http.RoundTripper that forwards each call to the next
// RoundTripper and writes one cassette per call into a directory, streamed or
// not, with each event's time taken as the caller reads the body. The cassette
// is written when the body reaches its end, fails, or is closed. Closing a
// body early after [DONE] records a clean end; closing it earlier records a
// reset, since the rest is unknown. Only the URL path is recorded, never the
// query. A Recorder is safe for concurrent use.
type Recorder struct {
	next    http.RoundTripper
	dir     string
	headers []string // redacted besides route.IsCredentialName
	fields  map[string]bool
	name    func(seq int, req *http.Request, model string) string

	mu    sync.Mutex
	seq   int
	files []string
	err   error
}

// NewRecorder returns a Recorder writing into dir (created if missing) and
// forwarding to next; a nil next means http.DefaultTransport.
func NewRecorder(next http.RoundTripper, dir string, opts ...RecorderOption) *Recorder {
	if next == nil {
		next = http.DefaultTransport
	}
	r := &Recorder{
		next:   next,
		dir:    dir,
		fields: map[string]bool{},
		name: func(seq int, _ *http.Request, model string) string {
			return fmt.Sprintf("%04d-%s.json", seq, sanitize(model))
		},
	}
	for _, o := range opts {
		o(r)
	}
	return r
}

// Files returns the paths of the cassettes written so far, in order.
func (r *Recorder) Files() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.files...)
}

// Err returns the first error writing a cassette, or nil. Recording errors
// never fail the caller's round trip.
func (r *Recorder) Err() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err
}

func sanitize(s string) string {
	if s == "" {
		return "call"
	}
	return strings.Map(func(c rune) rune {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '-', c == '.', c == '_':
			return c
		}
		return '_'
	}, s)
}

// RoundTrip forwards req and records the call.
func (r *Recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	var body []byte
	if req.Body != nil && req.Body != http.NoBody {
		b, err := io.ReadAll(req.Body)
		_ = req.Body.Close()
		if err != nil {
			return nil, fmt.Errorf("replay: recorder: read request body: %w", err)
		}
		body = b
		req = req.Clone(req.Context())
		req.Body = io.NopCloser(bytes.NewReader(body))
		req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
		req.ContentLength = int64(len(body))
	}
	var model struct {
		Model string `json:"model"`
	}
	_ = json.Unmarshal(body, &model)
	r.mu.Lock()
	r.seq++
	seq := r.seq
	r.mu.Unlock()

	name := r.name(seq, req, model.Model)
	// The credentials this request carries: nothing the cassette holds may
	// repeat them, whatever the upstream echoes (docs/SECURITY.md).
	sc := redact.RequestScrubber(req)
	c := &Cassette{
		Version:    CassetteVersion,
		Name:       strings.TrimSuffix(name, ".json"),
		RecordedAt: time.Now().UTC().Format(time.RFC3339),
		Request: CassetteRequest{
			Method:  req.Method,
			Path:    sc.Scrub(req.URL.Path),
			Headers: r.redactHeader(req.Header, sc),
			Body:    sc.ScrubJSON(r.redactBody(body)),
		},
	}
	file := filepath.Join(r.dir, name)
	start := time.Now()
	resp, err := r.next.RoundTrip(req)
	if err != nil {
		c.Response = CassetteResponse{End: "reset", EndMS: durMS(time.Since(start)), Events: []Event{}}
		r.write(file, c)
		return resp, err
	}
	c.Response = CassetteResponse{
		Status:    resp.StatusCode,
		Headers:   r.redactHeader(resp.Header, sc),
		HeadersMS: durMS(time.Since(start)),
		Events:    []Event{},
	}
	sse := strings.HasPrefix(strings.ToLower(resp.Header.Get("Content-Type")), "text/event-stream")
	resp.Body = &recBody{rc: resp.Body, rec: r, file: file, c: c, start: start, sse: sse, sc: sc}
	return resp, nil
}

// redactHeader returns h for a cassette: credential headers and the named
// ones read REDACTED, and any other value that holds a credential of sc, in
// any form, reads REDACTED too.
func (r *Recorder) redactHeader(h http.Header, sc *redact.Scrubber) http.Header {
	out := redact.Header(h, r.headers...)
	for _, vs := range out {
		for i, v := range vs {
			if sc.Contains([]byte(v)) {
				vs[i] = route.Redacted
			}
		}
	}
	return out
}

// redactBody returns the request body for the cassette: JSON with the named
// fields redacted, or the body as a JSON string if it is not JSON.
func (r *Recorder) redactBody(b []byte) json.RawMessage {
	if len(b) == 0 {
		return nil
	}
	if out, _, ok := r.redactJSON(b); ok {
		return out
	}
	return payload.AppendQuoted(nil, string(b))
}

// redactJSON decodes b, replaces the named fields and re-encodes it. It
// reports whether a field was replaced and whether b was JSON.
func (r *Recorder) redactJSON(b []byte) (out []byte, changed, ok bool) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if dec.Decode(&v) != nil {
		return nil, false, false
	}
	changed = r.walk(v)
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if enc.Encode(v) != nil {
		return nil, false, false
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), changed, true
}

func (r *Recorder) walk(v any) bool {
	changed := false
	switch t := v.(type) {
	case map[string]any:
		for k, x := range t {
			if r.fields[k] {
				t[k] = route.Redacted
				changed = true
				continue
			}
			changed = r.walk(x) || changed
		}
	case []any:
		for _, x := range t {
			changed = r.walk(x) || changed
		}
	}
	return changed
}

func (r *Recorder) write(file string, c *Cassette) {
	b, err := c.Marshal()
	if err == nil {
		if err = os.MkdirAll(filepath.Dir(file), 0o755); err == nil {
			err = os.WriteFile(file, b, 0o644)
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if err != nil {
		if r.err == nil {
			r.err = fmt.Errorf("replay: recorder: %w", err)
		}
		return
	}
	r.files = append(r.files, file)
}

// recBody records the body's events as the caller reads them.
type recBody struct {
	rc    io.ReadCloser
	rec   *Recorder
	file  string
	c     *Cassette
	start time.Time
	sse   bool
	sc    *redact.Scrubber // the request's credentials

	mu   sync.Mutex
	buf  []byte // bytes of an event not yet complete
	done bool   // seen [DONE]
	once sync.Once
}

func (b *recBody) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	b.mu.Lock()
	defer b.mu.Unlock()
	at := time.Since(b.start)
	if n > 0 {
		b.buf = append(b.buf, p[:n]...)
		b.split(at)
	}
	if err != nil {
		end := "eof"
		if !errors.Is(err, io.EOF) {
			end = "reset"
		}
		b.finish(at, end)
	}
	return n, err
}

// split moves complete events from buf into the cassette. A non-SSE body is
// recorded as one raw event per read.
func (b *recBody) split(at time.Duration) {
	if !b.sse {
		b.add(newEvent(at, eventRaw, "", string(b.buf)))
		b.buf = b.buf[:0]
		return
	}
	for {
		i := sse.EventEnd(b.buf)
		if i < 0 {
			return
		}
		block := string(b.buf[:i])
		b.buf = b.buf[i:]
		kind, name, data := b.event(block)
		if kind == eventData && data == "[DONE]" {
			b.done = true
		}
		b.add(newEvent(at, kind, name, data))
	}
}

// event returns the cassette event for one SSE block, with the named fields
// redacted. A quirky frame holding a redacted field loses its framing: the
// secret must go, byte-exactness comes second.
func (b *recBody) event(block string) (kind eventKind, name, data string) {
	kind, name, data = canonical([]byte(block))
	if len(b.rec.fields) == 0 {
		return kind, name, data
	}
	switch kind {
	case eventData:
		if out, changed, ok := b.rec.redactJSON([]byte(data)); ok && changed {
			data = string(out)
		}
	case eventRaw:
		if ev := sse.ParseEvent([]byte(block)); ev.HasData {
			if out, changed, ok := b.rec.redactJSON([]byte(ev.Data)); ok && changed {
				kind, name, data = eventData, ev.Name, string(out)
			}
		}
	}
	return kind, name, data
}

// add appends e with every credential of the request scrubbed from it:
// data as JSON (redact.Scrubber.ScrubJSON), the rest as text.
func (b *recBody) add(e Event) {
	scrub := func(p *string, json bool) {
		if p == nil || !b.sc.Contains([]byte(*p)) {
			return
		}
		if json {
			*p = string(b.sc.ScrubJSON([]byte(*p)))
		} else {
			*p = b.sc.Scrub(*p)
		}
	}
	e.Event = b.sc.Scrub(e.Event)
	scrub(e.Data, true)
	scrub(e.Comment, false)
	scrub(e.Raw, false)
	if e.RawBase64 != nil {
		if raw, err := base64.StdEncoding.DecodeString(*e.RawBase64); err == nil && b.sc.Contains(raw) {
			enc := base64.StdEncoding.EncodeToString([]byte(b.sc.Scrub(string(raw))))
			e.RawBase64 = &enc
		}
	}
	b.c.Response.Events = append(b.c.Response.Events, e)
}

// scrubAcrossReads scrubs a non-SSE body whose credential straddles two
// reads, so that no one raw event held it whole: the events become one,
// scrubbed, at the time of the last read.
func (b *recBody) scrubAcrossReads() {
	ev := b.c.Response.Events
	var all []byte
	for _, e := range ev {
		switch {
		case e.Raw != nil:
			all = append(all, *e.Raw...)
		case e.RawBase64 != nil:
			raw, _ := base64.StdEncoding.DecodeString(*e.RawBase64)
			all = append(all, raw...)
		}
	}
	if len(ev) == 0 || !b.sc.Contains(all) {
		return
	}
	at := ev[len(ev)-1].AtMS
	b.c.Response.Events = []Event{newEvent(0, eventRaw, "", b.sc.Scrub(string(all)))}
	b.c.Response.Events[0].AtMS = at
}

// finish records the end once and writes the cassette.
func (b *recBody) finish(at time.Duration, end string) {
	b.once.Do(func() {
		if len(b.buf) > 0 {
			// An unterminated last block (llama.cpp's [DONE] without its
			// blank line), or the tail of a non-SSE body.
			kind, name, data := eventRaw, "", string(b.buf)
			if b.sse {
				kind, name, data = b.event(data)
			}
			b.add(newEvent(at, kind, name, data))
			b.buf = nil
		}
		if !b.sse {
			b.redactRaw()
			b.scrubAcrossReads()
		}
		b.c.Response.End = end
		b.c.Response.EndMS = durMS(at)
		b.rec.write(b.file, b.c)
	})
}

func (b *recBody) Close() error {
	err := b.rc.Close()
	b.mu.Lock()
	defer b.mu.Unlock()
	// Closed before the end of body: a stream that sent [DONE], or a JSON
	// body that is complete, ended cleanly; anything else was cut short.
	end := "reset"
	if b.done || (!b.sse && b.completeJSON()) {
		end = "eof"
	}
	b.finish(time.Since(b.start), end)
	return err
}

// redactRaw redacts the named fields in a non-SSE body. The body is
// recorded as one raw event per read; when it is JSON holding such a field,
// those events become one redacted event at the time of the last read.
func (b *recBody) redactRaw() {
	ev := b.c.Response.Events
	if len(b.rec.fields) == 0 || len(ev) == 0 {
		return
	}
	var all []byte
	for _, e := range ev {
		if e.Raw == nil {
			return // not UTF-8, so not JSON
		}
		all = append(all, *e.Raw...)
	}
	out, changed, ok := b.rec.redactJSON(all)
	if !ok || !changed {
		return
	}
	b.c.Response.Events = []Event{newEvent(0, eventRaw, "", string(out))}
	b.c.Response.Events[0].AtMS = ev[len(ev)-1].AtMS
}

// completeJSON reports whether the raw events recorded so far form one
// complete JSON value.
func (b *recBody) completeJSON() bool {
	var all []byte
	for _, e := range b.c.Response.Events {
		if e.Raw != nil {
			all = append(all, *e.Raw...)
		}
	}
	return json.Valid(bytes.TrimSpace(all))
}
