package tpsroute

import (
	"context"
	"encoding/json"
	"io"

	"github.com/openai/openai-go/v3"

	"github.com/tpsroute/tpsroute/route"
)

// EmbeddingService creates routed embeddings, shaped like openai-go's
// client.Embeddings: New takes openai.EmbeddingNewParams and returns
// *openai.CreateEmbeddingResponse. Calls go to the deployments that declare
// route.APIEmbeddings, as Client.DoAPI describes. It is safe for concurrent
// use.
type EmbeddingService struct {
	c *Client
}

// New creates embeddings for params.Input, a batch kept whole (one request,
// one answer, vectors in input order), failing over on errors. Errors are
// those of Client.DoAPI.
func (s EmbeddingService) New(ctx context.Context, params openai.EmbeddingNewParams, opts ...CallOption) (*openai.CreateEmbeddingResponse, error) {
	return newDecoded[openai.CreateEmbeddingResponse](ctx, s.c, route.APIEmbeddings, params, opts)
}

// newDecoded is the New of a typed service: params, marshalled, are the
// request body of a call on api through DoAPI, and the whole answer is
// decoded into a new T with T's own UnmarshalJSON (openai-go's), so that
// RawJSON works as after openai-go's own call.
func newDecoded[T any, PT interface {
	*T
	UnmarshalJSON([]byte) error
}](ctx context.Context, c *Client, api route.API, params any, opts []CallOption) (*T, error) {
	body, err := json.Marshal(params)
	if err != nil {
		return nil, &RequestError{Reason: "the params cannot be encoded: " + err.Error()}
	}
	r, err := c.DoAPI(ctx, api, body, opts...)
	if err != nil {
		return nil, err
	}
	b, err := io.ReadAll(r.Body)
	_ = r.Body.Close()
	if err != nil {
		return nil, err
	}
	out := new(T)
	if err := PT(out).UnmarshalJSON(b); err != nil {
		return nil, err
	}
	return out, nil
}
