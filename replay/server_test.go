package replay

import (
	"context"
	"net/http"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestServerOpenAIClient(t *testing.T) {
	srv := NewServer(map[string]Script{"m": &Profile{OutputTokens: 5}})
	defer srv.Close()
	c := oaClient(srv.URL(), nil)

	t.Run("stream with usage", func(t *testing.T) {
		text, u, _, err := oaStream(t, c, "m", openai.ChatCompletionNewParams{
			StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
		})
		require.NoError(t, err)
		assert.Equal(t, Text(5), text)
		assert.EqualValues(t, 5, u.CompletionTokens)
		assert.Positive(t, u.PromptTokens)
	})
	t.Run("non-streaming", func(t *testing.T) {
		res, err := c.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
			Model:    "m",
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
		})
		require.NoError(t, err)
		require.Len(t, res.Choices, 1)
		assert.Equal(t, Text(5), res.Choices[0].Message.Content)
		assert.Equal(t, "stop", res.Choices[0].FinishReason)
		assert.EqualValues(t, 5, res.Usage.CompletionTokens)
	})
	t.Run("max tokens", func(t *testing.T) {
		res, err := c.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
			Model:               "m",
			Messages:            []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
			MaxCompletionTokens: openai.Int(3),
		})
		require.NoError(t, err)
		assert.Equal(t, Text(3), res.Choices[0].Message.Content)
		assert.Equal(t, "length", res.Choices[0].FinishReason)
	})
	t.Run("unknown model", func(t *testing.T) {
		_, err := c.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
			Model:    "nope",
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
		})
		var apiErr *openai.Error
		require.ErrorAs(t, err, &apiErr)
		assert.Equal(t, http.StatusNotFound, apiErr.StatusCode)
		assert.Equal(t, "model_not_found", apiErr.Code)
		assert.Equal(t, "invalid_request_error", apiErr.Type)
	})
	t.Run("models", func(t *testing.T) {
		page, err := c.Models.List(context.Background())
		require.NoError(t, err)
		require.Len(t, page.Data, 1)
		assert.Equal(t, "m", page.Data[0].ID)
	})
}

func TestServerRaw(t *testing.T) {
	srv := NewServer(map[string]Script{"m": &Profile{OutputTokens: 4}})
	defer srv.Close()
	res := rawCall(context.Background(), http.DefaultClient, srv.URL(), chatBody("m", true, nil))
	require.NoError(t, res.err)
	assert.Equal(t, 200, res.status)
	assert.Equal(t, Text(4), res.content())
	d := res.data()
	assert.Equal(t, "[DONE]", d[len(d)-1])
	a := srv.Attempts()
	require.Len(t, a, 1)
	assert.Equal(t, "ok", a[0].Outcome)
	assert.Equal(t, "REDACTED", a[0].Header.Get("Authorization"))
	assert.Equal(t, 6, a[0].Chunks) // role, 4 content, finish
}
