package tpsroute

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tpsroute/tpsroute/measure"
	"github.com/tpsroute/tpsroute/replay"
	"github.com/tpsroute/tpsroute/route"
)

// calls runs n streaming calls spaced by gap and returns who answered each.
func calls(t *testing.T, c *Client, n int, gap time.Duration, opts ...CallOption) []string {
	t.Helper()
	out := make([]string, 0, n)
	for range n {
		s, _, err := streamOnce(t, c, "m", opts...)
		require.NoError(t, err)
		out = append(out, s.Outcome().Deployment.Provider)
		time.Sleep(gap)
	}
	return out
}

func share(seq []string, provider string) float64 {
	if len(seq) == 0 {
		return 0
	}
	n := 0
	for _, p := range seq {
		if p == provider {
			n++
		}
	}
	return float64(n) / float64(len(seq))
}

func testMeasure() measure.Options {
	return measure.Options{Window: measure.WindowOptions{Length: time.Minute}, MinSamples: 3}
}

func TestThroughputFollowsDegradationAndRecovery(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newMemFleet()
		a := f.add("a", map[string]replay.Script{"m": &replay.Profile{
			TTFT: 100 * time.Millisecond, TPS: 200, OutputTokens: 50,
			Phases: []replay.Phase{{After: 60 * time.Second, TPS: 20}, {After: 150 * time.Second, TPS: 200}},
		}})
		b := f.add("b", map[string]replay.Script{"m": &replay.Profile{TTFT: 100 * time.Millisecond, TPS: 100, OutputTokens: 50}})
		c := mustNew(t, Config{
			HTTPClient:  &http.Client{Transport: f},
			Deployments: []route.Deployment{dep("a", "", "m", a), dep("b", "", "m", b)},
			Route:       route.Options{Seed: 7},
			Measure:     testMeasure(),
		})
		var before, during, after []string
		for time.Since(start(t)) < 60*time.Second {
			before = append(before, calls(t, c, 1, 2*time.Second)...)
		}
		for time.Since(start(t)) < 150*time.Second {
			during = append(during, calls(t, c, 1, 2*time.Second)...)
		}
		for time.Since(start(t)) < 300*time.Second {
			after = append(after, calls(t, c, 1, 2*time.Second)...)
		}
		t.Logf("before %s", strings.Join(before, ""))
		t.Logf("during %s", strings.Join(during, ""))
		t.Logf("after  %s", strings.Join(after, ""))
		t.Logf("%+v", c.RouteStats())

		assert.Greater(t, share(before[len(before)/2:], "a"), 0.8, "the faster deployment takes the traffic once measured")
		require.Greater(t, len(during), 20)
		assert.Greater(t, share(during[20:], "b"), 0.8, "within 20 calls of the degradation traffic moves to b")
		assert.Greater(t, share(after[len(after)/2:], "a"), 0.8, "after recovery traffic comes back to a")
	})
}

var bubbleStart = map[*testing.T]time.Time{}

// start returns the bubble's start time (the first call's time.Now).
func start(t *testing.T) time.Time {
	if s, ok := bubbleStart[t]; ok {
		return s
	}
	bubbleStart[t] = time.Now()
	return bubbleStart[t]
}

var _ = context.Background

func TestCostPicksCheapestWithinSLO(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newMemFleet()
		prof := func(tps float64) map[string]replay.Script {
			return map[string]replay.Script{"m": &replay.Profile{TTFT: 50 * time.Millisecond, TPS: tps, OutputTokens: 40}}
		}
		cheapSlow := dep("cheap", "", "m", f.add("cheap", prof(20)))
		cheapSlow.Price = measure.Price{Input: 0.1, Output: 0.2}
		mid := dep("mid", "", "m", f.add("mid", prof(100)))
		mid.Price = measure.Price{Input: 0.5, Output: 1}
		dear := dep("dear", "", "m", f.add("dear", prof(300)))
		dear.Price = measure.Price{Input: 2, Output: 8}
		c := mustNew(t, Config{
			HTTPClient:  &http.Client{Transport: f},
			Deployments: []route.Deployment{cheapSlow, mid, dear},
			Route:       route.Options{Seed: 3, Policy: route.Cost, SLO: route.SLO{MinTPS: 50}},
			Measure:     testMeasure(),
		})
		seq := calls(t, c, 60, time.Second)
		t.Logf("%s", strings.Join(seq, ","))
		// Exploration and cold probes keep a few calls on the others.
		assert.GreaterOrEqual(t, share(seq[30:], "mid"), 0.7, "the cheapest deployment that meets min_tps takes the traffic")

		// Without the SLO the cheapest takes it.
		seq = calls(t, c, 20, time.Second, WithSLO(route.SLO{MinTPS: 1}))
		assert.Greater(t, share(seq, "cheap"), 0.8)
	})
}

func TestCallOptionsConstrainThePlan(t *testing.T) {
	setup := func(t *testing.T) *Client {
		f := newMemFleet()
		ok := func() map[string]replay.Script {
			return map[string]replay.Script{"m": &replay.Profile{OutputTokens: 8}, "m2": &replay.Profile{OutputTokens: 8}}
		}
		down := map[string]replay.Script{"m": replay.WithFaults(&replay.Profile{}, replay.Status(503, "", nil))}
		ds := []route.Deployment{
			dep("a", "us", "m", f.add("aus", ok())),
			dep("a", "eu", "m", f.add("aeu", ok())),
			dep("b", "eu", "m", f.add("beu", down)),
			dep("c", "us", "m", f.add("cus", ok())),
			dep("d", "us", "m2", f.add("dus", ok())),
		}
		return mustNew(t, Config{HTTPClient: &http.Client{Transport: f}, Deployments: ds, Route: route.Options{Seed: 1, Exploration: -1}})
	}
	first := func(t *testing.T, s *Stream) string {
		a := s.Outcome().Attempts
		require.NotEmpty(t, a)
		return a[0].Key.Provider + "/" + a[0].Key.Region
	}
	tests := []struct {
		name string
		run  func(t *testing.T, c *Client)
	}{
		{"pin puts the pinned deployment first", func(t *testing.T, c *Client) {
			for range 5 {
				s, _, err := streamOnce(t, c, "m", WithPin("a", "eu"))
				require.NoError(t, err)
				assert.Equal(t, "a/eu", first(t, s))
			}
		}},
		{"pin still fails over", func(t *testing.T, c *Client) {
			s, _, err := streamOnce(t, c, "m", WithPin("b", "eu"))
			require.NoError(t, err)
			assert.Equal(t, "b/eu", first(t, s))
			assert.NotEqual(t, "b", s.Outcome().Deployment.Provider)
		}},
		{"pin without fallback fails", func(t *testing.T, c *Client) {
			s, _, err := streamOnce(t, c, "m", WithPin("b", "eu"), WithoutFallback())
			require.Error(t, err)
			require.NotEmpty(t, s.Outcome().Attempts)
			for _, a := range s.Outcome().Attempts {
				assert.Equal(t, "b", a.Key.Provider)
			}
		}},
		{"unknown pin", func(t *testing.T, c *Client) {
			_, _, err := streamOnce(t, c, "m", WithPin("zz", ""))
			require.ErrorIs(t, err, route.ErrNoDeployment)
			var pe *route.PinError
			require.ErrorAs(t, err, &pe)
		}},
		{"region restriction never leaves the region", func(t *testing.T, c *Client) {
			for range 10 {
				s, _, err := streamOnce(t, c, "m", WithRegion("eu"))
				require.NoError(t, err)
				assert.Equal(t, "eu", s.Outcome().Deployment.Region)
				for _, a := range s.Outcome().Attempts {
					assert.Equal(t, "eu", a.Key.Region)
				}
			}
			// In eu only b is left under Only("b"), and it is down: the call
			// fails rather than leave the region.
			s, _, err := streamOnce(t, c, "m", WithRegion("eu"), WithOnly("b"))
			require.Error(t, err)
			for _, a := range s.Outcome().Attempts {
				assert.Equal(t, "eu", a.Key.Region)
			}
		}},
		{"provider order", func(t *testing.T, c *Client) {
			s, _, err := streamOnce(t, c, "m", WithProviders("c", "a"))
			require.NoError(t, err)
			assert.Equal(t, "c/us", first(t, s))
		}},
		{"only and ignore", func(t *testing.T, c *Client) {
			_, _, err := streamOnce(t, c, "m", WithOnly("a"), WithIgnore("a"))
			require.ErrorIs(t, err, route.ErrNoDeployment, "only a, then ignoring a, leaves nothing")
			for range 5 {
				s, _, err := streamOnce(t, c, "m", WithIgnore("a", "b"))
				require.NoError(t, err)
				assert.Equal(t, "c", s.Outcome().Deployment.Provider)
			}
		}},
		{"model list fallback", func(t *testing.T, c *Client) {
			s, _, err := streamOnce(t, c, "m", WithOnly("b", "d"), WithModels("m2"))
			require.NoError(t, err)
			assert.Equal(t, "d", s.Outcome().Deployment.Provider)
			assert.Equal(t, "m2", s.Outcome().Deployment.Model)
		}},
		{"unknown model", func(t *testing.T, c *Client) {
			_, _, err := streamOnce(t, c, "nope")
			require.ErrorIs(t, err, route.ErrNoDeployment)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { tt.run(t, setup(t)) })
		})
	}
}
