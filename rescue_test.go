package tpsroute

import (
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tpsroute/tpsroute/fallback"
	"github.com/tpsroute/tpsroute/replay"
	"github.com/tpsroute/tpsroute/route"
)

// TestRescueFollowsTheSLO is issue 29 item 4 through the Client: a stream
// of a that slows to 20 tokens/s, under a quarter of its expected 100, is
// continued on b with exactly its text; with an SLO whose MinTPS (10) the
// slow stream still meets, from the Config or the call, it is left alone.
func TestRescueFollowsTheSLO(t *testing.T) {
	for _, tt := range []struct {
		name    string
		cfgSLO  route.SLO
		opts    []CallOption
		rescued bool
	}{
		{"no_slo", route.SLO{}, nil, true},
		{"config_min_tps_met", route.SLO{MinTPS: 10}, nil, false},
		{"call_min_tps_met", route.SLO{}, []CallOption{WithSLO(route.SLO{MinTPS: 10})}, false},
		{"call_min_tps_missed", route.SLO{MinTPS: 10}, []CallOption{WithSLO(route.SLO{MinTPS: 50})}, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := newMemFleet()
				good := &replay.Profile{TTFT: 100 * time.Millisecond, TPS: 100, OutputTokens: 150}
				a := dep("a", "", "m", f.add("a", map[string]replay.Script{"m": replay.WithFaults(good, replay.SlowAfter(5, 20))}))
				b := dep("b", "", "m", f.add("b", map[string]replay.Script{"m": good}))
				for _, d := range []*route.Deployment{&a, &b} {
					d.Capabilities.AssistantPrefill = true
					d.Expected = route.Prior{TPS: 100, TTFT: 100 * time.Millisecond}
				}
				cfg := Config{HTTPClient: &http.Client{Transport: f}, Deployments: []route.Deployment{a, b}}
				cfg.Route.SLO = tt.cfgSLO
				c := mustNew(t, cfg)
				s, text, err := streamOnce(t, c, "m", append(tt.opts, WithPin("a", ""))...)
				require.NoError(t, err)
				assert.Equal(t, replay.Text(150), text)
				atts := s.Outcome().Attempts
				require.NotEmpty(t, atts)
				assert.Equal(t, tt.rescued, atts[0].Rescued)
				if tt.rescued {
					assert.ErrorIs(t, atts[0].Err, fallback.ErrRescued)
					assert.Equal(t, "b", s.Outcome().Deployment.Provider)
				}
			})
		})
	}
}
