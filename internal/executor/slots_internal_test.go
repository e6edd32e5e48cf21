package executor

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestSlotSignal: a broadcast closes the channel every current subscriber
// holds and no other; each unsubscribe takes one subscriber off, and once
// none is left a broadcast does nothing, so a channel subscribed to later
// is not closed by it.
func TestSlotSignal(t *testing.T) {
	var s slotSignal
	a, b := s.subscribe(), s.subscribe()
	assert.Equal(t, int64(2), s.waiting.Load())
	s.broadcast()
	for _, ch := range []<-chan struct{}{a, b} {
		select {
		case <-ch:
		default:
			t.Fatal("a subscriber's channel is open after a broadcast")
		}
	}
	c := s.subscribe()
	select {
	case <-c:
		t.Fatal("a later subscription saw the earlier broadcast")
	default:
	}
	for range 3 {
		s.unsubscribe()
	}
	assert.Zero(t, s.waiting.Load())
	s.broadcast()
	select {
	case <-c:
		t.Fatal("a broadcast with nobody subscribed closed a channel")
	default:
	}
	s.subscribe()
	s.broadcast()
	select {
	case <-c:
	default:
		t.Fatal("the next broadcast with a subscriber closes the pending channel")
	}
	s.unsubscribe()
}
