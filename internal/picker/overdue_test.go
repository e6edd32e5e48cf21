package picker

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tpsroute/tpsroute/internal/registry"
	"github.com/tpsroute/tpsroute/measure"
	"github.com/tpsroute/tpsroute/route"
)

// TestOverdueRanksStalledLower checks that a deployment whose call in
// flight has run twice the time its figures give that call ranks by the
// speed the call is at most getting, before the call ends, and by its
// figures again once it has ended; and that the plan shows the call TPS so
// lowered while the deployment's TPS stays its measured one.
func TestOverdueRanksStalledLower(t *testing.T) {
	ds := []route.Deployment{dep("a", "us", "m"), dep("b", "us", "m")}
	reg := registry.New(measure.Options{MinSamples: 1})
	for i := range 20 {
		at := t0.Add(time.Duration(i-20) * time.Second)
		reg.RecordAt(at, ds[0].Key(), sample(200*time.Millisecond, 1000))
		reg.RecordAt(at, ds[1].Key(), sample(200*time.Millisecond, 900))
	}
	p := newPicker(t, ds, reg, strictOrder())
	first := func(now time.Time) route.Candidate {
		t.Helper()
		return mustPick(t, p, route.Request{Model: "m"}, now).Deployments[0]
	}
	require.Equal(t, "a", first(t0).Deployment.Provider)

	// At 0.2 s to the first token and 1000 tok/s, 200 tokens take 0.4 s.
	end := reg.BeginCallAt(t0, ds[0].Key(), 200)
	assert.Equal(t, "a", first(t0.Add(700*time.Millisecond)).Deployment.Provider, "under twice its time: noise")
	plan := mustPick(t, p, route.Request{Model: "m"}, t0.Add(time.Second))
	assert.Equal(t, []string{"b", "a"}, []string{plan.Deployments[0].Deployment.Provider, plan.Deployments[1].Deployment.Provider},
		"at 2.5 times its time the stalled call's deployment ranks below")
	a := plan.Deployments[1].Expected
	assert.InDelta(t, 1000, a.TPS, 1, "the deployment's figure stays")
	assert.InDelta(t, 400, a.CallTPS(), 1, "the call TPS is at most 1000/2.5")
	end()
	assert.Equal(t, "a", first(t0.Add(time.Second)).Deployment.Provider, "the call ended: its sample, not its age, decides")

	// A call without a cap (registry.Registry.BeginAt) is not timed.
	end = reg.BeginAt(t0, ds[0].Key())
	assert.Equal(t, "a", first(t0.Add(time.Minute)).Deployment.Provider)
	end()
	// Nor through a Source that hands out no handles.
	end = reg.BeginCallAt(t0, ds[0].Key(), 200)
	defer end()
	q := newPicker(t, ds, estimateOnly{reg}, strictOrder())
	assert.Equal(t, "a", mustPick(t, q, route.Request{Model: "m"}, t0.Add(time.Minute)).Deployments[0].Deployment.Provider)
}
