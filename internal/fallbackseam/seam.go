// Package fallbackseam lets internal/executor fill the parts of fallback's
// vocabulary values that users only read: the unexported fields of a
// *fallback.Error (why nothing could be tried, why a mid-stream failure was
// not continued) and the attempt count its message gives. fallback sets
// these functions in its init, as grpc-go's internal package does for its
// public packages; internal/executor asserts their types once, at its own
// initialization, which comes after fallback's. So the engine lives under
// internal/ while *fallback.Error keeps a public API that only reads.
//
// It imports nothing of the module (fallback imports it, and
// internal/executor imports both), so each value is an any holding the
// func type its comment names. They are written once, before any package
// that imports fallback runs, and only read afterwards: safe for
// concurrent use.
package fallbackseam

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
