package tpsroute

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/tpsroute/tpsroute/fallback"
	"github.com/tpsroute/tpsroute/measure"
)

func TestClassify(t *testing.T) {
	wrapped := func(err error) error { return fmt.Errorf("attempt 2: %w", err) }
	lastAttempt := func(err error) error {
		return &fallback.Error{Attempts: []fallback.Attempt{
			{Class: fallback.ClassRetry, Err: io.ErrUnexpectedEOF},
			{Class: fallback.ClassMidStream, Err: err},
		}}
	}
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"caller canceled", context.Canceled, measure.ClassCanceled},
		{"caller closed the body", fallback.ErrClosed, measure.ClassCanceled},
		{"hedge lost", fallback.ErrHedgeLost, measure.ClassCanceled},
		{"caller deadline", context.DeadlineExceeded, measure.ClassTimeout},
		{"headers deadline", fallback.ErrHeadersTimeout, measure.ClassTimeout},
		{"ttft deadline", fallback.ErrTTFTTimeout, measure.ClassTimeout},
		{"stall", fallback.ErrStall, measure.ClassTimeout},
		{"max duration", fallback.ErrMaxDuration, measure.ClassTimeout},
		{"max duration wrapped", wrapped(fallback.ErrMaxDuration), measure.ClassTimeout},
		{"max duration after output", errors.Join(fallback.ErrMidStream, fallback.ErrMaxDuration), measure.ClassTimeout},
		{"max duration in a fallback.Error", lastAttempt(fallback.ErrMaxDuration), measure.ClassTimeout},
		{"stall in a fallback.Error", lastAttempt(errors.Join(fallback.ErrMidStream, fallback.ErrStall)), measure.ClassTimeout},
		{"cut stream", errors.Join(fallback.ErrMidStream, fallback.ErrTruncated), measure.ClassOther},
		{"malformed event", fallback.ErrMalformed, measure.ClassOther},
		{"transport error", io.ErrUnexpectedEOF, measure.ClassOther},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, classify(tt.err))
		})
	}
}
