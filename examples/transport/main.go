// Command transport shows tpsroute under code you already have: an ordinary
// openai-go client, given the router's http.RoundTripper, gets routing,
// failover and measurement without any other change.
//
// The same works for any library that accepts an *http.Client: go-openai,
// langchaingo (see examples/langchaingo) or plain net/http.
//
//	go run ./examples/transport
//
// It runs offline against two simulated providers and exits with status 1 if
// a call fails.
package main

import (
	"context"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/tpsroute/tpsroute"
	"github.com/tpsroute/tpsroute/replay"
	"github.com/tpsroute/tpsroute/route"
)

func main() {
	log.SetFlags(0)
	if err := run(context.Background(), os.Stdout); err != nil {
		log.Fatal("transport example: ", err)
	}
}

// run makes the calls and writes what happened to w.
func run(ctx context.Context, w io.Writer) error {
	// Two simulated providers. "primary" answers its first call with a 503;
	// "backup" always answers.
	primary := replay.NewServer(map[string]replay.Script{
		"gpt-4.1-mini": replay.WithFaults(&replay.Profile{TTFT: 100 * time.Millisecond, TPS: 300, OutputTokens: 12},
			replay.Status(503, "", nil).OnAttempts(1)),
	})
	defer primary.Close()
	backup := replay.NewServer(map[string]replay.Script{
		"gpt-4.1-mini-2025-04-14": &replay.Profile{TTFT: 200 * time.Millisecond, TPS: 100, OutputTokens: 12},
	})
	defer backup.Close()

	router, err := tpsroute.New(tpsroute.Config{Deployments: []route.Deployment{
		{Provider: "primary", Region: "us", Model: "gpt-4.1-mini", BaseURL: primary.URL(), APIKey: "primary-key"},
		{Provider: "backup", Region: "eu", Model: "gpt-4.1-mini", ProviderModel: "gpt-4.1-mini-2025-04-14",
			BaseURL: backup.URL(), APIKey: "backup-key"},
	}})
	if err != nil {
		return err
	}

	// The only change to existing openai-go code: the HTTP client. The base
	// URL and API key given here are never used; each attempt gets its
	// deployment's own URL, key and model id. openai-go's retries are turned
	// off because the router already failed over.
	oc := openai.NewClient(
		option.WithHTTPClient(&http.Client{Transport: router.Transport()}),
		option.WithBaseURL("http://tpsroute.local/v1"),
		option.WithAPIKey("unused"),
		option.WithMaxRetries(0),
	)
	params := openai.ChatCompletionNewParams{
		Model:    "gpt-4.1-mini",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Count to twelve.")},
	}

	// A streaming call, unchanged openai-go code. The primary's 503 never
	// reaches this code: the router moved to the backup before the first
	// token. Per-call options travel in the request's context; WithOutcome
	// says who answered and what was tried.
	var report tpsroute.Outcome
	stream := oc.Chat.Completions.NewStreaming(tpsroute.ContextWithOptions(ctx, tpsroute.WithOutcome(&report)), params)
	defer stream.Close()
	var text strings.Builder
	for stream.Next() {
		for _, c := range stream.Current().Choices {
			text.WriteString(c.Delta.Content)
		}
	}
	if err := stream.Err(); err != nil {
		return err
	}
	stream.Close() // the Outcome is filled when the body is closed
	fmt.Fprintln(w, "streamed:    ", strings.TrimSpace(text.String()))
	for _, a := range report.Attempts {
		fmt.Fprintln(w, "              attempt:", a)
	}

	// A non-streaming call, kept in one region.
	report = tpsroute.Outcome{}
	rctx := tpsroute.ContextWithOptions(ctx, tpsroute.WithOutcome(&report), tpsroute.WithRegion("eu"))
	completion, err := oc.Chat.Completions.New(rctx, params)
	if err != nil {
		return err
	}
	fmt.Fprintln(w, "non-streamed:", strings.TrimSpace(completion.Choices[0].Message.Content))
	fmt.Fprintf(w, "              answered by %s/%s (model %s), TTFT %v\n", report.Deployment.Provider, report.Deployment.Region,
		completion.Model, report.Sample.TTFT.Round(10*time.Millisecond))

	// The router serves the model list too: the logical models configured.
	models, err := oc.Models.List(ctx)
	if err != nil {
		return err
	}
	for _, m := range models.Data {
		fmt.Fprintln(w, "model:       ", m.ID)
	}

	// Everything that went through the transport was measured.
	fmt.Fprintln(w, "measured:")
	for k, s := range router.Stats().All() {
		fmt.Fprintf(w, "  %-24s %d calls, %d errors", k, s.Requests, s.Errors)
		if s.TTFT.Count > 0 {
			fmt.Fprintf(w, ", TTFT p50 %.2fs", s.TTFT.P50)
		}
		fmt.Fprintln(w)
	}
	return nil
}
