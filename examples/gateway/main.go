package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tpsroute/tpsroute"
	"github.com/tpsroute/tpsroute/config"
	"github.com/tpsroute/tpsroute/fleet"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stderr, os.LookupEnv, nil); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// flags are the command line of the gateway.
type flags struct {
	config       string
	addr         string
	demo         bool
	authTokenEnv string
	maxBody      int64
	maxInFlight  int
	drain        time.Duration
	verbose      bool
	redis        string
	otlp         string
	state        string
}

func parseFlags(args []string, stderr io.Writer) (flags, error) {
	var f flags
	fs := flag.NewFlagSet("gateway", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&f.config, "config", "", "JSON config file (schema: docs/CONFIG.md)")
	fs.StringVar(&f.addr, "addr", "127.0.0.1:8080", "listen address; loopback unless told otherwise")
	fs.BoolVar(&f.demo, "demo", false, "serve embedded simulated providers (no network, no keys)")
	fs.StringVar(&f.authTokenEnv, "auth-token-env", "", "name of an environment variable holding the accepted bearer tokens, comma-separated")
	fs.Int64Var(&f.maxBody, "max-body", defaultMaxBody, "largest request body in bytes")
	fs.IntVar(&f.maxInFlight, "max-in-flight", defaultMaxInFlight, "chat-completion requests served at once; one more is answered 429 with Retry-After")
	fs.DurationVar(&f.drain, "drain", 30*time.Second, "on SIGINT/SIGTERM, how long in-flight streams may finish")
	fs.BoolVar(&f.verbose, "v", false, "log every request")
	fs.StringVar(&f.redis, "redis", "", "fleet mode: Redis URL (redis://[user:pass@]host:port/db or rediss://...) shared with the other replicas; overrides the config's fleet.redis_url (fleet name from the config, else \"default\")")
	fs.StringVar(&f.state, "state", "", "file that keeps the routing statistics across restarts: restored at start, written every minute (the config's state.interval) and after draining; overrides the config's state.file")
	fs.StringVar(&f.otlp, "otlp", "", "OTLP/HTTP endpoint URL to export traces to, e.g. http://127.0.0.1:4318 (default: no traces)")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: gateway (-config FILE | -demo) [-addr host:port] [-auth-token-env NAME] [-max-body N] [-max-in-flight N] [-drain D] [-redis URL] [-otlp URL] [-state FILE] [-v]")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return f, err
	}
	switch {
	case fs.NArg() > 0:
		return f, fmt.Errorf("gateway: unexpected argument %q", fs.Arg(0))
	case f.config == "" && !f.demo:
		fs.Usage()
		return f, errors.New("gateway: give -config FILE or -demo")
	case f.config != "" && f.demo:
		return f, errors.New("gateway: -config and -demo exclude each other")
	case f.maxBody <= 0:
		return f, errors.New("gateway: -max-body must be positive")
	case f.maxInFlight <= 0:
		return f, errors.New("gateway: -max-in-flight must be positive")
	case f.drain < 0:
		return f, errors.New("gateway: -drain must not be negative")
	}
	return f, nil
}

// run starts the gateway and serves until ctx ends, then drains. ready, if
// not nil, receives the listening address.
func run(ctx context.Context, args []string, stderr io.Writer, lookup func(string) (string, bool), ready chan<- string) error {
	f, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	level := slog.LevelWarn
	if f.verbose {
		level = slog.LevelInfo
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))

	cfg, fs, transport, err := loadConfig(f, lookup)
	if err != nil {
		return err
	}
	// The Client logs at Info what it restored from the state file and at
	// Warn a state file it could not use; its debug records stay off.
	cfg.Logger = logger
	var fl *fleet.Fleet
	if fs.RedisURL != "" {
		// The fleet logs Redis going away and coming back once each;
		// go-redis would log every failed dial on its own.
		redis.SetLogger(quietRedis{})
		if fl, err = fleet.Open(fs, logger); err != nil {
			return fmt.Errorf("gateway: %w", err)
		}
		defer fl.Close()
		cfg.Fleet = fl
	}
	tel, err := newTelemetry(ctx, f.otlp)
	if err != nil {
		return err
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := tel.shutdown(sctx); err != nil {
			logger.Warn("gateway: telemetry shutdown", "err", err)
		}
	}()
	cfg.MeterProvider, cfg.TracerProvider = tel.meters, tel.tracers
	hist := newHistory()
	cfg.OnAttempt = hist.attempt
	client, err := newClient(cfg, transport)
	if err != nil {
		return err
	}
	defer client.Close() // on an early return; after draining it was closed already
	tokens, err := authTokens(f.authTokenEnv, lookup)
	if err != nil {
		return err
	}
	g := newGateway(client, options{MaxBody: f.maxBody, MaxInFlight: f.maxInFlight, Tokens: tokens, Logger: logger, Metrics: tel.metrics, History: hist, Fleet: fl})
	sampling := make(chan struct{})
	defer close(sampling)
	go g.sampleEvery(sampling)

	ln, err := net.Listen("tcp", f.addr)
	if err != nil {
		return fmt.Errorf("gateway: %w", err)
	}
	if !isLoopback(ln.Addr()) && len(tokens) == 0 {
		logger.Warn("gateway: listening beyond loopback without -auth-token-env; anyone who can reach it spends your provider credits", "addr", ln.Addr().String())
	}
	srv := &http.Server{
		Handler:           g,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
	fmt.Fprintf(stderr, "gateway: listening on http://%s (%d deployments)\n", ln.Addr(), len(g.deps))
	if ready != nil {
		ready <- ln.Addr().String()
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	// Drain: refuse new connections, let in-flight streams finish up to the
	// deadline, then cut the rest (which cancels their upstream calls).
	g.draining.Store(true)
	fmt.Fprintf(stderr, "gateway: shutting down; draining in-flight requests for up to %s\n", f.drain)
	dctx, cancel := context.WithTimeout(context.Background(), f.drain)
	defer cancel()
	err = srv.Shutdown(dctx)
	if errors.Is(err, context.DeadlineExceeded) {
		fmt.Fprintln(stderr, "gateway: drain deadline passed; closing the remaining streams")
		err = srv.Close()
	}
	if serr := <-errc; serr != nil && !errors.Is(serr, http.ErrServerClosed) && err == nil {
		err = serr
	}
	// Every stream has ended: write the state file one last time.
	if cerr := client.Close(); cerr != nil {
		logger.Warn("gateway: state file not written at shutdown", "err", cerr)
	}
	return err
}

// loadConfig returns the Client's config and the fleet settings that f
// asks for: the -demo providers, with the RoundTripper that serves them, or
// the -config file, its api_key_env variables read with lookup; -redis and
// -state override the file's.
func loadConfig(f flags, lookup func(string) (string, bool)) (tpsroute.Config, tpsroute.FleetSettings, http.RoundTripper, error) {
	var cfg tpsroute.Config
	var fs tpsroute.FleetSettings
	var transport http.RoundTripper
	if f.demo {
		cfg, transport = demoConfig()
	} else {
		file, err := os.Open(f.config)
		if err != nil {
			return cfg, fs, nil, fmt.Errorf("gateway: %w", err)
		}
		cf, err := config.ParseLookup(file, lookup)
		file.Close()
		if err != nil {
			return cfg, fs, nil, err
		}
		cfg, fs = cf.Client, cf.Fleet
	}
	if f.redis != "" {
		fs.RedisURL = f.redis
	}
	if f.state != "" {
		cfg.StateFile = f.state
	}
	return cfg, fs, transport, nil
}

// authTokens returns the bearer tokens in the variable name (-auth-token-env),
// comma-separated, read with lookup; none when name is empty.
func authTokens(name string, lookup func(string) (string, bool)) ([]string, error) {
	if name == "" {
		return nil, nil
	}
	v, ok := lookup(name)
	var tokens []string
	for _, t := range strings.Split(v, ",") {
		if t = strings.TrimSpace(t); t != "" {
			tokens = append(tokens, t)
		}
	}
	if !ok || len(tokens) == 0 {
		return nil, fmt.Errorf("gateway: -auth-token-env %s: the variable is unset or holds no token", name)
	}
	return tokens, nil
}

// newClient returns the tpsroute.Client of the gateway for cfg. transport,
// when not nil, replaces cfg.HTTPClient's transport (the demo and tests use
// in-memory providers); without either, upstreamTransport is used.
func newClient(cfg tpsroute.Config, transport http.RoundTripper) (*tpsroute.Client, error) {
	if transport == nil && cfg.HTTPClient != nil {
		transport = cfg.HTTPClient.Transport
	}
	if transport == nil {
		transport = upstreamTransport()
	}
	// The Client uses only the http.Client's Transport (Config.HTTPClient).
	cfg.HTTPClient = &http.Client{Transport: transport}
	return tpsroute.New(cfg)
}

// upstreamTransport is the gateway's transport to providers when the config
// sets none: http.DefaultTransport's dialer, proxy and TLS settings, with room
// for many concurrent streams per provider and larger read buffers, so a
// burst of events is read in one system call.
func upstreamTransport() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConns = 1024
	t.MaxIdleConnsPerHost = 256
	t.ReadBufferSize = 64 << 10
	t.WriteBufferSize = 16 << 10
	return t
}

func isLoopback(a net.Addr) bool {
	ta, ok := a.(*net.TCPAddr)
	return ok && ta.IP.IsLoopback()
}

// quietRedis discards go-redis's own log lines.
type quietRedis struct{}

func (quietRedis) Printf(context.Context, string, ...any) {}
