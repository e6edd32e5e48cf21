package replay

import (
	"bytes"
	"cmp"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"time"
	"unicode/utf8"

	"github.com/tpsroute/tpsroute/internal/payload"
	"github.com/tpsroute/tpsroute/internal/sse"
	"github.com/tpsroute/tpsroute/tps"
)

// CassetteVersion is the cassette format version this package reads and
// writes (docs/CASSETTE.md).
const CassetteVersion = 1

// Cassette is one recorded call: the request, the response status and
// headers, and the body as timed events. As a Script it replays the response
// to any request for its model, byte-exact, with the original timing unless
// Scaled or Fast say otherwise; request contents (max_tokens, prefill) do not
// change it. It plays as the API its Request.Path names (Chat Completions,
// Responses, Messages or embeddings: docs/CASSETTE.md), whose output events
// the faults act on. A request without stream gets the events accumulated
// into the API's answer: one chat.completion, the Responses object, the
// Messages message. A Cassette must not be modified once handed to a Handler;
// it is then safe for concurrent use.
type Cassette struct {
	Version     int              `json:"version"`
	Name        string           `json:"name,omitempty"`
	Description string           `json:"description,omitempty"`
	RecordedAt  string           `json:"recorded_at,omitempty"` // RFC 3339; informational
	Request     CassetteRequest  `json:"request"`
	Response    CassetteResponse `json:"response"`

	fast  bool
	scale float64 // 0 means 1
}

// CassetteRequest is the recorded request. Secrets are redacted. It is a
// plain value: safe for concurrent reads, not for concurrent modification.
type CassetteRequest struct {
	Method  string          `json:"method"`
	Path    string          `json:"path"`
	Headers http.Header     `json:"headers,omitempty"`
	Body    json.RawMessage `json:"body,omitempty"` // the JSON body; a JSON string if the body was not JSON
}

// CassetteResponse is the recorded response. Status 0 with End "reset" and no
// events is a connection reset before headers. It is a plain value: safe for
// concurrent reads, not for concurrent modification.
type CassetteResponse struct {
	Status    int         `json:"status"`
	Headers   http.Header `json:"headers,omitempty"`
	HeadersMS float64     `json:"headers_ms"` // when headers arrived, ms after the request started
	Events    []Event     `json:"events"`
	End       string      `json:"end"`              // "eof" (default), "reset" or "hang"
	EndMS     float64     `json:"end_ms,omitempty"` // when the end happened; 0 means at the last event
}

// Event is one timed piece of a response body. Exactly one of Data, Comment,
// Raw and RawBase64 is set. Data is written as "data: " lines (preceded by
// "event: " when Event is set), Comment as ": " lines (a bare ":" when
// empty), each followed by a blank line; Raw and RawBase64 are written byte
// for byte, for framing quirks and non-SSE bodies. It is a plain value: safe
// for concurrent reads, not for concurrent modification.
type Event struct {
	AtMS      float64 `json:"at_ms"` // ms after the request started
	Event     string  `json:"event,omitempty"`
	Data      *string `json:"data,omitempty"`
	Comment   *string `json:"comment,omitempty"`
	Raw       *string `json:"raw,omitempty"`
	RawBase64 *string `json:"raw_base64,omitempty"` // raw bytes that are not valid UTF-8
}

// CassetteError is a problem with a cassette file: its name (the path, or the
// name given to ParseCassette) and what is wrong, with the position when
// known. It is immutable once returned and safe for concurrent use.
type CassetteError struct {
	Name    string // file path or name
	Where   string // e.g. "line 12, column 5" or "response.events[3]"; may be empty
	Problem string
}

// Error returns "replay: cassette NAME: WHERE: PROBLEM".
func (e *CassetteError) Error() string {
	if e.Where == "" {
		return "replay: cassette " + e.Name + ": " + e.Problem
	}
	return "replay: cassette " + e.Name + ": " + e.Where + ": " + e.Problem
}

// LoadCassette reads and validates the cassette at path. Errors are
// *CassetteError naming the file, except a failure to open it.
func LoadCassette(path string) (*Cassette, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("replay: cassette: %w", err)
	}
	defer f.Close()
	return ParseCassette(f, path)
}

// ParseCassette reads and validates a cassette; name identifies it in errors.
// Unknown fields are errors, so a typo in a hand-edited cassette is caught.
func ParseCassette(r io.Reader, name string) (*Cassette, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, &CassetteError{Name: name, Problem: "read: " + err.Error()}
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var c Cassette
	if err := dec.Decode(&c); err != nil {
		where := ""
		var se *json.SyntaxError
		var te *json.UnmarshalTypeError
		switch {
		case errors.As(err, &se):
			where = position(data, se.Offset)
		case errors.As(err, &te):
			where = position(data, te.Offset)
			if te.Field != "" {
				where += " (" + te.Field + ")"
			}
		}
		return nil, &CassetteError{Name: name, Where: where, Problem: "invalid JSON: " + err.Error()}
	}
	if dec.More() {
		return nil, &CassetteError{Name: name, Problem: "trailing data after the cassette object"}
	}
	if err := c.validate(); err != nil {
		err.Name = name
		return nil, err
	}
	return &c, nil
}

// position returns "line L, column C" of a byte offset.
func position(data []byte, off int64) string {
	off = min(max(off, 0), int64(len(data)))
	line := 1 + bytes.Count(data[:off], []byte("\n"))
	col := off - int64(bytes.LastIndexByte(data[:off], '\n'))
	return fmt.Sprintf("line %d, column %d", line, col)
}

// validate reports the first field of c that breaks the cassette format.
// Its complexity (about 24) is one check per field of the format
// (docs/CASSETTE.md), each with its own message.
func (c *Cassette) validate() *CassetteError {
	bad := func(where, format string, args ...any) *CassetteError {
		return &CassetteError{Where: where, Problem: fmt.Sprintf(format, args...)}
	}
	if c.Version != CassetteVersion {
		return bad("version", "unsupported version %d (this package reads version %d)", c.Version, CassetteVersion)
	}
	r := &c.Response
	switch r.End {
	case "", "eof", "reset", "hang":
	default:
		return bad("response.end", "unknown end %q (want eof, reset or hang)", r.End)
	}
	if r.Status == 0 && (r.End != "reset" || len(r.Events) > 0) {
		return bad("response.status", "status 0 is only valid for a reset before headers (end \"reset\", no events)")
	}
	if r.Status != 0 && (r.Status < 100 || r.Status > 599) {
		return bad("response.status", "invalid HTTP status %d", r.Status)
	}
	if !finite(r.HeadersMS) || r.HeadersMS < 0 {
		return bad("response.headers_ms", "must be a non-negative number of ms")
	}
	last := r.HeadersMS
	for i, e := range r.Events {
		where := fmt.Sprintf("response.events[%d]", i)
		n := 0
		for _, p := range []*string{e.Data, e.Comment, e.Raw, e.RawBase64} {
			if p != nil {
				n++
			}
		}
		if n != 1 {
			return bad(where, "needs exactly one of data, comment, raw or raw_base64 (has %d)", n)
		}
		if e.Event != "" && e.Data == nil {
			return bad(where, "event name %q without data", e.Event)
		}
		if e.RawBase64 != nil {
			if _, err := base64.StdEncoding.DecodeString(*e.RawBase64); err != nil {
				return bad(where, "raw_base64: %v", err)
			}
		}
		if !finite(e.AtMS) || e.AtMS < last {
			return bad(where, "at_ms %v is before the previous event or headers (%v)", e.AtMS, last)
		}
		last = e.AtMS
	}
	if !finite(r.EndMS) || (r.EndMS != 0 && r.EndMS < last) {
		return bad("response.end_ms", "end_ms %v is before the last event (%v)", r.EndMS, last)
	}
	return nil
}

func finite(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) }

// Scaled returns a copy of c that replays with every time multiplied by k
// (2 is twice as slow, 0.5 twice as fast). k <= 0 or NaN means as fast as
// possible.
func (c *Cassette) Scaled(k float64) *Cassette {
	d := *c
	d.fast = !(k > 0)
	d.scale = k
	return &d
}

// Fast returns a copy of c that replays as fast as possible: headers and
// every event at once, keeping the order and the end.
func (c *Cassette) Fast() *Cassette { return c.Scaled(0) }

func (*Cassette) sealed() {}

// ms converts a cassette time to the playback offset.
func (c *Cassette) ms(v float64) time.Duration {
	if c.fast {
		return 0
	}
	k := cmp.Or(c.scale, 1)
	return time.Duration(math.Round(v * k * float64(time.Millisecond)))
}

// protocol returns the API of c's recorded request path (protocolOf): the
// tap's protocol for its events, which decides which are output.
func (c *Cassette) protocol() tps.Protocol { return protocolOf(c.Request.Path) }

// plan builds the playback of c.
func (c *Cassette) plan(*request) *plan {
	r := &c.Response
	p := &plan{status: r.Status, header: http.Header{}, headersAt: c.ms(r.HeadersMS), proto: c.protocol()}
	for k, v := range r.Headers {
		switch http.CanonicalHeaderKey(k) {
		case "Content-Length", "Transfer-Encoding", "Connection", "Content-Encoding":
			continue
		}
		p.header[http.CanonicalHeaderKey(k)] = append([]string(nil), v...)
	}
	if r.Status == 0 {
		p.before = beforeReset
		p.outcome = "reset"
		return p
	}
	p.events = make([]event, 0, len(r.Events))
	var chunk payload.Chunk
	output := func(data []byte) bool { return payload.ParseEvent(uint8(p.proto), data, &chunk) == nil && chunk.Output }
	for _, e := range r.Events {
		ev := event{at: c.ms(e.AtMS)}
		switch {
		case e.Data != nil:
			ev.kind, ev.name, ev.data = eventData, e.Event, *e.Data
			ev.output = output([]byte(ev.data))
		case e.Comment != nil:
			ev.kind, ev.data = eventComment, *e.Comment
		default:
			raw := ""
			if e.Raw != nil {
				raw = *e.Raw
			} else {
				b, _ := base64.StdEncoding.DecodeString(*e.RawBase64)
				raw = string(b)
			}
			ev.kind, ev.data = eventRaw, raw
			sse.ForEachData([]byte(raw), func(d []byte) {
				ev.output = ev.output || output(d)
			})
		}
		p.events = append(p.events, ev)
	}
	if p.proto == tps.ProtocolEmbeddings {
		markAnswer(p)
	}
	p.endAt = c.ms(r.EndMS)
	switch r.End {
	case "reset":
		p.end = endReset
		p.outcome = "cut"
	case "hang":
		p.end = endHang
	}
	return p
}

// markAnswer marks the output event of an embeddings answer, which is
// never streamed: the tap reads the answer whole, as one event, so its
// output is the last raw event of a body that parses as an answer
// (tps.ProtocolEmbeddings.Parse), and SlowFirstToken delays the answer.
func markAnswer(p *plan) {
	var all []byte
	last := -1
	for i, e := range p.events {
		if e.kind == eventRaw {
			all = append(all, e.data...)
			last = i
		}
	}
	var chunk payload.Chunk
	if last >= 0 && payload.ParseEmbeddingsEvent(all, &chunk) == nil && chunk.Output {
		p.events[last].output = true
	}
}

// newEvent returns the cassette event for a kind, name and payload, choosing
// raw_base64 for raw bytes that are not valid UTF-8.
func newEvent(at time.Duration, kind eventKind, name, data string) Event {
	e := Event{AtMS: durMS(at)}
	switch kind {
	case eventData:
		e.Event, e.Data = name, &data
	case eventComment:
		e.Comment = &data
	default:
		if utf8.ValidString(data) {
			e.Raw = &data
		} else {
			b := base64.StdEncoding.EncodeToString([]byte(data))
			e.RawBase64 = &b
		}
	}
	return e
}

// durMS converts a duration to ms rounded to the microsecond.
func durMS(d time.Duration) float64 {
	return math.Round(float64(d)/float64(time.Microsecond)) / 1000
}

// Marshal returns c as indented, diff-friendly JSON ending in a newline.
func (c *Cassette) Marshal() ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(c); err != nil {
		return nil, fmt.Errorf("replay: marshal cassette: %w", err)
	}
	return b.Bytes(), nil
}
