package tps_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/tpsroute/tpsroute/tps"
)

const exampleBody = `data: {"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}

: keep-alive

data: {"model":"m","choices":[{"index":0,"delta":{"content":"Hello"}}]}

data: {"model":"m","choices":[{"index":0,"delta":{"content":", world"}}]}

data: {"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}

data: {"model":"m","choices":[],"usage":{"prompt_tokens":9,"completion_tokens":4,"prompt_tokens_details":{"cached_tokens":0}}}

data: [DONE]

`

// Wrap times an openai-go stream; the caller reads it as usual.
func ExampleWrap() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, exampleBody)
	}))
	defer srv.Close()
	client := openai.NewClient(option.WithBaseURL(srv.URL), option.WithAPIKey("key"))

	params := openai.ChatCompletionNewParams{
		Model:    "m",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Say hello")},
	}
	params.StreamOptions.IncludeUsage = openai.Bool(true) // a final usage chunk gives OutputTokens
	start := time.Now()
	stream := tps.Wrap(client.Chat.Completions.NewStreaming(context.Background(), params), start)
	defer stream.Close()
	for stream.Next() {
		if c := stream.Current(); len(c.Choices) > 0 {
			fmt.Print(c.Choices[0].Delta.Content)
		}
	}
	fmt.Println()
	if err := stream.Err(); err != nil {
		fmt.Println("error:", err)
		return
	}
	s := stream.Sample()
	fmt.Println("output tokens:", s.OutputTokens, "from", s.TokenSource)
	fmt.Println("output chunks:", s.OutputChunks, "of", s.Chunks)
	fmt.Println("cache:", s.Cache, "finish:", s.FinishReason, "end:", s.End)
	fmt.Println("tps ok:", s.TPSOK, "ttft > 0:", s.TTFT > 0)
	// Output:
	// Hello, world
	// output tokens: 4 from usage
	// output chunks: 2 of 5
	// cache: cold finish: stop end: stream
	// tps ok: true ttft > 0: true
}

// NewTap times a raw SSE body, as a transport or gateway sees it; the bytes
// pass through unchanged.
func ExampleNewTap() {
	var sample tps.Sample
	body := tps.NewTap(io.NopCloser(strings.NewReader(exampleBody)), time.Now(),
		func(s tps.Sample) { sample = s })
	b, _ := io.ReadAll(body)
	_ = body.Close()

	fmt.Println("unchanged:", string(b) == exampleBody)
	fmt.Println("output tokens:", sample.OutputTokens, "from", sample.TokenSource)
	fmt.Println("chunks:", sample.Chunks, "comments:", sample.Comments)
	fmt.Println("end:", sample.End, "truncated:", sample.Truncated, "err:", sample.Err)
	// Output:
	// unchanged: true
	// output tokens: 4 from usage
	// chunks: 5 comments: 1
	// end: done truncated: false err: <nil>
}
