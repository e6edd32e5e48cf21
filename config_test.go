package tpsroute

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

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
