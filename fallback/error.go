package fallback

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/tpsroute/tpsroute/internal/fallbackseam"
	"github.com/tpsroute/tpsroute/measure"
	"github.com/tpsroute/tpsroute/tps"
)

// Sentinel errors. They are found with errors.Is on a *Error.
var (
	// ErrOpen means the deployment's circuit breaker was open (or half-open and
	// out of probes).
	ErrOpen = errors.New("fallback: circuit breaker open")
	// ErrCoolingDown means the deployment was cooling down after a Retry-After,
	// a rate limit or an authentication failure.
	ErrCoolingDown = errors.New("fallback: deployment cooling down")
	// ErrNoBudget means the deployment's RPM/TPM limiter or in-flight cap had no
	// room.
	ErrNoBudget = errors.New("fallback: no rate-limit budget")
	// ErrHeadersTimeout means the response headers did not arrive within the
	// headers deadline.
	ErrHeadersTimeout = errors.New("fallback: headers deadline exceeded")
	// ErrTTFTTimeout means no output chunk arrived within the TTFT deadline while
	// another deployment was available.
	ErrTTFTTimeout = errors.New("fallback: TTFT deadline exceeded")
	// ErrSilent means that on an attempt with nowhere left to fail over to,
	// nothing at all (no event, no comment) arrived for Deadlines.Silence
	// before the first output chunk: the upstream went silent.
	ErrSilent = errors.New("fallback: upstream silent before its first output")
	// ErrStall means no output chunk arrived for the stall deadline after the
	// first one. SSE comments do not reset it.
	ErrStall = errors.New("fallback: stream stalled")
	// ErrMaxDuration means the attempt reached Deadlines.MaxDuration (of
	// Options or Call) before its stream ended, for example because the
	// provider kept sending keep-alive comments and never a terminator
	// (docs/STREAM_QUIRKS.md Q2). After the commit point it comes with ErrMidStream.
	ErrMaxDuration = errors.New("fallback: attempt exceeded its maximum duration")
	// ErrMidStream marks every failure after the commit point: the stream was
	// cut, stalled or carried an error after output had been delivered. A
	// stream never ends cleanly after such a failure.
	ErrMidStream = errors.New("fallback: stream failed after first output")
	// ErrTruncated means the stream ended without a finish_reason or [DONE].
	ErrTruncated = errors.New("fallback: stream ended without finish_reason or [DONE]")
	// ErrEmptyStream means the stream ended cleanly without any output or
	// finish_reason.
	ErrEmptyStream = errors.New("fallback: stream ended without output")
	// ErrMalformed means a data event could not be decoded as JSON.
	ErrMalformed = errors.New("fallback: malformed stream event")
	// ErrTooLarge means the upstream sent more than Options.Limits allow:
	// a line or event past Limits.Event, or more than Limits.Held before the
	// first output chunk (Limits.Answer for a non-streaming call).
	ErrTooLarge = errors.New("fallback: upstream stream exceeds a size limit")
	// ErrStreamError means the provider sent an error event inside an HTTP 200
	// stream; the attempt's error also wraps the provider's *openai.Error.
	ErrStreamError = errors.New("fallback: error event in stream")
	// ErrHedgeLost marks the attempt cancelled because a hedged attempt produced
	// output first. It is not a breaker failure.
	ErrHedgeLost = errors.New("fallback: hedge lost")
	// ErrContinuation means the mid-stream continuation that
	// MidStreamSameModel or MidStreamContinue asked for was not possible
	// (tool calls, n>1, reasoning text, a content-policy stop, no
	// prefill-capable deployment or attempt left) or failed; the caller
	// still gets the original mid-stream error, whose message says why after
	// "continuation not possible: " and whose Continuation method names the
	// reason. It is found with errors.Is on that *Error; a call with
	// MidStreamError never carries it (its reason is ContinuationOff).
	ErrContinuation = errors.New("fallback: continuation not possible")
	// ErrClosed means the caller closed the stream (the body of the committed attempt) before the stream ended.
	// The attempt's class is ClassCanceled and, because it wraps
	// context.Canceled, errors.Is(err, context.Canceled) holds: code that
	// tells the caller's cancellations from provider failures (statistics,
	// error rates) counts an early Close as the caller's. It is not a breaker
	// failure.
	ErrClosed = fmt.Errorf("fallback: body closed by caller: %w", context.Canceled)
)

// Attempt is the record of one try on one deployment, or of a deployment that
// was skipped (Class ClassSkipped). It is a value, safe to copy.
type Attempt struct {
	Key      measure.Key   // the deployment tried
	Phase    tps.Phase     // how far the attempt got when it failed; PhaseNone on success
	Status   int           // HTTP status, 0 if none arrived
	Class    Class         // what the executor made of it
	Duration time.Duration // from just before the request was written to the end
	Waited   time.Duration // time spent in backoff or cooldown waits before it
	Tokens   int64         // output tokens the attempt received (its tps.Sample.OutputTokens)
	Err      error         // nil on success; errors.As reaches *openai.Error for HTTP errors
	Rescued  bool          // its stream was too slow and the call continued on a faster deployment (RescueOptions; Err is ErrRescued)
}

// String summarises the attempt on one line without secrets.
func (a Attempt) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %s", a.Key, a.Class)
	if a.Rescued {
		b.WriteString(" (rescued)")
	}
	if a.Status != 0 {
		fmt.Fprintf(&b, " %d", a.Status)
	}
	if a.Phase != tps.PhaseNone {
		fmt.Fprintf(&b, " at %s", a.Phase)
	}
	if a.Tokens > 0 {
		fmt.Fprintf(&b, " after %d tokens", a.Tokens)
	}
	if a.Duration > 0 {
		fmt.Fprintf(&b, " in %s", a.Duration.Round(time.Millisecond))
	}
	if a.Err != nil {
		fmt.Fprintf(&b, " (%s)", a.Err.Error())
	}
	return b.String()
}

// Error is the failure of a whole call: every attempt, in order. The last
// attempt is the one that decided the outcome. errors.Is finds the sentinels
// and errors.As the provider's *openai.Error in any attempt, most recent first.
// An Error is not modified after it is returned; it is safe for concurrent reads.
type Error struct {
	Attempts []Attempt
	// Continuations lists the continuation attempts that were sent after the
	// deciding attempt failed mid-stream and that failed in turn (for
	// example a rejected prefill). They count in the message's attempt
	// total, as in the count of a committed call's attempts, but they did not decide the outcome:
	// Last, Phase, errors.Is and errors.As look at Attempts only.
	Continuations []Attempt

	cause error              // route.ErrNoDeployment when nothing could be tried
	cont  error              // why no continuation was made (wraps ErrContinuation unless it was off), nil otherwise
	why   ContinuationReason // the same, typed (Continuation)
}

// Error returns "fallback: N attempts: a1; a2; ...", one line, without keys.
func (e *Error) Error() string {
	var b strings.Builder
	n := countAttempts(e.Attempts) + countAttempts(e.Continuations)
	fmt.Fprintf(&b, "fallback: %d attempt", n)
	if n != 1 {
		b.WriteString("s")
	}
	for _, err := range [...]error{e.cause, e.cont} {
		if err != nil {
			fmt.Fprintf(&b, " (%s)", fallbackseam.Message(err))
		}
	}
	for i, a := range e.Attempts {
		sep := "; "
		if i == 0 {
			sep = ": "
		}
		b.WriteString(sep + a.String())
	}
	for _, a := range e.Continuations {
		if a.Class != ClassSkipped {
			b.WriteString("; continuation " + a.String())
		}
	}
	return b.String()
}

// countAttempts counts the attempts that were tried, skips not counted.
func countAttempts(as []Attempt) int {
	n := 0
	for _, a := range as {
		if a.Class != ClassSkipped {
			n++
		}
	}
	return n
}

// Unwrap returns the attempts' errors, the most recent first.
func (e *Error) Unwrap() []error {
	out := make([]error, 0, len(e.Attempts)+2)
	for _, err := range [...]error{e.cause, e.cont} {
		if err != nil {
			out = append(out, err)
		}
	}
	for i := len(e.Attempts) - 1; i >= 0; i-- {
		if err := e.Attempts[i].Err; err != nil {
			out = append(out, err)
		}
	}
	return out
}

// Last returns the attempt that decided the outcome, and false if there was none.
func (e *Error) Last() (Attempt, bool) {
	for i := len(e.Attempts) - 1; i >= 0; i-- {
		if e.Attempts[i].Class != ClassSkipped {
			return e.Attempts[i], true
		}
	}
	if len(e.Attempts) > 0 {
		return e.Attempts[len(e.Attempts)-1], true
	}
	return Attempt{}, false
}

// Phase returns the phase of the deciding attempt.
func (e *Error) Phase() tps.Phase {
	a, _ := e.Last()
	return a.Phase
}

// init gives internal/executor, which builds every *Error, the setters of
// its unexported fields (internal/fallbackseam).
func init() {
	fallbackseam.SetCause = func(e *Error, cause error) { e.cause = cause }
	fallbackseam.SetContinuation = func(e *Error, why ContinuationReason, note error) { e.why, e.cont = why, note }
	fallbackseam.CountAttempts = countAttempts
}

// Continuation returns why the mid-stream failure that decided e was not
// continued, or NoReason when e is not a mid-stream failure.
func (e *Error) Continuation() ContinuationReason { return e.why }
