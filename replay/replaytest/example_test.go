package replaytest_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/tpsroute/tpsroute/replay"
	"github.com/tpsroute/tpsroute/replay/replaytest"
)

// RecordOnce records a cassette the first time a test runs and replays it
// on every later run, without the provider. Here a replay.Server stands in
// for the real provider, and synctest.Test gives each of the two runs a
// *testing.T of its own, whose cleanups (the one that writes the cassette
// among them) run when the run ends.
func ExampleRecordOnce() {
	dir, err := os.MkdirTemp("", "replaytest-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "testdata", "hello.json")
	provider := replay.NewServer(map[string]replay.Script{"gpt-4.1-mini": &replay.Profile{OutputTokens: 3}})
	defer provider.Close()

	// run is one run of a test that asks for a completion through RecordOnce.
	run := func(name string) {
		synctest.Test(&testing.T{}, func(t *testing.T) {
			var answer string
			t.Cleanup(func() { fmt.Printf("%s: %q, failed %v\n", name, answer, t.Failed()) })
			url := replaytest.RecordOnce(t, path, provider.URL(), false)
			client := openai.NewClient(option.WithBaseURL(url), option.WithAPIKey("sk-secret-123"), option.WithMaxRetries(0))
			got, err := client.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
				Model:    "gpt-4.1-mini",
				Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Say hello")},
			})
			if err != nil {
				t.Fatal(err)
			}
			answer = got.Choices[0].Message.Content
		})
	}

	run("first run")
	b, err := os.ReadFile(path)
	if err != nil {
		panic(err)
	}
	fmt.Println("cassette written, key redacted:", !strings.Contains(string(b), "sk-secret-123"))
	provider.Close() // from now on nothing may reach it
	run("second run")
	fmt.Println("calls the provider answered:", len(provider.Attempts()))
	// Output:
	// first run: "w0 w1 w2 ", failed false
	// cassette written, key redacted: true
	// second run: "w0 w1 w2 ", failed false
	// calls the provider answered: 1
}
