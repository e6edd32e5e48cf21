package replaytest_test

import (
	"os"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tpsroute/tpsroute/replay/replaytest"
)

// TestHello records testdata/hello.json from the real provider the first
// time (with OPENAI_API_KEY set), and replays it offline ever after.
// REPLAY_RECORD=1 go test records it again.
func TestHello(t *testing.T) {
	url := replaytest.RecordOnce(t, "testdata/hello.json", "https://api.openai.com/v1",
		os.Getenv("REPLAY_RECORD") != "")
	client := openai.NewClient(option.WithBaseURL(url),
		option.WithAPIKey(os.Getenv("OPENAI_API_KEY")), option.WithMaxRetries(0))

	got, err := client.Chat.Completions.New(t.Context(), openai.ChatCompletionNewParams{
		Model:    "gpt-4.1-mini",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Say hello")},
	})
	require.NoError(t, err)
	require.Len(t, got.Choices, 1)
	assert.Contains(t, got.Choices[0].Message.Content, "Hello")
	assert.Equal(t, "stop", got.Choices[0].FinishReason)
}
