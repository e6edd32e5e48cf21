package executor

import (
	"errors"
	"strconv"

	"github.com/tpsroute/tpsroute/fallback"
	"github.com/tpsroute/tpsroute/internal/fallbackseam"
	"github.com/tpsroute/tpsroute/tps"
)

// The setters of *fallback.Error's unexported fields and its attempt
// count (internal/fallbackseam), which fallback's init provides.
var (
	setCause        = fallbackseam.SetCause.(func(*fallback.Error, error))
	setContinuation = fallbackseam.SetContinuation.(func(*fallback.Error, fallback.ContinuationReason, error))
	countAttempts   = fallbackseam.CountAttempts.(func([]fallback.Attempt) int)
)

var (
	// errFinished is the cause that ends a finished stream after
	// FinishGrace; it never reaches a caller.
	errFinished = errors.New("fallback: finished stream went silent")
)

// attemptError wraps a classified cause with a sentinel so that errors.Is finds
// both, and keeps the message short.
type attemptError struct {
	sentinel error
	cause    error
}

func (e *attemptError) Error() string {
	if e.cause == nil || e.cause == e.sentinel {
		return e.sentinel.Error()
	}
	return e.sentinel.Error() + ": " + fallbackseam.Message(e.cause)
}

func (e *attemptError) Unwrap() []error {
	if e.cause == nil || e.cause == e.sentinel {
		return []error{e.sentinel}
	}
	return []error{e.sentinel, e.cause}
}

func wrap(sentinel, cause error) error { return &attemptError{sentinel: sentinel, cause: cause} }

// noContinuation adds to orig, the call's error at the mid-stream failure of
// prev (class), why no continuation was made (why, from the continuation
// walk, when the failure itself did not decide it), and returns it. orig
// keeps its attempts: the caller gets the original mid-stream error, never
// a failed continuation's; the reason names the continuation that failed.
func (cl *call) noContinuation(orig *fallback.Error, prev *run, class fallback.Class, why fallback.ContinuationReason) *fallback.Error {
	cl.mu.Lock()
	orig.Continuations = append(orig.Continuations, cl.attempts[len(orig.Attempts):]...)
	cl.mu.Unlock()
	if class == fallback.ClassPolicy || class == fallback.ClassContextLength {
		why = fallback.ContinuationPointless
	}
	if r := cl.unsupported(prev); r == fallback.ContinuationOff {
		why = r
	}
	var detail string
	switch why {
	case fallback.ContinuationOff:
		setContinuation(orig, why, errContinuationOff)
		return orig
	case fallback.ContinuationPointless:
		detail = "a content-policy stop would only repeat"
		if class == fallback.ClassContextLength {
			detail = "the context is too long for a continuation"
		}
	case fallback.ContinuationUnsupported:
		switch {
		case cl.protocol == tps.ProtocolResponses:
			detail = "a Responses stream is not continued (the Responses API has no assistant prefill)"
		case !prefills(cl.protocol):
			detail = "a " + cl.protocol.String() + " stream is not continued (it has no assistant prefill)"
		case prev.toolCalls:
			detail = "the stream carried tool calls"
		case prev.multi || cl.choices > 1:
			detail = "the stream carried more than one choice"
		case prev.reasoning:
			detail = "the stream carried reasoning text"
		case prev.msg != nil && prev.msg.other:
			detail = "the stream carried a content block that is not text"
		default:
			detail = "no text was delivered to continue from"
		}
	case fallback.ContinuationNoTarget:
		detail = "no deployment left that declares assistant prefill"
	case fallback.ContinuationBudget:
		detail = "the attempt budget is spent"
	case fallback.ContinuationUnavailable:
		detail = "no target's breaker, cooldown or limiters let a continuation through"
	case fallback.ContinuationRejected:
		detail = "the target rejected the prefill"
	default: // ContinuationFailed
		detail = "the continuation failed"
	}
	if why == fallback.ContinuationRejected || why == fallback.ContinuationFailed {
		for _, a := range orig.Continuations {
			if a.Class != fallback.ClassSkipped { // the last continuation tried
				detail = "the continuation on " + a.Key.String() + " failed: " + a.Class.String()
				if a.Status != 0 {
					detail += " " + strconv.Itoa(a.Status)
				}
			}
		}
	}
	setContinuation(orig, why, wrap(fallback.ErrContinuation, errors.New(detail)))
	return orig
}

// errContinuationOff is the note a mid-stream error carries when the policy
// made no continuation; it is not ErrContinuation, which says one was asked
// for.
var errContinuationOff = errors.New("fallback: continuation off")

// errUncommitted and errPointless are the notes of a call that failed
// after output that never reached the caller (ContinuationUncommitted,
// ContinuationPointless): nothing was to be continued.
var (
	errUncommitted = errors.New("fallback: not continued: nothing had reached the caller")
	errPointless   = errors.New("fallback: not continued: the failure would only repeat")
)
