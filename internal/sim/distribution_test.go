package sim

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// outputTokens, CheckBestSplitTotal's measure, counts the successful calls'
// output tokens only: a failed call delivered nothing the caller could use.
func TestOutputTokens(t *testing.T) {
	for _, tc := range []struct {
		name  string
		calls []Call
		want  float64
	}{
		{"none", nil, 0},
		{"all successful", []Call{{OutputTokens: 100}, {OutputTokens: 250}}, 350},
		{"a failed call left out", []Call{{OutputTokens: 100}, {OutputTokens: 40, Failed: true}, {OutputTokens: 1}}, 101},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, outputTokens(&Result{Calls: tc.calls}))
		})
	}
}
