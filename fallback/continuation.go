package fallback

import "strconv"

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
	// without fallback (the root's WithoutFallback).
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
	// Client's life.
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
	// tool calls, reasoning text, a Messages content block that is not text
	// or more than one choice, or no text had been delivered, or it is a
	// Responses API stream (that API has no assistant prefill; the error's
	// message says so).
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
