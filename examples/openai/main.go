// Command openai shows the tpsroute Client used the way openai-go is used:
// client.Chat.Completions.NewStreaming and New, with the same parameter
// types, plus what openai-go cannot tell you: which deployment answered, how
// fast it was, and what the router has measured.
//
// Offline (the default), it starts three simulated providers on 127.0.0.1.
// To call your own providers instead, write a config file (docs/CONFIG.md)
// and pass it with the model to ask for:
//
//	go run ./examples/openai
//	go run ./examples/openai -config tpsroute.json -model llama-3.3-70b
//
// It exits with status 1 if a call fails.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"strings"
	"time"

	"github.com/openai/openai-go/v3"

	"github.com/tpsroute/tpsroute"
	"github.com/tpsroute/tpsroute/config"
	"github.com/tpsroute/tpsroute/measure"
	"github.com/tpsroute/tpsroute/replay"
	"github.com/tpsroute/tpsroute/route"
	"github.com/tpsroute/tpsroute/tps"
)

func main() {
	configPath := flag.String("config", "", "a tpsroute JSON config of your own providers (docs/CONFIG.md); empty means simulated providers")
	modelName := flag.String("model", "llama-3.3-70b", "the logical model to ask for")
	flag.Parse()
	log.SetFlags(0)
	if err := run(context.Background(), os.Stdout, *configPath, *modelName); err != nil {
		log.Fatal("openai example: ", err)
	}
}

// run makes the calls and writes what happened to w.
func run(ctx context.Context, w io.Writer, configPath, model string) error {
	cfg, stop, err := loadConfig(configPath)
	if err != nil {
		return err
	}
	defer stop()
	client, err := tpsroute.New(cfg)
	if err != nil {
		return err
	}
	ask := func(q string) openai.ChatCompletionNewParams {
		return openai.ChatCompletionNewParams{
			Model:    model, // the logical model: each deployment gets its own model id
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(q)},
		}
	}

	// 1. Stream, exactly as with openai-go. NewStreaming returns once the
	// first token has arrived; a provider that failed before that was
	// replaced invisibly.
	fmt.Fprintln(w, "== streaming")
	stream := client.Chat.Completions.NewStreaming(ctx, ask("Say hello in ten words."))
	for stream.Next() {
		for _, c := range stream.Current().Choices {
			fmt.Fprint(w, c.Delta.Content)
		}
	}
	stream.Close()
	if err := stream.Err(); err != nil {
		return err
	}
	// What openai-go cannot tell you: who answered and how fast.
	o := stream.Outcome()
	fmt.Fprintf(w, "\n%s\n", describe(o.Deployment, o.Sample))
	for _, a := range o.Attempts {
		fmt.Fprintln(w, "  attempt:", a) // a failed attempt here was invisible to the caller
	}

	// 2. Many calls at once. The first ones probe every deployment; then the
	// router sends traffic to the one with the best measured speed.
	fmt.Fprintln(w, "\n== 24 calls, 6 at a time")
	sem := make(chan struct{}, 6)
	type outcome struct {
		who string
		err error
	}
	done := make(chan outcome, 24)
	for i := range 24 {
		sem <- struct{}{}
		go func() {
			defer func() { <-sem }()
			s := client.Chat.Completions.NewStreaming(ctx, ask(fmt.Sprintf("Question %d", i)))
			defer s.Close()
			for s.Next() {
			}
			done <- outcome{s.Outcome().Deployment.Provider, s.Err()}
		}()
	}
	var failed error
	var order []string
	for range 24 {
		o := <-done
		failed = errors.Join(failed, o.err)
		order = append(order, o.who)
	}
	if failed != nil {
		return failed
	}
	fmt.Fprintln(w, "answered by, in order:", strings.Join(order, " "))
	printStats(w, client)

	// 3. The whole answer at once, as openai-go's New. WithOutcome says what
	// happened underneath; WithRegion keeps the call in one region (data
	// residency), failing over only inside it.
	fmt.Fprintln(w, "\n== non-streaming, eu-west only")
	var report tpsroute.Outcome
	completion, err := client.Chat.Completions.New(ctx, ask("One sentence on Europe."),
		tpsroute.WithRegion(region(cfg, "eu-west")), tpsroute.WithOutcome(&report))
	if err != nil {
		return err
	}
	fmt.Fprintln(w, strings.TrimSpace(completion.Choices[0].Message.Content))
	fmt.Fprintln(w, describe(report.Deployment, report.Sample))
	for _, a := range report.Attempts {
		fmt.Fprintln(w, "  attempt:", a)
	}
	return nil
}

// loadConfig returns the Client's config: the simulated providers, or the file
// at path. stop releases the simulated providers.
func loadConfig(path string) (tpsroute.Config, func(), error) {
	if path != "" {
		f, err := config.Load(path) // API keys come from the env vars the file names
		return f.Client, func() {}, err
	}

	// Three simulated providers of one model. groq is fast but its first
	// answer is a 503; together is slower; nebius serves eu-west.
	groq := replay.NewServer(map[string]replay.Script{
		"llama-3.3-70b-versatile": replay.WithFaults(
			&replay.Profile{TTFT: 150 * time.Millisecond, TPS: 400, OutputTokens: 40, Jitter: 0.1, Seed: 1},
			replay.Status(503, "", nil).OnAttempts(1)),
	})
	together := replay.NewServer(map[string]replay.Script{
		"meta-llama/Llama-3.3-70B-Instruct-Turbo": &replay.Profile{TTFT: 300 * time.Millisecond, TPS: 150, OutputTokens: 40, Jitter: 0.1, Seed: 2},
	})
	nebius := replay.NewServer(map[string]replay.Script{
		"meta-llama/Llama-3.3-70B-Instruct": &replay.Profile{TTFT: 250 * time.Millisecond, TPS: 100, OutputTokens: 40, Jitter: 0.1, Seed: 3},
	})
	stop := func() { groq.Close(); together.Close(); nebius.Close() }

	// This is the part to edit for your own providers: one Deployment per
	// provider and region, each with its own URL, key and model id.
	cfg := tpsroute.Config{
		Deployments: []route.Deployment{
			{Provider: "groq", Region: "us-east", Model: "llama-3.3-70b", ProviderModel: "llama-3.3-70b-versatile",
				BaseURL: groq.URL(), APIKey: "demo-groq-key", Price: measure.Price{Input: 0.59, Output: 0.79}},
			{Provider: "together", Region: "us-east", Model: "llama-3.3-70b", ProviderModel: "meta-llama/Llama-3.3-70B-Instruct-Turbo",
				BaseURL: together.URL(), APIKey: "demo-together-key", Price: measure.Price{Input: 0.88, Output: 0.88}},
			{Provider: "nebius", Region: "eu-west", Model: "llama-3.3-70b", ProviderModel: "meta-llama/Llama-3.3-70B-Instruct",
				BaseURL: nebius.URL(), APIKey: "demo-nebius-key", Price: measure.Price{Input: 0.13, Output: 0.40}},
		},
		Route: route.Options{Policy: route.Throughput}, // or route.Latency, route.Cost
	}
	// Measured after 3 calls instead of 10, with 4 probes of an unmeasured
	// deployment per 10 s instead of 2, so this short demo routes on data;
	// keep the defaults in production.
	cfg.Measure.MinSamples = 3
	cfg.Route.ColdProbes = 4
	return cfg, stop, nil
}

// region returns want if a deployment of cfg is in it, or else the first
// deployment's region, so the example also runs on your own config.
func region(cfg tpsroute.Config, want string) string {
	for _, d := range cfg.Deployments {
		if d.Region == want {
			return want
		}
	}
	return cfg.Deployments[0].Region
}

// describe says who answered and how fast. TPS needs two output chunks; a
// shorter answer has none, which is shown as "n/a", never as 0.
func describe(d route.Deployment, s tps.Sample) string {
	speed := "n/a"
	if s.TPSOK {
		speed = fmt.Sprintf("%.0f", s.TPS)
	}
	return fmt.Sprintf("answered by %s/%s: TTFT %v, %s tokens/s after the first token, %d tokens",
		d.Provider, d.Region, s.TTFT.Round(time.Millisecond), speed, s.OutputTokens)
}

// printStats prints what the router has measured of each deployment.
func printStats(w io.Writer, c *tpsroute.Client) {
	fmt.Fprintf(w, "%-32s %6s %10s %10s %8s %7s\n", "deployment", "calls", "ttft p50", "ttft p95", "tok/s", "errors")
	for k, s := range c.Stats().All() {
		fmt.Fprintf(w, "%-32s %6d %9.2fs %9.2fs %8.0f %7d\n", k, s.Requests, s.TTFT.P50, s.TTFT.P95, s.TPS.P50, s.Errors)
	}
}
