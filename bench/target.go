package bench

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/tpsroute/tpsroute"
	"github.com/tpsroute/tpsroute/fallback"
	"github.com/tpsroute/tpsroute/measure"
	"github.com/tpsroute/tpsroute/route"
	"github.com/tpsroute/tpsroute/tps"
)

// target sends one request and measures it.
type target interface {
	// name is the Result.Target of every request it sends.
	name() string
	// do sends p, measures it from sent, and fills r (all but the schedule).
	do(ctx context.Context, p *Prompt, sent time.Time, r *Result)
}

// caller sends request bodies through Client.Do as streams and drains the
// committed stream into a pooled buffer without decoding it: the executor's
// own tps.Tap times every chunk once, and the harness takes its Sample.
type caller struct {
	c    *tpsroute.Client
	pool *sync.Pool // of *[]byte drain buffers
}

func newCaller(c *tpsroute.Client) caller {
	return caller{c: c, pool: &sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}}
}

// call sends body with opts, drains the answer and fills r's measurement and
// error from sent. It returns the Response of a committed call (its Body
// drained and closed), or nil and Do's error.
func (k caller) call(ctx context.Context, body []byte, sent time.Time, r *Result, opts []tpsroute.CallOption) (*tpsroute.Response, error) {
	res, err := k.c.Do(ctx, body, opts...)
	if err != nil {
		r.fill(tps.Sample{Start: sent}, sent)
		k.failed(ctx, err, r)
		return nil, err
	}
	buf := k.pool.Get().(*[]byte)
	var rerr error
	for rerr == nil {
		_, rerr = res.Body.Read(*buf)
	}
	k.pool.Put(buf)
	_ = res.Body.Close()
	s := res.Sample()
	if s.Start.IsZero() {
		s.Start = sent
	}
	r.fill(s, sent)
	if rerr != io.EOF {
		// A failure after the commit point: Read returns a *fallback.Error,
		// whose last attempt is the committed one.
		a := fallback.Attempt{Err: rerr}
		var fe *fallback.Error
		if errors.As(rerr, &fe) {
			a, _ = fe.Last()
		}
		a.Phase = cmp.Or(s.ErrPhase, a.Phase, tps.PhaseMidStream)
		r.setError(&reported{k.c.HTTPError(rerr).Message, rerr}, errorClass(a), a.Phase)
	}
	return res, nil
}

// failed records an error of Client.Do, a call that never reached its
// commit point. The message is the Client's HTTP answer to it (API keys
// redacted). An unknown model or no deployment left by the options is
// no_deployment; otherwise the last attempt decides the class (errorClass)
// and the phase: none for a deployment skipped (no request sent), connect
// without a status, first_token after a 200 that brought no output, headers
// after an error status.
func (k caller) failed(ctx context.Context, err error, r *Result) {
	he := k.c.HTTPError(err)
	msg := &reported{fmt.Sprintf("bench: HTTP %d: %s", he.Status, he.Message), err}
	var me *tpsroute.ModelError
	var fe *fallback.Error
	switch {
	case ctx.Err() != nil:
		r.setError(msg, "canceled", tps.PhaseConnect)
	case errors.As(err, &fe) && len(fe.Attempts) > 0:
		a, _ := fe.Last()
		phase := tps.PhaseHeaders
		switch {
		case a.Class == fallback.ClassSkipped:
			phase = tps.PhaseNone
		case a.Status == 0:
			phase = tps.PhaseConnect
		case a.Status == 200:
			phase = tps.PhaseFirstToken
		}
		r.setError(msg, errorClass(a), phase)
	case errors.As(err, &me), errors.Is(err, route.ErrNoDeployment):
		r.setError(msg, "no_deployment", tps.PhaseNone)
	default: // a *RequestError, or what the Client reports as a 500
		r.setError(msg, errorClass(fallback.Attempt{Status: he.Status}), tps.PhaseNone)
	}
}

// reported is an error of the Client as the report spells it: its message
// with API keys redacted, still matching the original with errors.Is and As.
type reported struct {
	msg string
	err error
}

func (e *reported) Error() string { return e.msg }
func (e *reported) Unwrap() error { return e.err }

func (r *Result) setError(err error, class string, phase tps.Phase) {
	if errors.Is(err, context.Canceled) {
		class = "canceled"
	}
	r.Error, r.ErrorClass, r.ErrorPhase = err.Error(), class, phaseName(phase)
}

// pinned sends through Client.Do pinned to one deployment without failover,
// and takes the measurement the router recorded: the chunks are timed once,
// by the executor, and never decoded into Go values, so the harness stays
// cheap at thousands of streams per second.
type pinned struct {
	caller
	key   measure.Key
	label string
	model string
	opts  []tpsroute.CallOption
}

func newPinned(c *tpsroute.Client, d route.Deployment, model string) *pinned {
	k := d.Key()
	return &pinned{
		caller: newCaller(c),
		key:    k,
		label:  d.Provider + "/" + d.Region + "/" + k.Model,
		model:  model,
		opts:   []tpsroute.CallOption{tpsroute.WithPin(d.Provider, d.Region), tpsroute.WithoutFallback()},
	}
}

func (t *pinned) name() string { return t.label }

func (t *pinned) do(ctx context.Context, p *Prompt, sent time.Time, r *Result) {
	body := appendBody(make([]byte, 0, 512), t.model, p)
	if res, _ := t.call(ctx, body, sent, r, t.opts); res != nil {
		r.Deployment = t.key
		r.Attempts = len(res.Attempts())
	}
}

// routed sends through Client.Do with the router free to choose and fail
// over, as production traffic would: the routing of NewStreaming, without
// decoding every chunk into openai-go structs. The Sample is the committed
// attempt's; TTFT and E2E still count from sent, so routing and failed
// attempts are included.
type routed struct {
	caller
	model string
}

func newRouted(c *tpsroute.Client, model string) *routed {
	return &routed{caller: newCaller(c), model: model}
}

func (t *routed) name() string { return "routed" }

func (t *routed) do(ctx context.Context, p *Prompt, sent time.Time, r *Result) {
	body := appendBody(make([]byte, 0, 512), t.model, p)
	res, err := t.call(ctx, body, sent, r, nil)
	var fe *fallback.Error
	switch {
	case res != nil:
		r.Deployment = res.Deployment().Key()
		r.Attempts = len(res.Attempts())
	case errors.As(err, &fe):
		r.Attempts = len(fe.Attempts)
	}
}
