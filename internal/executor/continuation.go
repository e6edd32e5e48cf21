package executor

import (
	"errors"
	"net/http"
	"strings"
	"unicode"

	"github.com/tpsroute/tpsroute/fallback"

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
	if !cl.stream || cl.noFallback || cl.choices > 1 || !prefills(cl.protocol) || (cl.mid != fallback.MidStreamContinue && cl.mid != fallback.MidStreamSameModel) {
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

// prefills reports whether a stream of protocol p can be continued by an
// assistant prefill: Chat Completions and the Messages API, whose requests
// may end with an assistant message to continue. The Responses API has
// none.
func prefills(p tps.Protocol) bool {
	return p == tps.ProtocolChat || p == tps.ProtocolMessages
}

// prefill returns what a continuation of prev starts from: the text the
// caller has read, scrubbed again whole so that no credential of prev's
// deployment goes to the next one inside the prefill, and the continuation
// request, the call's body with that text as the final assistant message
// (Options.Prefill for chat, MessagesPrefill for Messages). A Messages
// prefill leaves out the text's trailing whitespace, which Anthropic
// refuses; the returned splice drops it from the continuation's events if
// they repeat it. It returns the reason instead when there is no text or
// no body.
func (cl *call) prefill(prev *run) (text string, body []byte, sp *msgSplice, why fallback.ContinuationReason) {
	text = prev.sc.Scrub(string(prev.text[:prev.relText]))
	if len(text) == 0 {
		return "", nil, nil, fallback.ContinuationUnsupported
	}
	var err error
	if cl.protocol == tps.ProtocolMessages && prev.msg != nil {
		sent := strings.TrimRightFunc(text, unicode.IsSpace)
		body, err = MessagesPrefill(cl.body, sent)
		sp = prev.msg.continued(text[len(sent):])
	} else {
		body, err = cl.e.opts.Prefill(cl.body, text)
	}
	if err != nil {
		return "", nil, nil, fallback.ContinuationFailed
	}
	return text, body, sp, fallback.NoReason
}

// selfContinuation reports whether the call's budgets leave room for a
// continuation on the deployment that was cut: a second attempt on one
// deployment and a second attempt in the call.
func (cl *call) selfContinuation() bool {
	return cl.e.opts.AttemptsPerDeployment > 1 && cl.maxAttempts > 1
}

// unsupported returns why the stream of prev cannot be continued whatever
// the plan: the policy, or what the stream carried; NoReason when it can.
func (cl *call) unsupported(prev *run) fallback.ContinuationReason {
	switch {
	case cl.mid == fallback.MidStreamError || cl.noFallback:
		return fallback.ContinuationOff
	case !prefills(cl.protocol): // a continuation is an assistant prefill
		return fallback.ContinuationUnsupported
	case prev.toolCalls || prev.multi || prev.reasoning || cl.choices > 1: // choices interleave (docs/STREAM_QUIRKS.md Q21)
		return fallback.ContinuationUnsupported
	case prev.msg != nil && prev.msg.other: // a tool_use or thinking block without deltas
		return fallback.ContinuationUnsupported
	case !cl.keepText:
		// mayContinue found no target; with the budgets aside, prev's own
		// deployment may be one.
		if cl.declaresContinuation(prev.d, prev.d) {
			return fallback.ContinuationBudget
		}
		return fallback.ContinuationNoTarget
	}
	return fallback.NoReason
}

// barred returns why candidate i, which declares a continuation, may not
// take one now: a remembered prefill rejection, a spent budget, or an
// earlier failure in this call; NoReason when it may.
func (cl *call) barred(i int, d *route.Deployment) fallback.ContinuationReason {
	if _, rejected := cl.e.noPrefill.Load(d.Key()); rejected {
		return fallback.ContinuationRejected
	}
	if cl.real >= cl.maxAttempts || cl.slots[i].tries >= cl.e.opts.AttemptsPerDeployment {
		return fallback.ContinuationBudget
	}
	if !cl.eligible(i) {
		return fallback.ContinuationUnavailable
	}
	return fallback.NoReason
}

// declaresContinuation reports whether a stream cut on from may be
// continued on to under the call's policy: to declares assistant prefill
// (for the requested model, on a wildcard deployment) and, unless the policy
// is MidStreamContinue, serves the same logical model and revision.
// Remembered rejections and budgets are barred's.
func (cl *call) declaresContinuation(from, to *route.Deployment) bool {
	return to.Capabilities.AssistantPrefill &&
		(cl.mid == fallback.MidStreamContinue || to.Model == from.Model && to.Revision == from.Revision)
}

// prefillRejected reports whether a continuation attempt failed because the
// provider refused the assistant prefill: a 400 or 422 before the stream
// whose error names the assistant message or the prefill.
func prefillRejected(a fallback.Attempt) bool {
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

// rank orders the reasons a continuation's targets gave: the call's reason
// is the most telling one, an attempt that was made before a target that
// was passed over.
func rank(r fallback.ContinuationReason) int {
	switch r {
	case fallback.ContinuationRejected:
		return 5
	case fallback.ContinuationFailed:
		return 4
	case fallback.ContinuationBudget:
		return 3
	case fallback.ContinuationUnavailable:
		return 2
	case fallback.ContinuationNoTarget:
		return 1
	}
	return 0
}

// worse returns whichever of r and s says more (rank).
func worse(r, s fallback.ContinuationReason) fallback.ContinuationReason {
	if rank(s) > rank(r) {
		return s
	}
	return r
}
