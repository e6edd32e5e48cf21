package main

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/tpsroute/tpsroute/fallback"
	"github.com/tpsroute/tpsroute/measure"
)

// TestHistoryRecordsOnlyTheDeploymentsFailures: the debug page's failovers
// list a deployment's own failures, not the caller's (fallback.Class.CallerFault)
// nor attempts that did not fail.
func TestHistoryRecordsOnlyTheDeploymentsFailures(t *testing.T) {
	h := newHistory()
	k := measure.Key{Provider: "p", Region: "r", Model: "m"}
	for _, c := range []fallback.Class{fallback.ClassNone, fallback.ClassSkipped, fallback.ClassCanceled,
		fallback.ClassInvalid, fallback.ClassPolicy, fallback.ClassContextLength} {
		h.attempt(fallback.Attempt{Key: k, Class: c})
	}
	assert.Empty(t, h.failovers)
	for _, c := range []fallback.Class{fallback.ClassNext, fallback.ClassRetry, fallback.ClassRateLimited, fallback.ClassAuth} {
		h.attempt(fallback.Attempt{Key: k, Class: c})
	}
	assert.Len(t, h.failovers, 4)
}
