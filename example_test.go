package tpsroute_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/tpsroute/tpsroute"
	"github.com/tpsroute/tpsroute/measure"
	"github.com/tpsroute/tpsroute/replay"
	"github.com/tpsroute/tpsroute/route"
)

// Stream a routed completion: the Client picks a deployment, sends it that
// deployment's own model id, and times the stream.
func ExampleChatCompletionService_NewStreaming() {
	groq := replay.NewServer(map[string]replay.Script{"llama-3.3-70b-versatile": &replay.Profile{TPS: 50, OutputTokens: 5}})
	defer groq.Close()

	client, err := tpsroute.New(tpsroute.Config{Deployments: []route.Deployment{{
		Provider: "groq", Region: "us", Model: "llama-3.3-70b", ProviderModel: "llama-3.3-70b-versatile",
		BaseURL: groq.URL(),
	}}})
	if err != nil {
		log.Fatal(err)
	}
	stream := client.Chat.Completions.NewStreaming(context.Background(), openai.ChatCompletionNewParams{
		Model:    "llama-3.3-70b",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Count to five.")},
	})
	defer stream.Close()
	var text strings.Builder
	for stream.Next() {
		for _, c := range stream.Current().Choices {
			text.WriteString(c.Delta.Content)
		}
	}
	if err := stream.Err(); err != nil {
		log.Fatal(err)
	}
	fmt.Println(strings.TrimSpace(text.String()))
	d, s := stream.Outcome().Deployment, stream.Outcome().Sample
	fmt.Printf("answered by %s/%s with %d output tokens (TPS measured: %v)\n", d.Provider, d.Region, s.OutputTokens, s.TPSOK)
	// Output:
	// w0 w1 w2 w3 w4
	// answered by groq/us with 5 output tokens (TPS measured: true)
}

// New returns the whole completion. It streams underneath, so a provider
// that fails, even mid-answer, is replaced invisibly by the next one.
func ExampleChatCompletionService_New() {
	down := replay.NewServer(map[string]replay.Script{"m": replay.WithFaults(&replay.Profile{}, replay.Status(503, "", nil))})
	defer down.Close()
	up := replay.NewServer(map[string]replay.Script{"m": &replay.Profile{OutputTokens: 3}})
	defer up.Close()

	client, err := tpsroute.New(tpsroute.Config{Deployments: []route.Deployment{
		{Provider: "primary", Model: "m", BaseURL: down.URL()},
		{Provider: "backup", Model: "m", BaseURL: up.URL()},
	}})
	if err != nil {
		log.Fatal(err)
	}
	var report tpsroute.Outcome
	completion, err := client.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Model:    "m",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Hi")},
	}, tpsroute.WithPin("primary", ""), tpsroute.WithOutcome(&report))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(strings.TrimSpace(completion.Choices[0].Message.Content))
	fmt.Println("answered by", report.Deployment.Provider)
	for _, a := range report.Attempts {
		fmt.Println("attempt:", a.Key.Provider, a.Class, a.Status)
	}
	// Output:
	// w0 w1 w2
	// answered by backup
	// attempt: primary next 503
	// attempt: backup ok 200
}

// Transport gives routing, failover and measurement to any code that takes
// an *http.Client; here openai-go itself. The caller's base URL and key are
// replaced per deployment.
func ExampleClient_Transport() {
	eu := replay.NewServer(map[string]replay.Script{"m": &replay.Profile{OutputTokens: 4}})
	defer eu.Close()
	client, err := tpsroute.New(tpsroute.Config{Deployments: []route.Deployment{
		{Provider: "vllm", Region: "eu-west", Model: "m", BaseURL: eu.URL()},
	}})
	if err != nil {
		log.Fatal(err)
	}

	oai := openai.NewClient(
		option.WithBaseURL("http://router.invalid/v1"),
		option.WithAPIKey("unused"),
		option.WithHTTPClient(&http.Client{Transport: client.Transport()}),
	)
	completion, err := oai.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Model:    "m",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Hi")},
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(strings.TrimSpace(completion.Choices[0].Message.Content))
	for k, st := range client.Stats().All() {
		fmt.Println(k, "requests:", st.Requests)
	}
	// Output:
	// w0 w1 w2 w3
	// vllm/eu-west/m requests: 1
}

// Do takes a raw chat-completions body and returns the committed SSE bytes
// with the deployment that answered and the attempts: what a gateway relays.
// A failure is turned into its HTTP answer by Client.HTTPError.
func ExampleClient_Do() {
	down := replay.NewServer(map[string]replay.Script{"m": replay.WithFaults(&replay.Profile{}, replay.Status(503, "", nil))})
	defer down.Close()
	up := replay.NewServer(map[string]replay.Script{"m": &replay.Profile{OutputTokens: 3}})
	defer up.Close()
	client, err := tpsroute.New(tpsroute.Config{Deployments: []route.Deployment{
		{Provider: "down", Region: "us", Model: "m", BaseURL: down.URL()},
		{Provider: "up", Region: "eu", Model: "m", BaseURL: up.URL()},
	}})
	if err != nil {
		log.Fatal(err)
	}
	body := []byte(`{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}],"x_vendor_field":1}`)
	resp, err := client.Do(context.Background(), body, tpsroute.WithProviders("down", "up"))
	if err != nil {
		log.Fatal(client.HTTPError(err).Status)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(resp.Header.Get("Content-Type"), strings.HasSuffix(string(raw), "data: [DONE]\n\n"))
	fmt.Println("answered by", resp.Outcome().Deployment.Key())
	for _, a := range resp.Outcome().Attempts {
		fmt.Println("attempt:", a.Key, a.Status)
	}

	_, err = client.Do(context.Background(), []byte(`{"model":"gpt-9","messages":[]}`))
	he := client.HTTPError(err)
	fmt.Println(he.Status, he.Code, he.Param)
	// Output:
	// text/event-stream true
	// answered by up/eu/m
	// attempt: down/us/m 503
	// attempt: up/eu/m 200
	// 404 model_not_found model
}

// Read a routed stream through its text path: Delta gives each chunk's text
// (and tool-call fragments, finish reason, usage) without decoding it into an
// openai.ChatCompletionChunk. Its slices are valid until the next Next.
func ExampleStream_Delta() {
	srv := replay.NewServer(map[string]replay.Script{"m": &replay.Profile{OutputTokens: 5}})
	defer srv.Close()
	client, err := tpsroute.New(tpsroute.Config{Deployments: []route.Deployment{{
		Provider: "local", Model: "m", BaseURL: srv.URL(),
	}}})
	if err != nil {
		log.Fatal(err)
	}
	stream := client.Chat.Completions.NewStreaming(context.Background(), openai.ChatCompletionNewParams{
		Model:    "m",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Count to five.")},
	})
	defer stream.Close()
	var text []byte
	finish := ""
	for stream.Next() {
		d := stream.Delta()
		text = append(text, d.Content...)
		if len(d.FinishReason) > 0 {
			finish = string(d.FinishReason)
		}
	}
	if err := stream.Err(); err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s (finish: %s)\n", strings.TrimSpace(string(text)), finish)
	// Output:
	// w0 w1 w2 w3 w4 (finish: stop)
}

// A Client with a state file restores what the previous process measured,
// so it routes on those statistics from its first call.
func ExampleClient_Close() {
	srv := replay.NewServer(map[string]replay.Script{"m": &replay.Profile{OutputTokens: 3}})
	defer srv.Close()
	dir, err := os.MkdirTemp("", "tpsroute-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	cfg := tpsroute.Config{
		Deployments: []route.Deployment{{Provider: "p", Region: "us", Model: "m", BaseURL: srv.URL()}},
		StateFile:   filepath.Join(dir, "tpsroute.state"),
	}
	params := openai.ChatCompletionNewParams{Model: "m", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}}

	first, err := tpsroute.New(cfg) // no file yet: a cold start
	if err != nil {
		log.Fatal(err)
	}
	for range 3 {
		if _, err := first.Chat.Completions.New(context.Background(), params); err != nil {
			log.Fatal(err)
		}
	}
	if err := first.Close(); err != nil { // writes the state file
		log.Fatal(err)
	}

	second, err := tpsroute.New(cfg) // restores it
	if err != nil {
		log.Fatal(err)
	}
	defer second.Close()
	st, _ := second.Stats().Lookup(measure.Key{Provider: "p", Region: "us", Model: "m"})
	fmt.Println("requests known before the first call:", st.Requests)
	// Output: requests known before the first call: 3
}

// HTTPError.ForAPI answers a failed call in its API's own error shape: the
// one mapping from an error to a status and class, written as OpenAI's
// SDKs or Anthropic's read it.
func ExampleHTTPError_ForAPI() {
	c, err := tpsroute.New(tpsroute.Config{Deployments: []route.Deployment{
		{Provider: "anthropic", Model: "claude", BaseURL: "https://api.anthropic.com/v1", APIs: []route.API{route.APIMessages}},
	}})
	if err != nil {
		log.Fatal(err)
	}
	he := c.HTTPError(route.ErrNoDeployment) // nothing could serve the call
	fmt.Println(he.Status, string(he.JSON()))
	msg := he.ForAPI(route.APIMessages)
	fmt.Println(msg.Status, string(msg.JSON()))
	// Output:
	// 503 {"error":{"message":"route: no deployment","type":"service_unavailable","param":null,"code":"no_deployment_available"}}
	// 529 {"type":"error","error":{"type":"overloaded_error","message":"route: no deployment"}}
}
