package sim

import (
	"bytes"
	"context"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/require"
)

// compare runs a bundled scenario under every policy in a synctest bubble
// and logs the table.
func compare(t *testing.T, name string, policies ...Policy) *Report {
	t.Helper()
	sc, err := Bundled(name)
	require.NoError(t, err)
	if len(policies) == 0 {
		policies = Baselines(sc.Seed)
	}
	var rep *Report
	synctest.Test(t, func(t *testing.T) {
		rep, err = Compare(context.Background(), sc, policies)
		require.NoError(t, err)
	})
	var b bytes.Buffer
	require.NoError(t, rep.WriteTable(&b))
	t.Logf("scenario %s\n%s", name, b.String())
	return rep
}

func TestScenarios(t *testing.T) {
	for _, name := range BundledNames() {
		t.Run(name, func(t *testing.T) {
			compare(t, name)
		})
	}
}
