package telemetry

import (
	"context"
	"errors"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/tpsroute/tpsroute/fallback"
	"github.com/tpsroute/tpsroute/route"
	"github.com/tpsroute/tpsroute/tps"
)

// Call is the telemetry of one routed call: the operation span and the
// operation metrics, fed by the fallback executor through the root's
// executor.Feedback, which calls OutputGap and AttemptEnd. Start it with Telemetry.Start, give it the plan
// with Plan before the executor runs, and End it exactly once. A nil *Call
// does nothing. Its methods are safe for concurrent use.
type Call struct {
	t      *Telemetry
	ctx    context.Context // the caller's context with the call's span
	span   trace.Span
	start  time.Time
	model  string // bounded requested model
	op     string // gen_ai.operation.name
	stream bool
	gaps   bool   // record time_per_output_chunk
	deps   []*dep // per plan index; written by Plan before the executor runs

	mu       sync.Mutex
	last     *dep // the last started attempt's deployment
	prev     prevAttempt
	firstOut time.Time // the first output chunk of any attempt
	in, out  int64     // tokens of every started attempt (billed)
	finish   string
	started  int
	ended    bool
}

type prevAttempt struct {
	ok    bool // set once a started attempt has ended
	class fallback.Class
	dep   *dep
	i     int
}

// Start begins the telemetry of a call for the requested model; stream is
// whether the caller reads a stream (time_to_first_chunk and
// time_per_output_chunk are recorded only then). The returned context
// carries the call's span ("chat {model}") under the caller's: pass it to the
// executor so that each attempt's request carries it. It is
// StartOperation with OperationChat.
func (t *Telemetry) Start(ctx context.Context, model string, stream bool) (context.Context, *Call) {
	return t.StartOperation(ctx, OperationChat, model, stream)
}

// StartOperation is Start for a call of the GenAI operation op
// (gen_ai.operation.name): OperationChat for chat completions, the
// Responses API and the Messages API, OperationEmbeddings for embeddings.
// The span is named "{op} {model}".
func (t *Telemetry) StartOperation(ctx context.Context, op, model string, stream bool) (context.Context, *Call) {
	c := &Call{t: t, start: time.Now(), model: t.Model(model), stream: stream, op: op}
	c.gaps = stream && t.tpoc.Enabled(ctx)
	ctx, c.span = t.tracer.Start(ctx, op+" "+c.model,
		trace.WithSpanKind(trace.SpanKindClient),
		trace.WithTimestamp(c.start),
		trace.WithAttributes(keyOperation.String(op), keyRequestModel.String(c.model)))
	c.ctx = ctx
	return ctx, c
}

// Plan records the plan the executor walks: it resolves the attributes of
// every candidate once and counts the routing decision by the reason of the
// first candidate. It must be called before the executor runs.
func (c *Call) Plan(plan route.Plan) {
	if c == nil {
		return
	}
	c.deps = make([]*dep, len(plan.Deployments))
	for i := range plan.Deployments {
		if d := plan.Deployments[i].Deployment; d != nil {
			c.deps[i] = c.t.resolve(d.Key())
		}
	}
	if len(c.deps) > 0 && c.deps[0] != nil && c.t.decisions.Enabled(c.ctx) {
		d := c.deps[0]
		c.t.decisions.Add(c.ctx, 1, metric.WithAttributes(append(d.attrs[1:len(d.attrs):len(d.attrs)],
			AttrReason.String(plan.Deployments[0].Reason))...))
	}
}

// OutputGap records the gap before one output chunk of the attempt on plan
// entry i: one histogram record, no allocation. It is called for every
// executor.Feedback.OutputGap.
func (c *Call) OutputGap(i int, gap time.Duration) {
	if !c.gaps || i >= len(c.deps) || c.deps[i] == nil {
		return
	}
	c.t.tpoc.Record(context.Background(), gap.Seconds(), c.deps[i].record...)
}

// AttemptEnd records one ended attempt: its counters (an implausible usage
// among them, by its reason), its TTFT, TPS and cost, its span under the
// call's (with a first-output-chunk event), and a failover or continuation
// event on the call's span when it followed a failed attempt. It is called
// from each attempt's executor.Done handle, and with a nil s from
// executor.Feedback.Skip.
func (c *Call) AttemptEnd(i int, a fallback.Attempt, s *tps.Sample) {
	// AttemptEnd is long (about 100 lines, complexity about 31) because it
	// writes one attempt's every metric and span attribute at the one point
	// where the attempt is complete; splitting it would only scatter the list
	// that docs/OBSERVABILITY.md documents.
	if c == nil {
		return
	}
	var d *dep
	if i < len(c.deps) {
		d = c.deps[i]
	}
	if d == nil {
		d = c.t.resolve(a.Key)
	}
	if d == nil {
		return
	}
	ctx := c.ctx
	outcome := outcomeOf(a)
	if c.t.attempts.Enabled(ctx) { // an attribute set costs a sort and a hash: none for a no-op meter
		attrs := append(d.attrs[1:len(d.attrs):len(d.attrs)], AttrOutcome.String(outcome), AttrClass.String(a.Class.String()))
		if a.Phase != tps.PhaseNone {
			attrs = append(attrs, AttrPhase.String(a.Phase.String()))
		}
		c.t.attempts.Add(ctx, 1, metric.WithAttributes(attrs...))
	}
	if a.Rescued {
		c.t.rescues.Add(ctx, 1, d.add...)
	}
	if s != nil && s.Implausible != tps.ImplausibleNone && c.t.implausible.Enabled(ctx) { // as measure counts Stats.ImplausibleUsage
		c.t.implausible.Add(ctx, 1, metric.WithAttributes(append(d.attrs[1:len(d.attrs):len(d.attrs)],
			AttrReason.String(s.Implausible.String()))...))
	}

	started := s != nil && !s.Start.IsZero()
	now := time.Now()
	begin, end := now, now
	if started {
		begin, end = s.Start, s.Start.Add(s.Total)
		if s.TTFT > 0 {
			c.t.attemptTTFC.Record(ctx, s.TTFT.Seconds(), d.own...)
		}
		if s.TPSOK {
			c.t.tps.Record(ctx, s.TPS, d.own...)
		}
		if usd := d.d.Price.Dollars(s.InputTokens, s.CachedTokens, s.OutputTokens); usd > 0 {
			c.t.cost.Add(ctx, usd, d.add...)
		}
	}

	c.mu.Lock()
	prev := c.prev
	if started {
		c.last = d
		c.started++
		c.in += s.InputTokens
		c.out += s.OutputTokens
		if s.FinishReason != "" {
			c.finish = s.FinishReason
		}
		if s.TTFT > 0 {
			if t := s.Start.Add(s.TTFT); c.firstOut.IsZero() || t.Before(c.firstOut) {
				c.firstOut = t
			}
		}
		c.prev = prevAttempt{ok: true, class: a.Class, dep: d, i: i}
	}
	c.mu.Unlock()

	var event string
	if started && prev.ok {
		switch {
		case prev.class == fallback.ClassMidStream && c.stream:
			// Only a streaming caller's call continues; a buffered call
			// restarts from scratch, which is a failover.
			event = "tpsroute.continuation"
			c.t.continuations.Add(ctx, 1, d.add...)
		case prev.class != fallback.ClassNone && prev.class != fallback.ClassCanceled && prev.i != i:
			event = "tpsroute.failover"
			if c.t.failovers.Enabled(ctx) {
				c.t.failovers.Add(ctx, 1, metric.WithAttributes(append(d.attrs[1:len(d.attrs):len(d.attrs)],
					AttrFrom.String(prev.dep.name), AttrClass.String(prev.class.String()))...))
			}
		}
	}

	if !c.span.IsRecording() {
		return
	}
	if event != "" {
		c.span.AddEvent(event, trace.WithTimestamp(begin), trace.WithAttributes(
			AttrFrom.String(prev.dep.name), AttrDeployment.String(d.name), AttrClass.String(prev.class.String())))
	}
	_, sp := c.t.tracer.Start(ctx, "tpsroute.attempt", trace.WithTimestamp(begin), trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithAttributes(AttrDeployment.String(d.name), keyProvider.String(d.d.Provider), AttrRegion.String(d.d.Region),
			keyRequestModel.String(d.model), AttrOutcome.String(outcome), AttrClass.String(a.Class.String())))
	if a.Phase != tps.PhaseNone {
		sp.SetAttributes(AttrPhase.String(a.Phase.String()))
	}
	if a.Status != 0 {
		sp.SetAttributes(attribute.Int("http.response.status_code", a.Status))
	}
	if started {
		if s.TTFT > 0 {
			sp.AddEvent("tpsroute.first_output_chunk", trace.WithTimestamp(s.Start.Add(s.TTFT)))
		}
		sp.SetAttributes(keyInputTokens.Int64(s.InputTokens), keyOutputTokens.Int64(s.OutputTokens))
	}
	if a.Err != nil && a.Class != fallback.ClassSkipped {
		sp.SetStatus(codes.Error, a.Class.String())
	}
	sp.End(trace.WithTimestamp(end))
}

// outcomeOf names an attempt's outcome: ok, skipped, canceled or failed.
func outcomeOf(a fallback.Attempt) string {
	switch a.Class {
	case fallback.ClassNone:
		return "ok"
	case fallback.ClassSkipped:
		return "skipped"
	case fallback.ClassCanceled:
		return "canceled"
	}
	return "failed"
}

// End ends the call with err (nil for a clean end or the caller's early
// Close): the operation metrics with the attributes of the last deployment
// tried, and the call's span. Calls after the first do nothing.
func (c *Call) End(err error) {
	if c == nil {
		return
	}
	c.mu.Lock()
	if c.ended {
		c.mu.Unlock()
		return
	}
	c.ended = true
	d, in, out, first, finish, started := c.last, c.in, c.out, c.firstOut, c.finish, c.started
	c.mu.Unlock()
	now := time.Now()
	ctx := c.ctx
	var attrs []attribute.KeyValue
	if d != nil {
		attrs = d.attrs[:len(d.attrs):len(d.attrs)]
	} else {
		attrs = []attribute.KeyValue{keyOperation.String(c.op), keyProvider.String(Other), keyRequestModel.String(c.model)}
	}
	errType, durAttrs := "", attrs
	if err != nil {
		errType = ErrorType(err)
		durAttrs = append(attrs, keyErrorType.String(errType))
	}
	// Each metric.WithAttributes builds an attribute set (a sort and a
	// hash): only for an instrument that records, not for the no-op
	// meter of a program without an OpenTelemetry SDK.
	if c.t.duration.Enabled(ctx) {
		c.t.duration.Record(ctx, now.Sub(c.start).Seconds(), metric.WithAttributes(durAttrs...))
	}
	if started > 0 && c.t.tokens.Enabled(ctx) {
		c.t.tokens.Record(ctx, in, metric.WithAttributes(append(attrs, keyTokenType.String("input"))...))
		c.t.tokens.Record(ctx, out, metric.WithAttributes(append(attrs, keyTokenType.String("output"))...))
	}
	if c.stream && !first.IsZero() && c.t.ttfc.Enabled(ctx) {
		c.t.ttfc.Record(ctx, first.Sub(c.start).Seconds(), metric.WithAttributes(attrs...))
	}
	if !c.span.IsRecording() {
		c.span.End()
		return
	}
	c.span.SetAttributes(attrs...)
	if started > 0 {
		c.span.SetAttributes(keyInputTokens.Int64(in), keyOutputTokens.Int64(out), attribute.Int("tpsroute.attempts", started))
	}
	if finish != "" {
		c.span.SetAttributes(keyFinishReasons.StringSlice([]string{finish}))
	}
	if c.stream && !first.IsZero() {
		c.span.SetAttributes(keyTTFC.Float64(first.Sub(c.start).Seconds()))
	}
	if errType != "" {
		c.span.SetAttributes(keyErrorType.String(errType))
		c.span.SetStatus(codes.Error, errType)
	}
	c.span.End(trace.WithTimestamp(now))
}

// ErrorType returns the low-cardinality error.type of a call's error: the
// fallback class of the deciding attempt ("rate-limited", "mid-stream",
// "canceled", ...), "no_deployment" when routing found none, "canceled" or
// "timeout" for the caller's context, else "_OTHER".
func ErrorType(err error) string {
	var fe *fallback.Error
	switch {
	case errors.As(err, &fe) && len(fe.Attempts) > 0:
		return fe.Attempts[len(fe.Attempts)-1].Class.String()
	case errors.Is(err, route.ErrNoDeployment):
		return "no_deployment"
	case errors.Is(err, context.Canceled):
		return "canceled"
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	}
	return Other
}
