package fallback

import (
	"errors"
	"net/http"
	"strconv"
	"strings"

	"github.com/openai/openai-go/v3"

	"github.com/tpsroute/tpsroute/route"
	"github.com/tpsroute/tpsroute/tps"
)

// mayContinue reports whether a mid-stream failure of this call could be
// continued: a streaming call whose policy continues and whose plan holds a
// deployment that could take the continuation. Only then do runs keep the
// text they deliver, so that other calls pay nothing for it. It does not
// consult the remembered prefill rejections: a false yes only keeps text.
func (cl *call) mayContinue() bool {
	if !cl.stream || cl.noFallback || cl.choices > 1 || cl.protocol != tps.ProtocolChat || (cl.mid != MidStreamContinue && cl.mid != MidStreamSameModel) {
		return false
	}
	for i := range cl.plan {
		for j := range cl.plan {
			// The cut deployment itself is a target (selfContinuation)
			// when it may be tried twice.
			if (i != j || cl.selfContinuation()) && cl.declaresContinuation(cl.plan[i].Deployment, cl.plan[j].Deployment) {
				return true
			}
		}
	}
	return false
}

// selfContinuation reports whether the call's budgets leave room for a
// continuation on the deployment that was cut: a second attempt on one
// deployment and a second attempt in the call.
func (cl *call) selfContinuation() bool {
	return cl.e.opts.AttemptsPerDeployment > 1 && cl.maxAttempts > 1
}

// unsupported returns why the stream of prev cannot be continued whatever
// the plan: the policy, or what the stream carried; NoReason when it can.
func (cl *call) unsupported(prev *run) ContinuationReason {
	switch {
	case cl.mid == MidStreamError || cl.noFallback:
		return ContinuationOff
	case cl.protocol != tps.ProtocolChat: // a continuation is a chat prefill
		return ContinuationUnsupported
	case prev.toolCalls || prev.multi || prev.reasoning || cl.choices > 1: // choices interleave (docs/STREAM_QUIRKS.md Q21)
		return ContinuationUnsupported
	case !cl.keepText:
		// mayContinue found no target; with the budgets aside, prev's own
		// deployment may be one.
		if cl.declaresContinuation(prev.d, prev.d) {
			return ContinuationBudget
		}
		return ContinuationNoTarget
	}
	return NoReason
}

// barred returns why candidate i, which declares a continuation, may not
// take one now: a remembered prefill rejection, a spent budget, or an
// earlier failure in this call; NoReason when it may.
func (cl *call) barred(i int, d *route.Deployment) ContinuationReason {
	if _, rejected := cl.e.noPrefill.Load(d.Key()); rejected {
		return ContinuationRejected
	}
	if cl.real >= cl.maxAttempts || cl.slots[i].tries >= cl.e.opts.AttemptsPerDeployment {
		return ContinuationBudget
	}
	if !cl.eligible(i) {
		return ContinuationUnavailable
	}
	return NoReason
}

// declaresContinuation reports whether a stream cut on from may be
// continued on to under the call's policy: to declares assistant prefill
// (for the requested model, on a wildcard deployment) and, unless the policy
// is MidStreamContinue, serves the same logical model and revision.
// Remembered rejections and budgets are barred's.
func (cl *call) declaresContinuation(from, to *route.Deployment) bool {
	return to.Capabilities.AssistantPrefill &&
		(cl.mid == MidStreamContinue || to.Model == from.Model && to.Revision == from.Revision)
}

// prefillRejected reports whether a continuation attempt failed because the
// provider refused the assistant prefill: a 400 or 422 before the stream
// whose error names the assistant message or the prefill.
func prefillRejected(a Attempt) bool {
	if a.Status != http.StatusBadRequest && a.Status != http.StatusUnprocessableEntity {
		return false
	}
	var api *openai.Error
	if !errors.As(a.Err, &api) {
		return false
	}
	m := strings.ToLower(api.Message + " " + api.Param + " " + api.Code)
	return strings.Contains(m, "prefill") || strings.Contains(m, "assistant")
}

// ContinuationReason says why a stream that failed after its commit point
// was not continued (see MidStreamPolicy): every mid-stream *Error carries
// one, which Error.Continuation returns and its message names. The zero
// value, NoReason, is the reason of an error that is not a mid-stream
// failure. It is a plain value, safe for concurrent use.
type ContinuationReason uint8

const (
	// NoReason: the error is not a mid-stream failure.
	NoReason ContinuationReason = iota
	// ContinuationOff: the policy is MidStreamError, or the call was made
	// with Call.NoFallback.
	ContinuationOff
	// ContinuationUncommitted: nothing had reached the caller (a
	// non-streaming call, or a stream that failed in the read that brought
	// its first output), so the call failed over instead of continuing,
	// and no deployment was left.
	ContinuationUncommitted
	// ContinuationNoTarget: no deployment of the plan that the policy
	// allows (the same model, unless MidStreamContinue) declares assistant
	// prefill.
	ContinuationNoTarget
	// ContinuationRejected: the target rejected the prefill (a 400 or 422
	// naming the assistant message or the prefill), now or earlier in the
	// Executor's life.
	ContinuationRejected
	// ContinuationBudget: the attempt budget is spent, in the call
	// (Options.MaxAttempts) or on each target (AttemptsPerDeployment).
	ContinuationBudget
	// ContinuationUnavailable: every target was refused by its breaker, a
	// cooldown or its limiters, or had failed earlier in the call.
	ContinuationUnavailable
	// ContinuationFailed: a continuation was sent and failed for another
	// reason than a rejected prefill (the Error's Continuations list it).
	ContinuationFailed
	// ContinuationUnsupported: the stream cannot be continued: it carried
	// tool calls, reasoning text or more than one choice, or no text had
	// been delivered, or it is not a chat stream (a Responses or Messages
	// stream: Call.Protocol).
	ContinuationUnsupported
	// ContinuationPointless: the failure would only repeat: a
	// content-policy stop or an exceeded context length.
	ContinuationPointless
)

// String returns a short lower-case name such as "rejected", or "" for
// NoReason.
func (r ContinuationReason) String() string {
	names := [...]string{"", "off", "uncommitted", "no-target", "rejected", "budget", "unavailable", "failed", "unsupported", "pointless"}
	if int(r) < len(names) {
		return names[r]
	}
	return "reason(" + strconv.Itoa(int(r)) + ")"
}

// rank orders the reasons a continuation's targets gave: the call's reason
// is the most telling one, an attempt that was made before a target that
// was passed over.
func (r ContinuationReason) rank() int {
	switch r {
	case ContinuationRejected:
		return 5
	case ContinuationFailed:
		return 4
	case ContinuationBudget:
		return 3
	case ContinuationUnavailable:
		return 2
	case ContinuationNoTarget:
		return 1
	}
	return 0
}

// worse returns whichever of r and s says more (rank).
func (r ContinuationReason) worse(s ContinuationReason) ContinuationReason {
	if s.rank() > r.rank() {
		return s
	}
	return r
}
