package executor

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestIsJSONAnswer: the media type decides, whatever its case, space and
// parameters; a near name is not JSON.
func TestIsJSONAnswer(t *testing.T) {
	for ct, want := range map[string]bool{
		"application/json":                 true,
		"Application/JSON; charset=utf-8":  true,
		" application/json ;charset=utf-8": true,
		"text/event-stream":                false,
		"application/jsonl":                false,
		"application/json-seq":             false,
		"":                                 false,
	} {
		assert.Equal(t, want, isJSONAnswer(&http.Response{Header: http.Header{"Content-Type": {ct}}}), ct)
	}
}

// TestIsJSONAnswerAllocatesNothing: the check runs on every attempt.
func TestIsJSONAnswerAllocatesNothing(t *testing.T) {
	resp := &http.Response{Header: http.Header{"Content-Type": {"text/event-stream; charset=utf-8"}}}
	assert.Zero(t, testing.AllocsPerRun(100, func() { isJSONAnswer(resp) }))
}
