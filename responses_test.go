package tpsroute

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tidwall/sjson"

	"github.com/tpsroute/tpsroute/fallback"
	"github.com/tpsroute/tpsroute/replay"
	"github.com/tpsroute/tpsroute/route"
)

// TestResponseService: client.Responses.NewStreaming and New give what
// openai-go's own client.Responses gives from the same provider, event by
// event and field by field; a failure after the first output delta is the
// stream's Err; a call nothing can serve is a stream whose Err says why.
func TestResponseService(t *testing.T) {
	up := newAPIUpstream(t, map[string]apiAnswerSpec{"responses": {200, apiRespStream}})
	c := apiClient(t, apiDep("r", up, route.APIResponses))
	direct := openai.NewClient(option.WithBaseURL(up.srv.URL+"/v1"), option.WithAPIKey("k"), option.WithMaxRetries(0),
		option.WithHTTPClient(up.srv.Client()))
	params := responses.ResponseNewParams{Model: "m", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hi")}}

	events := func(next func() bool, cur func() responses.ResponseStreamEventUnion) []string {
		var out []string
		for next() {
			out = append(out, cur().RawJSON())
		}
		return out
	}
	s := c.Responses.NewStreaming(context.Background(), params)
	got := events(s.Next, s.Current)
	require.NoError(t, s.Err())
	require.NoError(t, s.Close())
	d := direct.Responses.NewStreaming(context.Background(), params)
	want := events(d.Next, d.Current)
	require.NoError(t, d.Err())
	require.NoError(t, d.Close())
	assert.Len(t, got, 4)
	assert.Equal(t, want, got)

	r, err := c.Responses.New(context.Background(), params)
	require.NoError(t, err)
	// The provider's non-streaming answer is the object response.completed carries.
	completed := apiRespStream[strings.Index(apiRespStream, "event: response.completed"):]
	completed = completed[strings.Index(completed, `"response":`)+len(`"response":`) : len(completed)-len("}\n\n")]
	var want2 responses.Response
	require.NoError(t, want2.UnmarshalJSON([]byte(completed)))
	assert.JSONEq(t, completed, r.RawJSON())
	assert.Equal(t, want2.OutputText(), r.OutputText())
	assert.Equal(t, "Hello world!", r.OutputText())
	assert.Equal(t, int64(12), r.Usage.InputTokens)

	cut := newAPIUpstream(t, map[string]apiAnswerSpec{"responses": {200, strings.SplitAfter(apiRespStream, "\"delta\":\"world!\"}\n\n")[0] +
		"event: error\ndata: {\"type\":\"error\",\"code\":\"server_error\",\"message\":\"boom\",\"param\":null}\n\n"}})
	cc := apiClient(t, apiDep("r", cut, route.APIResponses))
	s = cc.Responses.NewStreaming(context.Background(), params)
	var n int
	for s.Next() {
		n++
	}
	require.Error(t, s.Err(), "never a clean end")
	require.NoError(t, s.Close())

	s = c.Responses.NewStreaming(context.Background(), responses.ResponseNewParams{Model: "nope"})
	assert.False(t, s.Next())
	assert.True(t, errors.Is(s.Err(), route.ErrNoDeployment), "%v", s.Err())

	// An upstream that refuses: the stream's Err is the executor's error.
	bad := newAPIUpstream(t, map[string]apiAnswerSpec{"responses": {http.StatusUnauthorized, `{"error":{"message":"no"}}`}})
	bc := apiClient(t, apiDep("r", bad, route.APIResponses))
	s = bc.Responses.NewStreaming(context.Background(), params)
	assert.False(t, s.Next())
	var fe *fallback.Error
	assert.ErrorAs(t, s.Err(), &fe)
	_, err = bc.Responses.New(context.Background(), params)
	assert.ErrorAs(t, err, &fe)
}

// TestTransportResponsesErrors: a Responses call through the Transport that
// fails before its stream is answered in OpenAI's error shape, which
// openai-go's client.Responses reads into an *openai.Error with the status,
// type, code and param (the Messages door answers Anthropic's instead:
// examples/anthropic).
func TestTransportResponsesErrors(t *testing.T) {
	bad := newAPIUpstream(t, map[string]apiAnswerSpec{"responses": {http.StatusServiceUnavailable, `{"error":{"message":"down","type":"server_error"}}`}})
	c := apiClient(t, apiDep("r", bad, route.APIResponses), dep("chat", "", "chat-only", bad.srv.URL+"/v1"))
	oc := openai.NewClient(option.WithBaseURL("http://tpsroute.invalid/v1"), option.WithAPIKey("k"), option.WithMaxRetries(0),
		option.WithHTTPClient(&http.Client{Transport: c.Transport()}))
	tests := []struct {
		name   string
		params responses.ResponseNewParams
		status int
		typ    string
		code   string
		param  string
	}{
		{"bad request", responses.ResponseNewParams{Model: "m", MaxOutputTokens: openai.Int(0)}, 400, "invalid_request_error", "", "max_output_tokens"},
		{"unknown model", responses.ResponseNewParams{Model: "nope"}, 404, "invalid_request_error", "model_not_found", "model"},
		{"not served on responses", responses.ResponseNewParams{Model: "chat-only"}, 404, "invalid_request_error", "api_not_served", "model"},
		{"all attempts failed", responses.ResponseNewParams{Model: "m"}, 503, "server_error", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := oc.Responses.New(context.Background(), tt.params)
			var oe *openai.Error
			require.ErrorAs(t, err, &oe)
			assert.Equal(t, tt.status, oe.StatusCode)
			assert.Equal(t, tt.typ, oe.Type)
			assert.Equal(t, tt.code, oe.Code)
			assert.Equal(t, tt.param, oe.Param)
			assert.NotEmpty(t, oe.Message)
		})
	}
}

// TestResponsesNonStreamShape: a provider that answers both ways (replay's
// Responses profile) gives the same response object to plain openai-go's
// non-streaming call and, through the stream underneath, to the routed
// Client's and the Transport's: every field but the per-request ids and
// timestamp, byte for byte, usage included.
func TestResponsesNonStreamShape(t *testing.T) {
	s := replay.NewServer(map[string]replay.Script{"m": &replay.Profile{OutputTokens: 40, Style: replay.Responses}})
	t.Cleanup(s.Close)
	plain := openai.NewClient(option.WithBaseURL(s.URL()), option.WithAPIKey("k"), option.WithMaxRetries(0))
	c := apiClient(t, route.Deployment{Provider: "p", Model: "m", BaseURL: s.URL(), APIKey: "k", APIs: []route.API{route.APIResponses}})
	viaTransport := openai.NewClient(option.WithBaseURL("http://caller.invalid/v1"), option.WithAPIKey("k"),
		option.WithHTTPClient(&http.Client{Transport: c.Transport()}), option.WithMaxRetries(0))
	params := responses.ResponseNewParams{Model: "m", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hi")}}
	want, err := plain.Responses.New(context.Background(), params)
	require.NoError(t, err)
	norm := func(raw string) string { // the ids and timestamp differ per request
		for _, k := range []string{"id", "created_at", "output.0.id"} {
			raw, _ = sjson.Set(raw, k, "")
		}
		return raw
	}
	for name, got := range map[string]func() (*responses.Response, error){
		"client":    func() (*responses.Response, error) { return c.Responses.New(context.Background(), params) },
		"transport": func() (*responses.Response, error) { return viaTransport.Responses.New(context.Background(), params) },
	} {
		t.Run(name, func(t *testing.T) {
			r, err := got()
			require.NoError(t, err)
			assert.Equal(t, norm(want.RawJSON()), norm(r.RawJSON()))
			assert.Equal(t, want.OutputText(), r.OutputText())
			assert.Equal(t, int64(40), r.Usage.OutputTokens)
		})
	}
}
