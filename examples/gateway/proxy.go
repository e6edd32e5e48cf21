package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/openai/openai-go/v3"

	"github.com/tpsroute/tpsroute/fallback"
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
}

// defaultMaxBody is the default request-size limit: 4 MiB holds a long
// multi-turn prompt with a few images as URLs; base64 images need more.
const defaultMaxBody = 4 << 20

// bodyReadTimeout bounds reading a request body, against slow senders.
const bodyReadTimeout = 30 * time.Second

// gateway is the OpenAI-compatible HTTP front of an engine. It is safe for
// concurrent use.
type gateway struct {
	eng      *engine
	opts     options
	logger   *slog.Logger
	mux      *http.ServeMux
	draining atomic.Bool
	started  time.Time
	bufs     sync.Pool          // *[]byte of copyBufSize, for stream copies
	ui       *template.Template // the debug page
}

// copyBufSize is the read size of a stream copy: many events at once when
// the provider is ahead of the client.
const copyBufSize = 32 << 10

// newGateway returns the gateway's handler over eng.
func newGateway(eng *engine, opts options) *gateway {
	if opts.MaxBody <= 0 {
		opts.MaxBody = defaultMaxBody
	}
	g := &gateway{eng: eng, opts: opts, logger: opts.Logger, started: time.Now()}
	g.bufs.New = func() any { b := make([]byte, copyBufSize); return &b }
	g.ui = newUITemplate()
	if g.logger == nil {
		g.logger = slog.New(slog.DiscardHandler)
	}
	g.mux = http.NewServeMux()
	g.mux.HandleFunc("POST /v1/chat/completions", g.chat)
	g.mux.HandleFunc("GET /v1/models", g.models)
	g.mux.HandleFunc("GET /healthz", g.healthz)
	g.mux.HandleFunc("GET /debug/tpsroute", g.debugJSON)
	g.mux.HandleFunc("GET /debug/tpsroute/ui", g.debugUI)
	g.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, &apiError{Status: http.StatusNotFound, Type: "invalid_request_error", Code: "unknown_url",
			Message: "gateway: unknown endpoint " + r.Method + " " + r.URL.Path}, eng.redact)
	})
	return g
}

// ServeHTTP authenticates the request, then dispatches it.
func (g *gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if len(g.opts.Tokens) > 0 && r.URL.Path != "/healthz" && !authorized(r, g.opts.Tokens) {
		w.Header().Set("WWW-Authenticate", `Bearer realm="tpsroute-gateway"`)
		writeError(w, &apiError{Status: http.StatusUnauthorized, Type: "invalid_request_error", Code: "invalid_api_key",
			Message: "gateway: missing or invalid bearer token"}, g.eng.redact)
		return
	}
	g.mux.ServeHTTP(w, r)
}

// apiError is an OpenAI-shaped error answer.
type apiError struct {
	Status  int
	Type    string
	Code    string
	Param   string
	Message string
	// RetryAfter, when set, is sent as the Retry-After header: the
	// provider's own, passed on with its 429 or 503.
	RetryAfter string
}

// errorBody is the wire form of an apiError, also used inside SSE error
// events.
func errorBody(e *apiError, redact interface{ Replace(string) string }) []byte {
	var b struct {
		Error struct {
			Message string  `json:"message"`
			Type    string  `json:"type"`
			Param   *string `json:"param"`
			Code    *string `json:"code"`
		} `json:"error"`
	}
	b.Error.Message, b.Error.Type = redact.Replace(e.Message), e.Type
	if e.Param != "" {
		b.Error.Param = &e.Param
	}
	if e.Code != "" {
		b.Error.Code = &e.Code
	}
	out, _ := json.Marshal(b)
	return out
}

func writeError(w http.ResponseWriter, e *apiError, redact interface{ Replace(string) string }) {
	body := errorBody(e, redact)
	if e.RetryAfter != "" {
		w.Header().Set("Retry-After", e.RetryAfter)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(e.Status)
	_, _ = w.Write(body)
}

// failure maps a failed call to its answer: the last attempt's HTTP status
// with the provider's error type and code, or 503 when no deployment gave
// one (all skipped, unreachable or timed out).
func failure(err error) *apiError {
	e := &apiError{Status: http.StatusServiceUnavailable, Type: "service_unavailable", Code: "no_deployment_available",
		Message: "gateway: " + err.Error()}
	var fe *fallback.Error
	if errors.As(err, &fe) {
		for i := len(fe.Attempts) - 1; i >= 0; i-- {
			if s := fe.Attempts[i].Status; s >= 400 {
				e.Status, e.Type, e.Code = s, "upstream_error", ""
				break
			}
		}
	}
	var oe *openai.Error
	if errors.As(err, &oe) && e.Status == oe.StatusCode {
		if oe.Type != "" {
			e.Type = oe.Type
		}
		e.Code, e.Param = oe.Code, oe.Param
		if oe.Response != nil && (e.Status == http.StatusTooManyRequests || e.Status == http.StatusServiceUnavailable) {
			e.RetryAfter = oe.Response.Header.Get("Retry-After")
		}
	}
	return e
}

// chat serves POST /v1/chat/completions.
func (g *gateway) chat(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(start.Add(bodyReadTimeout))
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, g.opts.MaxBody))
	_ = rc.SetReadDeadline(time.Time{})
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			g.fail(w, r, start, &apiError{Status: http.StatusRequestEntityTooLarge, Type: "invalid_request_error", Code: "request_too_large",
				Message: fmt.Sprintf("gateway: request body is larger than %d bytes", mbe.Limit)})
			return
		}
		g.fail(w, r, start, &apiError{Status: http.StatusBadRequest, Type: "invalid_request_error", Message: "gateway: read request body: " + err.Error()})
		return
	}
	d, aerr := parseDirectives(body, r.Header)
	if aerr != nil {
		g.fail(w, r, start, aerr)
		return
	}
	plan, aerr := g.plan(d)
	if aerr != nil {
		g.fail(w, r, start, aerr)
		return
	}
	res, err := g.eng.exec.Do(r.Context(), plan, fallback.Call{
		Body:                 d.body,
		Stream:               d.stream,
		Build:                build,
		NoFallback:           d.req.NoFallbacks,
		EstimatedInputTokens: d.req.ExpectedInputTokens,
	})
	if err != nil {
		if r.Context().Err() != nil {
			g.log(r, start, 499, nil, err) // the client is gone; nobody reads an answer
			return
		}
		g.fail(w, r, start, failure(err))
		return
	}
	defer res.Body.Close()
	h := w.Header()
	dep := res.Deployment()
	h.Set("X-Tpsroute-Deployment", dep.Key().String())
	h.Set("X-Tpsroute-Attempts", strconv.Itoa(attempts(res.Attempts())))
	if id := res.Header.Get("X-Request-Id"); id != "" {
		h.Set("X-Upstream-Request-Id", id)
	}
	if d.stream {
		err = g.stream(w, r, rc, res)
	} else {
		err = g.complete(w, res)
	}
	if err == nil && d.req.CacheKey != "" {
		g.eng.picker.Served(d.req.CacheKey, res.Deployment().Key(), time.Now())
	}
	g.log(r, start, http.StatusOK, res, err)
}

// plan asks the Picker and applies the directives it does not know.
func (g *gateway) plan(d *directives) (route.Plan, *apiError) {
	req := d.req
	for _, c := range []struct {
		param, kind string
		names       []string
	}{
		{"X-Route-Region", "region", req.Regions},
		{"provider.order", "provider", req.Providers},
		{"provider.only", "provider", req.Only},
		{"X-Route-Provider", "provider", []string{d.pinProvider}},
	} {
		for _, n := range c.names {
			if n != "" && !g.eng.known[c.kind+":"+n] {
				return route.Plan{}, badRequest(c.param, "no deployment has the %s %q", c.kind, n)
			}
		}
	}
	pinOnly := d.pinned && req.NoFallbacks
	if pinOnly {
		req.NoFallbacks = false // the pin decides the first; trimmed in shape
	}
	plan, err := g.eng.picker.Pick(req)
	if err != nil {
		for _, m := range append([]string{req.Model}, req.Models...) {
			if !g.eng.serves(m) {
				param := "model"
				if m != req.Model {
					param = "models"
				}
				return plan, &apiError{Status: http.StatusNotFound, Type: "invalid_request_error", Code: "model_not_found", Param: param,
					Message: fmt.Sprintf("gateway: %s: the model %q is not served by this gateway (see GET /v1/models)", param, m)}
			}
		}
		if !(d.pinned && len(plan.Excluded) > 0) {
			return plan, &apiError{Status: http.StatusServiceUnavailable, Type: "service_unavailable", Code: "no_deployment_available",
				Message: "gateway: no deployment satisfies the request's routing directives: " + err.Error()}
		}
	}
	return d.shape(plan, pinOnly || (d.pinned && d.req.NoFallbacks))
}

// attempts counts the attempts that reached a provider, skipped deployments
// not counted. A committed stream's own attempt is only recorded when it
// ends, so it is counted here while none has succeeded yet.
func attempts(as []fallback.Attempt) int {
	n, ok := 0, false
	for _, a := range as {
		if a.Class != fallback.ClassSkipped {
			n++
		}
		ok = ok || (a.Class == fallback.ClassNone && a.Err == nil)
	}
	if !ok {
		n++
	}
	return n
}

// doneEvent ends a stream that ended cleanly without its own [DONE].
const doneEvent = "data: [DONE]\n\n"

// stream relays the committed SSE stream: every read is written and flushed
// at once (the executor releases whole events only), so nothing is buffered.
// A failure after the first bytes ends the stream with an SSE error event and
// no [DONE]; a clean end that lacked [DONE] gets one.
func (g *gateway) stream(w http.ResponseWriter, r *http.Request, rc *http.ResponseController, res *fallback.Result) error {
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
			if !bytes.Contains(tail[:tn], []byte("[DONE]")) {
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
			e := &apiError{Type: "upstream_error", Code: "stream_interrupted",
				Message: "gateway: the stream failed after it started; the output above is incomplete: " + err.Error()}
			var ev bytes.Buffer
			if tn > 0 && tail[tn-1] != '\n' {
				ev.WriteString("\n\n")
			}
			ev.WriteString("data: ")
			ev.Write(errorBody(e, g.eng.redact))
			ev.WriteString("\n\n")
			_, _ = w.Write(ev.Bytes())
			_ = rc.Flush()
			return err
		}
	}
}

// fail writes e and logs it.
func (g *gateway) fail(w http.ResponseWriter, r *http.Request, start time.Time, e *apiError) {
	writeError(w, e, g.eng.redact)
	g.log(r, start, e.Status, nil, errors.New(e.Message))
}

// log records one request without secrets.
func (g *gateway) log(r *http.Request, start time.Time, status int, res *fallback.Result, err error) {
	if !g.logger.Enabled(r.Context(), slog.LevelInfo) {
		return
	}
	attrs := []slog.Attr{
		slog.String("method", r.Method), slog.String("path", r.URL.Path),
		slog.Int("status", status), slog.Duration("duration", time.Since(start)),
	}
	if res != nil {
		attrs = append(attrs, slog.String("deployment", res.Deployment().Key().String()),
			slog.Int("attempts", attempts(res.Attempts())))
		if s := res.Sample(); s.TTFT > 0 {
			attrs = append(attrs, slog.Duration("ttft", s.TTFT), slog.Float64("tps", s.TPS), slog.Int64("output_tokens", s.OutputTokens))
		}
	}
	if err != nil {
		attrs = append(attrs, slog.String("error", g.eng.redact.Replace(err.Error())))
	}
	g.logger.LogAttrs(r.Context(), slog.LevelInfo, "gateway: request", attrs...)
}
