package executor

import (
	"io"
	"net/http"
	"sync"

	"github.com/tpsroute/tpsroute/fallback"

	"github.com/tpsroute/tpsroute/route"
	"github.com/tpsroute/tpsroute/tps"
)

// Result is the committed attempt of a call. Its methods are safe for
// concurrent use with reading Body.
type Result struct {
	// Body is the SSE stream from the start: the bytes read before the commit
	// point, then the rest, whole events only; or, for a call with
	// Call.Assemble, the chat.completion JSON of the whole answer. A failure
	// after the commit point surfaces from Read as a *Error with phase
	// PhaseMidStream; it is never a clean io.EOF. With MidStreamContinue a
	// continuation is spliced in. Close cancels the upstream request at once
	// and is idempotent.
	Body io.ReadCloser
	// Header is the committed attempt's response header, reduced to what
	// may reach a caller: Content-Type, the request id (X-Request-Id,
	// Request-Id), Openai-Processing-Ms, Openai-Version, Retry-After (and
	// -Ms), X-Should-Retry and the X-Ratelimit-* and Anthropic-Ratelimit-*
	// families, one value each of at most 512 bytes, a value that holds the
	// deployment's credential reading "REDACTED" (docs/SECURITY.md).
	Header http.Header
	// StatusCode is the committed attempt's status, 200 in practice.
	StatusCode int
	// ContentLength is the length of Body in bytes when it is known in
	// advance, that of an assembled answer (Call.Assemble), whose Header
	// then says Content-Type "application/json"; -1 for a stream.
	ContentLength int64

	cl     *call
	mu     sync.Mutex
	dep    route.Deployment
	sample tps.Sample
}

// Deployment returns the deployment that answered; after a continuation, the
// one that continued.
func (r *Result) Deployment() route.Deployment {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.dep
}

// Attempts returns every attempt of the call so far, skipped deployments and
// continuations included, in order.
func (r *Result) Attempts() []fallback.Attempt {
	r.cl.mu.Lock()
	defer r.cl.mu.Unlock()
	return append([]fallback.Attempt(nil), r.cl.attempts...)
}

// AttemptCount returns how many attempts reached (or tried to reach) a
// provider so far, skipped deployments not counted: the count that *Error's
// message gives. The committed attempt is counted from the start, whether its
// stream is still being read, has ended or has failed; a continuation counts
// as one more attempt.
func (r *Result) AttemptCount() int {
	r.cl.mu.Lock()
	defer r.cl.mu.Unlock()
	return countAttempts(r.cl.attempts) + int(r.cl.pending.Load())
}

// Sample returns the tps.Sample of the committed attempt (the last one after a
// continuation). It is complete once Body returned an error or io.EOF, or was
// closed.
func (r *Result) Sample() tps.Sample {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.sample
}

func (r *Result) set(d route.Deployment, s tps.Sample) {
	r.mu.Lock()
	r.dep, r.sample = d, s
	r.mu.Unlock()
}
