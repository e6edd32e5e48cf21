package tpsroute

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"

	"github.com/tpsroute/tpsroute/fallback"
	"github.com/tpsroute/tpsroute/replay"
	"github.com/tpsroute/tpsroute/route"
)

// messagesText checks that raw is one well-formed Messages stream (one
// message_start first, blocks started in index order, each delta and stop
// in its open block, message_stop last) and returns its text.
func messagesText(t testing.TB, raw []byte) string {
	t.Helper()
	var text strings.Builder
	starts, blocks, open, stopped := 0, 0, -1, false
	for _, ev := range strings.Split(string(raw), "\n\n") {
		_, data, ok := strings.Cut(ev, "data: ")
		if !ok {
			continue
		}
		r := gjson.Parse(data)
		idx := int(r.Get("index").Int())
		assert.False(t, stopped, "an event after message_stop")
		switch typ := r.Get("type").String(); typ {
		case "message_start":
			starts++
		case "content_block_start":
			assert.Equal(t, blocks, idx, "blocks start in index order")
			assert.Equal(t, -1, open, "the previous block stopped")
			blocks, open = blocks+1, idx
		case "content_block_delta":
			assert.Equal(t, open, idx, "a delta of the open block")
			text.WriteString(r.Get("delta.text").String())
		case "content_block_stop":
			assert.Equal(t, open, idx)
			open = -1
		case "message_stop":
			stopped = true
		default:
			assert.Contains(t, []string{"ping", "message_delta"}, typ)
		}
	}
	assert.Equal(t, 1, starts, "one message_start")
	assert.True(t, stopped, "message_stop last")
	return text.String()
}

// TestMessagesContinuedEveryDoor is issue 30 item 5 through DoAPI and the
// Transport (a plain net/http client): a Messages stream cut after its
// tenth event continues on a same-model deployment that declares assistant
// prefill; the caller reads one Messages stream whose text is the whole
// answer, the prefill is the delivered text without its trailing space,
// and the Outcome's Sample is the continuation's, timed as one attempt.
func TestMessagesContinuedEveryDoor(t *testing.T) {
	const n = 30
	body := `{"model":"m","stream":true,"max_tokens":256,"messages":[{"role":"user","content":"hi"}]}`
	doors := map[string]func(t *testing.T, c *Client, ctx context.Context) ([]byte, *Response){
		"DoAPI": func(t *testing.T, c *Client, ctx context.Context) ([]byte, *Response) {
			r, err := c.DoAPI(ctx, route.APIMessages, []byte(body))
			require.NoError(t, err)
			raw, err := io.ReadAll(r.Body)
			require.NoError(t, err)
			require.NoError(t, r.Body.Close())
			return raw, r
		},
		"Transport": func(t *testing.T, c *Client, ctx context.Context) ([]byte, *Response) {
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://tpsroute.invalid/v1/messages", strings.NewReader(body))
			require.NoError(t, err)
			req.Header.Set("anthropic-version", "2023-06-01")
			resp, err := (&http.Client{Transport: c.Transport()}).Do(req)
			require.NoError(t, err)
			require.Equal(t, http.StatusOK, resp.StatusCode)
			raw, err := io.ReadAll(resp.Body)
			require.NoError(t, err)
			require.NoError(t, resp.Body.Close())
			return raw, nil
		},
	}
	for name, door := range doors {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := newMemFleet()
				prof := &replay.Profile{TTFT: 200 * time.Millisecond, TPS: 50, OutputTokens: n, Style: replay.Messages}
				a := dep("a", "", "m", f.add("a", map[string]replay.Script{"m": replay.WithFaults(prof, replay.CutAfter(10))}))
				b := dep("b", "", "m", f.add("b", map[string]replay.Script{"m": prof}))
				for _, d := range []*route.Deployment{&a, &b} {
					d.APIs = []route.API{route.APIMessages}
					d.Capabilities.AssistantPrefill = true
				}
				c := mustNew(t, Config{HTTPClient: &http.Client{Transport: f}, Deployments: []route.Deployment{a, b}})
				raw, r := door(t, c, ContextWithOptions(context.Background(), WithPin("a", "")))
				assert.Equal(t, replay.Text(n), messagesText(t, raw))
				reqs := f.providers["b"].requests()
				require.Len(t, reqs, 1)
				last := gjson.Get(reqs[0].Body, "messages.@reverse.0")
				assert.Equal(t, "assistant", last.Get("role").String())
				assert.Equal(t, strings.TrimSuffix(replay.Text(6), " "), last.Get("content").String(), "the delivered text, no trailing space")
				if r != nil {
					o := r.Outcome()
					assert.Equal(t, "b", o.Deployment.Provider)
					assert.Positive(t, o.Sample.TTFT, "the continuation's own timing")
					// w5's trailing space, which the prefill left out, is generated again.
					assert.Equal(t, int64(n-5), o.Sample.OutputTokens, "the continuation's tokens, as its message_delta says")
				}
			})
		})
	}
}

// TestMessagesPrefillRejectedThroughDoAPI: a Messages deployment that
// answers the prefill with a 400 is remembered and not offered a
// continuation again; the caller gets the typed mid-stream error.
func TestMessagesPrefillRejectedThroughDoAPI(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newMemFleet()
		prof := &replay.Profile{TTFT: 200 * time.Millisecond, TPS: 50, OutputTokens: 30, Style: replay.Messages}
		a := dep("a", "", "m", f.add("a", map[string]replay.Script{"m": replay.WithFaults(prof, replay.CutAfter(10))}))
		b := dep("b", "", "m", f.add("b", map[string]replay.Script{"m": replay.WithFaults(prof, replay.RejectPrefill())}))
		a.APIs, b.APIs = []route.API{route.APIMessages}, []route.API{route.APIMessages}
		b.Capabilities.AssistantPrefill = true
		c := mustNew(t, Config{HTTPClient: &http.Client{Transport: f}, Deployments: []route.Deployment{a, b}})
		for call := range 2 {
			r, err := c.DoAPI(ContextWithOptions(context.Background(), WithPin("a", "")), route.APIMessages,
				[]byte(`{"model":"m","stream":true,"max_tokens":256,"messages":[{"role":"user","content":"hi"}]}`))
			require.NoError(t, err)
			_, err = io.ReadAll(r.Body)
			require.NoError(t, r.Body.Close())
			require.ErrorIs(t, err, fallback.ErrMidStream, "call %d", call)
			var fe *fallback.Error
			require.ErrorAs(t, err, &fe)
			assert.Equal(t, fallback.ContinuationRejected, fe.Continuation(), "call %d", call)
		}
		assert.Len(t, f.providers["b"].requests(), 1, "one rejected prefill, then never offered again")
	})
}

// TestMessagesToolUseNotContinued: a Messages stream cut after a tool_use
// block is the typed mid-stream error with ContinuationUnsupported, through
// DoAPI and the Transport alike; no continuation is sent.
func TestMessagesToolUseNotContinued(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// apiMsgStream up to its message_delta, one event a millisecond,
		// then the connection is reset.
		cut := &replay.Cassette{Version: replay.CassetteVersion}
		cut.Response.Status, cut.Response.End = 200, "reset"
		for i, ev := range strings.SplitAfter(apiMsgStream[:strings.Index(apiMsgStream, "event: message_delta")], "\n\n") {
			if ev != "" {
				cut.Response.Events = append(cut.Response.Events, replay.Event{AtMS: float64(i), Raw: &ev})
			}
		}
		f := newMemFleet()
		prof := &replay.Profile{TTFT: 200 * time.Millisecond, TPS: 50, OutputTokens: 30, Style: replay.Messages}
		a := dep("a", "", "m", f.add("a", map[string]replay.Script{"m": cut}))
		b := dep("b", "", "m", f.add("b", map[string]replay.Script{"m": prof}))
		a.APIs, b.APIs = []route.API{route.APIMessages}, []route.API{route.APIMessages}
		b.Capabilities.AssistantPrefill = true
		c := mustNew(t, Config{HTTPClient: &http.Client{Transport: f}, Deployments: []route.Deployment{a, b}})
		ctx := ContextWithOptions(context.Background(), WithPin("a", ""))
		body := `{"model":"m","stream":true,"max_tokens":64,"messages":[{"role":"user","content":"hi"}]}`

		r, err := c.DoAPI(ctx, route.APIMessages, []byte(body))
		require.NoError(t, err)
		_, err = io.ReadAll(r.Body)
		require.NoError(t, r.Body.Close())
		require.ErrorIs(t, err, fallback.ErrMidStream)
		var fe *fallback.Error
		require.ErrorAs(t, err, &fe)
		assert.Equal(t, fallback.ContinuationUnsupported, fe.Continuation())
		assert.Contains(t, err.Error(), "the stream carried tool calls")

		req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://tpsroute.invalid/v1/messages", strings.NewReader(body))
		require.NoError(t, err)
		resp, err := (&http.Client{Transport: c.Transport()}).Do(req)
		require.NoError(t, err)
		raw, err := io.ReadAll(resp.Body)
		require.NoError(t, resp.Body.Close())
		require.Error(t, err, "never a clean end")
		assert.Contains(t, string(raw), `"tool_use"`, "the caller read the tool_use block")
		assert.Empty(t, f.providers["b"].requests(), "no continuation was sent")
	})
}
