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
	body, err := json.Marshal(params)
	if err != nil {
		return nil, &RequestError{Reason: "the params cannot be encoded: " + err.Error()}
	}
	r, err := s.c.DoAPI(ctx, route.APIEmbeddings, body, opts...)
	if err != nil {
		return nil, err
	}
	b, err := io.ReadAll(r.Body)
	_ = r.Body.Close()
	if err != nil {
		return nil, err
	}
	var out openai.CreateEmbeddingResponse
	if err := out.UnmarshalJSON(b); err != nil {
		return nil, err
	}
	return &out, nil
}
