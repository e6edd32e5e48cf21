package replay

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/tpsroute/tpsroute/route"
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

// Handler is a fake OpenAI-compatible provider as an http.Handler. It serves
// POST .../chat/completions (streaming and not) and GET .../models, choosing
// the Script by the request body's model. A Handler is safe for concurrent
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
	case strings.HasSuffix(r.URL.Path, "/chat/completions"):
		if r.Method != http.MethodPost {
			writeJSON(w, http.StatusMethodNotAllowed, errorBody("replay: method "+r.Method+" not allowed", "invalid_request_error", ""))
			return
		}
	default:
		writeJSON(w, http.StatusNotFound, errorBody("replay: unknown path "+r.URL.Path, "invalid_request_error", "not_found"))
		return
	}
	raw, err := io.ReadAll(r.Body)
	if err != nil {
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
		Header: h.redactHeader(r.Header), Messages: len(body.Messages), LastRole: body.lastRole(),
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

	req := &request{body: body, attempt: n, elapsed: start.Sub(h.created), start: start, state: st}
	p := script.plan(req)
	if !body.Stream {
		p = accumulate(p)
	}
	h.mu.Lock()
	a.Faults = p.faults
	h.mu.Unlock()
	h.play(w, r, p, a, start)
}

func (h *Handler) redactHeader(in http.Header) http.Header {
	return route.RedactHeader(in, h.redact...)
}

func (h *Handler) serveModels(w http.ResponseWriter) {
	names := make([]string, 0, len(h.scripts))
	for m := range h.scripts {
		names = append(names, m)
	}
	sort.Strings(names)
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
	for _, m := range names {
		list.Data = append(list.Data, model{ID: m, Object: "model", Created: h.created.Unix(), OwnedBy: "replay"})
	}
	b, _ := json.Marshal(list)
	writeJSON(w, http.StatusOK, string(b))
}

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

// play sends p, honouring its timing, the request's context and shutdown.
func (h *Handler) play(w http.ResponseWriter, r *http.Request, p *plan, a *Attempt, start time.Time) {
	ctx := r.Context()
	outcome := p.outcome
	status := 0
	chunks := 0
	defer func() {
		h.mu.Lock()
		a.Status = status
		a.Outcome = outcome
		a.Chunks = chunks
		a.End = time.Now()
		h.mu.Unlock()
	}()
	var timer *time.Timer
	// Events already due are written together into buf, as a server writing
	// into a buffered writer does: buf is written and flushed only before a
	// sleep, when it reaches flushSize, and at the end, so a stream with no
	// delays leaves in a few writes while a delayed event still leaves at its
	// time. dirty says headers or bytes await a flush; pending counts the
	// chunks in buf, logged as sent once written.
	var (
		buf     []byte
		dirty   bool
		pending int
	)
	fl, _ := w.(http.Flusher)
	flush := func() bool {
		if !dirty {
			return true
		}
		if len(buf) > 0 {
			if _, err := w.Write(buf); err != nil {
				return false
			}
			buf = buf[:0]
		}
		if fl != nil {
			fl.Flush()
		}
		dirty = false
		if pending > 0 {
			chunks += pending
			pending = 0
			h.mu.Lock()
			a.Chunks = chunks
			h.mu.Unlock()
		}
		return true
	}
	// wait sleeps until the offset at, flushing first; it reports why it
	// stopped early.
	wait := func(at time.Duration) string {
		select {
		case <-ctx.Done():
			return "canceled"
		case <-h.done:
			return "closed"
		default:
		}
		d := time.Until(start.Add(at))
		if d <= 0 {
			return ""
		}
		if !flush() {
			return "canceled"
		}
		if d = time.Until(start.Add(at)); d <= 0 {
			return ""
		}
		if timer == nil {
			timer = time.NewTimer(d)
		} else {
			timer.Reset(d)
		}
		select {
		case <-timer.C:
			return ""
		case <-ctx.Done():
			timer.Stop()
			return "canceled"
		case <-h.done:
			timer.Stop()
			return "closed"
		}
	}
	// hang waits for the client to go away; on shutdown it aborts.
	hang := func(beforeHeaders bool) {
		select {
		case <-ctx.Done():
		case <-h.done:
			abort(w, beforeHeaders)
		}
	}
	switch p.before {
	case beforeReset:
		if why := wait(p.headersAt); why != "" {
			outcome = why
			if why == "closed" {
				abort(w, true)
			}
			return
		}
		if outcome == "" {
			outcome = "reset"
		}
		abort(w, true)
		return
	case beforeHang:
		outcome = "hang"
		hang(true)
		return
	}
	if why := wait(p.headersAt); why != "" {
		outcome = why
		if why == "closed" {
			abort(w, true)
		}
		return
	}
	for k, v := range p.header {
		w.Header()[k] = v
	}
	if p.body != nil {
		w.Header().Set("Content-Length", strconv.Itoa(len(p.body)))
	}
	w.WriteHeader(p.status)
	status = p.status
	h.mu.Lock()
	a.Status = status
	h.mu.Unlock()
	if outcome == "" {
		outcome = "ok"
		if p.status != http.StatusOK {
			outcome = strconv.Itoa(p.status)
		}
	}
	if p.body != nil {
		_, _ = w.Write(p.body)
		return
	}
	dirty = true // the headers
	for _, e := range p.events {
		if why := wait(e.at); why != "" {
			outcome = why
			if why == "closed" {
				abort(w, false)
			}
			return
		}
		if buf == nil {
			if b, ok := h.bufs.Get().(*[]byte); ok {
				buf = (*b)[:0]
			} else {
				buf = make([]byte, 0, flushSize+4<<10)
			}
			defer func() {
				if cap(buf) <= 4*flushSize { // an outsized event's buffer is dropped
					h.bufs.Put(&buf)
				}
			}()
		}
		buf = e.appendTo(buf)
		dirty = true
		if e.chunk() {
			pending++
		}
		if len(buf) >= flushSize && !flush() {
			outcome = "canceled"
			return
		}
	}
	if why := wait(p.endAt); why != "" {
		outcome = why
		if why == "closed" {
			abort(w, false)
		}
		return
	}
	// Whatever is buffered goes out before the end, so a cut or a hang
	// acts after exactly the planned events.
	if !flush() {
		outcome = "canceled"
		return
	}
	switch p.end {
	case endReset:
		if outcome == "ok" {
			outcome = "reset"
		}
		abort(w, false)
	case endHang:
		outcome = "hang"
		hang(false)
	}
}
