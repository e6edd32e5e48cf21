// Package executor is the engine of failover: the Executor walks a
// route.Plan, sending one call to the deployments of the plan in order under
// per-deployment circuit breakers, rate limiters, Retry-After cooldowns,
// jittered backoff and deadlines, and commits to the first stream that
// produces output. The rules it follows (the commit point, the table of
// faults and classes, the deadlines, breakers, limits, hedging and the
// mid-stream policies) are stated for users in the package documentation
// of fallback, whose vocabulary it speaks: fallback.Options tunes it,
// fallback.Attempt and *fallback.Error report what it did.
//
// It is internal so that the module's public API stays that vocabulary:
// nothing outside the module calls an Executor. The root Client makes one
// in tpsroute.New (New, with the Client's Hooks) and runs every call
// through it (Executor.Do, with a Call built from the request and a
// Feedback that carries each attempt's outcome to measure, route, the
// fleet and telemetry). The fleet package reaches it through
// Shared, which it implements; internal/sim and internal/bench
// through the Client. Executor.Status implements internal/picker's Health, which the
// Client's Pickers read.
//
// # Mechanics
//
// It works at the HTTP level (a request body in, an SSE body out), so that
// the root's openai-go-shaped Client, its http.RoundTripper, its
// Responses, Messages and embeddings doors and a gateway share one
// Executor. Each attempt is built by Call.Build (DefaultBuild) from its own
// deployment only, sent through Hooks.Transport, and its body is read
// through a tps.Tap, which times it and frames its events; the run
// (run.go) arms one timer for the attempt's deadlines, holds whole events
// until the commit point (Limits bound what it holds), classifies a failure
// (classify.go: the status, headers and error body; the cause), and
// releases whole events to the caller, lone CR made LF and scrubbed of the
// deployment's key (relay.go). A streaming call's Result returns at its
// commit point and reads the rest from the committed run (stream.go), which
// continues or rescues it on another deployment when the policy says so
// (continuation.go, rescue.go); a non-streaming call reads its stream to the
// end first, and with Call.Assemble holds the answer folded from it instead
// (answer.go: a chat.completion, or a Responses call's final response
// object). A plain call's JSON answer is framed as a stream for the tap
// (plain.go). Hedged attempts run in parallel (hedge.go).
//
// Every attempt is admitted in one sequence (the breaker, Hooks.Shared, the
// limiters) and recorded at one point (run.finalize): the breaker, the
// limiter and Hooks.Shared are fed there, then the attempt's completion
// handle (Feedback.Begin returned it), then Hooks.OnAttempt. The
// *fallback.Error of a failed call is built here; its unexported parts (why
// nothing could be tried, why a mid-stream failure was not continued) are
// set through internal/fallbackseam.
//
// # Concurrency
//
// An Executor is safe for concurrent use and holds no goroutine between
// calls. Timers are stopped when an attempt ends; a hedged call's goroutines
// have ended when Do returns; Result.Body.Close cancels the upstream request
// at once, and the attempt ends as fallback.ClassCanceled with
// fallback.ErrClosed.
package executor
