package fallback

import (
	"context"
	"errors"
	"slices"
	"strconv"

	"github.com/tpsroute/tpsroute/measure"
)

// Class is what the executor made of one failed attempt: whether it retried the
// same deployment, moved on, or stopped. The package documentation has the full
// table of faults and classes. It is a plain value, safe for concurrent use.
type Class uint8

const (
	// ClassNone means the attempt succeeded.
	ClassNone Class = iota
	// ClassRetry retries the same deployment once after a jittered backoff, then
	// moves on: 500, 502, 504, other 5xx except 503, 409, and transport errors
	// such as a connection reset before the response headers.
	ClassRetry
	// ClassNext moves to the next deployment without retrying this one in the
	// call: 503, 529, 408, a 4xx that names no fault of the request (405,
	// 415, 421, ...: the deployment's own), the headers and TTFT deadlines, an
	// empty stream, and an in-stream error before the first output chunk.
	ClassNext
	// ClassRateLimited is a 429 rate limit: the deployment cools down until its
	// Retry-After (or a jittered backoff when absent) and the call moves on.
	// It is not counted as a breaker failure.
	ClassRateLimited
	// ClassAuth is 401, 403, or another 4xx whose body says the API key is
	// invalid (Gemini answers 400): the breaker trips, the deployment cools
	// down for Options.PenaltyCooldown, and the call moves on.
	ClassAuth
	// ClassUnavailable is a 404 (model not found), a 410, a 402, another 4xx
	// whose code is model_not_found, or a 429 insufficient_quota: the
	// deployment cools down for Options.PenaltyCooldown and the call moves on.
	ClassUnavailable
	// ClassInvalid is an invalid request, a 400, 422 or 431 (the caller's
	// headers), or a request whose attempt could not be built from the body:
	// the call stops, since every deployment would reject the same request.
	// It is a CallerFault.
	ClassInvalid
	// ClassPolicy is a content-policy rejection: the call stops, with the
	// provider's reason in the error. It is a CallerFault.
	ClassPolicy
	// ClassContextLength is context_length_exceeded: the call moves on only to
	// deployments whose ContextWindow is larger than this one's. It is a
	// CallerFault.
	ClassContextLength
	// ClassCanceled is the caller's own cancellation or deadline: the call stops
	// and no breaker counts it.
	ClassCanceled
	// ClassMidStream is a failure after the commit point: a cut, a stall, an
	// in-stream error or a malformed chunk after output was delivered.
	ClassMidStream
	// ClassSkipped means the deployment was not tried: its breaker was open, it
	// was cooling down, or it had no rate-limit budget or in-flight slot.
	ClassSkipped
)

// String returns a short lower-case name such as "rate-limited".
func (c Class) String() string {
	names := [...]string{"ok", "retry", "next", "rate-limited", "auth", "unavailable", "invalid", "policy", "context-length", "canceled", "mid-stream", "skipped"}
	if int(c) < len(names) {
		return names[c]
	}
	return "class(" + strconv.Itoa(int(c)) + ")"
}

// Timeout reports whether the attempt ended at a deadline: the caller's
// (context.DeadlineExceeded) or one of the executor's (ErrHeadersTimeout,
// ErrTTFTTimeout, ErrStall, ErrMaxDuration). Its Class says what the
// executor did about it: ClassNext before the commit point, ClassMidStream
// after it, ClassCanceled for the caller's deadline.
func (a Attempt) Timeout() bool {
	deadlines := []error{context.DeadlineExceeded, ErrHeadersTimeout, ErrTTFTTimeout, ErrStall, ErrMaxDuration}
	return slices.ContainsFunc(deadlines, func(d error) bool { return errors.Is(a.Err, d) })
}

// ErrorClass names the attempt's class the Client records it with: ""
// for a success, measure.ClassCaller for a CallerFault, measure.ClassTimeout
// when Timeout is true, measure.ClassCanceled for the rest of ClassCanceled
// (the caller, an early Close, a lost hedge), measure.ClassOther otherwise.
// measure counts neither ClassCaller nor ClassCanceled in the deployment's
// error rate.
func (a Attempt) ErrorClass() string {
	switch {
	case a.Class == ClassNone && a.Err == nil:
		return ""
	case a.Class.CallerFault():
		return measure.ClassCaller
	case a.Timeout():
		return measure.ClassTimeout
	case a.Class == ClassCanceled:
		return measure.ClassCanceled
	}
	return measure.ClassOther
}

// CallerFault reports whether a failure of class c names the caller's
// request rather than the deployment: ClassInvalid, ClassPolicy and
// ClassContextLength. Such a failure is charged to no deployment: it counts
// neither in the deployment's error rate (ErrorClass gives
// measure.ClassCaller) nor in its breaker, and it stops the call or moves it
// on only to a larger context window. docs/STREAM_QUIRKS.md has the table of
// statuses, classes and charges.
func (c Class) CallerFault() bool {
	switch c {
	case ClassInvalid, ClassPolicy, ClassContextLength:
		return true
	}
	return false
}
