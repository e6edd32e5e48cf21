package tpsroute

import (
	"context"
	"io"
	"net/http"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tpsroute/tpsroute/measure"
	"github.com/tpsroute/tpsroute/replay"
	"github.com/tpsroute/tpsroute/route"
)

// TestRevisionOnlyModel: a model configured only as "m@v2" is listed as
// "m@v2", and a call for the bare "m" is an unknown model (404
// model_not_found, a *ModelError), not an outage (503).
func TestRevisionOnlyModel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newMemFleet()
		d := dep("a", "us", "m", f.add("a", map[string]replay.Script{"m": &replay.Profile{OutputTokens: 4}}))
		d.Revision = "v2"
		c := mustNew(t, Config{HTTPClient: &http.Client{Transport: f}, Deployments: []route.Deployment{d}})
		assert.Equal(t, []string{"m@v2"}, c.ModelIDs())

		_, err := c.Do(context.Background(), []byte(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`))
		var me *ModelError
		require.ErrorAs(t, err, &me)
		assert.Equal(t, "m", me.Model)
		he := c.HTTPError(err)
		assert.Equal(t, http.StatusNotFound, he.Status, he.Message)
		assert.Equal(t, "model_not_found", he.Code)

		_, err = c.Do(context.Background(), []byte(`{"model":"m@v1","messages":[{"role":"user","content":"hi"}]}`))
		require.ErrorAs(t, err, &me, "an unknown revision is an unknown model too")
		assert.Equal(t, http.StatusNotFound, c.HTTPError(err).Status)

		r, err := c.Do(context.Background(), []byte(`{"model":"m@v2","messages":[{"role":"user","content":"hi"}]}`))
		require.NoError(t, err)
		_, _ = io.Copy(io.Discard, r.Body)
		require.NoError(t, r.Body.Close())
		assert.Equal(t, "v2", r.Outcome().Deployment.Revision)
	})
}

// TestPricePair: the SLO's MaxPrice demotes a deployment priced above it
// (it still serves when the cheap one fails); WithPriceCap drops it (the
// call fails instead of reaching it). Deployment b's output price is 4, a's
// 0.2; the router would put b first (WithProviders).
func TestPricePair(t *testing.T) {
	t.Run("max_price_demotes", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			c, _ := doFleet(false)
			var dec []route.Plan
			c.onDecision = func(_ route.Request, p route.Plan) { dec = append(dec, p) }
			r, err := c.Do(context.Background(), []byte(doBody), WithProviders("b", "a"), WithSLO(route.SLO{MaxPrice: 1}))
			require.NoError(t, err)
			_, _ = io.Copy(io.Discard, r.Body)
			require.NoError(t, r.Body.Close())
			assert.Equal(t, "a", r.Outcome().Deployment.Provider, "b is demoted behind a")
			require.Len(t, dec, 1)
			require.Len(t, dec[0].Deployments, 2, "b is demoted, not dropped")
			assert.Equal(t, "b", dec[0].Deployments[1].Deployment.Provider)
			assert.Equal(t, route.ViolatesPrice, dec[0].Deployments[1].Violations)
		})
	})
	t.Run("max_price_demoted_still_serves", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			c, _ := doFleet(true) // a answers 503
			r, err := c.Do(context.Background(), []byte(doBody), WithSLO(route.SLO{MaxPrice: 1}))
			require.NoError(t, err)
			_, _ = io.Copy(io.Discard, r.Body)
			require.NoError(t, r.Body.Close())
			assert.Equal(t, "b", r.Outcome().Deployment.Provider, "the demoted deployment is the fallback")
		})
	})
	t.Run("price_cap_drops", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			c, f := doFleet(true) // a answers 503
			_, err := c.Do(context.Background(), []byte(doBody), WithPriceCap(0, 1))
			require.Error(t, err, "b is above the cap, so nothing is left after a fails")
			assert.Zero(t, f.providers["b"].count(), "b is never called")
			assert.Equal(t, 503, c.HTTPError(err).Status)
		})
	})
	t.Run("price_cap_in_request", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			c, _ := doFleet(false)
			var dec route.Plan
			c.onDecision = func(_ route.Request, p route.Plan) { dec = p }
			r, err := c.Do(context.Background(), []byte(doBody), WithProviders("b", "a"), WithPriceCap(0.5, 0))
			require.NoError(t, err)
			_, _ = io.Copy(io.Discard, r.Body)
			require.NoError(t, r.Body.Close())
			require.Len(t, dec.Deployments, 1, "b's input price 1 is above the cap")
			assert.Equal(t, "a", dec.Deployments[0].Deployment.Provider)
			assert.Empty(t, dec.Excluded, "a capped deployment is not a candidate at all")
		})
	})
	t.Run("price_cap_leaves_nothing", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			c, _ := doFleet(false)
			_, err := c.Do(context.Background(), []byte(doBody), WithPriceCap(0, 0.1))
			require.ErrorIs(t, err, route.ErrNoDeployment)
			assert.Contains(t, err.Error(), "price cap")
			he := c.HTTPError(err)
			assert.Equal(t, 503, he.Status)
			assert.Equal(t, "no_deployment_available", he.Code)
		})
	})
}

// TestWithRequest: WithRequest passes a whole route.Request (its Model is
// ignored: the body names the model); a later shorthand changes one field
// of it, and an earlier one is replaced by it.
func TestWithRequest(t *testing.T) {
	route1 := func(t *testing.T, c *Client, opts ...CallOption) (route.Request, *Response, error) {
		var got route.Request
		c.onDecision = func(r route.Request, _ route.Plan) { got = r }
		r, err := c.Do(context.Background(), []byte(doBody), opts...)
		if err == nil {
			_, _ = io.Copy(io.Discard, r.Body)
			require.NoError(t, r.Body.Close())
		}
		return got, r, err
	}
	synctest.Test(t, func(t *testing.T) {
		c, _ := doFleet(false)
		got, r, err := route1(t, c, WithOnly("a"), WithRequest(route.Request{Model: "ignored", Pin: route.Pin{Provider: "b"}, Regions: []string{"eu"}}))
		require.NoError(t, err)
		assert.Equal(t, "b", r.Outcome().Deployment.Provider)
		assert.Equal(t, "m", got.Model, "the body names the model")
		assert.Empty(t, got.Only, "WithRequest replaced the earlier WithOnly")
		assert.Equal(t, []string{"eu"}, got.Regions)

		_, r, err = route1(t, c, WithRequest(route.Request{Pin: route.Pin{Provider: "b"}}), WithPin("a", ""))
		require.NoError(t, err)
		assert.Equal(t, "a", r.Outcome().Deployment.Provider, "a later shorthand changes its field")

		_, _, err = route1(t, c, WithRequest(route.Request{PriceCap: measure.Price{Output: 0.1}}))
		require.ErrorIs(t, err, route.ErrNoDeployment, "the price cap travels")
		_, _, err = route1(t, c, WithRequest(route.Request{Models: []string{"gpt-9"}}))
		var me *ModelError
		require.ErrorAs(t, err, &me)
		assert.Equal(t, "models", me.Param)
	})
}
