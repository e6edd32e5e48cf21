// Command langchaingo shows tpsroute under langchaingo: its OpenAI LLM,
// given an *http.Client whose Transport is the router's, gets routing,
// failover and measurement with no other change.
//
// This example is a nested module, so langchaingo's dependencies stay out of
// tpsroute's own go.mod. Run it from this directory:
//
//	cd examples/langchaingo && go run .
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

	"github.com/tmc/langchaingo/llms"
	"github.com/tmc/langchaingo/llms/openai"

	"github.com/tpsroute/tpsroute"
	"github.com/tpsroute/tpsroute/replay"
	"github.com/tpsroute/tpsroute/route"
)

func main() {
	log.SetFlags(0)
	if err := run(context.Background(), os.Stdout); err != nil {
		log.Fatal("langchaingo example: ", err)
	}
}

// run makes the calls and writes what happened to w.
func run(ctx context.Context, w io.Writer) error {
	// Two simulated providers of one model: "fast" resets the connection on
	// its first call, "steady" always answers.
	fast := replay.NewServer(map[string]replay.Script{
		"llama-3.3-70b-versatile": replay.WithFaults(&replay.Profile{TTFT: 100 * time.Millisecond, TPS: 300, OutputTokens: 16},
			replay.ResetBeforeHeaders().OnAttempts(1)),
	})
	defer fast.Close()
	steady := replay.NewServer(map[string]replay.Script{
		"meta-llama/Llama-3.3-70B-Instruct-Turbo": &replay.Profile{TTFT: 250 * time.Millisecond, TPS: 120, OutputTokens: 16},
	})
	defer steady.Close()

	router, err := tpsroute.New(tpsroute.Config{Deployments: []route.Deployment{
		{Provider: "fast", Region: "us-east", Model: "llama-3.3-70b", ProviderModel: "llama-3.3-70b-versatile",
			BaseURL: fast.URL(), APIKey: "fast-key"},
		{Provider: "steady", Region: "us-west", Model: "llama-3.3-70b", ProviderModel: "meta-llama/Llama-3.3-70B-Instruct-Turbo",
			BaseURL: steady.URL(), APIKey: "steady-key"},
	}})
	if err != nil {
		return err
	}

	// langchaingo's OpenAI LLM, as usual, except for WithHTTPClient. The base
	// URL and token are never used: each attempt gets the chosen deployment's
	// URL, key and model id. The model is the logical model.
	llm, err := openai.New(
		openai.WithHTTPClient(&http.Client{Transport: router.Transport()}),
		openai.WithBaseURL("http://tpsroute.local/v1"),
		openai.WithToken("unused"),
		openai.WithModel("llama-3.3-70b"),
	)
	if err != nil {
		return err
	}

	// A streaming call. The fast provider resets the first connection; the
	// router retries it after a short backoff (and would move on to steady
	// if it failed again), all before the first token, so langchaingo sees
	// one clean stream. WithOutcome, through the context, says what happened.
	var report tpsroute.Outcome
	var streamed strings.Builder
	answer, err := llms.GenerateFromSinglePrompt(tpsroute.ContextWithOptions(ctx, tpsroute.WithOutcome(&report)), llm,
		"Count to sixteen.",
		llms.WithStreamingFunc(func(_ context.Context, chunk []byte) error {
			streamed.Write(chunk)
			return nil
		}))
	if err != nil {
		return err
	}
	if streamed.String() != answer {
		return fmt.Errorf("streamed %q but the answer is %q", streamed.String(), answer)
	}
	fmt.Fprintln(w, "answer:", strings.TrimSpace(answer))
	fmt.Fprintf(w, "answered by %s/%s, TTFT %v, %.0f tokens/s\n", report.Deployment.Provider, report.Deployment.Region,
		report.Sample.TTFT.Round(10*time.Millisecond), report.Sample.TPS)
	for _, a := range report.Attempts {
		fmt.Fprintln(w, "  attempt:", a)
	}

	// A plain call: the router now prefers what it measured.
	answer, err = llms.GenerateFromSinglePrompt(ctx, llm, "Count again.")
	if err != nil {
		return err
	}
	fmt.Fprintln(w, "answer:", strings.TrimSpace(answer))
	for k, s := range router.Stats().All() {
		fmt.Fprintf(w, "measured %-30s %d calls, %d errors\n", k, s.Requests, s.Errors)
	}
	return nil
}
