package tpsroute

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/tpsroute/tpsroute/fallback"
	"github.com/tpsroute/tpsroute/internal/executor"
	"github.com/tpsroute/tpsroute/internal/registry"
	"github.com/tpsroute/tpsroute/measure"
	"github.com/tpsroute/tpsroute/route"
	"github.com/tpsroute/tpsroute/tps"
)

// Config configures a Client. The zero value of every field except
// Deployments is a documented default, so a Config with only Deployments set
// is complete. A Config is a plain value: New copies what it needs, so the
// Config may be reused or changed afterwards, but not while New reads it.
type Config struct {
	// Deployments are the providers, regions and models to route across.
	// At least one is required; each must pass route.Deployment.Validate and
	// no two may share a Key (provider, region, model and revision).
	Deployments []route.Deployment

	// Route tunes the Picker: the policy (Route.Policy, which WithPolicy
	// overrides per call; zero means route.Throughput), the SLO every call
	// applies (Route.SLO, whose fields WithSLO overrides per call; zero has
	// no constraints), exploration share, near-equal band,
	// cold probes, cache affinity, percentiles, latency metric, custom
	// Scorer and seed. The Client wires the Picker's health to the fallback
	// executor. A zero Route is route's documented defaults.
	Route route.Options
	// Measure tunes the statistics (window, EWMA half-life, samples needed).
	// Each deployment's non-zero Price is added to Measure.Prices (a copy)
	// and wins over an entry for the same key there; normally leave
	// Measure.Prices nil and set Deployments[i].Price. A zero Measure is
	// measure's documented defaults.
	Measure measure.Options
	// Fallback tunes failover: deadlines, attempts, backoff, breakers,
	// hedging, mid-stream policy. What the executor is connected to is the
	// Client's: HTTPClient, Tokenizer, Logger, OnAttempt and
	// OnBreakerChange below, the statistics for the measured TTFT and every
	// sample, and Fleet. A zero Fallback is fallback's documented defaults.
	Fallback fallback.Options

	// Logger receives debug records of decisions and failed attempts. Nil
	// means silent.
	Logger *slog.Logger
	// HTTPClient's Transport sends every request to the providers. Its
	// Timeout, Jar and CheckRedirect are not used: the Fallback deadlines
	// bound each attempt and the caller's context bounds the call. Nil, or a
	// nil Transport, means a transport of the Client's own with
	// http.DefaultTransport's settings and a 64 KiB read buffer per
	// connection (4 KiB in net/http's default), so that a stream is read in
	// fewer system calls; Client.Close closes its idle connections. A
	// program that replaced http.DefaultTransport with a RoundTripper that
	// is not an *http.Transport has that one used as it is.
	HTTPClient *http.Client
	// Tokenizer counts output tokens when a provider reports no usage, and
	// the first chunk's tokens always. Nil means usage, or else output chunks,
	// are counted (see tps.Sample.TokenSource).
	Tokenizer tps.Tokenizer
	// MaxWildcardModels is how many distinct models each wildcard deployment
	// (Model "*") serves, and keeps statistics for, at a time; a model
	// unused for 15 minutes gives its place up. A call for a further model is
	// not sent to that deployment, and is a *ModelError (404) when no other
	// deployment serves it; Client.RefusedModels counts these refusals. Zero
	// means 64; a wildcard deployment with a
	// Models list serves exactly those instead.
	MaxWildcardModels int

	// OnDecision, if not nil, is called with each call's request and plan
	// after routing and before the first attempt, on the caller's goroutine.
	// It must not block or modify the plan.
	OnDecision func(req route.Request, plan route.Plan)
	// OnAttempt, if not nil, is called after every attempt ends, including
	// deployments skipped for an open breaker or a cooldown. It runs on the
	// goroutine that ended the attempt and must not block.
	OnAttempt func(fallback.Attempt)
	// OnBreakerChange, if not nil, is called when a deployment's breaker
	// changes state. It runs under the breaker's lock: it must not block or
	// call the Client.
	OnBreakerChange func(k measure.Key, from, to route.BreakerState)

	// Fleet, if not nil, joins the Client to the other replicas of its
	// service (fleet mode): they share measurements, breakers, rate limits,
	// cache affinity and which deployment holds each stored Responses
	// response. fleet.New returns one, backed by Redis; the caller
	// closes it after the Client's last call. A Fleet serves one Client.
	// Nil means this Client learns alone.
	Fleet Fleet
	// StateFile, if not empty, is the file where the Client keeps its
	// statistics across restarts (docs/STATE.md): New restores them from it,
	// so that a restarted process routes like the one that stopped, and the
	// Client writes it every StateInterval and at Close, atomically (a
	// temporary file in the same directory, then a rename). A missing file
	// is a cold start; so is a state file of another version, for other
	// measure window options, or corrupt (logged at Warn; it is replaced at
	// the next write). A file that is not a state file, or cannot be read,
	// makes New fail, so that a wrong path is never overwritten. Keys no
	// configured deployment serves are not restored. Empty means no state
	// file: New starts cold and starts no goroutine.
	StateFile string
	// StateInterval is how often the Client writes StateFile, from one
	// goroutine that Close stops. Zero means once a minute (a crash
	// loses at most a minute of measurements; Close writes it too); negative means only at Close.
	StateInterval time.Duration

	// MeterProvider creates the Client's OpenTelemetry instruments: the GenAI
	// client metrics and tpsroute's own (docs/OBSERVABILITY.md lists them).
	// Nil means otel.GetMeterProvider(), the global one, which does nothing
	// until an SDK is installed.
	MeterProvider metric.MeterProvider
	// TracerProvider creates a span per call ("chat {model}") with a child
	// span per attempt, under the span of the call's context. Nil means
	// otel.GetTracerProvider(), which does nothing until an SDK is installed.
	TracerProvider trace.TracerProvider
}

// Fleet shares a Client's state with the other replicas of a fleet, off the
// call's critical path; *fleet.Fleet implements it, the one implementation
// there is: JoinClient takes the Client's statistics engine, a Registry of
// the module's internal/registry, which code outside the module cannot
// name. Implementations are safe for concurrent use.
type Fleet interface {
	// JoinClient is called once by New with the Client's statistics, its
	// deployments and learn, which records in the Client's cache affinity
	// that the deployment with key k served cacheKey at time at. It returns
	// the breaker and limit state the Client's executor consults.
	JoinClient(reg *registry.Registry, deployments []route.Deployment, learn func(cacheKey string, k measure.Key, at time.Time)) (executor.Shared, error)
	// Served is called when a call with a cache key succeeded on the
	// deployment with key k. It must not block. The cache key is already
	// hashed: a Fleet never sees the caller's key.
	Served(cacheKey string, k measure.Key, now time.Time)
	// Owned is called when the deployment with key k holds the state of id,
	// a Responses API response or conversation id, to share with the other
	// replicas. It must not block.
	Owned(id string, k measure.Key)
	// Owner returns the key of the deployment that holds id's state, as
	// another replica shared it; it is called for an id the Client does not
	// know, on the call's path, and must return within a bounded time (and
	// at once when the fleet's store is unreachable). The Client ignores a
	// key that names no deployment of its own serving Responses.
	Owner(ctx context.Context, id string) (measure.Key, bool)
}

// FleetSettings is how fleet.Open joins a fleet: the Redis URL, the fleet
// name and the sync interval; a config file's "fleet" section
// (config.File.Fleet). It is a plain value.
type FleetSettings struct {
	RedisURL string        // redis://[user:password@]host:port/db or rediss://...; "" means no fleet
	Name     string        // fleet name; "" means "default"
	Sync     time.Duration // sync interval; 0 means 1 s
}

// validate checks the fields New owns and names the bad one.
func (c *Config) validate() error {
	bad := func(field, msg string) error { return &ConfigError{Field: field, Msg: msg} }
	var se *route.SLOError
	switch {
	case len(c.Deployments) == 0:
		return bad("Deployments", "at least one deployment is required")
	case c.Route.Policy > route.Cost:
		return bad("Route.Policy", fmt.Sprintf("unknown policy %d", c.Route.Policy))
	case errors.As(c.Route.SLO.Validate(), &se):
		return bad("Route.SLO."+se.Field, se.Reason)
	}
	return nil
}

// ConfigError is an invalid Config: New returns one naming the bad field,
// and package config one naming the field and line of a config file.
// It is a value and safe to share.
type ConfigError struct {
	Line  int    // 1-based line of the offending token; 0 when unknown
	Field string // JSON path of the field, e.g. "deployments[1].price.input"; "" for the document
	Msg   string // what is wrong
}

// Error returns "tpsroute: config line L: field: msg".
func (e *ConfigError) Error() string {
	var b strings.Builder
	b.WriteString("tpsroute: config")
	if e.Line > 0 {
		b.WriteString(" line ")
		b.WriteString(strconv.Itoa(e.Line))
	}
	b.WriteString(": ")
	if e.Field != "" {
		b.WriteString(e.Field)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}
