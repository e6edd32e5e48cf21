package tpsroute

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"

	"github.com/tpsroute/tpsroute/internal/sse"
	"github.com/tpsroute/tpsroute/route"
)

// loneCRStream is a legal SSE stream whose every line ends with a lone CR
// (docs/STREAM_QUIRKS.md Q4).
const loneCRStream = `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}` + "\r\r" +
	`data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"Hello"},"finish_reason":null}]}` + "\r\r" +
	`data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":" world"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5}}` + "\r\r" +
	"data: [DONE]\r\r"

// upstreamRecorder serves body as an SSE answer and keeps the headers of
// every request it got.
type upstreamRecorder struct {
	body string
	mu   sync.Mutex
	seen []http.Header
}

func (u *upstreamRecorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	u.mu.Lock()
	u.seen = append(u.seen, r.Header.Clone())
	u.mu.Unlock()
	w.Header().Set("Content-Type", "text/event-stream")
	_, _ = io.WriteString(w, u.body)
}

func (u *upstreamRecorder) last() http.Header {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.seen[len(u.seen)-1]
}

// TestLoneCRThroughEveryDoor: a stream with lone-CR line ends gives the whole
// answer through every door, never zero chunks and a nil error.
func TestLoneCRThroughEveryDoor(t *testing.T) {
	up := &upstreamRecorder{body: loneCRStream}
	srv := httptest.NewServer(up)
	t.Cleanup(srv.Close)
	c := mustNew(t, Config{HTTPClient: srv.Client(),
		Deployments: []route.Deployment{{Provider: "p", Region: "r", Model: "m", BaseURL: srv.URL + "/v1", APIKey: "sk-p-12345"}}})
	const want = "Hello world"
	streamBody := `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`
	plainBody := `{"model":"m","messages":[{"role":"user","content":"hi"}]}`
	sseText := func(t *testing.T, b []byte) string {
		var text []byte
		n := 0
		sse.ForEachData(b, func(d []byte) {
			n++
			text = append(text, gjson.GetBytes(d, "choices.0.delta.content").Str...)
		})
		return string(text)
	}

	t.Run("client streaming", func(t *testing.T) {
		s, text, err := streamOnce(t, c, "m")
		require.NoError(t, err)
		assert.Equal(t, want, text)
		assert.EqualValues(t, 2, s.Outcome().Sample.OutputTokens)
	})
	t.Run("client New", func(t *testing.T) {
		cc, err := c.Chat.Completions.New(context.Background(), userParams("m", "hi"))
		require.NoError(t, err)
		require.Len(t, cc.Choices, 1)
		assert.Equal(t, want, cc.Choices[0].Message.Content)
	})
	t.Run("Do streaming", func(t *testing.T) {
		r, err := c.Do(context.Background(), []byte(streamBody))
		require.NoError(t, err)
		b, err := io.ReadAll(r.Body)
		require.NoError(t, err)
		r.Body.Close()
		assert.Equal(t, want, sseText(t, b))
		assert.NotContains(t, string(b), "\r", "callers get LF line ends")
	})
	t.Run("Do buffered", func(t *testing.T) {
		r, err := c.Do(context.Background(), []byte(plainBody))
		require.NoError(t, err)
		b, err := io.ReadAll(r.Body)
		require.NoError(t, err)
		r.Body.Close()
		assert.Equal(t, want, gjson.GetBytes(b, "choices.0.message.content").Str)
	})
	t.Run("Transport read raw", func(t *testing.T) {
		req, err := http.NewRequest(http.MethodPost, "http://gw.invalid/v1/chat/completions", strings.NewReader(streamBody))
		require.NoError(t, err)
		resp, err := c.Transport().RoundTrip(req)
		require.NoError(t, err)
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, want, sseText(t, b))
	})
	t.Run("Transport read by openai-go", func(t *testing.T) {
		oc := openai.NewClient(option.WithBaseURL("http://gw.invalid/v1"), option.WithAPIKey("caller"),
			option.WithHTTPClient(&http.Client{Transport: c.Transport()}), option.WithMaxRetries(0))
		s := oc.Chat.Completions.NewStreaming(context.Background(), userParams("m", "hi"))
		var text strings.Builder
		n := 0
		for s.Next() {
			n++
			for _, ch := range s.Current().Choices {
				text.WriteString(ch.Delta.Content)
			}
		}
		require.NoError(t, s.Err())
		require.NoError(t, s.Close())
		assert.Equal(t, want, text.String())
		assert.Equal(t, 3, n, "openai-go reads every chunk")
	})
}

// TestOneUpstreamHeaderSet: whichever door a call came through, the provider
// receives the same headers, less what Go's transport adds; the Chat
// service no longer sends openai-go's User-Agent and X-Stainless-* headers.
func TestOneUpstreamHeaderSet(t *testing.T) {
	up := &upstreamRecorder{body: strings.ReplaceAll(loneCRStream, "\r", "\n")}
	srv := httptest.NewServer(up)
	t.Cleanup(srv.Close)
	c := mustNew(t, Config{HTTPClient: srv.Client(),
		Deployments: []route.Deployment{{Provider: "p", Region: "r", Model: "m", BaseURL: srv.URL + "/v1", APIKey: "sk-p-12345",
			Headers: map[string]string{"X-Route-Region": "eu"}}}})
	names := func(h http.Header) []string {
		var out []string
		for k := range h {
			switch k {
			case "Accept-Encoding", "Content-Length", "User-Agent": // Go's transport's own
				continue
			}
			out = append(out, k+"="+strings.Join(h[k], ","))
		}
		return out
	}
	body := `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`
	var sets [][]string

	_, _, err := streamOnce(t, c, "m", WithHeader("X-Trace", "t1"))
	require.NoError(t, err)
	assert.Equal(t, "Go-http-client/1.1", up.last().Get("User-Agent"), "not openai-go's")
	sets = append(sets, names(up.last()))

	_, err = c.Chat.Completions.New(context.Background(), userParams("m", "hi"), WithHeader("X-Trace", "t1"))
	require.NoError(t, err)
	sets = append(sets, names(up.last()))

	r, err := c.Do(context.Background(), []byte(body), WithHeader("X-Trace", "t1"))
	require.NoError(t, err)
	_, _ = io.ReadAll(r.Body)
	r.Body.Close()
	sets = append(sets, names(up.last()))

	req, err := http.NewRequest(http.MethodPost, "http://gw.invalid/v1/chat/completions", strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("X-Trace", "t1")
	req.Header.Set("Authorization", "Bearer caller-key") // never forwarded
	resp, err := c.Transport().RoundTrip(req)
	require.NoError(t, err)
	_, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	sets = append(sets, names(up.last()))

	for i := range sets {
		assert.ElementsMatch(t, sets[0], sets[i], "door %d", i)
	}
	assert.Contains(t, sets[0], "Authorization=Bearer sk-p-12345")
	assert.Contains(t, sets[0], "X-Trace=t1")
	assert.Contains(t, sets[0], "X-Route-Region=eu")
	for _, h := range sets[0] {
		assert.NotContains(t, h, "X-Stainless")
	}
}

// TestStreamReadsEventsUpToTheExecutorsLimit: an event the executor accepts
// under a raised Limits.Event is read by the Stream too, not refused at
// sse.MaxEvent.
func TestStreamReadsEventsUpToTheExecutorsLimit(t *testing.T) {
	big := strings.Repeat("x", sse.MaxEvent+1024)
	up := &upstreamRecorder{body: `data: {"choices":[{"index":0,"delta":{"content":"` + big + `"},"finish_reason":"stop"}]}` + "\n\ndata: [DONE]\n\n"}
	srv := httptest.NewServer(up)
	t.Cleanup(srv.Close)
	cfg := Config{HTTPClient: srv.Client(),
		Deployments: []route.Deployment{{Provider: "p", Region: "r", Model: "m", BaseURL: srv.URL + "/v1", APIKey: "sk-p-12345"}}}
	cfg.Fallback.Limits.Event = 2 * sse.MaxEvent
	c := mustNew(t, cfg)
	_, text, err := streamOnce(t, c, "m")
	require.NoError(t, err)
	assert.Equal(t, len(big), len(text))
}
