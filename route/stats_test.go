package route_test

import (
	"encoding/json"
	"reflect"
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tpsroute/tpsroute/route"
)

// TestStatsJSON: Stats marshals with snake_case keys, one per field, like
// every other statistics type (measure.Snapshot, the gateway's debug page).
func TestStatsJSON(t *testing.T) {
	var st route.Stats
	v := reflect.ValueOf(&st).Elem()
	for i := range v.NumField() {
		v.Field(i).SetUint(uint64(i + 1))
	}
	b, err := json.Marshal(st)
	require.NoError(t, err)
	var got map[string]uint64
	require.NoError(t, json.Unmarshal(b, &got))
	assert.Len(t, got, v.NumField(), "one key per field")
	snake := regexp.MustCompile(`^[a-z][a-z0-9]*(_[a-z0-9]+)*$`)
	for k := range got {
		assert.Regexp(t, snake, k)
	}
	assert.Equal(t, uint64(1), got["picks"])
	assert.Equal(t, uint64(2), got["no_deployment"])
	assert.Equal(t, uint64(v.NumField()), got["half_open_probes"])

	var back route.Stats
	require.NoError(t, json.Unmarshal(b, &back))
	assert.Equal(t, st, back)
}
