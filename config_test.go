package tpsroute

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tpsroute/tpsroute/measure"
	"github.com/tpsroute/tpsroute/replay"
	"github.com/tpsroute/tpsroute/route"
)

func TestConfigValidate(t *testing.T) {
	dep := route.Deployment{Provider: "a", Model: "m", BaseURL: "http://127.0.0.1:1/v1"}
	tests := []struct {
		name  string
		mut   func(*Config)
		field string
	}{
		{"no deployments", func(c *Config) { c.Deployments = nil }, "Deployments"},
		{"bad slo", func(c *Config) { c.Route.SLO.MaxErrorRate = 2 }, "Route.SLO.MaxErrorRate"},
		{"policy out of range", func(c *Config) { c.Route.Policy = 9 }, "Route.Policy"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Config{Deployments: []route.Deployment{dep}}
			tt.mut(&c)
			_, err := New(c)
			var ce *ConfigError
			require.ErrorAs(t, err, &ce)
			assert.Equal(t, tt.field, ce.Field)
		})
	}
	t.Run("invalid deployment from route names the field", func(t *testing.T) {
		bad := dep
		bad.BaseURL = ""
		_, err := New(Config{Deployments: []route.Deployment{bad}})
		require.ErrorIs(t, err, route.ErrInvalidDeployment)
		var de *route.DeploymentError
		require.ErrorAs(t, err, &de)
		assert.Equal(t, "BaseURL", de.Field)
	})
}

// Measure.Prices is honoured: a key priced only there is metered at that
// price, and a deployment's own Price wins over an entry for its key.
func TestMeasurePricesMerged(t *testing.T) {
	srv := replay.NewServer(map[string]replay.Script{"m": &replay.Profile{OutputTokens: 10}, "n": &replay.Profile{OutputTokens: 10}})
	defer srv.Close()
	own, onlyMeasure := measure.Price{Output: 2}, measure.Price{Output: 5}
	c := mustNew(t, Config{
		Deployments: []route.Deployment{
			{Provider: "a", Model: "m", BaseURL: srv.URL(), Price: own},
			{Provider: "b", Model: "n", BaseURL: srv.URL()},
		},
		Measure: measure.Options{Prices: map[measure.Key]measure.Price{
			{Provider: "a", Model: "m"}: {Output: 100},
			{Provider: "b", Model: "n"}: onlyMeasure,
		}},
	})
	for _, model := range []string{"m", "n"} {
		_, err := c.Chat.Completions.New(context.Background(), userParams(model, "Hi"))
		require.NoError(t, err)
	}
	snap := c.Stats()
	a, ok := snap.Lookup(measure.Key{Provider: "a", Model: "m"})
	require.True(t, ok)
	assert.InDelta(t, 10*2/1e6, a.Cost, 1e-12, "the deployment's Price wins")
	b, ok := snap.Lookup(measure.Key{Provider: "b", Model: "n"})
	require.True(t, ok)
	assert.InDelta(t, 10*5/1e6, b.Cost, 1e-12, "Measure.Prices prices a key the deployment does not")
}
