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
	"github.com/tpsroute/tpsroute/route"
	"github.com/tpsroute/tpsroute/tps"
)

// target sends the requests of one Report target through Client.Do as
// streams, pinned to one deployment without failover (Compare mode) or with
// the router free to choose and fail over, as production traffic would
// (Routed mode). It drains the committed stream into a pooled buffer without
// decoding it: the executor's own tps.Tap times every chunk once and the
// harness takes its Sample, so it stays cheap at thousands of streams per
// second. TTFT and E2E count from the harness's send, so routing and failed
// attempts are included.
type target struct {
	c     *tpsroute.Client
	pool  *sync.Pool // of *[]byte drain buffers
	name  string     // the Result.Target of every request it sends
	model string
	opts  []tpsroute.CallOption
}

func newTarget(c *tpsroute.Client, name, model string, opts ...tpsroute.CallOption) *target {
	return &target{c: c, pool: &sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }},
		name: name, model: model, opts: opts}
}

// newPinned returns the target of deployment d in Compare mode.
func newPinned(c *tpsroute.Client, d route.Deployment, model string) *target {
	return newTarget(c, d.Provider+"/"+d.Region+"/"+d.Key().Model, model,
		tpsroute.WithPin(d.Provider, d.Region), tpsroute.WithoutFallback())
}

// newRouted returns the target of Routed mode.
func newRouted(c *tpsroute.Client, model string) *target { return newTarget(c, "routed", model) }

// do sends p, measures it from sent, and fills r (all but the schedule):
// the answer's measurement and deployment, or the error, and the attempts.
func (t *target) do(ctx context.Context, p *Prompt, sent time.Time, r *Result) {
	res, err := t.c.Do(ctx, appendBody(make([]byte, 0, 512), t.model, p), t.opts...)
	if err != nil {
		r.fill(tps.Sample{Start: sent}, sent)
		t.failed(ctx, err, r)
		var fe *fallback.Error
		if errors.As(err, &fe) {
			r.Attempts = len(fe.Attempts)
		}
		return
	}
	buf := t.pool.Get().(*[]byte)
	var rerr error
	for rerr == nil {
		_, rerr = res.Body.Read(*buf)
	}
	t.pool.Put(buf)
	_ = res.Body.Close()
	o := res.Outcome()
	r.Deployment = o.Deployment.Key()
	r.Attempts = len(o.Attempts)
	s := o.Sample
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
		r.setError(&reported{t.c.HTTPError(rerr).Message, rerr}, errorClass(a), a.Phase)
	}
}

// failed records an error of Client.Do, a call that never reached its
// commit point. The message is the Client's HTTP answer to it (API keys
// redacted). An unknown model or no deployment left by the options is
// no_deployment; otherwise the last attempt decides the class (errorClass)
// and the phase: none for a deployment skipped (no request sent), connect
// without a status, first_token after a 200 that brought no output, headers
// after an error status.
func (t *target) failed(ctx context.Context, err error, r *Result) {
	he := t.c.HTTPError(err)
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
