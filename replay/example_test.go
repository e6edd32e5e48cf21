package replay_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/tpsroute/tpsroute/replay"
)

// A user's test: a fake provider that rate-limits the first attempt, driven by
// the real openai-go client.
func ExampleNewServer() {
	srv := replay.NewServer(map[string]replay.Script{
		"gpt-4o-mini": replay.WithFaults(
			&replay.Profile{TTFT: 5 * time.Millisecond, OutputTokens: 4},
			replay.RateLimited("1").OnAttempts(1),
		),
	})
	defer srv.Close()

	client := openai.NewClient(option.WithBaseURL(srv.URL()), option.WithAPIKey("test"), option.WithMaxRetries(0))
	params := openai.ChatCompletionNewParams{
		Model:    "gpt-4o-mini",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hello")},
	}
	_, err := client.Chat.Completions.New(context.Background(), params)
	var apiErr *openai.Error
	if errors.As(err, &apiErr) {
		fmt.Println("attempt 1:", apiErr.StatusCode, apiErr.Response.Header.Get("Retry-After"))
	}
	res, err := client.Chat.Completions.New(context.Background(), params)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("attempt 2: %q\n", res.Choices[0].Message.Content)
	for _, a := range srv.Attempts() {
		fmt.Println(a.N, a.Outcome, a.Header.Get("Authorization"))
	}
	// Output:
	// attempt 1: 429 1
	// attempt 2: "w0 w1 w2 w3 "
	// 1 429 REDACTED
	// 2 ok REDACTED
}

// Record a call once, then replay it forever without the provider.
func ExampleNewRecorder() {
	dir, err := os.MkdirTemp("", "cassettes")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)

	// The "real" provider; in practice http.DefaultTransport and a real URL.
	provider := replay.NewServer(map[string]replay.Script{"m": &replay.Profile{OutputTokens: 3, Style: replay.VLLM}})
	rec := replay.NewRecorder(http.DefaultTransport, dir)
	client := openai.NewClient(option.WithBaseURL(provider.URL()), option.WithAPIKey("sk-secret"),
		option.WithMaxRetries(0), option.WithHTTPClient(&http.Client{Transport: rec}))
	stream := client.Chat.Completions.NewStreaming(context.Background(), openai.ChatCompletionNewParams{
		Model: "m", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
	})
	for stream.Next() {
	}
	stream.Close()
	provider.Close()

	cassette, err := replay.LoadCassette(rec.Files()[0])
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("recorded:", len(cassette.Response.Events), "events, end", cassette.Response.End, "auth", cassette.Request.Headers.Get("Authorization"))

	replayed := replay.NewServer(map[string]replay.Script{"m": cassette})
	defer replayed.Close()
	client = openai.NewClient(option.WithBaseURL(replayed.URL()), option.WithAPIKey("x"), option.WithMaxRetries(0))
	res, err := client.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Model: "m", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("replayed: %q %s\n", res.Choices[0].Message.Content, res.Choices[0].FinishReason)
	// Output:
	// recorded: 5 events, end eof auth REDACTED
	// replayed: "w0 w1 w2 " stop
}

// The in-memory transport runs a handler without sockets; inside a
// testing/synctest bubble its timing is virtual.
func ExampleHandler_Transport() {
	h := replay.NewHandler(map[string]replay.Script{
		"m": replay.WithFaults(&replay.Profile{OutputTokens: 8}, replay.CutAfter(3)),
	})
	client := openai.NewClient(option.WithBaseURL("http://replay.invalid/v1"), option.WithAPIKey("x"),
		option.WithMaxRetries(0), option.WithHTTPClient(&http.Client{Transport: h.Transport()}))
	stream := client.Chat.Completions.NewStreaming(context.Background(), openai.ChatCompletionNewParams{
		Model: "m", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
	})
	text := ""
	for stream.Next() {
		for _, c := range stream.Current().Choices {
			text += c.Delta.Content
		}
	}
	fmt.Printf("%q %v\n", text, stream.Err())
	stream.Close()
	a := h.Attempts()[0]
	fmt.Println(a.Outcome, a.Chunks, a.Faults)
	// Output:
	// "w0 w1 " unexpected EOF
	// cut 3 [cut-after(3)]
}

func ExampleText() {
	fmt.Printf("%q\n", replay.Text(4))
	// Output: "w0 w1 w2 w3 "
}

func ExampleBundled() {
	c, err := replay.Bundled("deepseek-reasoner")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(c.Response.Events[0].AtMS, *c.Response.Events[0].Comment)
	fmt.Println(len(replay.BundledNames()) >= 8)
	// Output:
	// 0.8 keep-alive
	// true
}

// A Func script decides each answer when the request arrives: here the speed
// falls with the prompt size.
func ExampleFunc() {
	script := replay.Func(func(c replay.Call) replay.Script {
		return &replay.Profile{OutputTokens: 4, TPS: 1000 / (1 + float64(c.PromptTokens)/1000)}
	})
	h := replay.NewHandler(map[string]replay.Script{"m": script})
	body := `{"model":"m","stream":true,"messages":[{"role":"user","content":"hello"}]}`
	n, _ := replay.PromptTokens([]byte(body))
	req := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", strings.NewReader(body))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	fmt.Println(n, rec.Code, strings.Contains(rec.Body.String(), `"content":"w3 "`))
	// Output: 9 200 true
}
