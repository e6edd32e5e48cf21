package replay

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
)

// Transport returns an in-memory http.RoundTripper that runs h for each
// request without any network: the response body is an io.Pipe fed by the
// handler as it plays its script. The round trip returns when the handler
// sends headers, honours the request's context (cancellation ends the handler
// and fails a pending body read with the context's error), and closing the
// body ends the handler too, so nothing leaks. Because all waiting is on
// timers and channels, the transport works inside testing/synctest bubbles,
// where a script's sleeps are virtual. A reset before headers fails the round
// trip with an error wrapping ErrConnReset; a cut mid-stream fails the body
// read with io.ErrUnexpectedEOF. The RoundTripper is safe for concurrent use.
func (h *Handler) Transport() http.RoundTripper {
	return memTransport{h: h}
}

// Hosts is an in-memory http.RoundTripper for several simulated providers:
// it sends each request to the Handler of the request URL's host, through
// that Handler's Transport, and fails a request for any other host with an
// error naming it. Give each deployment a base URL at its own made-up host
// ("http://fast.test/v1") and one http.Client reaches them all, without a
// socket. A Hosts is safe for concurrent use once built.
type Hosts map[string]*Handler

// RoundTrip sends req to the Handler of req.URL.Host.
func (hs Hosts) RoundTrip(req *http.Request) (*http.Response, error) {
	h, ok := hs[req.URL.Host]
	if !ok {
		if req.Body != nil {
			_ = req.Body.Close()
		}
		return nil, fmt.Errorf("replay: no Handler for host %q", req.URL.Host)
	}
	return h.Transport().RoundTrip(req)
}

type memTransport struct{ h *Handler }

func (t memTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if err := req.Context().Err(); err != nil {
		if req.Body != nil {
			_ = req.Body.Close()
		}
		return nil, err
	}
	ctx, cancel := context.WithCancel(req.Context())
	pr, pw := io.Pipe()
	w := &memWriter{header: http.Header{}, ready: make(chan struct{}), pw: pw, ctx: ctx}
	sr := req.WithContext(ctx)
	sr.RequestURI = req.URL.RequestURI()
	sr.RemoteAddr = "127.0.0.1:1"
	if sr.Body == nil {
		sr.Body = http.NoBody
	}
	sr.Host = cmp.Or(sr.Host, req.URL.Host)
	stop := context.AfterFunc(ctx, func() {
		pw.CloseWithError(context.Cause(ctx))
	})
	go func() {
		defer sr.Body.Close() // a RoundTripper closes the request body
		defer cancel()
		defer stop()
		defer w.finish()
		defer func() {
			if v := recover(); v != nil && v != http.ErrAbortHandler {
				w.fail(fmt.Errorf("replay: handler panic: %v", v))
			} else if v != nil {
				w.abort()
			}
		}()
		t.h.ServeHTTP(w, sr)
	}()
	select {
	case <-w.ready:
	case <-req.Context().Done():
		cancel()
		return nil, context.Cause(req.Context())
	}
	if w.err != nil {
		cancel()
		return nil, w.err
	}
	resp := &http.Response{
		Status:        strconv.Itoa(w.code) + " " + http.StatusText(w.code),
		StatusCode:    w.code,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        w.sent,
		Body:          &memBody{pr: pr, cancel: cancel},
		ContentLength: -1,
		Request:       req,
	}
	if cl := w.sent.Get("Content-Length"); cl != "" {
		if n, err := strconv.ParseInt(cl, 10, 64); err == nil {
			resp.ContentLength = n
		}
	}
	return resp, nil
}

// memBody is the client's end of the pipe; Close ends the handler.
type memBody struct {
	pr     *io.PipeReader
	cancel context.CancelFunc
}

func (b *memBody) Read(p []byte) (int, error) { return b.pr.Read(p) }

func (b *memBody) Close() error {
	b.cancel()
	return b.pr.Close()
}

// memWriter is the handler's http.ResponseWriter in memory.
type memWriter struct {
	ctx    context.Context // the handler's request context
	header http.Header
	pw     *io.PipeWriter

	once    sync.Once
	ready   chan struct{} // closed when headers are sent, or the round trip fails
	code    int
	sent    http.Header
	err     error // the round trip's error, set before ready closes
	aborted atomic.Bool
}

func (w *memWriter) Header() http.Header { return w.header }

func (w *memWriter) WriteHeader(code int) {
	w.once.Do(func() {
		w.code = code
		w.sent = w.header.Clone()
		close(w.ready)
	})
}

func (w *memWriter) Write(b []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	return w.pw.Write(b)
}

// Flush sends headers; the pipe has no buffer to flush.
func (w *memWriter) Flush() { w.WriteHeader(http.StatusOK) }

// fail ends the round trip with err if headers were not sent yet, otherwise
// the body read with err.
func (w *memWriter) fail(err error) {
	w.once.Do(func() {
		w.err = err
		close(w.ready)
	})
	w.aborted.Store(true)
	w.pw.CloseWithError(err)
}

// abort is the in-memory connection reset: before headers the round trip
// fails with ErrConnReset, after them the body read fails with
// io.ErrUnexpectedEOF.
func (w *memWriter) abort() {
	sentHeaders := true
	w.once.Do(func() {
		sentHeaders = false
		w.err = fmt.Errorf("replay: in-memory transport: %w", ErrConnReset)
		close(w.ready)
	})
	w.aborted.Store(true)
	if sentHeaders {
		w.pw.CloseWithError(io.ErrUnexpectedEOF)
	} else {
		w.pw.CloseWithError(ErrConnReset)
	}
}

// finish ends the body cleanly after the handler returned, unless aborted.
func (w *memWriter) finish() {
	w.WriteHeader(http.StatusOK)
	switch {
	case w.aborted.Load():
	case w.ctx.Err() != nil:
		// The client went away: its read fails with the context's error,
		// as over a real connection, never with a clean EOF.
		w.pw.CloseWithError(context.Cause(w.ctx))
	default:
		_ = w.pw.Close()
	}
}
