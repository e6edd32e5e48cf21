package executor

import (
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tpsroute/tpsroute/fallback"

	"github.com/tpsroute/tpsroute/tps"
)

// stream is Result.Body: the committed run's released bytes, then the rest of
// its stream, then, with MidStreamContinue, a continuation's.
type stream struct {
	res *Result

	mu      sync.Mutex // one Read at a time; Close waits for it after cancelling
	cur     *run
	active  atomic.Pointer[run] // cur, for Close to cancel without the lock
	closing atomic.Bool         // Close was called: a continuation must not start
	err     error               // sticky: io.EOF or the *Error
	closed  bool
}

func (s *stream) Read(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for {
		if s.err != nil {
			return 0, s.err
		}
		a := s.cur
		if a.off < a.rel {
			n := copy(p, a.buf[a.off:a.rel])
			a.off += n
			return n, nil
		}
		if a.eof {
			s.end()
			a.releaseBuf()
			s.err = io.EOF
			continue
		}
		if a.rescue.slowRate > 0 && !a.rescue.tried && a.readErr == nil && !a.stopped && !a.finished.Load() {
			// Everything released was read: the caller holds exactly the
			// text a rescue continues from.
			if next := s.rescue(a); next != nil {
				s.cur = next
				s.res.set(*next.d, tps.Sample{})
				continue
			}
			if s.closing.Load() {
				a.cancel(fallback.ErrClosed)
			}
		}
		err := a.readErr
		if err == nil && !a.stopped {
			err = a.fill()
		}
		class, ferr := a.streamFailure(err)
		if ferr == nil {
			continue
		}
		if a.off < a.rel {
			// Deliver the whole events read before the failure first: the
			// caller then holds exactly the text a continuation resumes
			// from. The failure is sticky and comes back once they are read.
			continue
		}
		if class == fallback.ClassCanceled {
			a.fail(tps.PhaseMidStream, a.resp.StatusCode, fallback.ClassCanceled, ferr)
			s.res.set(*a.d, a.sample)
			s.err = s.res.cl.err()
			continue
		}
		// A content filter that cuts the answer is about the content, not
		// the provider's health: it stays ClassPolicy, outside the breaker.
		rec := fallback.ClassMidStream
		if class == fallback.ClassPolicy {
			rec = fallback.ClassPolicy
		}
		a.fail(tps.PhaseMidStream, a.resp.StatusCode, rec, wrap(fallback.ErrMidStream, ferr))
		s.res.set(*a.d, a.sample)
		orig := s.res.cl.err()
		// A content-policy stop or an oversized context would only repeat.
		if class == fallback.ClassPolicy || class == fallback.ClassContextLength {
			s.err = s.res.cl.noContinuation(orig, a, class, fallback.ContinuationPointless)
			continue
		}
		next, why := s.continuation(a)
		if next != nil {
			s.cur = next
			s.res.set(*next.d, tps.Sample{})
			continue
		}
		s.err = s.res.cl.noContinuation(orig, a, class, why)
	}
}

// end finalizes the current run as a success.
func (s *stream) end() {
	a := s.cur
	a.succeed()
	s.res.set(*a.d, a.sample)
}

// Close cancels the upstream request at once, then releases the run. It is
// idempotent and may be called concurrently with Read.
func (s *stream) Close() error {
	s.closing.Store(true) // before loading active: see continuation
	if a := s.active.Load(); a != nil {
		a.cancel(fallback.ErrClosed) // unblocks a Read in progress
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	a := s.cur
	if !a.finalized {
		if a.eof || (a.finished.Load() && a.off >= a.rel) {
			s.end()
		} else {
			a.fail(tps.PhaseMidStream, a.resp.StatusCode, fallback.ClassCanceled, fallback.ErrClosed)
			s.res.set(*a.d, a.sample)
		}
	}
	a.releaseBuf()
	if s.err == nil {
		s.err = fallback.ErrClosed
	}
	return nil
}

// continuation opens the next prefill-capable deployment with the delivered
// text as an assistant prefix, or returns nil and why not when the policy,
// the stream or the plan do not allow it.
func (s *stream) continuation(prev *run) (*run, fallback.ContinuationReason) {
	cl := prev.cl
	if r := cl.unsupported(prev); r != fallback.NoReason {
		return nil, r
	}
	// Exactly what the caller has read (call.prefill).
	text, body, sp, why := cl.prefill(prev)
	if why != fallback.NoReason {
		return nil, why
	}
	why = fallback.ContinuationNoTarget
	// The other deployments in plan order, then the one that was cut: a
	// provider that dropped one connection often serves the next, and it
	// is the only target of a model served once. eligible bounds it by
	// AttemptsPerDeployment, admit by its breaker, which has counted the
	// cut.
	for k := range len(cl.plan) + 1 {
		i := k
		if k == len(cl.plan) {
			i = prev.i
		} else if i == prev.i {
			continue
		}
		d := cl.plan[i].Deployment
		if !cl.declaresContinuation(prev.d, d) {
			continue
		}
		if r := cl.barred(i, d); r != fallback.NoReason {
			why = worse(why, r)
			continue
		}
		st := cl.e.state(d)
		done, ok := cl.admit(d.Key(), st, time.Now())
		if !ok {
			why = worse(why, fallback.ContinuationUnavailable)
			continue
		}
		cl.real++
		cl.slots[i].tries++
		a := cl.newRun(i, d, st, done, body, cl.remaining(i))
		a.keepText, a.msg = true, sp.fresh() // one splice per target
		a.text = append(a.text, text...)
		a.relText = len(a.text)
		s.active.Store(a) // Close aborts the continuation too
		if s.closing.Load() {
			// Close ran between the cut and the Store above and cancelled
			// only the previous run: without this it would wait on s.mu
			// until this whole attempt committed or failed.
			a.cancel(fallback.ErrClosed)
		}
		if a.open(true) {
			return a, fallback.NoReason
		}
		cl.slots[i].excluded = true
		if prefillRejected(a.att) {
			cl.e.noPrefill.Store(d.Key(), struct{}{})
			why = worse(why, fallback.ContinuationRejected)
		} else {
			why = worse(why, fallback.ContinuationFailed)
		}
		if a.att.Class == fallback.ClassCanceled {
			return nil, why
		}
	}
	return nil, why
}
