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
			newCaller(c).failed(ctx, tt.err, &r)
			assert.Equal(t, tt.class, r.ErrorClass, r.Error)
			assert.Equal(t, tt.phase, r.ErrorPhase, r.Error)
			assert.Regexp(t, `^bench: HTTP \d{3}: `, r.Error)
		})
	}
}
