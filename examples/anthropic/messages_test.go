package anthropic_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/tpsroute/tpsroute"
	"github.com/tpsroute/tpsroute/measure"
	"github.com/tpsroute/tpsroute/replay"
	"github.com/tpsroute/tpsroute/route"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// stream is a Messages stream as Anthropic sends it: pings, a text block, a
// tool_use block whose input starts with an empty partial_json, usage split
// between message_start and message_delta.
const stream = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_01\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[],\"model\":\"claude-sonnet-4-5\",\"stop_reason\":null,\"stop_sequence\":null,\"usage\":{\"input_tokens\":20,\"cache_creation_input_tokens\":0,\"cache_read_input_tokens\":100,\"output_tokens\":1}}}\n\n" +
	"event: ping\ndata: {\"type\": \"ping\"}\n\n" +
	"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n" +
	"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hi \"}}\n\n" +
	"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"there\"}}\n\n" +
	"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n" +
	"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"tool_use\",\"id\":\"toolu_1\",\"name\":\"get_weather\",\"input\":{}}}\n\n" +
	"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"\"}}\n\n" +
	"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"city\\\": \\\"Paris\\\"}\"}}\n\n" +
	"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":1}\n\n" +
	"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"tool_use\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":9}}\n\n" +
	"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"

// upstream is a Messages provider on loopback answering status and body,
// recording the keys it was sent.
type upstream struct {
	srv    *httptest.Server
	status int
	body   string
	mu     sync.Mutex
	keys   []string
	auths  []string
}

func newUpstream(t *testing.T, status int, body string) *upstream {
	u := &upstream{status: status, body: body}
	u.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		u.mu.Lock()
		u.keys = append(u.keys, r.Header.Get("X-Api-Key"))
		u.auths = append(u.auths, r.Header.Get("Authorization"))
		u.mu.Unlock()
		if r.URL.Path != "/v1/messages" {
			http.NotFound(w, r)
			return
		}
		if u.status == http.StatusOK {
			w.Header().Set("Content-Type", "text/event-stream")
		} else {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(u.status)
		}
		_, _ = io.WriteString(w, u.body)
	}))
	t.Cleanup(func() { u.srv.CloseClientConnections(); u.srv.Close() })
	return u
}

func client(t *testing.T, ups ...*upstream) (*tpsroute.Client, anthropic.Client) {
	var ds []route.Deployment
	for i, u := range ups {
		ds = append(ds, route.Deployment{Provider: "p" + string(rune('0'+i)), Model: "claude", ProviderModel: "claude-sonnet-4-5",
			BaseURL: u.srv.URL + "/v1", APIKey: "sk-ant-" + string(rune('0'+i)) + "-secret", APIs: []route.API{route.APIMessages}})
	}
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	c, err := tpsroute.New(tpsroute.Config{Deployments: ds, HTTPClient: &http.Client{Transport: tr}, Route: route.Options{Seed: 1}})
	require.NoError(t, err)
	ac := anthropic.NewClient(option.WithBaseURL("http://tpsroute.invalid/"), option.WithAPIKey("caller-key"),
		option.WithHTTPClient(&http.Client{Transport: c.Transport()}), option.WithMaxRetries(0))
	return c, ac
}

var params = anthropic.MessageNewParams{
	Model:     "claude",
	MaxTokens: 256,
	Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Weather in Paris?"))},
}

// TestAnthropicSDK: anthropic-sdk-go's Messages.NewStreaming and New through
// the Transport: an HTTP 529 fails over to the next Messages deployment,
// the SDK's accumulator rebuilds the message from the routed stream, New
// decodes the message tpsroute assembled, each deployment gets its own
// x-api-key (the caller's never), and the call is measured under the
// Messages key.
func TestAnthropicSDK(t *testing.T) {
	over := newUpstream(t, 529, `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`)
	ok := newUpstream(t, http.StatusOK, stream)
	c, ac := client(t, over, ok)
	ctx := tpsroute.ContextWithOptions(context.Background(), tpsroute.WithPin("p0", ""))

	s := ac.Messages.NewStreaming(ctx, params)
	var msg anthropic.Message
	for s.Next() {
		require.NoError(t, msg.Accumulate(s.Current()))
	}
	require.NoError(t, s.Err())
	require.NoError(t, s.Close())
	require.Len(t, msg.Content, 2)
	assert.Equal(t, "Hi there", msg.Content[0].Text)
	assert.Equal(t, "get_weather", msg.Content[1].Name)
	assert.JSONEq(t, `{"city":"Paris"}`, string(msg.Content[1].Input))
	assert.Equal(t, anthropic.StopReasonToolUse, msg.StopReason)
	assert.Equal(t, int64(9), msg.Usage.OutputTokens)

	got, err := ac.Messages.New(ctx, params)
	require.NoError(t, err)
	assert.Equal(t, "msg_01", got.ID)
	require.Len(t, got.Content, 2)
	assert.Equal(t, "Hi there", got.Content[0].Text)
	assert.JSONEq(t, `{"city": "Paris"}`, string(got.Content[1].Input))
	assert.Equal(t, int64(100), got.Usage.CacheReadInputTokens)
	assert.Equal(t, int64(9), got.Usage.OutputTokens)

	for i, u := range []*upstream{over, ok} {
		u.mu.Lock()
		require.Len(t, u.keys, 2)
		for j := range u.keys {
			assert.Equal(t, "sk-ant-"+string(rune('0'+i))+"-secret", u.keys[j])
			assert.Empty(t, u.auths[j], "the caller's credentials never go upstream")
		}
		u.mu.Unlock()
	}
	st, found := c.Stats().Lookup(measure.Key{Provider: "p1", Model: "claude", API: "messages"})
	require.True(t, found)
	assert.Equal(t, int64(2), st.Successes)
}

// TestAnthropicSDKMidStreamError: an overloaded_error event after the first
// delta reaches anthropic-sdk-go as an error (the stream's, or the call's
// when nothing had been delivered yet), never a truncated success.
func TestAnthropicSDKMidStreamError(t *testing.T) {
	cut := stream[:strings.Index(stream, "event: content_block_stop")] +
		"event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n"
	_, ac := client(t, newUpstream(t, http.StatusOK, cut))
	s := ac.Messages.NewStreaming(context.Background(), params)
	for s.Next() {
	}
	require.Error(t, s.Err())
	require.NoError(t, s.Close())
}

// TestAnthropicSDKErrors: a Messages call that fails before its stream is
// answered by the Transport in Anthropic's error shape, with the status
// Anthropic uses, so anthropic-sdk-go returns an *anthropic.Error whose
// StatusCode, Type and Message say what happened: a bad request, an unknown
// model, every deployment overloaded (the provider's 529 passed on), a
// provider's 500, and no deployment reachable (529 overloaded_error, not
// OpenAI's 503 service_unavailable).
func TestAnthropicSDKErrors(t *testing.T) {
	over := newUpstream(t, 529, `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`)
	broken := newUpstream(t, http.StatusInternalServerError, `{"type":"error","error":{"type":"api_error","message":"Internal server error"}}`)
	gone := newUpstream(t, http.StatusOK, stream)
	gone.srv.Close() // nothing listens: every attempt fails to connect
	tests := []struct {
		name   string
		ups    []*upstream
		params func(p anthropic.MessageNewParams) anthropic.MessageNewParams
		status int
		typ    anthropic.ErrorType
	}{
		{"bad request", []*upstream{over}, func(p anthropic.MessageNewParams) anthropic.MessageNewParams { p.MaxTokens = -1; return p },
			http.StatusBadRequest, anthropic.ErrorTypeInvalidRequestError},
		{"unknown model", []*upstream{over}, func(p anthropic.MessageNewParams) anthropic.MessageNewParams { p.Model = "nope"; return p },
			http.StatusNotFound, anthropic.ErrorTypeNotFoundError},
		{"every deployment overloaded", []*upstream{over, over}, nil, 529, anthropic.ErrorTypeOverloadedError},
		{"provider error", []*upstream{broken}, nil, http.StatusInternalServerError, anthropic.ErrorTypeAPIError},
		{"no deployment reachable", []*upstream{gone}, nil, 529, anthropic.ErrorTypeOverloadedError},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, ac := client(t, tt.ups...)
			p := params
			if tt.params != nil {
				p = tt.params(p)
			}
			check := func(err error) {
				t.Helper()
				var ae *anthropic.Error
				require.ErrorAs(t, err, &ae)
				assert.Equal(t, tt.status, ae.StatusCode)
				assert.Equal(t, tt.typ, ae.Type())
				assert.NotEmpty(t, ae.Message)
				assert.NotContains(t, ae.RawJSON(), "secret")
			}
			_, err := ac.Messages.New(context.Background(), p)
			check(err)
			s := ac.Messages.NewStreaming(context.Background(), p)
			for s.Next() {
			}
			check(s.Err())
			require.NoError(t, s.Close())
		})
	}
}

// hosts is an in-memory fleet: each request goes to the replay handler of
// its URL's host.
type hosts map[string]*replay.Handler

func (h hosts) RoundTrip(r *http.Request) (*http.Response, error) {
	return h[r.URL.Host].Transport().RoundTrip(r)
}

// TestAnthropicSDKContinuation: a Messages stream cut after its tenth event
// continues on a deployment that declares assistant prefill, and
// anthropic-sdk-go's accumulator reads one message: one text block holding
// the whole answer, the continuation's stop reason.
func TestAnthropicSDKContinuation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n = 30
		prof := &replay.Profile{TTFT: 200 * time.Millisecond, TPS: 50, OutputTokens: n, Style: replay.Messages}
		fleet := hosts{
			"a.test": replay.NewHandler(map[string]replay.Script{"claude-sonnet-4-5": replay.WithFaults(prof, replay.CutAfter(10))}),
			"b.test": replay.NewHandler(map[string]replay.Script{"claude-sonnet-4-5": prof}),
		}
		var ds []route.Deployment
		for _, p := range []string{"a", "b"} {
			ds = append(ds, route.Deployment{Provider: p, Model: "claude", ProviderModel: "claude-sonnet-4-5", BaseURL: "http://" + p + ".test/v1",
				APIKey: "sk-ant-" + p, APIs: []route.API{route.APIMessages}, Capabilities: route.Capabilities{AssistantPrefill: true}})
		}
		c, err := tpsroute.New(tpsroute.Config{Deployments: ds, HTTPClient: &http.Client{Transport: fleet}})
		require.NoError(t, err)
		ac := anthropic.NewClient(option.WithBaseURL("http://tpsroute.invalid/"), option.WithAPIKey("caller-key"),
			option.WithHTTPClient(&http.Client{Transport: c.Transport()}), option.WithMaxRetries(0))

		s := ac.Messages.NewStreaming(tpsroute.ContextWithOptions(context.Background(), tpsroute.WithPin("a", "")), params)
		var msg anthropic.Message
		for s.Next() {
			require.NoError(t, msg.Accumulate(s.Current()))
		}
		require.NoError(t, s.Err())
		require.NoError(t, s.Close())
		require.Len(t, msg.Content, 1, "the continued block is one block")
		assert.Equal(t, replay.Text(n), msg.Content[0].Text)
		assert.Equal(t, anthropic.StopReasonEndTurn, msg.StopReason)
		require.Len(t, fleet["b.test"].Attempts(), 1)
		assert.Equal(t, "assistant", fleet["b.test"].Attempts()[0].LastRole)
	})
}
