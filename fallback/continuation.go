package fallback

import (
	"errors"
	"net/http"
	"strings"

	"github.com/openai/openai-go/v3"

	"github.com/tpsroute/tpsroute/route"
)

// mayContinue reports whether a mid-stream failure of this call could be
// continued: a streaming call whose policy continues and whose plan holds a
// deployment that could take the continuation. Only then do runs keep the
// text they deliver, so that other calls pay nothing for it. It does not
// consult the remembered prefill rejections: a false yes only keeps text.
func (cl *call) mayContinue() bool {
	if !cl.stream || cl.noFallback || cl.choices > 1 || (cl.mid != MidStreamContinue && cl.mid != MidStreamSameModel) {
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

// continuesOn reports whether a stream cut on from may be continued on to
// under the call's policy: to declares assistant prefill (for the requested
// model, on a wildcard deployment), has not rejected a prefill in this
// Executor, and, unless the policy is MidStreamContinue, serves the same
// logical model and revision.
func (cl *call) continuesOn(from, to *route.Deployment) bool {
	if !cl.declaresContinuation(from, to) {
		return false
	}
	_, rejected := cl.e.noPrefill.Load(to.Key())
	return !rejected
}

// declaresContinuation is continuesOn without the remembered rejections.
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
