// Package fallbackseam lets internal/executor fill the parts of fallback's
// vocabulary values that users only read: the unexported fields of a
// *fallback.Error (why nothing could be tried, why a mid-stream failure was
// not continued) and the attempt count its message gives; and it holds the one rule both
// packages follow to name a cause in a message (Message). fallback sets
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
