package main

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestGatewayLoneCRStream: an upstream whose SSE lines end with a lone CR
// (legal SSE) reaches an openai-go caller of the gateway whole: the gateway
// hands callers LF line ends, which openai-go's decoder needs.
func TestGatewayLoneCRStream(t *testing.T) {
	chunk := func(content, finish string) string {
		return `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"` + content + `"},"finish_reason":` + finish + `}]}` + "\r\r"
	}
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, chunk("Hello", "null")+chunk(" world", `"stop"`)+"data: [DONE]\r\r")
	}))
	t.Cleanup(up.Close)
	d := dep("p", "us", "m")
	d.ProviderModel, d.BaseURL = "", up.URL+"/v1"
	c, err := newClient(testConfig(d), up.Client().Transport)
	require.NoError(t, err)
	srv := httptest.NewServer(newGateway(c, options{}))
	t.Cleanup(srv.Close)

	oc := openai.NewClient(option.WithBaseURL(srv.URL+"/v1"), option.WithAPIKey("caller"), option.WithMaxRetries(0))
	s := oc.Chat.Completions.NewStreaming(context.Background(), openai.ChatCompletionNewParams{
		Model: "m", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}})
	var text strings.Builder
	for s.Next() {
		for _, ch := range s.Current().Choices {
			text.WriteString(ch.Delta.Content)
		}
	}
	require.NoError(t, s.Err())
	require.NoError(t, s.Close())
	assert.Equal(t, "Hello world", text.String())
}
