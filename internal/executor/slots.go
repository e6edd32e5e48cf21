package executor

import (
	"sync"
	"sync/atomic"
)

// slotSignal wakes the calls that wait for a deployment full of calls in
// flight (its Limits.MaxInFlight or a concurrency limit learnt from its
// 429s) when any call of the Executor ends, so that a waiting call takes a
// freed slot at once rather than at the end of a Retry-After, and does not
// fail for want of a slot that frees within MaxWait. The zero value is
// ready to use. A release costs one atomic load while nobody waits.
type slotSignal struct {
	waiting atomic.Int64
	mu      sync.Mutex
	ch      chan struct{} // closed by the next broadcast; nil until someone subscribes
}

// subscribe returns a channel closed by the next broadcast; unsubscribe
// ends the subscription (once for each subscribe). A caller subscribes
// before it checks for room, so that a slot freed between the check and
// the wait is not missed.
func (s *slotSignal) subscribe() <-chan struct{} {
	s.waiting.Add(1)
	s.mu.Lock()
	if s.ch == nil {
		s.ch = make(chan struct{})
	}
	ch := s.ch
	s.mu.Unlock()
	return ch
}

// unsubscribe ends one subscription.
func (s *slotSignal) unsubscribe() { s.waiting.Add(-1) }

// broadcast wakes every current subscriber. A call's end, after its slot
// is given back, calls it.
func (s *slotSignal) broadcast() {
	if s.waiting.Load() == 0 {
		return
	}
	s.mu.Lock()
	if s.ch != nil {
		close(s.ch)
		s.ch = nil
	}
	s.mu.Unlock()
}
