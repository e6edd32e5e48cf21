package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"testing/synctest"

	"github.com/tpsroute/tpsroute/internal/sim"
)

const simUsage = `tpsbench sim runs simulated fleets through a real tpsroute.Client and scores
routing policies against an oracle and the common baselines. It runs in real
time: every policy at once, so a scenario takes its duration.

Usage:
  tpsbench sim [flags] SCENARIO...
  tpsbench sim -random N [-seed S] [-class C] [-calls K]

A SCENARIO is a JSON file or a bundled name: %s.

With -random N it scores N fleets drawn by sim.Generate (seeds S to S+N-1,
class C or every class) in virtual time, so it takes CPU, not their
duration, and prints the distribution of each policy's ratio to the oracle:
median, p10, worst and the share of fleets in which it beats the defaults by
more than 5%%, over all fleets and per class, then the class checks.

Policies: tpsroute (the Client's defaults), oracle, round-robin, random,
litellm-latency, p2c-peak-ewma, openrouter-price, pinned-N (deployment N).

Flags:
`

// simPolicy returns the named policy, seeded.
func simPolicy(name string, seed uint64) (sim.Policy, error) {
	for _, p := range sim.Baselines(seed) {
		if p.Name() == name {
			return p, nil
		}
	}
	var n int
	if _, err := fmt.Sscanf(name, "pinned-%d", &n); err == nil && n >= 0 {
		return sim.Pinned(n), nil
	}
	return nil, fmt.Errorf("unknown policy %q", name)
}

// simCommand is "tpsbench sim".
func simCommand(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("tpsbench sim", flag.ContinueOnError)
	fs.SetOutput(stderr)
	policies := fs.String("policies", "", "comma-separated policies; empty means all but pinned")
	outDir := fs.String("o", "", "directory for report.json and report.html")
	format := fs.String("format", "table", "stdout format: table, markdown or json")
	random := fs.Int("random", 0, "score this many generated fleets instead of SCENARIOs")
	seed := fs.Uint64("seed", 1, "with -random: the first fleet's seed")
	class := fs.String("class", "", "with -random: draw only this class ("+strings.Join(sim.Classes(), ", ")+")")
	calls := fs.Int("calls", 0, "with -random: about this many calls a fleet (0: the generator's default)")
	fs.Usage = func() {
		fmt.Fprintf(stderr, simUsage, strings.Join(sim.BundledNames(), ", "))
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return flagExit(err)
	}
	if *random > 0 {
		return simRandom(*random, *seed, sim.Space{Class: *class, Calls: *calls}, *format, stdout, stderr)
	}
	if fs.NArg() == 0 {
		fmt.Fprintln(stderr, "tpsbench: sim needs a SCENARIO (a file or one of "+strings.Join(sim.BundledNames(), ", ")+")")
		return exitUsage
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var reps []*sim.Report
	for _, name := range fs.Args() {
		sc, err := sim.LoadScenario(name)
		if err != nil {
			return fail(stderr, exitUsage, err)
		}
		pols := sim.Baselines(sc.Seed)
		if *policies != "" {
			pols = nil
			for _, n := range splitList(*policies) {
				p, err := simPolicy(n, sc.Seed)
				if err != nil {
					return fail(stderr, exitUsage, err)
				}
				pols = append(pols, p)
			}
		}
		fmt.Fprintf(stderr, "scenario %s: %d policies for %v\n", sc.Name, len(pols), sc.Duration)
		rep, err := sim.Compare(ctx, sc, pols)
		if err != nil {
			fmt.Fprintln(stderr, "tpsbench:", err)
			if ctx.Err() != nil {
				return exitInterrupted
			}
			return exitFailed
		}
		reps = append(reps, rep)
		switch *format {
		case "json":
			err = rep.WriteJSON(stdout)
		case "markdown":
			fmt.Fprintf(stdout, "### %s\n\n", sc.Name)
			err = rep.WriteMarkdown(stdout)
		default:
			fmt.Fprintf(stdout, "scenario %s\n", sc.Name)
			err = rep.WriteTable(stdout)
		}
		if err != nil {
			return fail(stderr, exitFailed, err)
		}
	}
	if *outDir != "" {
		if err := writeSimFiles(reps, *outDir); err != nil {
			return fail(stderr, exitFailed, err)
		}
		fmt.Fprintf(stderr, "wrote %s and %s\n", filepath.Join(*outDir, "report.json"), filepath.Join(*outDir, "report.html"))
	}
	return exitOK
}

func writeSimFiles(reps []*sim.Report, dir string) error {
	return writeOutputs(dir, map[string]func(io.Writer) error{
		"report.json": func(w io.Writer) error {
			for _, r := range reps {
				if err := r.WriteJSON(w); err != nil {
					return err
				}
			}
			return nil
		},
		"report.html": func(w io.Writer) error { return sim.WriteHTML(w, reps...) },
	})
}

// simRandom is "tpsbench sim -random N": n generated fleets from seed on,
// each scored by every policy in its own synctest bubble (virtual time; a
// bare testing.T is enough for a bubble whose function never fails it), two
// at a time.
func simRandom(n int, seed uint64, sp sim.Space, format string, stdout, stderr io.Writer) int {
	scs := make([]*sim.Scenario, n)
	for i := range scs {
		sc, err := sim.Generate(seed+uint64(i), sp)
		if err != nil {
			return fail(stderr, exitUsage, err)
		}
		scs[i] = sc
	}
	d := &sim.Distribution{Fleets: make([]*sim.FleetScore, n)}
	errs := make([]error, n)
	sem := make(chan struct{}, 2)
	var wg sync.WaitGroup
	for i, sc := range scs {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			synctest.Test(&testing.T{}, func(*testing.T) {
				d.Fleets[i], errs[i] = sim.ScoreFleet(context.Background(), sc, sim.RandomBaselines(sc.Seed))
			})
			fmt.Fprintf(stderr, "fleet %s: %d deployments\n", sc.Name, len(sc.Deployments))
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return fail(stderr, exitFailed, err)
	}
	var err error
	switch format {
	case "json":
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		err = enc.Encode(d)
	case "markdown":
		err = d.WriteMarkdown(stdout)
	default:
		err = d.WriteTable(stdout)
	}
	if err != nil {
		return fail(stderr, exitFailed, err)
	}
	return exitOK
}
