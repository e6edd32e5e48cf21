package tpsroute

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tpsroute/tpsroute/replay"
	"github.com/tpsroute/tpsroute/route"
)

// TestWildcardModelsAreBounded: callers inventing model names cannot grow
// the statistics without bound through a wildcard deployment.
func TestWildcardModelsAreBounded(t *testing.T) {
	scripts := map[string]replay.Script{}
	for i := range 10 {
		scripts[fmt.Sprint("m", i)] = &replay.Profile{OutputTokens: 3}
	}
	call := func(c *Client, model string) error {
		_, err := c.Chat.Completions.New(context.Background(), userParams(model, "hi"))
		return err
	}
	t.Run("cap", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			f := newMemFleet()
			c := mustNew(t, Config{HTTPClient: &http.Client{Transport: f}, MaxWildcardModels: 3, Deployments: []route.Deployment{
				{Provider: "vllm", Model: route.Wildcard, BaseURL: f.add("vllm", scripts)},
			}})
			for i := range 3 {
				require.NoError(t, call(c, fmt.Sprint("m", i)))
			}
			require.NoError(t, call(c, "m1"), "an admitted model stays admitted")
			err := call(c, "m3")
			var me *ModelError
			require.ErrorAs(t, err, &me)
			assert.True(t, me.Capped)
			assert.ErrorIs(t, err, route.ErrNoDeployment)
			assert.Equal(t, http.StatusNotFound, c.HTTPError(err).Status)
			assert.Len(t, c.Stats().Keys(), 3, "the refused model created no statistics")
			assert.Equal(t, uint64(1), c.RefusedModels())
			assert.Len(t, f.providers["vllm"].requests(), 4, "nothing was sent for the refused model")

			time.Sleep(wildcardIdle + time.Minute) // virtual time: the three models go idle
			require.NoError(t, call(c, "m3"), "an idle model gives its place up")
		})
	})
	t.Run("fallback models count against the cap", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			f := newMemFleet()
			down := map[string]replay.Script{}
			for i := range 10 {
				down[fmt.Sprint("m", i)] = replay.WithFaults(&replay.Profile{}, replay.Status(http.StatusServiceUnavailable, "", nil))
			}
			c := mustNew(t, Config{HTTPClient: &http.Client{Transport: f}, MaxWildcardModels: 3, Deployments: []route.Deployment{
				{Provider: "vllm", Model: route.Wildcard, BaseURL: f.add("vllm", down)},
			}})
			_, err := c.Chat.Completions.New(context.Background(), userParams("m0", "hi"), WithModels("m1", "m2", "m3", "m4", "m5"))
			require.Error(t, err)
			assert.Len(t, c.Stats().Keys(), 3, "statistics for the admitted models only")
			assert.Equal(t, uint64(3), c.RefusedModels(), "m3, m4 and m5 refused")
		})
	})
	t.Run("default cap", func(t *testing.T) {
		w := newWildcards([]route.Deployment{{Provider: "p", Model: route.Wildcard, BaseURL: "http://x/v1"}}, 0)
		assert.Equal(t, 64, w.max)
		assert.Nil(t, newWildcards([]route.Deployment{{Provider: "p", Model: "m", BaseURL: "http://x/v1"}}, 0))
	})
	t.Run("known list", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			f := newMemFleet()
			c := mustNew(t, Config{HTTPClient: &http.Client{Transport: f}, Deployments: []route.Deployment{
				{Provider: "vllm", Model: route.Wildcard, Models: []string{"m0", "m1"}, BaseURL: f.add("vllm", scripts)},
				{Provider: "fixed", Model: "m5", BaseURL: f.add("fixed", scripts)},
			}})
			require.NoError(t, call(c, "m0"))
			require.NoError(t, call(c, "m5"))
			picks := c.RouteStats().Picks
			err := call(c, "m2")
			var me *ModelError
			require.ErrorAs(t, err, &me)
			assert.False(t, me.Capped)
			assert.Equal(t, http.StatusNotFound, c.HTTPError(err).Status)
			assert.Equal(t, picks, c.RouteStats().Picks, "refused before routing")
			assert.Len(t, c.Stats().Keys(), 2)
			assert.Equal(t, uint64(1), c.RefusedModels())
			assert.Equal(t, []string{"m5"}, c.ModelIDs())
		})
	})
	t.Run("models only on a wildcard", func(t *testing.T) {
		_, err := New(Config{Deployments: []route.Deployment{{Provider: "p", Model: "m", Models: []string{"x"}, BaseURL: "http://x/v1"}}})
		assert.True(t, errors.Is(err, route.ErrInvalidDeployment), "%v", err)
	})
}
