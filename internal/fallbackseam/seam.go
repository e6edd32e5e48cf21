package fallbackseam

import "strings"

var (
	// SetCause is a func(e *fallback.Error, cause error): it sets why
	// nothing in the call's plan could be tried (route.ErrNoDeployment, or
	// the caller's context's cause), which e's message names and Unwrap
	// returns.
	SetCause any
	// SetContinuation is a func(e *fallback.Error, why
	// fallback.ContinuationReason, note error): it sets why the mid-stream
	// failure that decided e was not continued (Error.Continuation) and
	// the note that e's message names and Unwrap returns.
	SetContinuation any
	// CountAttempts is a func(as []fallback.Attempt) int: the attempts that
	// were tried, skipped deployments not counted, as e's message counts
	// them.
	CountAttempts any
)

// Message renders err without its "fallback: " prefix: the one rule for
// naming a cause inside a message that already starts with one, which both
// *fallback.Error's message and the executor's attempt errors follow.
func Message(err error) string {
	return strings.TrimPrefix(err.Error(), "fallback: ")
}
