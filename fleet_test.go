package tpsroute

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tpsroute/tpsroute/internal/executor"
	"github.com/tpsroute/tpsroute/internal/registry"
	"github.com/tpsroute/tpsroute/measure"
	"github.com/tpsroute/tpsroute/replay"
	"github.com/tpsroute/tpsroute/route"
)

// recordingFleet is a Fleet that keeps what the Client hands it.
type recordingFleet struct {
	mu     sync.Mutex
	reg    *registry.Registry
	deps   []route.Deployment
	learn  func(string, measure.Key, time.Time)
	served []string
	joins  int
}

func (f *recordingFleet) JoinClient(reg *registry.Registry, deps []route.Deployment, learn func(string, measure.Key, time.Time)) (executor.Shared, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reg, f.deps, f.learn = reg, deps, learn
	f.joins++
	return nil, nil
}

func (f *recordingFleet) Served(cacheKey string, k measure.Key, _ time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.served = append(f.served, cacheKey+"@"+k.Provider)
}

func (f *recordingFleet) Owned(string, measure.Key) {}

func (f *recordingFleet) Owner(context.Context, string) (measure.Key, bool) {
	return measure.Key{}, false
}

// TestFleetWiring: New joins the Fleet once with the Client's registry and
// credential-free deployments; a served cache key reaches the Fleet only as
// a digest; a key the Fleet learned from another replica is an affinity hit.
func TestFleetWiring(t *testing.T) {
	pf := newMemFleet()
	a := dep("a", "us", "m", pf.add("a", map[string]replay.Script{"m": &replay.Profile{OutputTokens: 4}}))
	b := dep("b", "us", "m", pf.add("b", map[string]replay.Script{"m": &replay.Profile{OutputTokens: 4}}))
	rf := &recordingFleet{}
	cfg := Config{Deployments: []route.Deployment{a, b}, HTTPClient: &http.Client{Transport: pf}, Fleet: rf}
	c := mustNew(t, cfg)
	require.Equal(t, 1, rf.joins)
	require.Same(t, c.reg, rf.reg)
	for _, d := range rf.deps {
		assert.Empty(t, d.APIKey)
	}

	s, _, err := streamOnce(t, c, "m", WithCacheKey("user-42-session"))
	require.NoError(t, err)
	rf.mu.Lock()
	require.Len(t, rf.served, 1)
	assert.NotContains(t, rf.served[0], "user-42")
	assert.True(t, strings.HasPrefix(rf.served[0], "fleet:"), rf.served[0])
	rf.mu.Unlock()

	// Another replica served "other-session" on the deployment not chosen.
	other := a
	if s.Outcome().Deployment.Provider == "a" {
		other = b
	}
	rf.learn(fleetCacheKey("other-session"), other.Key(), time.Now())
	s, _, err = streamOnce(t, c, "m", WithCacheKey("other-session"))
	require.NoError(t, err)
	assert.Equal(t, other.Provider, s.Outcome().Deployment.Provider)
	assert.Equal(t, uint64(1), c.RouteStats().AffinityHits)
}
