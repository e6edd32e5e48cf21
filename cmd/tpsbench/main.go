package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/tpsroute/tpsroute/config"
	"github.com/tpsroute/tpsroute/internal/bench"
)

// Exit codes.
const (
	exitOK          = 0
	exitFailed      = 1
	exitUsage       = 2
	exitSLOMissed   = 3
	exitInterrupted = 130
)

const usageText = `tpsbench measures LLM providers under your own traffic.

Usage:
  tpsbench run     [flags]   one configuration (compare mode unless -routed)
  tpsbench compare [flags]   every deployment pinned in turn, identical load
  tpsbench sweep   [flags]   several -concurrency levels or -rate values
  tpsbench report  FILE      re-render a report.json as table, CSV and HTML
  tpsbench sim     [-policies a,b] [-o DIR] SCENARIO...
                             score routing policies in a simulated fleet (tpsbench sim -h)

Examples:
  # Offline demo: two providers in two regions, cold vs warm prompt cache.
  tpsbench compare --demo -cache both -concurrency 4 -o out/

  # Your providers (keys come from the env vars the config names).
  export GROQ_API_KEY=... TOGETHER_API_KEY=...
  tpsbench compare -config tpsroute.json -model llama-3.3-70b -prompts prompts.jsonl \
      -n 50 -warmup 5 -slo ttft=300ms,tps=30 -o out/

  # Open-loop Poisson sweep through the router.
  tpsbench sweep -config tpsroute.json -routed -rate 1,2,4,8 -poisson -n 100 -o sweep/

  # Re-render a saved report.
  tpsbench report out/report.json -o out/

Exit codes: 0 ok; 1 run failed or no request succeeded; 2 bad usage or config;
3 -slo given and a configuration missed it; 130 interrupted (partial results written).

Flags:
`

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// options are the parsed flags.
type options struct {
	config, prompts, model, outDir, cache, sloText, targets string
	concurrency, rate, inputTokens                          string
	n, warmup, systemTokens, maxTokens, demoTokens          int
	poisson, routed, force, demo, quiet                     bool
	seed                                                    uint64
	timeout                                                 time.Duration
}

// commandUsage is the usage line and summary of each command, printed by
// "tpsbench CMD -h".
var commandUsage = map[string]string{
	"run":     "tpsbench run [flags]\n\nOne configuration: every deployment pinned in turn (compare mode), or through\nthe router with -routed.",
	"compare": "tpsbench compare [flags]\n\nEvery deployment (or each of -targets) pinned in turn under identical load,\none table row per configuration and target. With -slo, exits 3 when a row\nmisses it.\n\nExample (offline):\n  tpsbench compare --demo -cache both -concurrency 4 -slo ttft=300ms,tps=60 -o out/",
	"sweep":   "tpsbench sweep [flags]\n\nSeveral -concurrency levels or -rate values, one configuration each.",
	"report":  "tpsbench report FILE [flags]\n\nRe-render a report.json as a table, and with -o as CSV and HTML.",
}

// newFlags returns the flag set of cmd ("" for the top level), whose -h
// prints cmd's usage.
func newFlags(stderr io.Writer, cmd string) (*flag.FlagSet, *options) {
	o := &options{}
	name := "tpsbench"
	if cmd != "" {
		name += " " + cmd
	}
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		if u, ok := commandUsage[cmd]; ok {
			fmt.Fprintf(stderr, "Usage: %s\n\nExit codes: 0 ok; 1 run failed or no request succeeded; 2 bad usage or config;\n3 -slo given and a configuration missed it; 130 interrupted.\n\nFlags:\n", u)
		} else {
			fmt.Fprint(stderr, usageText)
		}
		fs.PrintDefaults()
	}
	fs.StringVar(&o.config, "config", "", "router config `file` (docs/CONFIG.md schema)")
	fs.StringVar(&o.prompts, "prompts", "", "JSONL `file` of prompts ({\"messages\":[...]} or {\"prompt\":\"...\"}, optional max_tokens)")
	fs.StringVar(&o.model, "model", "", "logical model to request (default: the first deployment's)")
	fs.StringVar(&o.targets, "targets", "", "comma-separated provider or provider/region to compare (default: all)")
	fs.StringVar(&o.concurrency, "concurrency", "1", "closed-loop concurrency `levels`, comma-separated")
	fs.StringVar(&o.rate, "rate", "", "open-loop `rates` in requests/s, comma-separated (selects open loop)")
	fs.BoolVar(&o.poisson, "poisson", false, "Poisson arrivals for -rate (default: evenly spaced)")
	fs.IntVar(&o.n, "n", bench.DefaultRequests, "measured requests per configuration and target (at least 20 without -force)")
	fs.IntVar(&o.warmup, "warmup", 2, "warmup requests per configuration and target, excluded")
	fs.BoolVar(&o.force, "force", false, "allow -n below 20")
	fs.StringVar(&o.cache, "cache", "cold", "prompt cache: cold, warm or both")
	fs.StringVar(&o.sloText, "slo", "", "goodput SLO, e.g. ttft=300ms,tps=30[,e2e=5s][,p=95]")
	fs.StringVar(&o.outDir, "o", "", "output `dir` for report.json, results.csv and report.html")
	fs.StringVar(&o.inputTokens, "input-tokens", "", "synthetic prompt `lengths` in tokens, comma-separated (default 256)")
	fs.IntVar(&o.systemTokens, "system-tokens", 0, "synthetic system prompt length in tokens")
	fs.IntVar(&o.maxTokens, "max-tokens", 0, "output cap in tokens (0: provider default)")
	fs.BoolVar(&o.routed, "routed", false, "send through the router instead of pinning each deployment")
	fs.BoolVar(&o.demo, "demo", false, "use embedded simulated providers: no network, no keys")
	fs.IntVar(&o.demoTokens, "demo-tokens", 60, "answer length of the demo providers")
	fs.Uint64Var(&o.seed, "seed", 1, "seed for synthetic prompts and Poisson arrivals")
	fs.DurationVar(&o.timeout, "timeout", bench.DefaultTimeout, "per-request timeout")
	fs.BoolVar(&o.quiet, "q", false, "no progress line")
	return fs, o
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fs, _ := newFlags(stderr, "")
		fs.Usage()
		if len(args) == 0 {
			return exitUsage
		}
		return exitOK
	}
	cmd, rest := args[0], args[1:]
	if cmd == "sim" {
		return simCommand(rest, stdout, stderr)
	}
	fs, o := newFlags(stderr, cmd)
	if cmd == "report" {
		// "report FILE [flags]" or "report [flags] FILE".
		var file string
		if len(rest) > 0 && !strings.HasPrefix(rest[0], "-") {
			file, rest = rest[0], rest[1:]
		}
		if err := fs.Parse(rest); err != nil {
			return flagExit(err)
		}
		if file == "" && fs.NArg() == 1 {
			file = fs.Arg(0)
		}
		if file == "" {
			fmt.Fprintln(stderr, "tpsbench: report needs a FILE")
			return exitUsage
		}
		return report(file, o, stdout, stderr)
	}
	switch cmd {
	case "run", "compare", "sweep":
	default:
		fmt.Fprintf(stderr, "tpsbench: unknown command %q (want run, compare, sweep, report or sim; -h for help)\n", cmd)
		return exitUsage
	}
	if err := fs.Parse(rest); err != nil {
		return flagExit(err)
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "tpsbench: unexpected argument %q\n", fs.Arg(0))
		return exitUsage
	}
	cfg, err := buildConfig(cmd, o)
	if err != nil {
		return fail(stderr, exitUsage, err)
	}
	if !o.quiet {
		cfg.Progress = progressPrinter(stderr)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rep, err := bench.Run(ctx, cfg)
	if rep == nil {
		fmt.Fprintln(stderr, "tpsbench:", err)
		if errors.Is(err, bench.ErrTooFewRequests) || errors.Is(err, bench.ErrInvalidConfig) {
			return exitUsage
		}
		return exitFailed
	}
	code := finish(rep, o, stdout, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "tpsbench: interrupted; partial results written")
		return exitInterrupted
	}
	return code
}

// fail prints err as tpsbench's error and returns the exit code code.
func fail(stderr io.Writer, code int, err error) int {
	fmt.Fprintln(stderr, "tpsbench:", err)
	return code
}

func flagExit(err error) int {
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	return exitUsage
}

// buildConfig turns the flags into a bench.Config.
//
// It is long (complexity 25) because every flag is checked where it is
// read, each with its own message; split, the checks would be apart from
// the fields they guard.
func buildConfig(cmd string, o *options) (bench.Config, error) {
	var cfg bench.Config
	switch {
	case o.demo && o.config != "":
		return cfg, errors.New("-demo and -config are exclusive")
	case o.demo:
		cfg.Router = bench.Demo(o.demoTokens, o.seed)
	case o.config == "":
		return cfg, errors.New("-config FILE or --demo is required")
	default:
		f, err := config.Load(o.config) // reads each api_key_env from the environment
		if err != nil {
			return cfg, err
		}
		cfg.Router = f.Client
	}
	if o.routed {
		cfg.Mode = bench.Routed
	}
	if cmd == "compare" && o.routed {
		return cfg, errors.New("compare pins each deployment; -routed belongs to run or sweep")
	}
	if o.targets != "" {
		cfg.Targets = splitList(o.targets)
	}
	cfg.Workload.Model = o.model
	if o.prompts != "" {
		f, err := os.Open(o.prompts)
		if err != nil {
			return cfg, err
		}
		ps, err := bench.LoadPrompts(f)
		f.Close()
		if err != nil {
			return cfg, err
		}
		cfg.Workload.Prompts = ps
	}
	var err error
	if cfg.Workload.InputTokens, err = parseInts(o.inputTokens, "-input-tokens"); err != nil {
		return cfg, err
	}
	cfg.Workload.SystemTokens, cfg.Workload.MaxTokens, cfg.Workload.Seed = o.systemTokens, o.maxTokens, o.seed
	if o.rate != "" {
		for _, s := range splitList(o.rate) {
			v, err := strconv.ParseFloat(s, 64)
			if err != nil || !(v > 0) {
				return cfg, fmt.Errorf("-rate %q: want positive numbers", o.rate)
			}
			cfg.Rates = append(cfg.Rates, v)
		}
	} else if cfg.Concurrency, err = parseInts(o.concurrency, "-concurrency"); err != nil {
		return cfg, err
	}
	levels := max(len(cfg.Rates), len(cfg.Concurrency))
	if cmd == "sweep" && levels < 2 {
		return cfg, errors.New("sweep needs at least two -concurrency levels or -rate values")
	}
	if cmd != "sweep" && levels > 1 {
		return cfg, errors.New("several levels: use the sweep command")
	}
	cfg.Poisson = o.poisson
	cfg.Requests, cfg.Warmup, cfg.Force, cfg.Seed, cfg.Timeout = o.n, o.warmup, o.force, o.seed, o.timeout
	if cfg.Cache, err = bench.ParseCacheModes(o.cache); err != nil {
		return cfg, err
	}
	if cfg.SLO, err = bench.ParseSLO(o.sloText); err != nil {
		return cfg, err
	}
	return cfg, nil
}

func splitList(s string) []string {
	var out []string
	for p := range strings.SplitSeq(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func parseInts(s, name string) ([]int, error) {
	var out []int
	for _, p := range splitList(s) {
		v, err := strconv.Atoi(p)
		if err != nil || v <= 0 {
			return nil, fmt.Errorf("%s %q: want positive integers", name, s)
		}
		out = append(out, v)
	}
	return out, nil
}

// isTerminal reports whether w is a character device (a TTY).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// progressPrinter writes the live progress line: rewritten in place on a
// TTY, one plain line per update otherwise (no ANSI codes).
func progressPrinter(w io.Writer) func(bench.Progress) {
	tty := isTerminal(w)
	last := time.Time{}
	return func(p bench.Progress) {
		line := fmt.Sprintf("[%d/%d] %s  TTFT p50 %s  TPS p50 %.1f  errors %d  elapsed %s  ETA %s",
			p.Done, p.Total, p.Label, fmtMS(p.TTFTP50), p.TPSP50, p.Errors,
			p.Elapsed.Round(time.Second), p.ETA.Round(time.Second))
		switch {
		case tty && p.Finished:
			fmt.Fprintf(w, "\r\033[K%s\n", line)
		case tty:
			fmt.Fprintf(w, "\r\033[K%s", line)
		case p.Finished || time.Since(last) >= 5*time.Second:
			// Not a TTY: a plain line at most every 5 s, so logs stay short.
			fmt.Fprintln(w, line)
			last = time.Now()
		}
	}
}

func fmtMS(v float64) string {
	if v == 0 {
		return "-"
	}
	if v < 1000 {
		return strconv.FormatFloat(v, 'f', 0, 64) + "ms"
	}
	return strconv.FormatFloat(v/1000, 'f', 2, 64) + "s"
}

// finish prints the table, writes the files and returns the exit code.
func finish(rep *bench.Report, o *options, stdout, stderr io.Writer) int {
	if err := rep.WriteTable(stdout); err != nil {
		return fail(stderr, exitFailed, err)
	}
	if o.outDir != "" {
		if err := writeFiles(rep, o.outDir); err != nil {
			return fail(stderr, exitFailed, err)
		}
		fmt.Fprintf(stderr, "wrote %s, %s and %s\n",
			filepath.Join(o.outDir, "report.json"), filepath.Join(o.outDir, "results.csv"), filepath.Join(o.outDir, "report.html"))
	}
	ok := 0
	for _, s := range rep.Summaries {
		ok += s.OK
	}
	if ok == 0 {
		fmt.Fprintln(stderr, "tpsbench: no request succeeded")
		return exitFailed
	}
	if !rep.SLO.IsZero() && !rep.SLOMet() {
		fmt.Fprintf(stderr, "tpsbench: SLO %s missed by the rows marked *; exit status %d (-h lists the exit codes)\n", o.sloText, exitSLOMissed)
		return exitSLOMissed
	}
	return exitOK
}

func writeFiles(rep *bench.Report, dir string) error {
	return writeOutputs(dir, map[string]func(io.Writer) error{
		"report.json": rep.WriteJSON,
		"results.csv": rep.WriteCSV,
		"report.html": rep.WriteHTML,
	})
}

// writeOutputs creates dir and writes each named file in it with its
// writer, closing every file and naming the one that failed.
func writeOutputs(dir string, files map[string]func(io.Writer) error) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for name, write := range files {
		f, err := os.Create(filepath.Join(dir, name))
		if err != nil {
			return err
		}
		err = write(f)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("writing %s: %w", name, err)
		}
	}
	return nil
}

func report(file string, o *options, stdout, stderr io.Writer) int {
	f, err := os.Open(file)
	if err != nil {
		return fail(stderr, exitUsage, err)
	}
	defer f.Close()
	rep, err := bench.ReadReport(f)
	if err != nil {
		return fail(stderr, exitUsage, err)
	}
	if o.sloText != "" {
		if rep.SLO, err = bench.ParseSLO(o.sloText); err != nil {
			return fail(stderr, exitUsage, err)
		}
		rep.Summarize()
	}
	return finish(rep, o, stdout, stderr)
}
