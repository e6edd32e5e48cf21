package main

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tpsroute/tpsroute"
	"github.com/tpsroute/tpsroute/fallback"
	"github.com/tpsroute/tpsroute/fleet"
	"github.com/tpsroute/tpsroute/route"
)

// options configures a gateway. The zero value of every field is a default.
type options struct {
	// MaxBody is the largest request body accepted, in bytes. Zero means
	// defaultMaxBody.
	MaxBody int64
	// Tokens are the accepted inbound bearer tokens. Empty means no
	// authentication.
	Tokens []string
	// Logger receives one record per request. Nil means silent.
	Logger *slog.Logger
	// Fleet, when not nil, is the fleet the Client joined; /debug/tpsroute
	// shows its status.
	Fleet *fleet.Fleet
	// Metrics, if not nil, serves GET /metrics (the Prometheus exporter).
	Metrics http.Handler
	// History, if not nil, is the debug page's history, already fed with
	// failed attempts through Config.OnAttempt. Nil means a new one that sees
	// no failover.
	History *history
	// MaxInFlight caps the chat-completion requests served at once, from
	// the first byte of the body read to the last byte of the answer; one
	// more is answered 429 with Retry-After at once, before its body is read.
	// Zero means defaultMaxInFlight.
	MaxInFlight int
}

// defaultMaxInFlight is the default cap on concurrent chat-completion
// requests: 1,024 streams cost the gateway about 110 MiB, so the cap bounds
// its memory at about that plus MaxInFlight request bodies, while leaving
// room for far more streams than one provider key usually allows.
const defaultMaxInFlight = 1024

// busyRetryAfter is the Retry-After of a 429 for a full gateway: a stream
// lasts seconds, so a slot is likely free by then.
const busyRetryAfter = "1"

// defaultMaxBody is the default request-size limit: 4 MiB holds a long
// multi-turn prompt with a few images as URLs; base64 images need more.
const defaultMaxBody = 4 << 20

// bodyReadTimeout bounds reading a request body, against slow senders.
const bodyReadTimeout = 30 * time.Second

// gateway is the OpenAI-compatible HTTP front of a tpsroute.Client. It is
// safe for concurrent use.
type gateway struct {
	c        *tpsroute.Client
	deps     []route.Deployment // as configured
	opts     options
	logger   *slog.Logger
	mux      *http.ServeMux
	draining atomic.Bool
	started  time.Time
	bufs     sync.Pool    // *[]byte of copyBufSize, for stream copies
	hist     *history     // the debug page's sparklines and failovers
	inFlight atomic.Int64 // chat-completion requests being served
}

// copyBufSize is the read size of a stream copy: many events at once when
// the provider is ahead of the client.
const copyBufSize = 32 << 10

// newGateway returns the gateway's handler over c.
func newGateway(c *tpsroute.Client, opts options) *gateway {
	if opts.MaxBody <= 0 {
		opts.MaxBody = defaultMaxBody
	}
	if opts.MaxInFlight <= 0 {
		opts.MaxInFlight = defaultMaxInFlight
	}
	g := &gateway{c: c, deps: c.Deployments(), opts: opts, started: time.Now(),
		logger: cmp.Or(opts.Logger, slog.New(slog.DiscardHandler)), hist: cmp.Or(opts.History, newHistory())}
	g.bufs.New = func() any { b := make([]byte, copyBufSize); return &b }
	g.mux = http.NewServeMux()
	g.mux.HandleFunc("POST /v1/chat/completions", g.chat)
	g.mux.HandleFunc("POST /v1/responses", g.responses)
	g.mux.HandleFunc("POST /v1/messages", g.messages)
	g.mux.HandleFunc("POST /v1/embeddings", g.embeddings)
	g.mux.HandleFunc("GET /v1/models", g.models)
	g.mux.HandleFunc("GET /healthz", g.healthz)
	g.mux.HandleFunc("GET /debug/tpsroute", g.debugJSON)
	g.mux.HandleFunc("GET /debug/tpsroute/ui", g.debugUI)
	// A known endpoint asked with another method is a 405 naming the allowed
	// one, not the catch-all's 404.
	g.mux.HandleFunc("/v1/chat/completions", methodNotAllowed(http.MethodPost))
	g.mux.HandleFunc("/v1/responses", methodNotAllowed(http.MethodPost))
	g.mux.HandleFunc("/v1/messages", methodNotAllowed(http.MethodPost))
	g.mux.HandleFunc("/v1/embeddings", methodNotAllowed(http.MethodPost))
	g.mux.HandleFunc("/v1/models", methodNotAllowed(http.MethodGet, http.MethodHead))
	g.mux.HandleFunc("GET /debug/tpsroute/ui.js", g.debugUIScript)
	g.mux.HandleFunc("GET /debug/tpsroute/history", g.debugHistory)
	if opts.Metrics != nil {
		g.mux.Handle("GET /metrics", opts.Metrics)
	}
	g.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		(&tpsroute.HTTPError{Status: http.StatusNotFound, Type: "invalid_request_error", Code: "unknown_url",
			Message: "gateway: unknown endpoint " + r.Method + " " + r.URL.Path}).Write(w)
	})
	return g
}

// methodNotAllowed answers 405 with an Allow header listing allowed, as an
// error in the path's API's shape.
func methodNotAllowed(allowed ...string) http.HandlerFunc {
	allow := strings.Join(allowed, ", ")
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Allow", allow)
		(&tpsroute.HTTPError{Status: http.StatusMethodNotAllowed, Type: "invalid_request_error", Code: "method_not_allowed",
			Message: "gateway: " + r.Method + " " + r.URL.Path + " is not allowed; use " + allow}).ForAPI(apiOf(r.URL.Path)).Write(w)
	}
}

// ServeHTTP authenticates the request, then dispatches it.
func (g *gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if len(g.opts.Tokens) > 0 && r.URL.Path != "/healthz" && !authorized(r, g.opts.Tokens) {
		w.Header().Set("WWW-Authenticate", `Bearer realm="tpsroute-gateway"`)
		(&tpsroute.HTTPError{Status: http.StatusUnauthorized, Type: "invalid_request_error", Code: "invalid_api_key",
			Message: "gateway: missing or invalid bearer token"}).ForAPI(apiOf(r.URL.Path)).Write(w)
		return
	}
	g.mux.ServeHTTP(w, r)
}

// httpError is the answer to a failed call: tpsroute.Client.HTTPError (the
// mapping the library's Transport uses too), with the call option a
// *tpsroute.RequestError or *route.PinError names translated back into
// the gateway's directive.
func (g *gateway) httpError(err error) *tpsroute.HTTPError {
	he := g.c.HTTPError(err)
	var re *tpsroute.RequestError
	var pe *route.PinError
	switch {
	case errors.As(err, &re) && re.Param != "":
		he.Param = directiveOf(re.Param)
		he.Message = "gateway: " + he.Param + ": " + re.Reason
	case errors.As(err, &pe):
		he.Param = "X-Route-Provider"
		he.Message = "gateway: X-Route-Provider: " + he.Message
	}
	return he
}

// directiveOf names the directive that sets the tpsroute call option param
// of a *tpsroute.RequestError; body fields keep their own names.
func directiveOf(param string) string {
	switch param {
	case "region":
		return "X-Route-Region"
	case "providers":
		return "provider.order"
	case "only":
		return "provider.only"
	}
	return param
}

// chat serves POST /v1/chat/completions, or answers 429 when
// options.MaxInFlight requests are being served already.
func (g *gateway) chat(w http.ResponseWriter, r *http.Request) { g.serve(w, r, route.APIChat) }

// serve serves one call of api (api.go has the Responses and Messages
// doors), or answers 429 when options.MaxInFlight requests are being served
// already.
func (g *gateway) serve(w http.ResponseWriter, r *http.Request, api route.API) {
	start := time.Now()
	if n := g.inFlight.Add(1); n > int64(g.opts.MaxInFlight) {
		g.inFlight.Add(-1)
		w.Header().Set("Retry-After", busyRetryAfter)
		g.fail(w, r, start, api, &tpsroute.HTTPError{Status: http.StatusTooManyRequests, Type: "rate_limit_error", Code: "gateway_busy",
			Message: fmt.Sprintf("gateway: %d requests are in flight already, the gateway's limit (-max-in-flight); retry after %s s", g.opts.MaxInFlight, busyRetryAfter)})
		return
	}
	defer g.inFlight.Add(-1)
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(start.Add(bodyReadTimeout))
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, g.opts.MaxBody))
	_ = rc.SetReadDeadline(time.Time{})
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			g.fail(w, r, start, api, &tpsroute.HTTPError{Status: http.StatusRequestEntityTooLarge, Type: "invalid_request_error", Code: "request_too_large",
				Message: fmt.Sprintf("gateway: request body is larger than %d bytes", mbe.Limit)})
			return
		}
		g.fail(w, r, start, api, &tpsroute.HTTPError{Status: http.StatusBadRequest, Type: "invalid_request_error", Message: "gateway: read request body: " + err.Error()})
		return
	}
	d, herr := parseDirectives(body, r.Header)
	if herr != nil {
		g.fail(w, r, start, api, herr)
		return
	}
	if r.Context().Err() != nil {
		g.log(r, start, tpsroute.StatusClientClosedRequest, nil, r.Context().Err()) // gone while its body was read: route nothing
		return
	}
	resp, err := g.c.DoAPI(r.Context(), api, d.body, append(apiOptions(api, r.Header), tpsroute.WithRequest(d.req))...)
	if err != nil {
		if r.Context().Err() != nil {
			g.log(r, start, tpsroute.StatusClientClosedRequest, nil, err) // the client is gone; nobody reads an answer
			return
		}
		g.fail(w, r, start, api, g.httpError(err))
		return
	}
	defer resp.Body.Close()
	h := w.Header()
	o := resp.Outcome()
	h.Set("X-Tpsroute-Deployment", o.Deployment.Key().String())
	h.Set("X-Tpsroute-Attempts", strconv.Itoa(o.AttemptCount))
	if id := resp.Header.Get("X-Request-Id"); id != "" {
		h.Set("X-Upstream-Request-Id", id)
	}
	if resp.Stream {
		err = g.stream(w, r, rc, resp, api)
	} else {
		h.Set("Content-Type", "application/json")
		h.Set("Content-Length", resp.Header.Get("Content-Length"))
		w.WriteHeader(http.StatusOK)
		_, err = io.Copy(w, resp.Body)
	}
	g.log(r, start, http.StatusOK, resp, err)
}

// doneEvent ends a stream that ended cleanly without its own [DONE].
const doneEvent = "data: [DONE]\n\n"

// stream relays the committed SSE stream: every read is written and flushed
// at once (the executor releases whole events only), so nothing is buffered.
// A failure after the first bytes ends the stream with an SSE error event in
// the API's shape (streamError) and no [DONE]; a clean chat stream that
// lacked [DONE] gets one (the Responses and Messages APIs have none).
func (g *gateway) stream(w http.ResponseWriter, r *http.Request, rc *http.ResponseController, res *tpsroute.Response, api route.API) error {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	bp := g.bufs.Get().(*[]byte)
	defer g.bufs.Put(bp)
	buf := *bp
	var tail [24]byte // the last bytes written, to see a [DONE]
	tn := 0
	for {
		n, err := res.Body.Read(buf)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				return werr // the client is gone; the deferred Close cancels upstream
			}
			if werr := rc.Flush(); werr != nil {
				return werr
			}
			if n >= len(tail) {
				tn = copy(tail[:], buf[n-len(tail):n])
			} else {
				keep := min(tn, len(tail)-n)
				copy(tail[:], tail[tn-keep:tn])
				tn = keep + copy(tail[keep:], buf[:n])
			}
		}
		if err == io.EOF {
			if api == route.APIChat && !bytes.Contains(tail[:tn], []byte("[DONE]")) {
				if _, werr := io.WriteString(w, doneEvent); werr != nil {
					return werr
				}
				_ = rc.Flush()
			}
			return nil
		}
		if err != nil {
			if r.Context().Err() != nil {
				return err // the client is gone
			}
			e := g.c.HTTPError(err)
			e.Type, e.Code, e.Param = streamErrorType(api, err), "stream_interrupted", ""
			e.Message = "gateway: the stream failed after it started; the output above is incomplete: " + e.Message
			var ev bytes.Buffer
			if tn > 0 && tail[tn-1] != '\n' {
				ev.WriteString("\n\n")
			}
			streamError(&ev, api, e)
			_, _ = w.Write(ev.Bytes())
			_ = rc.Flush()
			return err
		}
	}
}

// fail writes e in the shape of api's errors (HTTPError.ForAPI: Anthropic's
// on /v1/messages, OpenAI's elsewhere) and logs it.
func (g *gateway) fail(w http.ResponseWriter, r *http.Request, start time.Time, api route.API, e *tpsroute.HTTPError) {
	e = e.ForAPI(api)
	e.Write(w)
	g.log(r, start, e.Status, nil, e)
}

// log records one request without secrets.
func (g *gateway) log(r *http.Request, start time.Time, status int, res *tpsroute.Response, err error) {
	if !g.logger.Enabled(r.Context(), slog.LevelInfo) {
		return
	}
	attrs := []slog.Attr{
		slog.String("method", r.Method), slog.String("path", r.URL.Path),
		slog.Int("status", status), slog.Duration("duration", time.Since(start)),
	}
	if res != nil {
		o := res.Outcome()
		attrs = append(attrs, slog.String("deployment", o.Deployment.Key().String()),
			slog.Int("attempts", o.AttemptCount))
		if s := o.Sample; s.TTFT > 0 {
			attrs = append(attrs, slog.Duration("ttft", s.TTFT), slog.Float64("tps", s.TPS), slog.Int64("output_tokens", s.OutputTokens))
		}
	}
	if err != nil {
		attrs = append(attrs, slog.String("error", g.c.HTTPError(err).Message)) // keys redacted
		// Why a mid-stream failure was not continued (fallback.ContinuationReason).
		if fe := (*fallback.Error)(nil); errors.As(err, &fe) && fe.Continuation() != fallback.NoReason {
			attrs = append(attrs, slog.String("no_continuation", fe.Continuation().String()))
		}
	}
	g.logger.LogAttrs(r.Context(), slog.LevelInfo, "gateway: request", attrs...)
}
