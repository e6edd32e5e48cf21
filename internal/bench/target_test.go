package bench

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tpsroute/tpsroute"
	"github.com/tpsroute/tpsroute/fallback"
	"github.com/tpsroute/tpsroute/replay"
	"github.com/tpsroute/tpsroute/route"
	"github.com/tpsroute/tpsroute/tps"
)

// TestCallerFailed checks the class and phase given to each typed error of
// Client.Do, the ones the runs in TestRunErrorsByClass cannot easily provoke.
func TestCallerFailed(t *testing.T) {
	c, err := tpsroute.New(knownConfig(map[string]*replay.Profile{"a": {OutputTokens: 2}}))
	require.NoError(t, err)
	one := func(a fallback.Attempt) error { return &fallback.Error{Attempts: []fallback.Attempt{a}} }
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name         string
		ctx          context.Context
		err          error
		class, phase string
	}{
		{name: "unknown model", err: &tpsroute.ModelError{Param: "model", Model: "x"}, class: "no_deployment"},
		{name: "no deployment", err: fmt.Errorf("pin: %w", route.ErrNoDeployment), class: "no_deployment"},
		{name: "breaker open", err: one(fallback.Attempt{Class: fallback.ClassSkipped, Err: fallback.ErrOpen}), class: "skipped"},
		{name: "cooling down", err: one(fallback.Attempt{Class: fallback.ClassSkipped, Err: fallback.ErrCoolingDown}), class: "skipped"},
		{name: "rate limited", err: one(fallback.Attempt{Status: 429, Phase: tps.PhaseHeaders, Class: fallback.ClassRateLimited, Err: errors.New("429")}),
			class: "rate_limit", phase: "headers"},
		{name: "reset", err: one(fallback.Attempt{Phase: tps.PhaseConnect, Class: fallback.ClassRetry, Err: errors.New("connection reset")}),
			class: "connect", phase: "connect"},
		{name: "headers timeout", err: one(fallback.Attempt{Phase: tps.PhaseHeaders, Class: fallback.ClassNext, Err: fallback.ErrHeadersTimeout}),
			class: "timeout", phase: "connect"},
		{name: "ttft timeout", err: one(fallback.Attempt{Status: 200, Phase: tps.PhaseFirstToken, Class: fallback.ClassNext, Err: fallback.ErrTTFTTimeout}),
			class: "timeout", phase: "first_token"},
		{name: "empty stream", err: one(fallback.Attempt{Status: 200, Phase: tps.PhaseFirstToken, Class: fallback.ClassNext, Err: fallback.ErrEmptyStream}),
			class: "first_token", phase: "first_token"},
		{name: "bad request body", err: &tpsroute.RequestError{Param: "messages", Reason: "missing"}, class: "bad_request"},
		{name: "caller canceled", ctx: canceled, err: one(fallback.Attempt{Class: fallback.ClassCanceled, Err: context.Canceled}),
			class: "canceled", phase: "connect"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := tt.ctx
			if ctx == nil {
				ctx = context.Background()
			}
			var r Result
			newRouted(c, "a").failed(ctx, tt.err, &r)
			assert.Equal(t, tt.class, r.ErrorClass, r.Error)
			assert.Equal(t, tt.phase, r.ErrorPhase, r.Error)
			assert.Regexp(t, `^bench: HTTP \d{3}: `, r.Error)
		})
	}
}

// TestErrorClass pins each row of docs/BENCH.md's table of error classes,
// in its order of precedence, on the deciding attempt.
func TestErrorClass(t *testing.T) {
	mid := func(err error) error { return errors.Join(fallback.ErrMidStream, err) }
	tests := []struct {
		name string
		a    fallback.Attempt
		want string
	}{
		{"skipped", fallback.Attempt{Class: fallback.ClassSkipped, Err: fallback.ErrNoBudget}, "skipped"},
		{"quota", fallback.Attempt{Class: fallback.ClassUnavailable, Status: 429, Phase: tps.PhaseHeaders}, "quota"},
		{"rate limit", fallback.Attempt{Class: fallback.ClassRateLimited, Status: 429, Phase: tps.PhaseHeaders}, "rate_limit"},
		{"forbidden", fallback.Attempt{Class: fallback.ClassAuth, Status: 403, Phase: tps.PhaseHeaders}, "auth"},
		{"model not found", fallback.Attempt{Class: fallback.ClassUnavailable, Status: 404, Phase: tps.PhaseHeaders}, "not_found"},
		{"gateway timeout", fallback.Attempt{Class: fallback.ClassRetry, Status: 504, Phase: tps.PhaseHeaders}, "timeout"},
		{"context length", fallback.Attempt{Class: fallback.ClassContextLength, Status: 400, Phase: tps.PhaseHeaders}, "bad_request"},
		{"overloaded", fallback.Attempt{Class: fallback.ClassNext, Status: 529, Phase: tps.PhaseHeaders}, "server"},
		{"own deadline after output", fallback.Attempt{Class: fallback.ClassCanceled, Status: 200, Phase: tps.PhaseMidStream, Err: mid(context.DeadlineExceeded)}, "timeout"},
		{"stall", fallback.Attempt{Class: fallback.ClassMidStream, Status: 200, Phase: tps.PhaseMidStream, Err: mid(fallback.ErrStall)}, "mid_stream"},
		{"cut", fallback.Attempt{Class: fallback.ClassMidStream, Status: 200, Phase: tps.PhaseMidStream, Err: mid(fallback.ErrTruncated)}, "mid_stream"},
		{"max duration before output", fallback.Attempt{Class: fallback.ClassNext, Status: 200, Phase: tps.PhaseFirstToken, Err: fallback.ErrMaxDuration}, "timeout"},
		{"malformed before output", fallback.Attempt{Class: fallback.ClassNext, Status: 200, Phase: tps.PhaseFirstToken, Err: fallback.ErrMalformed}, "first_token"},
		{"bad gateway", fallback.Attempt{Class: fallback.ClassRetry, Status: 502, Phase: tps.PhaseHeaders}, "connect"},
		{"refused", fallback.Attempt{Class: fallback.ClassRetry, Phase: tps.PhaseConnect, Err: errors.New("connection refused")}, "connect"},
		{"no phase", fallback.Attempt{Class: fallback.ClassInvalid, Err: errors.New("bad URL")}, "other"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, errorClass(tt.a))
		})
	}
}
