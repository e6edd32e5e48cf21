package tpsroute

import (
	"context"
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tpsroute/tpsroute/internal/registry"
	"github.com/tpsroute/tpsroute/replay"
	"github.com/tpsroute/tpsroute/route"
)

// The output gaps of a stream still running reach measure's live speed
// (registry.LiveTPS) through the Client's feedback, before the stream ends.
func TestOutputGapsFeedLiveSpeed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newMemFleet()
		url := f.add("a", map[string]replay.Script{"m": &replay.Profile{TTFT: 10 * time.Millisecond, TPS: 100, OutputTokens: 50, TokensPerChunk: 5}})
		c := mustNew(t, Config{Deployments: []route.Deployment{dep("a", "", "m", url)}, HTTPClient: &http.Client{Transport: f}})
		p := userParams("m", "hello")
		p.MaxTokens = openai.Int(50)
		s := c.Chat.Completions.NewStreaming(context.Background(), p)
		_, err := drain(t, s)
		require.NoError(t, err)
		require.NoError(t, s.Close())

		h := c.reg.Handle(c.Deployments()[0].Key())
		require.NotNil(t, h)
		s = c.Chat.Completions.NewStreaming(context.Background(), p)
		for range 6 {
			require.True(t, s.Next())
		}
		v, n := registry.LiveTPS(h)
		assert.Equal(t, 1, n, "the running stream counts")
		est, _ := c.reg.Estimate(c.Deployments()[0].Key())
		assert.InEpsilon(t, est.TPSP50, v, 0.02, "at the speed the first stream's sample showed")
		_, err = drain(t, s)
		require.NoError(t, err)
		require.NoError(t, s.Close())
		_, n = registry.LiveTPS(h)
		assert.Zero(t, n, "not once it ended")
	})
}
