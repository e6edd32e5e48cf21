// Command record shows "record once, replay forever": it records one
// streaming call into a cassette, then serves the cassette from a fake
// provider and makes the same call again, offline, with the original timing.
//
// With OPENAI_API_KEY and OPENAI_BASE_URL set it records that endpoint
// (OPENAI_MODEL names the model, default gpt-4.1-mini); otherwise it records a
// simulated provider, so it also runs offline:
//
//	go run ./examples/record                       # offline demo
//	OPENAI_BASE_URL=https://api.groq.com/openai/v1 OPENAI_API_KEY=... \
//	  OPENAI_MODEL=llama-3.3-70b-versatile go run ./examples/record -dir testdata
//
// The cassette is written to -dir (a temporary directory, removed at the end,
// when -dir is empty). API keys are never written: the Authorization header
// is recorded as "REDACTED". It exits with status 1 if the replayed answer
// differs from the recorded one.
package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/tpsroute/tpsroute/replay"
	"github.com/tpsroute/tpsroute/tps"
)

func main() {
	dir := flag.String("dir", "", "directory for the cassette; empty means a temporary directory removed at the end")
	flag.Parse()
	log.SetFlags(0)
	if err := run(context.Background(), os.Stdout, *dir, os.Getenv); err != nil {
		log.Fatal("record example: ", err)
	}
}

// run records one call into dir, replays it and writes both to w. getenv
// reads OPENAI_BASE_URL, OPENAI_API_KEY and OPENAI_MODEL.
func run(ctx context.Context, w io.Writer, dir string, getenv func(string) string) error {
	if dir == "" {
		tmp, err := os.MkdirTemp("", "tpsroute-record-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(tmp)
		dir = tmp
	}

	baseURL, apiKey, model := getenv("OPENAI_BASE_URL"), getenv("OPENAI_API_KEY"), cmp.Or(getenv("OPENAI_MODEL"), "gpt-4.1-mini")
	if baseURL == "" || apiKey == "" {
		// No endpoint configured: record a simulated provider in the Groq
		// dialect (usage sent twice), with a realistic TTFT and speed.
		demo := replay.NewServer(map[string]replay.Script{
			model: &replay.Profile{TTFT: 180 * time.Millisecond, TPS: 250, OutputTokens: 30, Jitter: 0.2, Seed: 7, Style: replay.UsageTwice},
		})
		defer demo.Close()
		baseURL, apiKey = demo.URL(), "sk-demo-never-recorded"
		fmt.Fprintln(w, "recording a simulated provider (set OPENAI_API_KEY and OPENAI_BASE_URL to record a real one)")
	} else {
		fmt.Fprintln(w, "recording", baseURL)
	}

	// 1. Record: the Recorder is an http.RoundTripper between the client and
	// the provider. It writes one cassette per call, with each event's time.
	rec := replay.NewRecorder(http.DefaultTransport, dir)
	recorded, err := call(ctx, rec, baseURL, apiKey, model)
	if err != nil {
		return fmt.Errorf("recording: %w", err)
	}
	if err := rec.Err(); err != nil {
		return err
	}
	files := rec.Files()
	if len(files) != 1 {
		return fmt.Errorf("recorded %d cassettes, want 1", len(files))
	}
	show(w, "recorded", recorded)

	// 2. Look at what was written: events with their times, no secrets.
	cas, err := replay.LoadCassette(files[0])
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "cassette:  %s: %d events, headers at %.0f ms, Authorization %q\n",
		files[0], len(cas.Response.Events), cas.Response.HeadersMS, cas.Request.Headers.Get("Authorization"))

	// 3. Replay: a fake provider serves the cassette for that model, with the
	// recorded timing. Tests point their client at it and need no network.
	srv := replay.NewServer(map[string]replay.Script{model: cas})
	defer srv.Close()
	replayed, err := call(ctx, http.DefaultTransport, srv.URL(), "any-key", model)
	if err != nil {
		return fmt.Errorf("replaying: %w", err)
	}
	show(w, "replayed", replayed)

	if replayed.text != recorded.text || replayed.sample.Chunks != recorded.sample.Chunks ||
		replayed.sample.OutputTokens != recorded.sample.OutputTokens {
		return errors.New("the replayed answer differs from the recorded one")
	}
	fmt.Fprintf(w, "same answer, chunks and usage; TTFT differs by %v\n",
		(replayed.sample.TTFT - recorded.sample.TTFT).Abs().Round(time.Millisecond))
	return nil
}

// answer is one call's text and measurement.
type answer struct {
	text   string
	sample tps.Sample
}

// call makes one streaming call through rt and times it with tps.Wrap.
func call(ctx context.Context, rt http.RoundTripper, baseURL, apiKey, model string) (answer, error) {
	client := openai.NewClient(
		option.WithHTTPClient(&http.Client{Transport: rt}),
		option.WithBaseURL(baseURL),
		option.WithAPIKey(apiKey),
		option.WithMaxRetries(0),
	)
	start := time.Now()
	stream := tps.Wrap(client.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{
		Model:         model,
		Messages:      []openai.ChatCompletionMessageParamUnion{openai.UserMessage("In one sentence: why measure tokens per second?")},
		StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
	}), start)
	var text strings.Builder
	for stream.Next() {
		for _, c := range stream.Current().Choices {
			text.WriteString(c.Delta.Content)
		}
	}
	// Close before reading the cassette: the Recorder writes it when the
	// body ends or is closed.
	stream.Close()
	return answer{text.String(), stream.Sample()}, stream.Err()
}

func show(w io.Writer, what string, a answer) {
	s := a.sample
	tpsText := "n/a"
	if s.TPSOK {
		tpsText = fmt.Sprintf("%.0f tok/s", s.TPS)
	}
	text := strings.TrimSpace(a.text)
	if len(text) > 60 {
		text = text[:57] + "..."
	}
	fmt.Fprintf(w, "%-9s  TTFT %4d ms, %s, %d output tokens (%s), %d chunks: %q\n",
		what+":", s.TTFT.Milliseconds(), tpsText, s.OutputTokens, s.TokenSource, s.Chunks, text)
}
