package bench

import (
	"context"
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tpsroute/tpsroute"
	"github.com/tpsroute/tpsroute/replay"
	"github.com/tpsroute/tpsroute/route"
)

// knownConfig returns a router config of in-memory replay providers with the
// given profiles, one deployment per profile, all serving model "m".
func knownConfig(profiles map[string]*replay.Profile) tpsroute.Config {
	scripts := map[string]replay.Script{}
	for k, p := range profiles {
		scripts[k] = p
	}
	return knownConfigScripts(scripts)
}

// knownConfigScripts is knownConfig for any replay scripts; providers are
// named "a" to "d" and ordered by name.
func knownConfigScripts(scripts map[string]replay.Script) tpsroute.Config {
	hosts := replay.Hosts{}
	var deps []route.Deployment
	for _, name := range []string{"a", "b", "c", "d"} {
		p, ok := scripts[name]
		if !ok {
			continue
		}
		host := name + ".test.invalid"
		hosts[host] = replay.NewHandler(map[string]replay.Script{"m": p})
		deps = append(deps, route.Deployment{
			Provider: name, Region: "r1", Model: "m", BaseURL: "http://" + host + "/v1",
		})
	}
	return tpsroute.Config{Deployments: deps, HTTPClient: &http.Client{Transport: hosts}}
}

func TestRunAccuracy(t *testing.T) {
	tests := []struct {
		name    string
		ttft    time.Duration
		tps     float64
		jitter  float64
		rates   []float64
		poisson bool
		conc    []int
	}{
		{name: "closed exact", ttft: 200 * time.Millisecond, tps: 50, conc: []int{1}},
		{name: "closed jitter c=4", ttft: 800 * time.Millisecond, tps: 150, jitter: 0.2, conc: []int{4}},
		{name: "open poisson", ttft: 200 * time.Millisecond, tps: 50, jitter: 0.1, rates: []float64{5}, poisson: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				cfg := Config{
					Router: knownConfig(map[string]*replay.Profile{
						"a": {TTFT: tt.ttft, TPS: tt.tps, Jitter: tt.jitter, OutputTokens: 100, Seed: 1},
						"b": {TTFT: 4 * tt.ttft, TPS: 3 * tt.tps, Jitter: tt.jitter, OutputTokens: 100, Seed: 2},
					}),
					Concurrency: tt.conc, Rates: tt.rates, Poisson: tt.poisson,
					Requests: 40, Warmup: 2, Seed: 7,
				}
				rep, err := Run(context.Background(), cfg)
				require.NoError(t, err)
				require.Len(t, rep.Summaries, 2)
				for i, want := range []struct {
					ttft time.Duration
					tps  float64
				}{{tt.ttft, tt.tps}, {4 * tt.ttft, 3 * tt.tps}} {
					s := rep.Summaries[i]
					assert.Equal(t, 40, s.OK, "target %s errors %v", s.Target, s.Errors)
					assert.InEpsilon(t, float64(want.ttft.Milliseconds()), s.TTFT.P50, 0.05, "TTFT p50 of %s", s.Target)
					assert.InEpsilon(t, want.tps, s.TPS.P50, 0.05, "TPS p50 of %s", s.Target)
					assert.Equal(t, int64(4000), s.OutputTokens)
				}
			})
		})
	}
}

func TestRunProgress(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var got []Progress
		cfg := Config{
			Router:           knownConfig(map[string]*replay.Profile{"a": {TTFT: 200 * time.Millisecond, TPS: 50, OutputTokens: 20}, "b": {TTFT: 100 * time.Millisecond, TPS: 100, OutputTokens: 20}}),
			Requests:         20,
			ProgressInterval: time.Second,
			Progress:         func(p Progress) { got = append(got, p) },
		}
		_, err := Run(context.Background(), cfg)
		require.NoError(t, err)
		require.Greater(t, len(got), 5)
		last := got[len(got)-1]
		assert.True(t, last.Finished)
		assert.Equal(t, 40, last.Done)
		assert.Equal(t, 40, last.Total)
		assert.Zero(t, last.ETA)
		assert.Contains(t, last.Label, "cold c=1 b/r1/m")
		for i := 1; i < len(got); i++ {
			assert.GreaterOrEqual(t, got[i].Done, got[i-1].Done)
			if i < len(got)-1 {
				assert.Equal(t, time.Second, got[i].Elapsed-got[i-1].Elapsed, "one call per interval")
			}
		}
		mid := got[3]
		assert.Contains(t, mid.Label, "a/r1/m")
		assert.InDelta(t, 200, mid.TTFTP50, 1, "running p50 of the current target")
		assert.InDelta(t, 50, mid.TPSP50, 1)
		assert.Positive(t, mid.ETA)
	})
}
