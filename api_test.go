package tpsroute

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tpsroute/tpsroute/fallback"
	"github.com/tpsroute/tpsroute/measure"
	"github.com/tpsroute/tpsroute/route"
)

// Responses and Messages streams as the APIs send them.
const (
	apiRespStream = "event: response.created\ndata: {\"type\":\"response.created\",\"sequence_number\":0,\"response\":{\"id\":\"resp_1\",\"object\":\"response\",\"status\":\"in_progress\",\"model\":\"gpt-4.1\",\"output\":[],\"usage\":null,\"error\":null}}\n\n" +
		"event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"sequence_number\":1,\"item_id\":\"msg_1\",\"output_index\":0,\"content_index\":0,\"delta\":\"Hello \"}\n\n" +
		"event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"sequence_number\":2,\"item_id\":\"msg_1\",\"output_index\":0,\"content_index\":0,\"delta\":\"world!\"}\n\n" +
		"event: response.completed\ndata: {\"type\":\"response.completed\",\"sequence_number\":3,\"response\":{\"id\":\"resp_1\",\"object\":\"response\",\"status\":\"completed\",\"model\":\"gpt-4.1\",\"output\":[{\"id\":\"msg_1\",\"type\":\"message\",\"status\":\"completed\",\"role\":\"assistant\",\"content\":[{\"type\":\"output_text\",\"annotations\":[],\"text\":\"Hello world!\"}]}],\"error\":null,\"usage\":{\"input_tokens\":12,\"input_tokens_details\":{\"cached_tokens\":0},\"output_tokens\":3,\"output_tokens_details\":{\"reasoning_tokens\":0},\"total_tokens\":15}}}\n\n"
	apiRespFailed = "event: response.created\ndata: {\"type\":\"response.created\",\"sequence_number\":0,\"response\":{\"id\":\"resp_0\",\"status\":\"in_progress\"}}\n\n" +
		"event: response.failed\ndata: {\"type\":\"response.failed\",\"sequence_number\":1,\"response\":{\"id\":\"resp_0\",\"status\":\"failed\",\"error\":{\"code\":\"server_error\",\"message\":\"boom\"}}}\n\n"
	apiMsgStream = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[],\"model\":\"claude-x\",\"stop_reason\":null,\"stop_sequence\":null,\"usage\":{\"input_tokens\":20,\"cache_creation_input_tokens\":0,\"cache_read_input_tokens\":100,\"output_tokens\":1}}}\n\n" +
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
	apiChatStream = "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"chat\"},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n"
)

// apiUpstream is a provider on loopback that serves every API at its path
// with the answer set for it, and records what it was sent.
type apiUpstream struct {
	srv     *httptest.Server
	mu      sync.Mutex
	answers map[string]apiAnswerSpec // by path suffix: "responses", "messages", "chat/completions"
	seen    []seen
	paths   []string
}

type apiAnswerSpec struct {
	status int
	body   string
}

func newAPIUpstream(t *testing.T, answers map[string]apiAnswerSpec) *apiUpstream {
	u := &apiUpstream{answers: answers}
	u.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		u.mu.Lock()
		u.seen = append(u.seen, seen{Header: r.Header.Clone(), Body: string(b)})
		u.paths = append(u.paths, r.URL.Path)
		answers := u.answers
		u.mu.Unlock()
		for suffix, a := range answers {
			if strings.HasSuffix(r.URL.Path, "/"+suffix) {
				switch {
				case a.status != http.StatusOK:
					w.WriteHeader(a.status)
				case suffix == "embeddings":
					w.Header().Set("Content-Type", "application/json")
				default:
					w.Header().Set("Content-Type", "text/event-stream")
				}
				_, _ = io.WriteString(w, a.body)
				return
			}
		}
		http.NotFound(w, r)
	}))
	t.Cleanup(func() { u.srv.CloseClientConnections(); u.srv.Close() })
	return u
}

func (u *apiUpstream) requests() ([]seen, []string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]seen(nil), u.seen...), append([]string(nil), u.paths...)
}

// apiClient returns a Client over deployments whose BaseURL is each
// upstream's, with loopback connections closed after the test.
func apiClient(t *testing.T, ds ...route.Deployment) *Client {
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	return mustNew(t, Config{Deployments: ds, HTTPClient: &http.Client{Transport: tr}, Route: route.Options{Seed: 1}})
}

func apiDep(provider string, u *apiUpstream, apis ...route.API) route.Deployment {
	d := dep(provider, "", "m", u.srv.URL+"/v1")
	d.APIs = apis
	return d
}

// TestAPIRoutesOnlyToServingDeployments: a call of each API goes only to the
// deployments that declare it, at the API's path, and a model served on
// other APIs only is a *route.APIError (404 api_not_served), never
// translated.
func TestAPIRoutesOnlyToServingDeployments(t *testing.T) {
	chat := newAPIUpstream(t, map[string]apiAnswerSpec{"chat/completions": {200, apiChatStream}})
	resp := newAPIUpstream(t, map[string]apiAnswerSpec{"responses": {200, apiRespStream}})
	msgs := newAPIUpstream(t, map[string]apiAnswerSpec{"messages": {200, apiMsgStream}})
	c := apiClient(t, apiDep("c", chat), apiDep("r", resp, route.APIResponses), apiDep("a", msgs, route.APIMessages))

	for _, tc := range []struct {
		api  route.API
		body string
		want *apiUpstream
		path string
	}{
		{route.APIChat, `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`, chat, "/v1/chat/completions"},
		{route.APIResponses, `{"model":"m","stream":true,"input":"hi"}`, resp, "/v1/responses"},
		{route.APIMessages, `{"model":"m","stream":true,"max_tokens":64,"messages":[{"role":"user","content":"hi"}]}`, msgs, "/v1/messages"},
	} {
		t.Run(string(tc.api), func(t *testing.T) {
			r, err := c.DoAPI(context.Background(), tc.api, []byte(tc.body))
			require.NoError(t, err)
			_, err = io.ReadAll(r.Body)
			require.NoError(t, err)
			require.NoError(t, r.Body.Close())
			for _, u := range []*apiUpstream{chat, resp, msgs} {
				_, paths := u.requests()
				if u == tc.want {
					assert.Equal(t, []string{tc.path}, paths)
				} else {
					assert.Empty(t, paths)
				}
				u.mu.Lock()
				u.seen, u.paths = nil, nil
				u.mu.Unlock()
			}
		})
	}

	only := apiClient(t, apiDep("c", chat), apiDep("a", msgs, route.APIMessages))
	_, err := only.DoAPI(context.Background(), route.APIResponses, []byte(`{"model":"m","input":"hi"}`))
	var ae *route.APIError
	require.ErrorAs(t, err, &ae)
	assert.Equal(t, &route.APIError{API: route.APIResponses, Model: "m", Served: []route.API{route.APIChat, route.APIMessages}}, ae)
	he := only.HTTPError(err)
	assert.Equal(t, http.StatusNotFound, he.Status)
	assert.Equal(t, "api_not_served", he.Code)
	assert.Contains(t, he.Message, "does not translate between APIs")

	// A model with a deployment on the API, and another model that has none.
	other := dep("x", "", "other", msgs.srv.URL+"/v1")
	mixed := apiClient(t, apiDep("r", resp, route.APIResponses), other)
	_, err = mixed.DoAPI(context.Background(), route.APIResponses, []byte(`{"model":"other","input":"hi"}`))
	require.ErrorAs(t, err, &ae)
	assert.Equal(t, []route.API{route.APIChat}, ae.Served)

	_, err = c.DoAPI(context.Background(), route.APIEmbeddings, []byte(`{"model":"m","input":"hi"}`))
	require.ErrorAs(t, err, &ae, "no deployment serves embeddings")
	assert.Equal(t, route.APIEmbeddings, ae.API)
	_, err = c.DoAPI(context.Background(), "completions", []byte(`{"model":"m","prompt":"hi"}`))
	var re *RequestError
	require.ErrorAs(t, err, &re)
	_, err = c.DoAPI(context.Background(), route.APIMessages, []byte(`{"model":"m","max_tokens":0,"messages":[]}`))
	require.ErrorAs(t, err, &re)
	assert.Equal(t, "max_tokens", re.Param)
}

// TestResponsesThroughOpenAIGo: openai-go's client.Responses, pointed at the
// Transport, streams and creates responses routed over Responses
// deployments: a response.failed before the first output fails over
// invisibly (the caller sees one response.created), nothing chat-only is
// sent upstream, each deployment gets its own key, and the statistics are
// kept under the Responses key, apart from the deployment's chat ones.
func TestResponsesThroughOpenAIGo(t *testing.T) {
	bad := newAPIUpstream(t, map[string]apiAnswerSpec{"responses": {200, apiRespFailed}})
	good := newAPIUpstream(t, map[string]apiAnswerSpec{"responses": {200, apiRespStream}, "chat/completions": {200, apiChatStream}})
	c := apiClient(t, apiDep("bad", bad, route.APIResponses), apiDep("good", good, route.APIChat, route.APIResponses))
	oc := openai.NewClient(option.WithBaseURL("http://tpsroute.invalid/v1"), option.WithAPIKey("caller-secret"),
		option.WithHTTPClient(&http.Client{Transport: c.Transport()}), option.WithMaxRetries(0))
	params := responses.ResponseNewParams{Model: "m", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hi")}}

	// The pin puts the failing deployment first.
	s := oc.Responses.NewStreaming(ContextWithOptions(context.Background(), WithPin("bad", "")), params)
	var text strings.Builder
	var types []string
	for s.Next() {
		ev := s.Current()
		types = append(types, ev.Type)
		if ev.Type == "response.output_text.delta" {
			text.WriteString(ev.Delta)
		}
	}
	require.NoError(t, s.Err())
	require.NoError(t, s.Close())
	assert.Equal(t, "Hello world!", text.String())
	assert.Equal(t, []string{"response.created", "response.output_text.delta", "response.output_text.delta", "response.completed"}, types)

	got, err := oc.Responses.New(ContextWithOptions(context.Background(), WithPin("good", "")), params)
	require.NoError(t, err)
	assert.Equal(t, "Hello world!", got.OutputText())
	assert.Equal(t, int64(3), got.Usage.OutputTokens)

	reqs, paths := good.requests()
	require.NotEmpty(t, reqs)
	for i, r := range reqs {
		assert.Equal(t, "/v1/responses", paths[i])
		assert.Equal(t, "Bearer key-good-", r.Header.Get("Authorization"))
		assert.NotContains(t, r.Body, "stream_options", "Responses refuses chat's stream_options (unknown_parameter)")
		assert.NotContains(t, r.Body, "caller-secret")
		assert.Contains(t, r.Body, `"stream":true`)
	}
	breqs, _ := bad.requests()
	require.Len(t, breqs, 1, "the pinned deployment failed first")
	for _, r := range breqs {
		assert.Equal(t, "Bearer key-bad-", r.Header.Get("Authorization"))
	}

	respKey := measure.Key{Provider: "good", Model: "m", API: "responses"}
	st, ok := c.Stats().Lookup(respKey)
	require.True(t, ok, "statistics under %v", respKey)
	assert.Equal(t, int64(2), st.Requests)
	_, ok = c.Stats().Lookup(measure.Key{Provider: "good", Model: "m"})
	assert.False(t, ok, "no chat call was made: the chat key has no samples")
}

// TestMessagesThroughTransport: a Messages call through the Transport goes
// to Messages deployments with the deployment's key as x-api-key, never the
// caller's credentials, and an anthropic-version (the deployment's, else the
// caller's, else the default); an HTTP 529 fails over; the stream reaches
// the caller byte for byte, event names kept; without "stream" the answer is
// the assembled message.
func TestMessagesThroughTransport(t *testing.T) {
	overloaded := newAPIUpstream(t, map[string]apiAnswerSpec{"messages": {529, `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`}})
	ok := newAPIUpstream(t, map[string]apiAnswerSpec{"messages": {200, apiMsgStream}})
	d1 := apiDep("a1", overloaded, route.APIMessages)
	d2 := apiDep("a2", ok, route.APIMessages)
	d2.Headers = map[string]string{"anthropic-version": "2023-06-01"}
	c := apiClient(t, d1, d2)
	hc := &http.Client{Transport: c.Transport()}

	post := func(body string) (*http.Response, []byte) {
		req, err := http.NewRequest(http.MethodPost, "http://tpsroute.invalid/v1/messages", strings.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("x-api-key", "caller-secret")
		req.Header.Set("Authorization", "Bearer caller-secret")
		req.Header.Set("anthropic-version", "2099-01-01")
		req.Header.Set("anthropic-beta", "prompt-caching-2024-07-31")
		req = req.WithContext(ContextWithOptions(context.Background(), WithPin("a1", "")))
		resp, err := hc.Do(req)
		require.NoError(t, err)
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		require.NoError(t, resp.Body.Close())
		return resp, b
	}
	resp, b := post(`{"model":"m","stream":true,"max_tokens":64,"messages":[{"role":"user","content":"hi"}]}`)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(b))
	assert.Equal(t, apiMsgStream, string(b))

	resp, b = post(`{"model":"m","max_tokens":64,"messages":[{"role":"user","content":"hi"}]}`)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(b))
	var msg struct {
		ID         string `json:"id"`
		StopReason string `json:"stop_reason"`
		Content    []struct {
			Type  string          `json:"type"`
			Text  string          `json:"text"`
			Name  string          `json:"name"`
			Input json.RawMessage `json:"input"`
		} `json:"content"`
		Usage struct {
			InputTokens     int64 `json:"input_tokens"`
			CacheReadTokens int64 `json:"cache_read_input_tokens"`
			OutputTokens    int64 `json:"output_tokens"`
		} `json:"usage"`
	}
	require.NoError(t, json.Unmarshal(b, &msg), string(b))
	assert.Equal(t, "msg_1", msg.ID)
	assert.Equal(t, "tool_use", msg.StopReason)
	require.Len(t, msg.Content, 2)
	assert.Equal(t, "Hi there", msg.Content[0].Text)
	assert.Equal(t, "get_weather", msg.Content[1].Name)
	assert.JSONEq(t, `{"city": "Paris"}`, string(msg.Content[1].Input))
	assert.Equal(t, int64(9), msg.Usage.OutputTokens, "message_delta's count replaces the placeholder")
	assert.Equal(t, int64(20), msg.Usage.InputTokens)

	for _, u := range []struct {
		up      *apiUpstream
		key     string
		version string
	}{{overloaded, "key-a1-", "2099-01-01"}, {ok, "key-a2-", "2023-06-01"}} {
		reqs, paths := u.up.requests()
		require.Len(t, reqs, 2, "the pin puts a1 first; its 529 fails over to a2")
		for i, r := range reqs {
			assert.Equal(t, "/v1/messages", paths[i])
			assert.Equal(t, u.key, r.Header.Get("X-Api-Key"))
			assert.Empty(t, r.Header.Get("Authorization"))
			assert.Equal(t, u.version, r.Header.Get("Anthropic-Version"))
			assert.Equal(t, "prompt-caching-2024-07-31", r.Header.Get("Anthropic-Beta"))
			assert.NotContains(t, r.Body, "stream_options", "Messages refuses unknown fields")
			assert.False(t, bytes.Contains([]byte(r.Body), []byte("caller-secret")))
		}
	}
	st, found := c.Stats().Lookup(measure.Key{Provider: "a2", Model: "m", API: "messages"})
	require.True(t, found)
	assert.Equal(t, int64(2), st.Requests)
	assert.Equal(t, int64(240), st.InputTokens, "input + cache read, twice")
}

// TestMessagesStreamErrorAfterOutputIsMidStream: an overloaded_error event
// after the first delta reaches the caller as a read error through the
// Transport, never a clean end.
func TestMessagesStreamErrorAfterOutputIsMidStream(t *testing.T) {
	body := strings.Replace(apiMsgStream, "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n",
		"event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n", 1)
	up := newAPIUpstream(t, map[string]apiAnswerSpec{"messages": {200, body}})
	c := apiClient(t, apiDep("a", up, route.APIMessages))
	r, err := c.DoAPI(context.Background(), route.APIMessages, []byte(`{"model":"m","stream":true,"max_tokens":64,"messages":[{"role":"user","content":"hi"}]}`))
	if err == nil {
		_, err = io.ReadAll(r.Body)
		_ = r.Body.Close()
	}
	require.Error(t, err, "never a clean end")
	assert.False(t, errors.Is(err, io.EOF))
}

// TestStatefulResponses: a Responses call that names a previous_response_id
// or a conversation goes only to the deployment that holds that state; when
// that deployment fails, the call fails with a *StateError, never on another
// deployment; a store:false answer binds nothing, and an unknown id goes to
// one deployment, never round them all.
func TestStatefulResponses(t *testing.T) {
	ups := map[string]*apiUpstream{}
	var ds []route.Deployment
	for _, p := range []string{"a", "b", "c"} {
		u := newAPIUpstream(t, map[string]apiAnswerSpec{"responses": {200, strings.ReplaceAll(apiRespStream, "resp_1", "resp_"+p)}})
		ups[p] = u
		ds = append(ds, apiDep(p, u, route.APIResponses))
	}
	c := apiClient(t, ds...)
	count := func() map[string]int {
		out := map[string]int{}
		for p, u := range ups {
			reqs, _ := u.requests()
			out[p] = len(reqs)
		}
		return out
	}
	call := func(body string) (string, error) {
		r, err := c.DoAPI(context.Background(), route.APIResponses, []byte(body))
		if err != nil {
			return "", err
		}
		b, err := io.ReadAll(r.Body)
		require.NoError(t, r.Body.Close())
		require.NoError(t, err)
		var v struct{ ID string }
		require.NoError(t, json.Unmarshal(b, &v))
		return v.ID, nil
	}

	first, err := call(`{"model":"m","input":"hi"}`)
	require.NoError(t, err)
	owner := strings.TrimPrefix(first, "resp_")
	before := count()
	for range 6 {
		id, err := call(`{"model":"m","input":"more","previous_response_id":"` + first + `"}`)
		require.NoError(t, err)
		assert.Equal(t, first, id, "served by the owner")
	}
	after := count()
	for p := range ups {
		want := before[p]
		if p == owner {
			want += 6
		}
		assert.Equal(t, want, after[p], "deployment %s", p)
	}

	// The owner fails: a typed error, and no other deployment is asked.
	ups[owner].mu.Lock()
	ups[owner].answers = map[string]apiAnswerSpec{"responses": {500, `{"error":{"message":"down"}}`}}
	ups[owner].mu.Unlock()
	before = count()
	_, err = call(`{"model":"m","input":"more","previous_response_id":"` + first + `"}`)
	var se *StateError
	require.ErrorAs(t, err, &se)
	assert.Equal(t, first, se.ID)
	assert.Equal(t, "responses", se.Deployment.API)
	assert.Equal(t, owner, se.Deployment.Provider)
	var fe *fallback.Error
	assert.ErrorAs(t, err, &fe)
	after = count()
	for p := range ups {
		if p == owner {
			assert.Greater(t, after[p], before[p], "the owner was asked (and retried)")
		} else {
			assert.Equal(t, before[p], after[p], "deployment %s was not asked", p)
		}
	}

	// An unknown id, or one of a store:false answer: one deployment only.
	for p, u := range ups {
		u.mu.Lock()
		u.answers = map[string]apiAnswerSpec{"responses": {500, `{"error":{"message":"down ` + p + `"}}`}}
		u.mu.Unlock()
	}
	before = count()
	_, err = call(`{"model":"m","input":"more","previous_response_id":"resp_unknown"}`)
	require.Error(t, err)
	assert.False(t, errors.As(err, &se), "nothing known: no owner to name")
	after = count()
	asked := 0
	for p := range ups {
		if after[p] > before[p] {
			asked++
		}
	}
	assert.Equal(t, 1, asked, "an unknown id goes to one deployment")
}

// TestStatefulResponsesConversationAndStore: the deployment that served a
// call of a conversation serves its later calls; a store:false answer's id
// binds nothing.
func TestStatefulResponsesConversationAndStore(t *testing.T) {
	c := mustNew(t, Config{Deployments: []route.Deployment{{Provider: "x", Model: "m", BaseURL: "http://127.0.0.1:1/v1", APIs: []route.API{route.APIResponses}}}})
	k := measure.Key{Provider: "x", Model: "m", API: "responses"}
	info := requestInfo{API: route.APIResponses, ConvID: "conv_1"}
	c.ownResponse(&info, "resp_9", k)
	got, ok := c.owners.get("conv_1")
	assert.True(t, ok)
	assert.Equal(t, k, got)
	_, ok = c.owners.get("resp_9")
	assert.True(t, ok)

	info = requestInfo{API: route.APIResponses, NoStore: true}
	c.ownResponse(&info, "resp_10", k)
	_, ok = c.owners.get("resp_10")
	assert.False(t, ok, "store:false: nothing to bind")

	for _, tc := range []struct {
		body  string
		param string
		want  requestInfo
	}{
		{`{"model":"m","conversation":{"id":"conv_2"},"store":false}`, "", requestInfo{ConvID: "conv_2", NoStore: true}},
		{`{"model":"m","conversation":"conv_3","previous_response_id":"resp_1"}`, "", requestInfo{ConvID: "conv_3", PrevID: "resp_1"}},
		{`{"model":"m","previous_response_id":1}`, "previous_response_id", requestInfo{}},
		{`{"model":"m","conversation":{"x":1}}`, "conversation", requestInfo{}},
		{`{"model":"m","store":"no"}`, "store", requestInfo{}},
	} {
		info, err := readAPIRequest([]byte(tc.body), route.APIResponses)
		if tc.param != "" {
			var re *RequestError
			require.ErrorAs(t, err, &re, tc.body)
			assert.Equal(t, tc.param, re.Param)
			continue
		}
		require.NoError(t, err)
		assert.Equal(t, tc.want, requestInfo{ConvID: info.ConvID, PrevID: info.PrevID, NoStore: info.NoStore}, tc.body)
	}
}

// TestMessagesCacheControl: Messages cache_control blocks (on system
// blocks, message content and tools) reach a deployment that declares
// cache_control as sent, and are stripped for one that does not, which
// would refuse the call.
func TestMessagesCacheControl(t *testing.T) {
	const body = `{"model":"m","max_tokens":8,"system":[{"type":"text","text":"long prefix","cache_control":{"type":"ephemeral"}}],` +
		`"tools":[{"name":"t","input_schema":{"type":"object"},"cache_control":{"type":"ephemeral"}}],` +
		`"messages":[{"role":"user","content":[{"type":"text","text":"hi","cache_control":{"type":"ephemeral"}}]}]}`
	for _, accepts := range []bool{true, false} {
		up := newAPIUpstream(t, map[string]apiAnswerSpec{"messages": {200, apiMsgStream}})
		d := apiDep("a", up, route.APIMessages)
		d.Capabilities.CacheControl = accepts
		c := apiClient(t, d)
		r, err := c.DoAPI(context.Background(), route.APIMessages, []byte(body))
		require.NoError(t, err)
		require.NoError(t, r.Body.Close())
		reqs, _ := up.requests()
		require.Len(t, reqs, 1)
		got := reqs[0].Body
		if accepts {
			assert.Equal(t, 3, strings.Count(got, `"cache_control"`), got)
		} else {
			assert.NotContains(t, got, "cache_control")
			assert.Contains(t, got, `"text":"long prefix"`)
		}
	}
}

// TestResponsesCacheAffinity: Responses calls with one prompt_cache_key go
// to the deployment that served the key last, as chat calls do (affinity
// is kept per API, in the Responses Picker).
func TestResponsesCacheAffinity(t *testing.T) {
	var ds []route.Deployment
	ups := map[string]*apiUpstream{}
	for _, p := range []string{"a", "b", "c"} {
		u := newAPIUpstream(t, map[string]apiAnswerSpec{"responses": {200, apiRespStream}})
		ups[p] = u
		ds = append(ds, apiDep(p, u, route.APIResponses))
	}
	c := apiClient(t, ds...)
	var first string
	for i := range 8 {
		r, err := c.DoAPI(context.Background(), route.APIResponses, []byte(`{"model":"m","stream":true,"input":"hi","prompt_cache_key":"user-42"}`))
		require.NoError(t, err)
		_, err = io.ReadAll(r.Body)
		require.NoError(t, err)
		require.NoError(t, r.Body.Close())
		if i == 0 {
			first = r.Outcome().Deployment.Provider
			continue
		}
		assert.Equal(t, first, r.Outcome().Deployment.Provider, "call %d", i)
	}
	assert.Equal(t, uint64(7), c.RouteStats().AffinityHits)
}
