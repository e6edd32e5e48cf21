package tpsroute

import (
	"context"
	"encoding/json"
	"net/http"

	"github.com/openai/openai-go/v3/packages/ssestream"
	"github.com/openai/openai-go/v3/responses"
	"github.com/tidwall/sjson"

	"github.com/tpsroute/tpsroute/route"
)

// ResponseService creates routed responses with OpenAI's Responses API,
// shaped like openai-go's client.Responses: New and NewStreaming take
// openai-go's responses.ResponseNewParams and return its types. Calls go to
// the deployments that declare route.APIResponses, as Client.DoAPI
// describes. It is safe for concurrent use.
type ResponseService struct {
	c *Client
}

// New creates a response: the call streams underneath (so it is measured),
// fails over invisibly until its end, and returns the response object that
// response.completed (or response.incomplete) carried, decoded by
// openai-go. Errors are those of Client.DoAPI.
func (s ResponseService) New(ctx context.Context, params responses.ResponseNewParams, opts ...CallOption) (*responses.Response, error) {
	return newDecoded[responses.Response](ctx, s.c, route.APIResponses, params, opts)
}

// NewStreaming streams a response, as openai-go's NewStreaming does: the
// returned stream is openai-go's own, over the committed attempt's events
// (Next, Current, Err, Close); failover happens before the first output
// delta, and a failure after it is the stream's Err, never a clean end. A
// call that fails before any event returns a stream whose Err says why.
// Close before the end cancels the upstream request.
func (s ResponseService) NewStreaming(ctx context.Context, params responses.ResponseNewParams, opts ...CallOption) *ssestream.Stream[responses.ResponseStreamEventUnion] {
	body, err := json.Marshal(params)
	if err == nil {
		body, err = sjson.SetBytes(body, "stream", true)
	}
	if err != nil {
		return ssestream.NewStream[responses.ResponseStreamEventUnion](nil, &RequestError{Reason: "the params cannot be encoded: " + err.Error()})
	}
	r, err := s.c.DoAPI(ctx, route.APIResponses, body, opts...)
	if err != nil {
		return ssestream.NewStream[responses.ResponseStreamEventUnion](nil, err)
	}
	res := &http.Response{StatusCode: r.StatusCode, Header: r.Header, Body: r.Body}
	return ssestream.NewStream[responses.ResponseStreamEventUnion](ssestream.NewDecoder(res), nil)
}
