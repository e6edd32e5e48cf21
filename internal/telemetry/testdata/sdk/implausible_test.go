package sdk_test

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/tpsroute/tpsroute"
	"github.com/tpsroute/tpsroute/replay"
	"github.com/tpsroute/tpsroute/route"
)

// lyingBody passes an SSE body through line by line with from replaced by
// to: an upstream that misreports its usage.
type lyingBody struct {
	r        *bufio.Reader
	c        io.Closer
	from, to []byte
	out      []byte
}

func (l *lyingBody) Read(p []byte) (int, error) {
	if len(l.out) == 0 {
		line, err := l.r.ReadSlice('\n')
		if len(line) == 0 {
			return 0, err
		}
		l.out = bytes.ReplaceAll(line, l.from, l.to)
	}
	n := copy(p, l.out)
	l.out = l.out[n:]
	return n, nil
}

func (l *lyingBody) Close() error { return l.c.Close() }

type rtFunc func(*http.Request) (*http.Response, error)

func (f rtFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestImplausibleUsageCounted: a deployment whose reported completion_tokens
// its five-chunk stream could not have carried is counted in
// tpsroute.usage.implausible, once per attempt, with its deployment's
// attributes and the reason, the same count as measure's
// Stats.ImplausibleUsage; an honest deployment has no series.
func TestImplausibleUsageCounted(t *testing.T) {
	for _, tt := range []struct {
		name, lie, reason string
	}{
		{"inflated", "1000000000000000000", "over-streamed"},
		{"negative", "-1", "negative"},
		{"zero for a streamed answer", "0", "no-visible"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := newSDK(t)
				f := fleet{}
				profile := map[string]replay.Script{"m": &replay.Profile{TTFT: 100 * time.Millisecond, TPS: 50, OutputTokens: 5}}
				honest := deployment("honest", "m", f.add("honest", profile))
				liar := deployment("liar", "m", f.add("liar", profile))
				inner := f["liar"]
				f["liar"] = rtFunc(func(r *http.Request) (*http.Response, error) {
					resp, err := inner.RoundTrip(r)
					if err == nil {
						resp.Body = &lyingBody{r: bufio.NewReader(resp.Body), c: resp.Body,
							from: []byte(`"completion_tokens":5,`), to: []byte(`"completion_tokens":` + tt.lie + `,`)}
					}
					return resp, err
				})
				c := s.client(t, f, tpsroute.Config{Deployments: []route.Deployment{honest, liar}})
				const calls = 3
				for range calls {
					for _, pin := range []string{"honest", "liar"} {
						_, err := drain(t, c.Chat.Completions.NewStreaming(context.Background(), params("m"), tpsroute.WithPin(pin, "")))
						require.NoError(t, err)
					}
				}

				m, ok := s.metrics(t)["tpsroute.usage.implausible"]
				require.True(t, ok, "the counter has a series")
				assert.Equal(t, "{attempt}", m.Unit)
				sum, ok := m.Data.(metricdata.Sum[int64])
				require.True(t, ok, "an int64 counter, got %T", m.Data)
				assert.True(t, sum.IsMonotonic)
				require.Len(t, sum.DataPoints, 1, "the liar's series only")
				dp := sum.DataPoints[0]
				assert.EqualValues(t, calls, dp.Value, "once per attempt")
				for k, v := range map[string]string{
					"gen_ai.provider.name": "liar", "tpsroute.region": "eu", "gen_ai.request.model": "m",
					"gen_ai.response.model": "m", "server.address": "liar.test", "server.port": "8443",
					"tpsroute.reason": tt.reason,
				} {
					assert.Equal(t, v, attr(dp.Attributes, k), k)
				}
				assert.False(t, dp.Attributes.HasValue("gen_ai.operation.name"), "tpsroute's own instruments carry no operation")

				st, ok := c.Stats().Lookup(liar.Key())
				require.True(t, ok)
				assert.Equal(t, st.ImplausibleUsage, dp.Value, "the same count as measure")
				st, ok = c.Stats().Lookup(honest.Key())
				require.True(t, ok)
				assert.Zero(t, st.ImplausibleUsage)
			})
		})
	}
}
