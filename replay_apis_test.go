package tpsroute

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tpsroute/tpsroute/internal/payload"
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

// embeddingsAnswer is an OpenAI embeddings answer, as the upstream of
// TestReplayRecordsAPIs sends it.
const embeddingsAnswer = `{"object":"list","data":[{"object":"embedding","index":0,"embedding":[0.25,-0.5]},{"object":"embedding","index":1,"embedding":[1,0]}],"model":"m","usage":{"prompt_tokens":7,"total_tokens":7}}`

// TestReplayRecordsAPIs: a Responses, Messages or embeddings call through
// the Client, recorded by replay's Recorder from a live upstream on
// 127.0.0.1, is one cassette holding the API's path, its named events with
// their timing and no credential (Authorization, Anthropic's x-api-key);
// replayed through a replay.Handler to the Client in a synctest bubble, it
// gives the same answer byte for byte and a Sample timed as the recording
// (TTFT at the recorded first output event), and a fault acts on the API's
// output events (SlowFirstToken delays the first delta).
func TestReplayRecordsAPIs(t *testing.T) {
	const key = "sk-live-secret-0123456789"
	tests := []struct {
		api      route.API
		body     string
		upstream func(t *testing.T) string // its base URL
	}{
		{route.APIResponses, `{"model":"m","stream":true,"input":"hi"}`, func(t *testing.T) string {
			s := replay.NewServer(map[string]replay.Script{"m": &replay.Profile{TTFT: 30 * time.Millisecond, TPS: 200, OutputTokens: 6, Style: replay.Responses}})
			t.Cleanup(s.Close)
			return s.URL()
		}},
		{route.APIMessages, `{"model":"m","stream":true,"max_tokens":64,"messages":[{"role":"user","content":"hi"}]}`, func(t *testing.T) string {
			s := replay.NewServer(map[string]replay.Script{"m": &replay.Profile{TTFT: 30 * time.Millisecond, TPS: 200, OutputTokens: 6, Style: replay.Messages}})
			t.Cleanup(s.Close)
			return s.URL()
		}},
		{route.APIEmbeddings, `{"model":"m","input":["a","b"]}`, func(t *testing.T) string {
			s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.Copy(io.Discard, r.Body)
				w.Header().Set("Content-Type", "application/json")
				_, _ = io.WriteString(w, embeddingsAnswer)
			}))
			t.Cleanup(s.Close)
			return s.URL + "/v1"
		}},
	}
	for _, tt := range tests {
		t.Run(string(tt.api), func(t *testing.T) {
			dir := t.TempDir()
			tr := &http.Transport{}
			t.Cleanup(tr.CloseIdleConnections)
			rec := replay.NewRecorder(tr, dir)
			d := dep("live", "", "m", tt.upstream(t))
			d.APIKey, d.APIs = key, []route.API{tt.api}
			live := mustNew(t, Config{HTTPClient: &http.Client{Transport: rec}, Deployments: []route.Deployment{d}})
			r, err := live.DoAPI(context.Background(), tt.api, []byte(tt.body))
			require.NoError(t, err)
			want, err := io.ReadAll(r.Body)
			require.NoError(t, err)
			require.NoError(t, r.Body.Close())
			recorded := r.Outcome().Sample
			require.NoError(t, recorded.Err)
			require.NoError(t, rec.Err())
			require.Len(t, rec.Files(), 1)

			raw, err := os.ReadFile(rec.Files()[0])
			require.NoError(t, err)
			assert.NotContains(t, string(raw), key, "no credential in the cassette")
			c, err := replay.LoadCassette(rec.Files()[0])
			require.NoError(t, err)
			assert.Equal(t, "/v1/"+tt.api.Path(), c.Request.Path)
			cred := "Authorization"
			if tt.api == route.APIMessages {
				cred = "X-Api-Key"
				assert.Equal(t, []string{anthropicVersion}, c.Request.Headers.Values("Anthropic-Version"))
			}
			assert.Equal(t, []string{route.Redacted}, c.Request.Headers.Values(cred))
			require.NotEmpty(t, c.Response.Events)
			if tt.api != route.APIEmbeddings {
				for _, e := range c.Response.Events {
					assert.NotEmpty(t, e.Event, "every event keeps its name")
				}
			}

			// The cassette's first output event (an embeddings answer's
			// first bytes): the replayed TTFT is its
			// offset exactly. The live TTFT was measured above the
			// recorder, in real time, so it is no earlier than that offset
			// and later by what the machine took to pass the event up (a
			// few ms under the race detector on a loaded machine).
			first := -1.0
			for _, e := range c.Response.Events {
				var ch payload.Chunk
				if tt.api == route.APIEmbeddings || e.Data != nil && payload.ParseEvent(uint8(protocol(tt.api)), []byte(*e.Data), &ch) == nil && ch.Output {
					first = e.AtMS
					break
				}
			}
			require.GreaterOrEqual(t, first, 0.0, "the cassette holds an output event")
			atFirst := time.Duration(first * float64(time.Millisecond))
			assert.GreaterOrEqual(t, recorded.TTFT, atFirst-time.Millisecond, "the live TTFT is no earlier than the recorded event")

			synctest.Test(t, func(t *testing.T) {
				for _, slow := range []time.Duration{0, time.Second} {
					var s replay.Script = c
					if slow > 0 {
						s = replay.WithFaults(c, replay.SlowFirstToken(slow))
					}
					h := replay.NewHandler(map[string]replay.Script{"m": s})
					d := dep("replay", "", "m", "http://replay.test/v1")
					d.APIs = []route.API{tt.api}
					cl := mustNew(t, Config{HTTPClient: &http.Client{Transport: h.Transport()}, Deployments: []route.Deployment{d}})
					r, err := cl.DoAPI(context.Background(), tt.api, []byte(tt.body))
					require.NoError(t, err)
					got, err := io.ReadAll(r.Body)
					require.NoError(t, err)
					require.NoError(t, r.Body.Close())
					assert.Equal(t, string(want), string(got), "the same answer")
					played := r.Outcome().Sample
					require.NoError(t, played.Err)
					assert.InDelta(t, atFirst+slow, played.TTFT, float64(time.Millisecond), "timed as the recording")
					assert.Equal(t, recorded.OutputTokens, played.OutputTokens)
					assert.Equal(t, recorded.InputTokens, played.InputTokens)
					assert.Equal(t, recorded.FinishReason, played.FinishReason)
					assert.Equal(t, recorded.End, played.End)
				}
			})
		})
	}
}
