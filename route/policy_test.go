package route

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestPolicyNames is the one table of policy names read both ways.
func TestPolicyNames(t *testing.T) {
	assert.Equal(t, []Policy{Throughput, Latency, Cost}, Policies())
	for _, p := range Policies() {
		got, ok := ParsePolicy(strings.ToUpper(p.String()))
		assert.True(t, ok, p.String())
		assert.Equal(t, p, got)
	}
	for _, bad := range []string{"", "default", "price", "fast"} {
		got, ok := ParsePolicy(bad)
		assert.False(t, ok, bad)
		assert.Zero(t, got, bad)
	}
	assert.Equal(t, "default", Policy(0).String())
}
