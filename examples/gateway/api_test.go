package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"

	"github.com/tpsroute/tpsroute/route"
)

// Responses and Messages streams as their APIs send them.
const (
	gwRespStream = "event: response.created\ndata: {\"type\":\"response.created\",\"sequence_number\":0,\"response\":{\"id\":\"resp_1\",\"status\":\"in_progress\"}}\n\n" +
		"event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"sequence_number\":1,\"delta\":\"Hello\"}\n\n" +
		"event: response.completed\ndata: {\"type\":\"response.completed\",\"sequence_number\":2,\"response\":{\"id\":\"resp_1\",\"status\":\"completed\",\"output\":[],\"usage\":{\"input_tokens\":4,\"output_tokens\":1,\"total_tokens\":5}}}\n\n"
	gwRespFailed = "event: response.created\ndata: {\"type\":\"response.created\",\"sequence_number\":0,\"response\":{\"id\":\"resp_0\"}}\n\n" +
		"event: response.failed\ndata: {\"type\":\"response.failed\",\"sequence_number\":1,\"response\":{\"error\":{\"code\":\"server_error\",\"message\":\"boom\"}}}\n\n"
	gwMsgHead = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[],\"model\":\"c\",\"usage\":{\"input_tokens\":3,\"output_tokens\":1}}}\n\n" +
		"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n" +
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hi\"}}\n\n"
	gwMsgTail = "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n" +
		"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":2}}\n\n" +
		"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"
	gwMsgOverloaded = "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n"
)

// apiHosts is an in-memory upstream: each host answers every request with
// its body (an SSE stream) and records the request. A body holding "|" is
// sent in two parts, the second when the first has been read.
type apiHosts struct {
	bodies map[string]string
	mu     sync.Mutex
	seen   []*http.Request
	sent   []string // the request bodies, by seen's order
}

func (h *apiHosts) RoundTrip(r *http.Request) (*http.Response, error) {
	b, _ := io.ReadAll(r.Body)
	h.mu.Lock()
	h.seen = append(h.seen, r)
	h.sent = append(h.sent, string(b))
	h.mu.Unlock()
	name, _, _ := strings.Cut(r.URL.Host, ".")
	body, ok := h.bodies[name]
	if !ok {
		return nil, io.ErrUnexpectedEOF
	}
	first, rest, _ := strings.Cut(body, "|")
	pr, pw := io.Pipe()
	go func() {
		_, err := io.WriteString(pw, first)
		if err == nil {
			_, err = io.WriteString(pw, rest)
		}
		pw.CloseWithError(err)
	}()
	return &http.Response{StatusCode: http.StatusOK, Header: http.Header{"Content-Type": {"text/event-stream"}}, Body: pr, Request: r}, nil
}

func (h *apiHosts) requests() []*http.Request {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]*http.Request(nil), h.seen...)
}

func apiGateway(t *testing.T, bodies map[string]string, opts options, ds ...route.Deployment) (*gateway, *apiHosts) {
	hosts := &apiHosts{bodies: bodies}
	c, err := newClient(testConfig(ds...), hosts)
	require.NoError(t, err)
	return newGateway(c, opts), hosts
}

func apiDep(provider string, apis ...route.API) route.Deployment {
	d := dep(provider, "", "m")
	d.APIs = apis
	return d
}

func serveAPI(g *gateway, path, body string, hdr ...string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodPost, path, strings.NewReader(body))
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	w := httptest.NewRecorder()
	g.ServeHTTP(w, req)
	return w
}

// TestGatewayResponses: POST /v1/responses is routed to Responses
// deployments with the directives ("provider": order), fails over on a
// response.failed before output, and is relayed without a [DONE] (the API
// has none); the debug page keeps its statistics under the Responses key.
func TestGatewayResponses(t *testing.T) {
	g, hosts := apiGateway(t, map[string]string{"a": gwRespFailed, "b": gwRespStream, "c": "never"}, options{},
		apiDep("a", route.APIResponses), apiDep("b", route.APIResponses), dep("c", "", "m"))
	w := serveAPI(g, "/v1/responses", `{"model":"m","stream":true,"input":"hi","provider":{"order":["a","b"]}}`)
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	assert.Equal(t, gwRespStream, w.Body.String(), "one attempt's stream, no [DONE]")
	assert.Equal(t, "2", w.Header().Get("X-Tpsroute-Attempts"))
	assert.Equal(t, "b//m#responses", w.Header().Get("X-Tpsroute-Deployment"))
	var hs []string
	for _, r := range hosts.requests() {
		hs = append(hs, r.URL.Host+r.URL.Path)
		assert.Empty(t, r.Header.Get("X-Api-Key"))
	}
	assert.Equal(t, []string{"a.test/v1/responses", "b.test/v1/responses"}, hs)

	w = serveAPI(g, "/v1/responses", `{"model":"m","input":"hi","provider":{"only":["b"]}}`)
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	assert.Equal(t, "resp_1", gjson.Get(w.Body.String(), "id").Str, "the response object")

	dbg := httptest.NewRecorder()
	g.ServeHTTP(dbg, httptest.NewRequest(http.MethodGet, "/debug/tpsroute", nil))
	assert.Contains(t, dbg.Body.String(), `"api":"responses"`)

	w = serveAPI(g, "/v1/messages", `{"model":"m","max_tokens":5,"messages":[]}`)
	assert.Equal(t, http.StatusNotFound, w.Code)
	assert.Equal(t, "not_found_error", anthropicErrorOf(t, w.Body.Bytes()).Get("type").Str, "in Anthropic's shape on /v1/messages")
}

// anthropicErrorOf returns the error object of an Anthropic-shaped error
// body ({"type":"error","error":{"type","message"}}).
func anthropicErrorOf(t testing.TB, body []byte) gjson.Result {
	t.Helper()
	require.Equal(t, "error", gjson.GetBytes(body, "type").Str, "an Anthropic-shaped error body: %s", body)
	e := gjson.GetBytes(body, "error")
	require.True(t, e.IsObject(), "%s", body)
	require.NotEmpty(t, e.Get("message").Str)
	require.NotEmpty(t, e.Get("type").Str)
	require.False(t, e.Get("code").Exists(), "no OpenAI fields: %s", body)
	return e
}

// TestGatewayMessagesErrors: every failure on /v1/messages before the
// stream is answered in Anthropic's error shape, with the status Anthropic
// uses (529 overloaded_error when no deployment could serve it), so
// anthropic-sdk-go reads it; the same failures on /v1/responses keep
// OpenAI's shape, which openai-go reads.
func TestGatewayMessagesErrors(t *testing.T) {
	g, _ := apiGateway(t, map[string]string{}, options{Tokens: []string{"gw-token"}},
		apiDep("a", route.APIMessages, route.APIResponses), dep("c", "", "chat-only"))
	auth := []string{"x-api-key", "gw-token"}
	msg := `"max_tokens":5,"messages":[{"role":"user","content":"hi"}]`
	tests := []struct {
		name, body string
		hdr        []string
		status     int
		typ        string
	}{
		{"bad request", `{"model":"m","max_tokens":0,"messages":[]}`, auth, http.StatusBadRequest, "invalid_request_error"},
		{"not JSON", `{`, auth, http.StatusBadRequest, "invalid_request_error"},
		{"unknown model", `{"model":"nope",` + msg + `}`, auth, http.StatusNotFound, "not_found_error"},
		{"model not served on messages", `{"model":"chat-only",` + msg + `}`, auth, http.StatusNotFound, "not_found_error"},
		{"all attempts failed", `{"model":"m",` + msg + `}`, auth, 529, "overloaded_error"},
		{"no key", `{"model":"m",` + msg + `}`, nil, http.StatusUnauthorized, "authentication_error"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := serveAPI(g, "/v1/messages", tt.body, tt.hdr...)
			assert.Equal(t, tt.status, w.Code, w.Body.String())
			assert.Equal(t, tt.typ, anthropicErrorOf(t, w.Body.Bytes()).Get("type").Str)
			assert.Equal(t, "false", w.Header().Get("X-Should-Retry"))
		})
	}
	w := serveAPI(g, "/v1/responses", `{"model":"m","input":"hi"}`, "Authorization", "Bearer gw-token")
	assert.Equal(t, http.StatusServiceUnavailable, w.Code, w.Body.String())
	assert.Equal(t, "no_deployment_available", errorOf(t, w.Body.Bytes()).Get("code").Str, "OpenAI's shape on /v1/responses")
}

// TestGatewayMessages: POST /v1/messages takes the caller's key as
// x-api-key, sends each deployment's own key and the caller's
// anthropic-version and anthropic-beta upstream, and ends a stream that
// fails after its first output with "event: error" in the Messages shape
// (which anthropic-sdk-go raises), never with a [DONE] or a data-only event.
func TestGatewayMessages(t *testing.T) {
	g, hosts := apiGateway(t, map[string]string{"a": gwMsgHead + "|" + gwMsgOverloaded, "b": gwMsgHead + gwMsgTail},
		options{Tokens: []string{"gw-token"}}, apiDep("a", route.APIMessages), apiDep("b", route.APIMessages))
	hdr := []string{"x-api-key", "gw-token", "anthropic-version", "2023-06-01", "anthropic-beta", "tools-2024-04-04"}

	w := serveAPI(g, "/v1/messages", `{"model":"m","stream":true,"max_tokens":5,"messages":[{"role":"user","content":"hi"}],"provider":{"order":["b"]}}`, hdr...)
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	assert.Equal(t, gwMsgHead+gwMsgTail, w.Body.String())

	w = serveAPI(g, "/v1/messages", `{"model":"m","stream":true,"max_tokens":5,"messages":[{"role":"user","content":"hi"}],"provider":{"order":["a"],"allow_fallbacks":false}}`, hdr...)
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	body := w.Body.String()
	require.True(t, strings.HasPrefix(body, gwMsgHead), body)
	tail := strings.TrimPrefix(body, gwMsgHead)
	assert.True(t, strings.HasPrefix(tail, "event: error\ndata: "), tail)
	data := strings.TrimSuffix(strings.TrimPrefix(tail, "event: error\ndata: "), "\n\n")
	assert.Equal(t, "error", gjson.Get(data, "type").Str)
	assert.Equal(t, "overloaded_error", gjson.Get(data, "error.type").Str, "the provider's own type")
	assert.Contains(t, gjson.Get(data, "error.message").Str, "the stream failed after it started")
	assert.NotContains(t, body, "[DONE]")

	for _, r := range hosts.requests() {
		name, _, _ := strings.Cut(r.URL.Host, ".")
		assert.Equal(t, "sk-"+name+"-secret-key", r.Header.Get("X-Api-Key"))
		assert.Empty(t, r.Header.Get("Authorization"))
		assert.Equal(t, "2023-06-01", r.Header.Get("Anthropic-Version"))
		assert.Equal(t, "tools-2024-04-04", r.Header.Get("Anthropic-Beta"))
		assert.Equal(t, "/v1/messages", r.URL.Path)
	}

	w = serveAPI(g, "/v1/messages", `{"model":"m","max_tokens":5,"messages":[]}`, "x-api-key", "wrong")
	assert.Equal(t, http.StatusUnauthorized, w.Code)
	assert.Equal(t, "authentication_error", anthropicErrorOf(t, w.Body.Bytes()).Get("type").Str)
}

// TestGatewayMessagesContinued: a /v1/messages stream that fails after
// its first output continues on a deployment that declares assistant
// prefill, the delivered text as the final assistant message, and the
// caller reads one Messages stream: the continuation's message_start and
// the start of the block it continues are not relayed.
func TestGatewayMessagesContinued(t *testing.T) {
	a, b := apiDep("a", route.APIMessages), apiDep("b", route.APIMessages)
	b.Capabilities.AssistantPrefill = true
	cont := strings.Replace(gwMsgHead, `"text":"Hi"`, `"text":" there"`, 1)
	g, hosts := apiGateway(t, map[string]string{"a": gwMsgHead + "|" + gwMsgOverloaded, "b": cont + gwMsgTail}, options{}, a, b)
	w := serveAPI(g, "/v1/messages", `{"model":"m","stream":true,"max_tokens":5,"messages":[{"role":"user","content":"hi"}],"provider":{"order":["a","b"]}}`,
		"anthropic-version", "2023-06-01")
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	assert.Equal(t, gwMsgHead+cont[strings.Index(cont, "event: content_block_delta"):]+gwMsgTail, w.Body.String())
	reqs := hosts.requests()
	require.Len(t, reqs, 2)
	assert.Equal(t, "b.test", reqs[1].URL.Host)
	hosts.mu.Lock()
	last := gjson.Get(hosts.sent[1], "messages.@reverse.0")
	hosts.mu.Unlock()
	assert.Equal(t, "assistant", last.Get("role").Str)
	assert.Equal(t, "Hi", last.Get("content").Str)
}

// embeddingsHost answers every request with an embeddings JSON answer.
type embeddingsHost struct{ body string }

func (h embeddingsHost) RoundTrip(r *http.Request) (*http.Response, error) {
	_, _ = io.Copy(io.Discard, r.Body)
	return &http.Response{StatusCode: http.StatusOK, Header: http.Header{"Content-Type": {"application/json"}},
		Body: io.NopCloser(strings.NewReader(h.body)), Request: r}, nil
}

// TestGatewayEmbeddings: POST /v1/embeddings is routed to embeddings
// deployments and answered with the provider's JSON as sent.
func TestGatewayEmbeddings(t *testing.T) {
	const answer = `{"object":"list","data":[{"object":"embedding","index":0,"embedding":"AACAPw=="}],"model":"e","usage":{"prompt_tokens":2,"total_tokens":2}}`
	c, err := newClient(testConfig(apiDep("e", route.APIEmbeddings)), embeddingsHost{answer})
	require.NoError(t, err)
	g := newGateway(c, options{})
	w := serveAPI(g, "/v1/embeddings", `{"model":"m","input":["a"],"encoding_format":"base64"}`)
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	assert.JSONEq(t, answer, w.Body.String())
	assert.Equal(t, "e//m#embeddings", w.Header().Get("X-Tpsroute-Deployment"))
	w = serveAPI(g, "/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`)
	assert.Equal(t, http.StatusNotFound, w.Code)
	assert.Equal(t, "api_not_served", errorOf(t, w.Body.Bytes()).Get("code").Str)
}
