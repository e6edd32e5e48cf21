package replay

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/tpsroute/tpsroute/internal/answer"
	"github.com/tpsroute/tpsroute/internal/payload"
	"github.com/tpsroute/tpsroute/internal/sse"
	"github.com/tpsroute/tpsroute/tps"
)

// eventKind says how an event is framed on the wire.
type eventKind uint8

const (
	eventData    eventKind = iota // "data: ...\n\n" (optionally preceded by "event: name")
	eventComment                  // ": ...\n\n"
	eventRaw                      // bytes written as they are
)

// event is one SSE event of a planned response, at an offset from the
// request's arrival.
type event struct {
	at     time.Duration
	kind   eventKind
	name   string // SSE "event:" field for data events; "" for none
	data   string
	output bool // carries output: the plan's protocol's parser sets Chunk.Output
}

// chunk reports whether e counts as a chunk for CutAfter, StallAfter,
// MalformedAt and ErrorEventAt: a data event other than [DONE], or a raw
// event. Comments are not chunks.
func (e event) chunk() bool {
	return e.kind == eventRaw || e.kind == eventData && !e.done()
}

// done reports whether e is the "[DONE]" terminator.
func (e event) done() bool { return e.kind == eventData && e.data == "[DONE]" }

// bytes renders e in SSE framing.
func (e event) bytes() []byte { return e.appendTo(nil) }

// appendTo appends e in SSE framing to dst and returns the extended slice.
func (e event) appendTo(dst []byte) []byte {
	switch e.kind {
	case eventComment:
		if e.data == "" {
			return append(dst, ":\n\n"...)
		}
		for line := range strings.SplitSeq(e.data, "\n") {
			dst = append(dst, ": "...)
			dst = append(dst, line...)
			dst = append(dst, '\n')
		}
		return append(dst, '\n')
	case eventRaw:
		return append(dst, e.data...)
	}
	if e.name != "" {
		dst = append(dst, "event: "...)
		dst = append(dst, e.name...)
		dst = append(dst, '\n')
	}
	for line := range strings.SplitSeq(e.data, "\n") {
		dst = append(dst, "data: "...)
		dst = append(dst, line...)
		dst = append(dst, '\n')
	}
	return append(dst, '\n')
}

// endKind says how a planned response ends after its last event.
type endKind uint8

const (
	endEOF   endKind = iota // clean end of body
	endReset                // connection aborted, no terminator
	endHang                 // nothing more until the client goes away
)

func (k endKind) String() string {
	switch k {
	case endReset:
		return "reset"
	case endHang:
		return "hang"
	}
	return "eof"
}

// beforeKind says what happens before response headers.
type beforeKind uint8

const (
	beforeNone  beforeKind = iota
	beforeReset            // abort the connection instead of answering
	beforeHang             // never answer
)

// plan is one fully decided response. Scripts build it; faults rewrite it; the
// handler plays it.
type plan struct {
	status    int
	header    http.Header
	before    beforeKind
	headersAt time.Duration // when headers are sent (or the reset happens)
	body      []byte        // a non-SSE body, written right after headers; nil for SSE
	events    []event
	end       endKind
	endAt     time.Duration // the end happens no earlier than this
	outcome   string        // overrides the derived outcome when set
	faults    []string
	proto     tps.Protocol // the API whose events these are (the tap's protocol for them)
}

// protocolOf returns the API of a request path, as the tpsroute Transport
// tells them apart: .../responses, .../messages, .../embeddings, and chat
// for any other.
func protocolOf(path string) tps.Protocol {
	path = strings.TrimSuffix(path, "/")
	switch {
	case strings.HasSuffix(path, "/responses"):
		return tps.ProtocolResponses
	case strings.HasSuffix(path, "/messages"):
		return tps.ProtocolMessages
	case strings.HasSuffix(path, "/embeddings"):
		return tps.ProtocolEmbeddings
	}
	return tps.ProtocolChat
}

// newStreamPlan returns a 200 SSE plan with the usual headers.
func newStreamPlan() *plan {
	h := http.Header{}
	h.Set("Content-Type", "text/event-stream; charset=utf-8")
	h.Set("Cache-Control", "no-cache")
	return &plan{status: http.StatusOK, header: h}
}

// setStatus turns p into an error answer with a JSON body. Extra headers are
// added; the events are dropped, and so is an outcome an earlier fault set
// (a "cut" that no longer happens), so the status is what the log shows.
func (p *plan) setStatus(code int, body string, extra http.Header) {
	h := http.Header{}
	for k, v := range p.header {
		if strings.EqualFold(k, "Content-Type") || strings.EqualFold(k, "Cache-Control") {
			continue
		}
		h[k] = v
	}
	h.Set("Content-Type", "application/json")
	for k, v := range extra {
		h[http.CanonicalHeaderKey(k)] = append([]string(nil), v...)
	}
	p.status = code
	p.header = h
	p.body = []byte(body)
	p.events = nil
	p.end = endEOF
	p.endAt = p.headersAt
	p.outcome = ""
}

// lastAt returns the offset of the last event, or headersAt with none.
func (p *plan) lastAt() time.Duration {
	at := p.headersAt
	for _, e := range p.events {
		at = max(at, e.at)
	}
	return at
}

// chunkIndex returns the index in p.events of the k-th chunk (1-based), or -1.
func (p *plan) chunkIndex(k int) int {
	n := 0
	for i, e := range p.events {
		if e.chunk() {
			n++
			if n == k {
				return i
			}
		}
	}
	return -1
}

// shiftFrom delays events[i:] and the end by d.
func (p *plan) shiftFrom(i int, d time.Duration) {
	for j := i; j < len(p.events); j++ {
		p.events[j].at += d
	}
	if p.endAt > 0 || i < len(p.events) {
		p.endAt += d
	}
}

// errorBody returns an OpenAI-shaped error body.
func errorBody(message, typ, code string) string {
	b, _ := json.Marshal(map[string]any{"error": map[string]any{
		"message": message, "type": typ, "param": nil, "code": nilIfEmpty(code),
	}})
	return string(b)
}

func nilIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// accumulate turns a streaming plan into the non-streaming answer a client
// that did not ask for a stream gets: headers and the whole chat.completion at
// the time of the last event. A reset or hang stays a reset or hang, before
// headers, since nothing has been sent yet. An error event becomes an error
// status with the error as the body.
func accumulate(p *plan) *plan {
	if p.before != beforeNone || p.body != nil || p.status != http.StatusOK {
		return p
	}
	q := *p
	q.events = nil
	q.headersAt = max(p.lastAt(), p.endAt)
	switch p.end {
	case endReset:
		q.before = beforeReset
		q.outcome = "cut"
		return &q
	case endHang:
		q.before = beforeHang
		return &q
	}
	if p.proto == tps.ProtocolResponses || p.proto == tps.ProtocolMessages {
		return accumulateAPI(p, &q)
	}
	// The answer is tps's accumulation of the chunks (every choice, tool
	// calls, usage), as the tpsroute Client builds its own.
	var (
		acc     answer.Accumulator
		chunk   payload.Chunk
		errBody []byte
		errCode int
		seen    bool
		rawBody strings.Builder
		allRaw  = true
	)
	fold := func(data []byte) {
		if errBody != nil || payload.ParseChunk(data, &chunk) != nil {
			return
		}
		seen = true
		if chunk.Error {
			errBody, errCode = errorAnswer(chunk.ErrorBody)
		} else {
			acc.Add(data)
		}
	}
	for _, e := range p.events {
		switch e.kind {
		case eventComment:
			continue
		case eventRaw:
			rawBody.WriteString(e.data)
			sse.ForEachData([]byte(e.data), fold)
		default:
			allRaw = false
			if !e.done() {
				fold([]byte(e.data))
			}
		}
		if errBody != nil {
			break
		}
	}
	h := p.header.Clone()
	h.Set("Content-Type", "application/json")
	h.Del("Cache-Control")
	q.header = h
	switch {
	case errBody != nil:
		q.status = errCode
		q.body = errBody
		q.outcome = "error_event"
	case !seen && allRaw && len(p.events) > 0:
		// A recorded non-SSE body (a non-streaming cassette): play it as is.
		q.header = p.header.Clone()
		q.body = []byte(rawBody.String())
	default:
		q.body = acc.JSON()
	}
	q.end = endEOF
	return &q
}

// accumulateAPI finishes q, the non-streaming answer to p, a Responses or
// Messages stream: the API's own answer, as the tpsroute Client folds it
// (answer.ResponsesAnswer: the response object of response.completed;
// answer.MessagesAnswer: the message), or, for an error event, the error as
// an error status in the API's shape (Anthropic's {"type":"error",
// "error":{...}} with 529 for overloaded_error). A recorded body that is no
// such stream is played as is.
func accumulateAPI(p, q *plan) *plan {
	var (
		stream []byte
		chunk  payload.Chunk
		errRaw []byte
	)
	for _, e := range p.events {
		b := e.bytes()
		stream = append(stream, b...)
		if errRaw == nil {
			sse.ForEachData(b, func(data []byte) {
				if errRaw == nil && payload.ParseEvent(uint8(p.proto), data, &chunk) == nil && chunk.Error {
					errRaw = append([]byte{}, chunk.ErrorBody...)
					if len(errRaw) == 0 {
						errRaw = []byte("{}")
					}
				}
			})
		}
	}
	q.header = p.header.Clone()
	q.header.Set("Content-Type", "application/json")
	q.header.Del("Cache-Control")
	q.end = endEOF
	fold := answer.ResponsesAnswer
	if p.proto == tps.ProtocolMessages {
		fold = answer.MessagesAnswer
	}
	switch body, err := fold(stream); {
	case errRaw != nil && p.proto == tps.ProtocolMessages:
		// errRaw is the event's data, {"type":"error","error":{...}}, or
		// its error object.
		var e struct {
			Type  string          `json:"type"`
			Error json.RawMessage `json:"error"`
		}
		_ = json.Unmarshal(errRaw, &e)
		if len(e.Error) > 0 {
			errRaw = e.Error
			_ = json.Unmarshal(errRaw, &e)
		}
		q.status, q.body, q.outcome = http.StatusInternalServerError, []byte(`{"type":"error","error":`+string(errRaw)+`}`), "error_event"
		switch e.Type {
		case "overloaded_error":
			q.status = 529
		case "rate_limit_error":
			q.status = http.StatusTooManyRequests
		}
	case errRaw != nil:
		q.body, q.status = errorAnswer(errRaw)
		q.outcome = "error_event"
	case err == nil:
		q.body = body
	default:
		q.header = p.header.Clone()
		q.body = stream
	}
	return q
}

// errorAnswer returns the body and status an in-stream error becomes in a
// non-streaming answer: {"error": raw} with the error's numeric code when it
// is an HTTP status, else 500. raw is the value of the chunk's "error" key.
func errorAnswer(raw []byte) ([]byte, int) {
	status := http.StatusInternalServerError
	var e struct {
		Code json.RawMessage `json:"code"`
	}
	if json.Unmarshal(raw, &e) == nil {
		if n, err := strconv.Atoi(strings.Trim(string(e.Code), `"`)); err == nil && n >= 400 && n < 600 {
			status = n
		}
	}
	return []byte(`{"error":` + string(raw) + `}`), status
}
