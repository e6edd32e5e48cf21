package tpsroute

import (
	"context"
	"io"
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tpsroute/tpsroute/measure"
	"github.com/tpsroute/tpsroute/replay"
	"github.com/tpsroute/tpsroute/route"
)

// TestReplayAPIStylesThroughClient: replay's Responses and Messages styles
// serve DoAPI in a synctest bubble: an error event before the first output
// fails over, the answer is the other deployment's whole stream, and the
// statistics time the profile's TTFT under the API's key.
func TestReplayAPIStylesThroughClient(t *testing.T) {
	for _, tc := range []struct {
		api   route.API
		style replay.Style
		body  string
	}{
		{route.APIResponses, replay.Responses, `{"model":"m","stream":true,"input":"hi"}`},
		{route.APIMessages, replay.Messages, `{"model":"m","stream":true,"max_tokens":64,"messages":[{"role":"user","content":"hi"}]}`},
	} {
		t.Run(string(tc.api), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := newMemFleet()
				prof := &replay.Profile{TTFT: 300 * time.Millisecond, TPS: 50, OutputTokens: 6, Style: tc.style}
				a := dep("a", "", "m", f.add("a", map[string]replay.Script{"m": replay.WithFaults(prof, replay.ErrorEventAt(2, tc.style))}))
				b := dep("b", "", "m", f.add("b", map[string]replay.Script{"m": prof}))
				a.APIs, b.APIs = []route.API{tc.api}, []route.API{tc.api}
				c := mustNew(t, Config{HTTPClient: &http.Client{Transport: f}, Deployments: []route.Deployment{a, b}})
				r, err := c.DoAPI(ContextWithOptions(context.Background(), WithPin("a", "")), tc.api, []byte(tc.body))
				require.NoError(t, err)
				got, err := io.ReadAll(r.Body)
				require.NoError(t, err)
				require.NoError(t, r.Body.Close())
				assert.Equal(t, "b", r.Outcome().Deployment.Provider)
				assert.Contains(t, string(got), "w5 ")
				assert.NotContains(t, string(got), "event: error")
				s := r.Outcome().Sample
				assert.Equal(t, int64(6), s.OutputTokens)
				st, ok := c.Stats().Lookup(measure.Key{Provider: "b", Model: "m", API: string(tc.api)})
				require.True(t, ok)
				assert.InDelta(t, 0.3, st.TTFT.P50, 0.01)
			})
		})
	}
}
