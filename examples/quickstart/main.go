// Command quickstart shows tpsroute doing its job, offline, in about 25
// seconds: no API key, no network.
//
// It starts five simulated OpenAI-compatible providers of one model on
// 127.0.0.1, in three regions, each with its own time to first token (TTFT),
// speed, price and failure mode. Then it sends streaming calls through a
// tpsroute.Client at a fixed concurrency while a script degrades them: the
// fastest provider's speed halves, then one region answers 503 for 7.5 s and
// recovers. Every second it prints what the router measured and where the
// calls went; at the end, where the traffic went in each phase and why, and
// whether any call was lost.
//
// Usage:
//
//	go run ./examples/quickstart [-policy throughput|latency|cost] [-duration 25s] [-concurrency 12]
//
// The last line is machine-checkable, for example
//
//	calls: 412  answered: 412  lost: 0  failed over: 17  retried: 5  continued: 3
//
// and the exit status is 1 if any call was lost.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"time"

	"github.com/tpsroute/tpsroute/route"
)

func main() {
	cfg := config{Policy: route.Throughput}
	flag.Func("policy", "how to order providers: throughput, latency or cost (default throughput)", func(s string) error {
		p, err := parsePolicy(s)
		cfg.Policy = p
		return err
	})
	flag.DurationVar(&cfg.Duration, "duration", 25*time.Second, "how long to send traffic; the scripted events scale with it")
	flag.IntVar(&cfg.Concurrency, "concurrency", 12, "calls in flight at all times")
	flag.Parse()
	cfg.Live = isTerminal(os.Stdout)
	_, noColor := os.LookupEnv("NO_COLOR")
	cfg.Color = cfg.Live && !noColor

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	res, err := run(ctx, cfg, os.Stdout)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	if res.Lost > 0 || res.Interrupted > 0 {
		os.Exit(1)
	}
}

// parsePolicy maps a -policy value to a route.Policy.
func parsePolicy(s string) (route.Policy, error) {
	for _, p := range []route.Policy{route.Throughput, route.Latency, route.Cost} {
		if p.String() == s {
			return p, nil
		}
	}
	return 0, fmt.Errorf("unknown policy %q: want throughput, latency or cost", s)
}

// isTerminal reports whether f is a terminal (a character device). Colours
// and the in-place redraw are for people; logs, pipes and CI get plain,
// appended text.
func isTerminal(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
