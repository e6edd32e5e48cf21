package main

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/tpsroute/tpsroute"
	"github.com/tpsroute/tpsroute/fallback"
	"github.com/tpsroute/tpsroute/measure"
	"github.com/tpsroute/tpsroute/route"
	"github.com/tpsroute/tpsroute/tps"
)

// engine is the routing core of the gateway: the same composition as
// tpsroute.New (measure.Registry -> route.Picker -> fallback.Executor), built
// from the shared tpsroute.Config. The gateway composes it itself because it
// needs the raw SSE bytes of the committed attempt together with the
// deployment that answered and the attempts made (fallback.Result), which the
// root Client does not expose at the HTTP level. An engine is safe for
// concurrent use.
type engine struct {
	reg    *measure.Registry
	exec   *fallback.Executor
	picker *route.Picker
	deps   []route.Deployment
	known  map[string]bool   // "provider:NAME" and "region:NAME" of every deployment
	redact *strings.Replacer // replaces every upstream API key with [REDACTED]
	logger *slog.Logger
}

// newEngine builds the engine for cfg. transport, when not nil, replaces
// cfg.HTTPClient's transport (the demo and tests use in-memory providers).
func newEngine(cfg tpsroute.Config, transport http.RoundTripper) (*engine, error) {
	if len(cfg.Deployments) == 0 {
		return nil, errors.New("gateway: the config has no deployments")
	}
	e := &engine{logger: cfg.Logger}
	if e.logger == nil {
		e.logger = slog.New(slog.DiscardHandler)
	}
	mo := cfg.Measure
	mo.Prices = make(map[measure.Key]measure.Price, len(cfg.Deployments))
	var keys []string
	for _, d := range cfg.Deployments {
		if !d.IsWildcard() && d.Price != (route.Price{}) {
			mo.Prices[d.Key()] = measure.Price{Input: d.Price.Input, CachedInput: d.Price.CachedInput, Output: d.Price.Output}
		}
		if len(d.APIKey) >= 4 {
			keys = append(keys, d.APIKey, "[REDACTED]")
		}
	}
	if mo.Classify == nil {
		mo.Classify = classify
	}
	e.redact = strings.NewReplacer(keys...)
	e.reg = measure.NewRegistry(mo)

	base := transport
	if base == nil && cfg.HTTPClient != nil {
		base = cfg.HTTPClient.Transport
	}
	if base == nil {
		base = upstreamTransport()
	}
	fo := cfg.Fallback
	fo.Transport = &inFlightTransport{next: base, reg: e.reg}
	fo.Tokenizer = cfg.Tokenizer
	fo.Logger = cfg.Logger
	fo.OnAttempt = cfg.OnAttempt
	fo.Observe = func(d route.Deployment, s tps.Sample) { e.reg.Record(d.Key(), s) }
	e.exec = fallback.New(fo)

	ro := cfg.Route
	ro.Health = e.exec
	ro.Policy = cfg.Policy
	ro.SLO = cfg.SLO
	p, err := route.NewPicker(cfg.Deployments, e.reg, ro)
	if err != nil {
		return nil, err
	}
	e.picker = p
	e.deps = p.Deployments()
	e.known = make(map[string]bool)
	for _, d := range e.deps {
		e.known["provider:"+d.Provider] = true
		e.known["region:"+d.Region] = true
	}
	return e, nil
}

// serves reports whether some deployment serves the logical model (a
// "model@revision" is matched on its model and revision).
func (e *engine) serves(model string) bool {
	name, rev := route.ParseModel(model)
	for i := range e.deps {
		d := &e.deps[i]
		if d.IsWildcard() && rev == "" {
			return true
		}
		if d.Model == name && (rev == "" || d.Revision == rev) {
			return true
		}
	}
	return false
}

// classify names the error class of a failed sample for measure: the
// caller's cancellation and a lost hedge are cancellations, deadlines are
// timeouts.
func classify(err error) string {
	switch {
	case errors.Is(err, context.Canceled), errors.Is(err, fallback.ErrHedgeLost):
		return measure.ClassCanceled
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, fallback.ErrHeadersTimeout),
		errors.Is(err, fallback.ErrTTFTTimeout), errors.Is(err, fallback.ErrStall):
		return measure.ClassTimeout
	}
	return measure.ClassOther
}

// attemptKey is the context key carrying an attempt's measure.Key from the
// build function to inFlightTransport.
type attemptKey struct{}

// inFlightTransport counts each attempt in measure's in-flight gauge from the
// moment it is sent until its response body is closed.
type inFlightTransport struct {
	next http.RoundTripper
	reg  *measure.Registry
}

func (t *inFlightTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	k, ok := req.Context().Value(attemptKey{}).(measure.Key)
	if !ok {
		return t.next.RoundTrip(req)
	}
	end := t.reg.Begin(k)
	resp, err := t.next.RoundTrip(req)
	if err != nil || resp.Body == nil {
		end()
		return resp, err
	}
	resp.Body = &endOnClose{ReadCloser: resp.Body, end: end}
	return resp, nil
}

// endOnClose calls end once, when the body is closed.
type endOnClose struct {
	io.ReadCloser
	end func()
}

func (b *endOnClose) Close() error {
	err := b.ReadCloser.Close()
	if b.end != nil {
		b.end()
		b.end = nil
	}
	return err
}

// status is the breaker, cooldown and limiter state of k now.
func (e *engine) status(k measure.Key) route.Status { return e.exec.Status(k, time.Now()) }

// upstreamTransport is the gateway's transport to providers when the config
// sets none: http.DefaultTransport's dialer, proxy and TLS settings, with room
// for many concurrent streams per provider and larger read buffers, so a
// burst of events is read in one system call.
func upstreamTransport() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConns = 1024
	t.MaxIdleConnsPerHost = 256
	t.ReadBufferSize = 64 << 10
	t.WriteBufferSize = 16 << 10
	return t
}
