package replay

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"io"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/tpsroute/tpsroute/internal/redact"
	"github.com/tpsroute/tpsroute/tps"
)

// Script decides how a fake provider answers one model's requests. It is
// implemented by *Profile (synthetic), *Cassette (recorded) and the result of
// WithFaults; the interface is sealed. Scripts are safe for concurrent use
// once handed to a Handler.
type Script interface {
	plan(r *request) *plan
	sealed()
}

// ErrConnReset is the error a Handler.Transport round trip wraps when a script
// resets the connection before sending headers.
var ErrConnReset = errors.New("replay: connection reset by peer")

// Option configures a Handler or Server at construction. Options are pure
// functions of their arguments, safe for concurrent use.
type Option func(*Handler)

// RedactHeaders adds request header names (case-insensitive) whose values the
// attempt log replaces with "REDACTED", besides every credential header
// (route.IsCredentialName: Authorization, Api-Key, X-Goog-Api-Key, Cookie,
// Set-Cookie, any name with auth, key, token, secret, password, signature or
// credential in it).
func RedactHeaders(names ...string) Option {
	return func(h *Handler) {
		h.redact = append(h.redact, names...)
	}
}

// Attempt is one request as the handler saw it: a log entry for assertions
// such as "the second attempt came at least 2 s after a 429". Attempts
// returns copies, safe to use concurrently with the handler.
type Attempt struct {
	N            int         // attempt number for this model, from 1
	Time         time.Time   // arrival (time.Now, virtual inside synctest)
	End          time.Time   // when the answer ended; zero while in flight
	Model        string      // the request body's model
	Method, Path string      // e.g. "POST", "/v1/chat/completions"
	Header       http.Header // request headers with secrets redacted
	Messages     int         // number of messages
	LastRole     string      // role of the last message
	Stream       bool        // the request asked for a stream
	IncludeUsage bool        // stream_options.include_usage
	MaxTokens    int         // max_completion_tokens or max_tokens; 0 if unset
	Status       int         // HTTP status sent; 0 if no headers were sent
	Outcome      string      // "ok", the status code ("429"), "reset", "cut", "hang", "error_event", "canceled" or "closed"
	Chunks       int         // chunks (data events other than [DONE], raw events) sent
	Faults       []string    // names of the faults applied
}

// Handler is a fake LLM provider as an http.Handler. It serves POST
// .../chat/completions, .../responses and .../messages (streaming and not),
// POST .../embeddings (a cassette recorded on it) and GET .../models,
// choosing the Script by the request body's model. A Handler is safe for concurrent
// use.
type Handler struct {
	scripts map[string]Script
	created time.Time
	redact  []string

	mu       sync.Mutex
	attempts []*Attempt
	models   map[string]*modelState

	closed bool           // guarded by mu; set by shutdown
	wg     sync.WaitGroup // in-flight ServeHTTP calls
	done   chan struct{}  // closed by shutdown

	bufs sync.Pool // *[]byte write buffers for play, reused across answers
}

// modelState is the mutable state a Handler keeps per model.
type modelState struct {
	mu       sync.Mutex
	attempts int
	prefixes map[uint64]int
}

// cache returns the cached prompt tokens for c (its longest previously seen
// message prefix, rounded down to block) and remembers c's prefixes.
func (s *modelState) cache(c *chatRequest, block int) int {
	hashes, tokens := c.prefixHashes()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.prefixes == nil {
		s.prefixes = map[uint64]int{}
	}
	cached := 0
	for i, h := range hashes {
		if _, ok := s.prefixes[h]; ok {
			cached = tokens[i]
		}
		s.prefixes[h] = tokens[i]
	}
	return cached / block * block
}

// NewHandler returns a Handler serving scripts by model name. Requests for
// other models get a 404 with an OpenAI-shaped model_not_found error and are
// logged as attempts with outcome "404". The map is
// copied; a nil Script value panics. The handler's clock (for Phase.After,
// During and DownFor) starts now.
func NewHandler(scripts map[string]Script, opts ...Option) *Handler {
	h := &Handler{
		scripts: make(map[string]Script, len(scripts)),
		created: time.Now(),
		models:  map[string]*modelState{},
		done:    make(chan struct{}),
	}
	for m, s := range scripts {
		if s == nil {
			panic("replay: nil Script for model " + strconv.Quote(m))
		}
		h.scripts[m] = s
	}
	for _, o := range opts {
		o(h)
	}
	return h
}

// Attempts returns a copy of the attempt log in arrival order. Entries of
// requests still in flight show their progress so far.
func (h *Handler) Attempts() []Attempt {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]Attempt, len(h.attempts))
	for i, a := range h.attempts {
		out[i] = *a
		out[i].Header = a.Header.Clone()
		out[i].Faults = slices.Clone(a.Faults)
	}
	return out
}

// shutdown ends every in-flight and future answer with an aborted connection.
func (h *Handler) shutdown() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.closed {
		h.closed = true
		close(h.done)
	}
}

// ServeHTTP answers one request. To abort a connection (resets, cuts,
// shutdown) it hijacks it before headers or panics with http.ErrAbortHandler
// after them, as net/http expects; under an httptest.ResponseRecorder such a
// script panics, so use Transport or a Server for them.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		abort(w, true)
		return
	}
	h.wg.Add(1)
	h.mu.Unlock()
	defer h.wg.Done()
	start := time.Now()
	switch {
	case strings.HasSuffix(r.URL.Path, "/models") && r.Method == http.MethodGet:
		h.serveModels(w)
		return
	case strings.HasSuffix(r.URL.Path, "/chat/completions"), protocolOf(r.URL.Path) != tps.ProtocolChat:
		// The Responses and Messages paths are served by scripts in their
		// styles (Style Responses, Messages) and cassettes recorded on
		// them, the embeddings path by cassettes recorded on it.
		if r.Method != http.MethodPost {
			writeJSON(w, http.StatusMethodNotAllowed, errorBody("replay: method "+r.Method+" not allowed", "invalid_request_error", ""))
			return
		}
	default:
		writeJSON(w, http.StatusNotFound, errorBody("replay: unknown path "+r.URL.Path, "invalid_request_error", "not_found"))
		return
	}
	raw, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxRequestBody))
	if err != nil {
		if tooLarge := new(http.MaxBytesError); errors.As(err, &tooLarge) {
			writeJSON(w, http.StatusRequestEntityTooLarge, errorBody("replay: the request body is over "+strconv.Itoa(maxRequestBody>>20)+" MiB", "invalid_request_error", "request_too_large"))
		}
		return
	}
	var body chatRequest
	if err := json.Unmarshal(raw, &body); err != nil {
		writeJSON(w, http.StatusBadRequest, errorBody("replay: the request body is not valid JSON: "+err.Error(), "invalid_request_error", ""))
		return
	}
	script, ok := h.scripts[body.Model]
	h.mu.Lock()
	st := h.models[body.Model]
	if st == nil {
		st = &modelState{}
		h.models[body.Model] = st
	}
	st.attempts++
	n := st.attempts
	mt, _ := body.maxTokens()
	a := &Attempt{
		N: n, Time: start, Model: body.Model, Method: r.Method, Path: r.URL.Path,
		Header: redact.Header(r.Header, h.redact...), Messages: len(body.Messages), LastRole: body.lastRole(),
		Stream: body.Stream, IncludeUsage: body.includeUsage(), MaxTokens: mt,
	}
	h.attempts = append(h.attempts, a)
	if !ok {
		a.Status, a.Outcome, a.End = http.StatusNotFound, "404", time.Now()
	}
	h.mu.Unlock()
	if !ok {
		writeJSON(w, http.StatusNotFound, errorBody("replay: the model `"+body.Model+"` does not exist", "invalid_request_error", "model_not_found"))
		return
	}

	req := &request{body: body, attempt: n, elapsed: start.Sub(h.created), start: start, state: st, proto: protocolOf(r.URL.Path), header: a.Header}
	p := script.plan(req)
	if !body.Stream {
		p = accumulate(p)
	}
	h.mu.Lock()
	a.Faults = p.faults
	h.mu.Unlock()
	h.play(w, r, p, a, start)
}

func (h *Handler) serveModels(w http.ResponseWriter) {
	type model struct {
		ID      string `json:"id"`
		Object  string `json:"object"`
		Created int64  `json:"created"`
		OwnedBy string `json:"owned_by"`
	}
	list := struct {
		Object string  `json:"object"`
		Data   []model `json:"data"`
	}{Object: "list", Data: []model{}}
	for _, m := range slices.Sorted(maps.Keys(h.scripts)) {
		list.Data = append(list.Data, model{ID: m, Object: "model", Created: h.created.Unix(), OwnedBy: "replay"})
	}
	b, _ := json.Marshal(list)
	writeJSON(w, http.StatusOK, string(b))
}

// maxRequestBody is the largest request body the Handler reads: a test's
// prompt of a few million tokens fits, and a client that sends without end
// gets 413 rather than the test process's memory.
const maxRequestBody = 64 << 20

func writeJSON(w http.ResponseWriter, code int, body string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(code)
	_, _ = io.WriteString(w, body)
}

// aborter is implemented by the in-memory transport's ResponseWriter.
type aborter interface {
	abort()
}

// abort ends the connection without a clean end of response. Before headers
// a TCP connection is hijacked and closed with a reset; after headers the
// handler panics with http.ErrAbortHandler, so net/http drops the connection
// without the chunked terminator.
func abort(w http.ResponseWriter, beforeHeaders bool) {
	if a, ok := w.(aborter); ok {
		a.abort()
		return
	}
	if beforeHeaders {
		if hj, ok := w.(http.Hijacker); ok {
			if conn, _, err := hj.Hijack(); err == nil {
				if l, ok := conn.(interface{ SetLinger(int) error }); ok {
					_ = l.SetLinger(0)
				}
				_ = conn.Close()
				return
			}
		}
	}
	panic(http.ErrAbortHandler)
}

// flushSize is the size at which play writes its buffer of due events
// without waiting for a sleep, as a full bufio.Writer would.
const flushSize = 32 << 10

// play sends p, honouring its timing, the request's context and shutdown,
// and records how it ended in a.
func (h *Handler) play(w http.ResponseWriter, r *http.Request, p *plan, a *Attempt, start time.Time) {
	pl := &player{h: h, w: w, ctx: r.Context(), a: a, start: start, outcome: p.outcome}
	pl.fl, _ = w.(http.Flusher)
	defer pl.done()
	if !pl.headers(p) || p.body != nil {
		return
	}
	if !pl.events(p.events) {
		return
	}
	pl.end(p)
}

// player is one attempt being played: the response writer, the buffer of
// events already due, and what the attempt log will say of it. It is used by
// the handler goroutine of one request.
//
// Events already due are written together into buf, as a server writing into
// a buffered writer does: buf is written and flushed only before a sleep,
// when it reaches flushSize, and at the end, so a stream with no delays
// leaves in a few writes while a delayed event still leaves at its time.
type player struct {
	h     *Handler
	w     http.ResponseWriter
	fl    http.Flusher // nil if w cannot flush
	ctx   context.Context
	a     *Attempt
	start time.Time
	timer *time.Timer // reused by every wait

	buf     []byte // from h.bufs once the first event is due; see done
	dirty   bool   // headers or bytes await a flush
	pending int    // chunks in buf, counted as sent once written

	status  int
	chunks  int
	outcome string // Attempt.Outcome
	ended   bool   // done has run
}

// abort records the attempt's end, so that its log entry is complete before
// the client sees the connection go (a test reads Attempts as soon as its
// read fails), then aborts the response.
func (pl *player) abort(beforeHeaders bool) {
	pl.done()
	abort(pl.w, beforeHeaders)
}

// stop is why a wait ended before its time.
type stop int

const (
	stopNone     stop = iota // the time came
	stopCanceled             // the client went away (or a write failed)
	stopClosed               // the Handler is shutting down
)

// done records the attempt's end and returns the buffer to the pool, once.
func (pl *player) done() {
	if pl.ended {
		return
	}
	pl.ended = true
	h := pl.h
	h.mu.Lock()
	pl.a.Status = pl.status
	pl.a.Outcome = pl.outcome
	pl.a.Chunks = pl.chunks
	pl.a.End = time.Now()
	h.mu.Unlock()
	if b := pl.buf; b != nil && cap(b) <= 4*flushSize { // an outsized event's buffer is dropped
		h.bufs.Put(&b)
	}
}

// flush writes and flushes what is buffered; false means the write failed.
func (pl *player) flush() bool {
	if !pl.dirty {
		return true
	}
	if len(pl.buf) > 0 {
		if _, err := pl.w.Write(pl.buf); err != nil {
			return false
		}
		pl.buf = pl.buf[:0]
	}
	if pl.fl != nil {
		pl.fl.Flush()
	}
	pl.dirty = false
	if pl.pending > 0 {
		pl.chunks += pl.pending
		pl.pending = 0
		pl.h.mu.Lock()
		pl.a.Chunks = pl.chunks
		pl.h.mu.Unlock()
	}
	return true
}

// wait sleeps until the offset at, flushing first; it reports why it stopped
// early.
func (pl *player) wait(at time.Duration) stop {
	select {
	case <-pl.ctx.Done():
		return stopCanceled
	case <-pl.h.done:
		return stopClosed
	default:
	}
	d := time.Until(pl.start.Add(at))
	if d <= 0 {
		return stopNone
	}
	if !pl.flush() {
		return stopCanceled
	}
	if d = time.Until(pl.start.Add(at)); d <= 0 {
		return stopNone
	}
	if pl.timer == nil {
		pl.timer = time.NewTimer(d)
	} else {
		pl.timer.Reset(d)
	}
	select {
	case <-pl.timer.C:
		return stopNone
	case <-pl.ctx.Done():
		pl.timer.Stop()
		return stopCanceled
	case <-pl.h.done:
		pl.timer.Stop()
		return stopClosed
	}
}

// waitOrStop waits until at and reports whether the time came; otherwise it
// records why in the outcome and, on shutdown, aborts the response.
func (pl *player) waitOrStop(at time.Duration, beforeHeaders bool) bool {
	switch pl.wait(at) {
	case stopCanceled:
		pl.outcome = "canceled"
		return false
	case stopClosed:
		pl.outcome = "closed"
		pl.abort(beforeHeaders)
		return false
	}
	return true
}

// hang waits for the client to go away; on shutdown it aborts.
func (pl *player) hang(beforeHeaders bool) {
	pl.outcome = "hang"
	select {
	case <-pl.ctx.Done():
	case <-pl.h.done:
		pl.abort(beforeHeaders)
	}
}

// headers plays what comes before the body: a reset or hang instead of
// headers, or the status and headers at their time, then a whole
// non-streamed body. It reports whether the events follow.
func (pl *player) headers(p *plan) bool {
	switch p.before {
	case beforeReset:
		if pl.waitOrStop(p.headersAt, true) {
			pl.outcome = cmp.Or(pl.outcome, "reset")
			pl.abort(true)
		}
		return false
	case beforeHang:
		pl.hang(true)
		return false
	}
	if !pl.waitOrStop(p.headersAt, true) {
		return false
	}
	for k, v := range p.header {
		pl.w.Header()[k] = v
	}
	if p.body != nil {
		pl.w.Header().Set("Content-Length", strconv.Itoa(len(p.body)))
	}
	pl.w.WriteHeader(p.status)
	pl.status = p.status
	pl.h.mu.Lock()
	pl.a.Status = pl.status
	pl.h.mu.Unlock()
	if pl.outcome == "" {
		pl.outcome = "ok"
		if p.status != http.StatusOK {
			pl.outcome = strconv.Itoa(p.status)
		}
	}
	if p.body != nil {
		_, _ = pl.w.Write(p.body)
		return false
	}
	pl.dirty = true // the headers
	return true
}

// events plays the stream's events at their times and reports whether all
// were written.
func (pl *player) events(events []event) bool {
	for _, e := range events {
		if !pl.waitOrStop(e.at, false) {
			return false
		}
		if pl.buf == nil {
			if b, ok := pl.h.bufs.Get().(*[]byte); ok {
				pl.buf = (*b)[:0]
			} else {
				pl.buf = make([]byte, 0, flushSize+4<<10)
			}
		}
		pl.buf = e.appendTo(pl.buf)
		pl.dirty = true
		if e.chunk() {
			pl.pending++
		}
		if len(pl.buf) >= flushSize && !pl.flush() {
			pl.outcome = "canceled"
			return false
		}
	}
	return true
}

// end plays the stream's end at its time: whatever is buffered goes out
// first, so a cut or a hang acts after exactly the planned events.
func (pl *player) end(p *plan) {
	if !pl.waitOrStop(p.endAt, false) {
		return
	}
	if !pl.flush() {
		pl.outcome = "canceled"
		return
	}
	switch p.end {
	case endReset:
		if pl.outcome == "ok" {
			pl.outcome = "reset"
		}
		pl.abort(false)
	case endHang:
		pl.hang(false)
	}
}
