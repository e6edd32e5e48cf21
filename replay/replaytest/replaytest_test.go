package replaytest_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/tpsroute/tpsroute/replay"
	"github.com/tpsroute/tpsroute/replay/replaytest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// ask streams one completion from url and returns its text.
func ask(t *testing.T, url string) string {
	t.Helper()
	c := openai.NewClient(option.WithBaseURL(url), option.WithAPIKey("sk-secret-123"), option.WithMaxRetries(0))
	s := c.Chat.Completions.NewStreaming(t.Context(), openai.ChatCompletionNewParams{
		Model: "m", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}})
	defer s.Close()
	var b strings.Builder
	for s.Next() {
		for _, ch := range s.Current().Choices {
			b.WriteString(ch.Delta.Content)
		}
	}
	require.NoError(t, s.Err())
	return b.String()
}

func TestRecordOnce(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cassettes", "hello.json")
	real := replay.NewServer(map[string]replay.Script{"m": &replay.Profile{OutputTokens: 6}})
	defer real.Close()

	t.Run("records when the file is missing", func(t *testing.T) {
		assert.Equal(t, replay.Text(6), ask(t, replaytest.RecordOnce(t, path, real.URL(), false)))
	})
	require.Len(t, real.Attempts(), 1, "the call went to the real provider")
	assert.NotEmpty(t, real.Attempts()[0].Header.Get("Authorization"), "with the client's own key (the log redacts it)")
	b, err := os.ReadFile(path)
	require.NoError(t, err, "the cassette is written when the test ends")
	assert.NotContains(t, string(b), "sk-secret-123", "keys are redacted")
	assert.Contains(t, string(b), "REDACTED")

	real.Close() // from now on nothing may reach it
	t.Run("replays when the file exists", func(t *testing.T) {
		assert.Equal(t, replay.Text(6), ask(t, replaytest.RecordOnce(t, path, "http://127.0.0.1:1/v1", false)))
	})
	after, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, string(b), string(after), "replaying leaves the file alone")

	longer := replay.NewServer(map[string]replay.Script{"m": &replay.Profile{OutputTokens: 9}})
	defer longer.Close()
	t.Run("rerecord records again", func(t *testing.T) {
		assert.Equal(t, replay.Text(9), ask(t, replaytest.RecordOnce(t, path, longer.URL(), true)))
	})
	assert.Len(t, longer.Attempts(), 1)
	t.Run("and the new recording is what replays", func(t *testing.T) {
		assert.Equal(t, replay.Text(9), ask(t, replaytest.RecordOnce(t, path, "http://127.0.0.1:1/v1", false)))
	})
}

// TestCassetteDocExample keeps docs/CASSETTE.md's example the code that
// TestHello (example_doc_test.go) runs.
func TestCassetteDocExample(t *testing.T) {
	doc, err := os.ReadFile("../../docs/CASSETTE.md")
	require.NoError(t, err)
	m := regexp.MustCompile("(?s)## Record once in tests.*?```go\n(.*?)```").FindSubmatch(doc)
	require.NotNil(t, m, "docs/CASSETTE.md has a Go block under \"Record once in tests\"")
	code, err := os.ReadFile("example_doc_test.go")
	require.NoError(t, err)
	assert.Equal(t, string(code), string(m[1]))
}
