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

	"github.com/tpsroute/tpsroute/fallback"
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
