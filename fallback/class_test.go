package fallback

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/tpsroute/tpsroute/measure"
)

// TestAttemptErrorClass checks the class each kind of attempt is recorded
// with in measure (the table the root's classify of sample errors had).
func TestAttemptErrorClass(t *testing.T) {
	wrapped := func(err error) error { return fmt.Errorf("attempt 2: %w", err) }
	tests := []struct {
		name    string
		a       Attempt
		timeout bool
		want    string
	}{
		{"success", Attempt{Class: ClassNone}, false, ""},
		{"caller canceled", Attempt{Class: ClassCanceled, Err: context.Canceled}, false, measure.ClassCanceled},
		{"caller closed the body", Attempt{Class: ClassCanceled, Err: ErrClosed}, false, measure.ClassCanceled},
		{"hedge lost", Attempt{Class: ClassCanceled, Err: ErrHedgeLost}, false, measure.ClassCanceled},
		{"caller deadline", Attempt{Class: ClassCanceled, Err: context.DeadlineExceeded}, true, measure.ClassTimeout},
		{"headers deadline", Attempt{Class: ClassNext, Err: ErrHeadersTimeout}, true, measure.ClassTimeout},
		{"ttft deadline", Attempt{Class: ClassNext, Err: ErrTTFTTimeout}, true, measure.ClassTimeout},
		{"stall", Attempt{Class: ClassMidStream, Err: ErrStall}, true, measure.ClassTimeout},
		{"max duration", Attempt{Class: ClassNext, Err: ErrMaxDuration}, true, measure.ClassTimeout},
		{"max duration wrapped", Attempt{Class: ClassNext, Err: wrapped(ErrMaxDuration)}, true, measure.ClassTimeout},
		{"max duration after output", Attempt{Class: ClassMidStream, Err: errors.Join(ErrMidStream, ErrMaxDuration)}, true, measure.ClassTimeout},
		{"stall after output", Attempt{Class: ClassMidStream, Err: errors.Join(ErrMidStream, ErrStall)}, true, measure.ClassTimeout},
		{"cut stream", Attempt{Class: ClassMidStream, Err: errors.Join(ErrMidStream, ErrTruncated)}, false, measure.ClassOther},
		{"malformed event", Attempt{Class: ClassNext, Err: ErrMalformed}, false, measure.ClassOther},
		{"transport error", Attempt{Class: ClassRetry, Err: io.ErrUnexpectedEOF}, false, measure.ClassOther},
		{"rate limited", Attempt{Class: ClassRateLimited, Status: 429, Err: errors.New("429")}, false, measure.ClassOther},
		{"invalid request", Attempt{Class: ClassInvalid, Status: 400, Err: errors.New("400")}, false, measure.ClassCaller},
		{"unbuildable body", Attempt{Class: ClassInvalid, Err: errors.New("sjson")}, false, measure.ClassCaller},
		{"content policy after output", Attempt{Class: ClassPolicy, Err: errors.Join(ErrMidStream, ErrStreamError)}, false, measure.ClassCaller},
		{"context length", Attempt{Class: ClassContextLength, Status: 400, Err: errors.New("400")}, false, measure.ClassCaller},
		{"auth", Attempt{Class: ClassAuth, Status: 401, Err: errors.New("401")}, false, measure.ClassOther},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.timeout, tt.a.Timeout())
			assert.Equal(t, tt.want, tt.a.ErrorClass())
		})
	}
}
