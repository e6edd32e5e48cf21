package tpsroute

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"log/slog"
	"maps"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/tidwall/gjson"

	"github.com/tpsroute/tpsroute/internal/executor"
	"github.com/tpsroute/tpsroute/internal/picker"
	"github.com/tpsroute/tpsroute/internal/redact"
	"github.com/tpsroute/tpsroute/internal/registry"
	"github.com/tpsroute/tpsroute/internal/telemetry"
	"github.com/tpsroute/tpsroute/measure"
	"github.com/tpsroute/tpsroute/route"
)

// Client routes chat completions across the configured deployments, fails
// over by the fallback rules and records every call's timing. Its Chat
// service is shaped like openai-go's, and Transport gives the same flow as an
// http.RoundTripper. A Client is safe for concurrent use; make one per
// process, so that statistics, breakers and cooldowns see every call.
type Client struct {
	// Chat holds the chat-completion service, as in openai-go:
	// client.Chat.Completions.NewStreaming(ctx, params, opts...).
	Chat ChatService
	// Responses creates responses with OpenAI's Responses API, as in
	// openai-go: client.Responses.NewStreaming(ctx, params, opts...).
	Responses ResponseService
	// Embeddings creates embeddings, as in openai-go:
	// client.Embeddings.New(ctx, params, opts...).
	Embeddings EmbeddingService

	reg    *registry.Registry
	tel    *telemetry.Telemetry
	exec   *executor.Executor
	picker *picker.Picker // the chat Picker; nil when no deployment serves chat
	// pickers holds one Picker per API some deployment serves (api.go).
	pickers map[route.API]*picker.Picker
	owners  *owners // which deployment holds each Responses id's state
	logger  *slog.Logger
	fleet   Fleet       // nil unless Config.Fleet
	state   *stateSaver // nil unless Config.StateFile

	onDecision   func(route.Request, route.Plan)
	hedgeDefault bool // Config.Fallback.Hedge was configured: every call may hedge
	maxEvent     int  // Config.Fallback.Limits.Event: a Stream reads events as large as the executor releases

	minTPS float64 // Config.Route.SLO.MinTPS: a stream is rescued for slowness only below it (executor.Call.MinTPS)

	own *http.Transport // the upstream transport New built when Config.HTTPClient set none; nil otherwise

	deps   []route.Deployment // as configured, for ModelIDs and Deployments
	wild   *wildcards         // wildcard deployments' admitted models; nil without one
	redact *redact.Scrubber   // every configured API key and credential header value -> REDACTED
}

// ChatService is the chat namespace of a Client, as in openai-go.
// It is safe for concurrent use.
type ChatService struct {
	// Completions creates routed chat completions.
	Completions ChatCompletionService
}

// ChatCompletionService creates routed chat completions. It is safe for
// concurrent use.
type ChatCompletionService struct {
	c *Client
}

// New returns a Client for cfg. It validates cfg and returns a *ConfigError
// naming the bad field, or route's *route.DeploymentError (matching
// route.ErrInvalidDeployment) for an invalid or duplicate deployment.
// With Config.StateFile, New restores the statistics saved there and starts
// the one goroutine that writes them, which Client.Close stops; otherwise it
// starts none, and Close does nothing.
func New(cfg Config) (*Client, error) {
	// New is long (about 85 lines) because it is the one place that wires
	// the components together, in order: measure, fallback with its hooks,
	// the fleet, telemetry, route; each step needs the previous ones.
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	c := &Client{logger: cmp.Or(cfg.Logger, slog.New(slog.DiscardHandler)), onDecision: cfg.OnDecision, minTPS: cfg.Route.SLO.MinTPS}

	mo := cfg.Measure
	mo.Prices = make(map[measure.Key]measure.Price, len(cfg.Deployments)+len(mo.Prices))
	maps.Copy(mo.Prices, cfg.Measure.Prices)
	for _, d := range cfg.Deployments {
		if !d.IsWildcard() && d.Price != (measure.Price{}) {
			mo.Prices[d.Key()] = d.Price
			for _, a := range d.APIs { // statistics are kept per API
				mo.Prices[d.ForAPI(a).Key()] = d.Price
			}
		}
	}
	c.reg = registry.New(mo)
	if cfg.StateFile != "" {
		// Before the fleet joins, which then does not republish them.
		if err := restoreState(cfg.StateFile, c.reg, cfg.Deployments, c.logger, time.Now()); err != nil {
			return nil, err
		}
	}

	var base http.RoundTripper
	if cfg.HTTPClient != nil && cfg.HTTPClient.Transport != nil {
		base = cfg.HTTPClient.Transport
	} else if c.own = upstreamTransport(http.DefaultTransport); c.own != nil {
		base = c.own
	} else {
		base = http.DefaultTransport // the program's own RoundTripper, as it is
	}
	fo := cfg.Fallback
	hooks := executor.Hooks{
		Transport:     base,
		Tokenizer:     cfg.Tokenizer,
		Logger:        cfg.Logger,
		OnAttempt:     cfg.OnAttempt,
		OnStateChange: cfg.OnBreakerChange,
		MeasuredTTFT:  c.measuredTTFT,
	}
	c.hedgeDefault = fo.Hedge.Delay > 0 || fo.Hedge.DelayFunc != nil
	c.maxEvent = fo.Limits.Event
	if !c.hedgeDefault {
		// Calls that opt in with WithHedge wait their deployment's TTFT p95.
		fo.Hedge.DelayFunc = c.measuredTTFT
	}
	if cfg.Fleet != nil {
		c.fleet = cfg.Fleet
		// The Picker is built below; affinity learned before then is dropped.
		var picker atomic.Pointer[picker.Picker]
		learn := func(cacheKey string, k measure.Key, at time.Time) {
			if p := picker.Load(); p != nil {
				p.Served(cacheKey, k, at)
			}
		}
		defer func() { picker.Store(c.picker) }()
		sh, err := cfg.Fleet.JoinClient(c.reg, publicDeployments(cfg.Deployments), learn)
		if err != nil {
			return nil, err
		}
		hooks.Shared = sh
	}
	c.exec = executor.New(fo, hooks)
	tel, err := telemetry.New(telemetry.Options{
		MeterProvider: cfg.MeterProvider, TracerProvider: cfg.TracerProvider,
		Deployments: apiDeployments(cfg.Deployments), Health: c.exec,
	})
	if err != nil {
		return nil, fmt.Errorf("tpsroute: telemetry: %w", err)
	}
	c.tel = tel

	if err := c.newPickers(cfg.Deployments, cfg.Route); err != nil {
		return nil, err
	}
	c.wild = newWildcards(c.deps, cfg.MaxWildcardModels)
	c.redact = redact.NewScrubber(cfg.Deployments...)

	c.Chat.Completions.c = c
	if cfg.StateFile != "" {
		c.state = &stateSaver{path: cfg.StateFile, reg: c.reg, logger: c.logger}
		c.state.start(cfg.StateInterval)
	}
	return c, nil
}

// Stats returns the statistics of every deployment key seen: percentiles and
// EWMAs of TTFT and TPS, counts, error rates, tokens and cost. Keys of
// wildcard deployments carry the model actually requested.
func (c *Client) Stats() measure.Snapshot { return c.reg.Snapshot() }

// Deployments returns a copy of the configured deployments, in order, without
// credentials: APIKey is empty, and the value of every header whose name
// suggests a credential (Authorization, api-key, X-Goog-Api-Key, Cookie, any
// name with auth, key, token, secret, password, signature or credential in
// it) reads "REDACTED" (redact.Deployment). Routing headers such as X-Route-Region are kept.
func (c *Client) Deployments() []route.Deployment { return publicDeployments(c.deps) }

// publicDeployments returns redact.Deployment of each of ds.
func publicDeployments(ds []route.Deployment) []route.Deployment {
	out := make([]route.Deployment, len(ds))
	for i, d := range ds {
		out[i] = redact.Deployment(d)
	}
	return out
}

// fleetCacheKey is the form of a cache key routed on and shared in fleet
// mode: a SHA-256 digest, so that the fleet's store never holds the caller's
// key (which may be derived from a prompt).
func fleetCacheKey(k string) string {
	h := sha256.Sum256([]byte(k))
	return "fleet:" + hex.EncodeToString(h[:16])
}

// ModelIDs returns the logical model ids the Client serves, in
// configuration order, each once: every model name that an unversioned
// deployment serves, followed by "model@revision" for each revision
// configured (a model configured only with revisions is listed only with
// them: a call for the bare name is served by no deployment). Wildcard deployments
// ("*") add nothing. The Transport's GET .../models and examples/gateway list
// these. (It is named ModelIDs, not Models, so that it is not mistaken for
// openai-go's client.Models service: tpsroute has no model service, and an
// openai-go client plugged in through Transport lists these ids with
// client.Models.List.)
func (c *Client) ModelIDs() []string {
	var out []string
	seen := make(map[string]bool)
	add := func(id string) {
		if !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	for i := range c.deps {
		if d := &c.deps[i]; !d.IsWildcard() && d.Revision == "" {
			add(d.Model)
		}
	}
	for i := range c.deps {
		if d := &c.deps[i]; !d.IsWildcard() && d.Revision != "" {
			add(d.Model + "@" + d.Revision)
		}
	}
	return out
}

// Status returns the breaker, cooldown and limiter state of the deployment
// with key k now.
func (c *Client) Status(k measure.Key) route.Status { return c.exec.Status(k, time.Now()) }

// RefusedModels returns how many times a model was refused where wildcard
// deployments are configured: a call for a model no deployment serves (none
// of the wildcard deployments lists it), and a wildcard deployment left out
// of a call because it already serves Config.MaxWildcardModels other models.
// Refusals create no statistics. It is zero without wildcard deployments.
func (c *Client) RefusedModels() uint64 {
	if c.wild == nil {
		return 0
	}
	return c.wild.refused.Load()
}

// RouteStats returns the picker's counters (route.Stats): picks, affinity
// hits and misses, cold probes, explorations.
// With deployments of several APIs (route.Deployment.APIs) it sums the
// counters of each API's picker.
func (c *Client) RouteStats() route.Stats {
	var s route.Stats
	for _, p := range c.pickers {
		t := p.Stats()
		s.Picks += t.Picks
		s.NoDeployment += t.NoDeployment
		s.AffinityHits += t.AffinityHits
		s.AffinityMisses += t.AffinityMisses
		s.AffinityBroken += t.AffinityBroken
		s.ColdProbes += t.ColdProbes
		s.Explorations += t.Explorations
		s.BandPicks += t.BandPicks
		s.HalfOpenProbes += t.HalfOpenProbes
	}
	return s
}

// measuredTTFT returns d's measured TTFT p95 once it is warm: the hedge delay
// of calls that opt in, and the base of the executor's TTFT deadline.
func (c *Client) measuredTTFT(d route.Deployment) (time.Duration, bool) {
	e, ok := c.reg.Estimate(d.Key())
	if !ok || !e.OK || !(e.TTFTP95 > 0) {
		return 0, false
	}
	return time.Duration(e.TTFTP95 * float64(time.Second)), true
}

// call is one routed call: what the caller asked and what routing made of it.
// It is the call's executor.Feedback (feedback.go).
type call struct {
	c        *Client
	cfg      callConfig
	info     requestInfo
	cacheKey string
	hdr      http.Header // the caller's headers, forwarded minus credentials
	// out is the call's output cap, the body's max_tokens (or
	// max_completion_tokens); 0 when it states none. Begin gives it to
	// measure, which may read it as an upper bound on the answer:
	// route.Request.ExpectedOutputTokens is an expected size, not a cap, and
	// an answer longer than twice it would read as stalled.
	out int64
	// flights are the first attempts' calls in flight in measure, whose
	// output gaps feedback.go reports (registry.Flight, live speed).
	flights [liveAttempts]registry.Flight
}

// do routes one serialised chat-completion body, already read into info by
// readRequest, and runs it through the executor. The returned Result's Body
// must be closed.
func (c *Client) do(ctx context.Context, body []byte, info requestInfo, hdr http.Header, cc *callConfig, stream bool) (*executor.Result, error) {
	ctx, cc.tel = c.tel.StartOperation(ctx, operation(info.api()), info.RawModel, stream)
	if len(cc.hdr) > 0 { // WithHeader's, beside a Transport caller's own
		h := hdr.Clone()
		if h == nil {
			h = make(http.Header, len(cc.hdr))
		}
		for k, vs := range cc.hdr {
			h[k] = append(h[k], vs...)
		}
		hdr = h
	}
	cl := &call{c: c, cfg: *cc, info: info, hdr: hdr}
	req := cc.req
	req.Model = info.RawModel
	owner, bound := c.bindState(ctx, &req, &info) // a stateful Responses call: its deployment only
	for _, m := range req.Models {
		if err := checkModelName("models", m); err != nil {
			return nil, err
		}
	}
	if req.CacheKey == "" {
		req.CacheKey = info.CacheKey
		if req.CacheKey == "" {
			req.CacheKey = prefixCacheKey(body)
		}
	}
	if c.fleet != nil && req.CacheKey != "" {
		req.CacheKey = fleetCacheKey(req.CacheKey)
	}
	cl.cacheKey = req.CacheKey
	if req.ExpectedInputTokens <= 0 {
		req.ExpectedInputTokens = cmp.Or(info.InputTokens, int64(len(body)/4)+1)
	}
	if req.ExpectedOutputTokens <= 0 && info.MaxTokens > 0 {
		req.ExpectedOutputTokens = info.MaxTokens
	}
	cl.out = info.MaxTokens
	now := time.Now()
	// Republish stale estimates (at most once per second) before reading
	// them, so that a deployment without traffic shows its window emptying
	// (route then ranks it on the level it last showed and re-measures it).
	c.reg.SweepAt(now)
	picker, err := c.pickerFor(&info)
	if err != nil {
		return nil, err
	}
	plan, err := picker.PickAt(req, now)
	if err != nil {
		return nil, stateError(c.routeError(c.apiError(err, &info)), &info, owner, bound)
	}
	if c.wild != nil {
		if plan = c.wild.admit(plan, now); len(plan.Deployments) == 0 {
			return nil, &ModelError{Param: "model", Model: req.Model, Capped: true}
		}
	}
	if c.onDecision != nil {
		c.onDecision(req, plan)
	}
	cc.tel.Plan(plan)
	if c.logger.Enabled(ctx, slog.LevelDebug) {
		c.logger.DebugContext(ctx, "tpsroute: plan", "model", info.RawModel, "plan", plan.Explain())
	}
	res, err := c.exec.Do(ctx, plan, executor.Call{
		Body:                 body,
		Stream:               stream,
		Assemble:             !stream, // the answer, built as the tap scans each chunk
		Plain:                cc.plain,
		Build:                cl.build,
		Protocol:             protocol(info.api()),
		NoHedge:              !(c.hedgeDefault || cc.hedge),
		NoFallback:           cc.req.NoFallbacks,
		EstimatedInputTokens: req.ExpectedInputTokens,
		MinTPS:               cmp.Or(req.SLO.MinTPS, c.minTPS),
		Deadlines:            cc.deadlines,
		Feedback:             cl,
	})
	if err != nil {
		err = stateError(err, &info, owner, bound)
	}
	return res, err
}

// routeError returns the Client's error for the Picker's err: a
// *RequestError for an unknown provider or region, a *ModelError for an
// unknown model (counted as a refusal where wildcard deployments are
// configured), else err.
func (c *Client) routeError(err error) error {
	var ne *route.NameError
	if !errors.As(err, &ne) {
		return err
	}
	switch ne.Field {
	case "Model", "Models":
		if c.wild != nil {
			c.wild.refused.Add(1)
		}
		return &ModelError{Param: strings.ToLower(ne.Field), Model: ne.Name}
	case "Regions":
		return &RequestError{Param: "region", Reason: "no deployment has the region " + strconv.Quote(ne.Name)}
	}
	return &RequestError{Param: strings.ToLower(ne.Field), Reason: "no deployment has the provider " + strconv.Quote(ne.Name)}
}

// build makes one attempt's request from deployment d only: its URL, key,
// headers and model id. The caller's headers are forwarded without
// credentials. It is the call's executor.BuildFunc. A body it cannot edit
// (readRequest lets through only what it can) is the caller's error, a
// *RequestError answered with 400: New validated every deployment's URL, so
// the body is all that can fail here, and the Executor's ClassInvalid charges
// no deployment for it.
func (cl *call) build(ctx context.Context, d route.Deployment, body []byte) (*http.Request, error) {
	if cl.info.api() != route.APIChat {
		return cl.buildAPI(ctx, d, body)
	}
	unbuildable := func(err error) error {
		return &RequestError{Reason: "the request body cannot be sent: " + err.Error()}
	}
	b, err := attemptBody(body, d)
	if err != nil {
		return nil, unbuildable(err)
	}
	if cl.cfg.req.CacheKey != "" && d.Capabilities.CacheControl && cl.info.CacheKey == "" {
		if b, err = setCacheKey(b, cl.cfg.req.CacheKey); err != nil {
			return nil, unbuildable(err)
		}
	}
	// executor.DefaultBuild sets the wire model (the requested one for a
	// wildcard), include_usage, the key and the deployment's headers; the
	// executor already made the body a stream.
	req, err := executor.DefaultBuild(ctx, d.ForModel(cl.info.Model), b)
	if err != nil {
		return nil, unbuildable(err)
	}
	for k, vs := range cl.hdr {
		if forwardable(k) && req.Header.Get(k) == "" { // the deployment's own headers win
			req.Header[k] = vs
		}
	}
	// No compression: net/http asks for gzip on its own and inflates the
	// answer out of sight of every cap (1 MB on the wire became 3.1 GiB). An
	// explicit identity turns that off on any *http.Transport, the caller's
	// Config.HTTPClient included (DisableCompression would reach only a
	// transport built here), and asks the server for plain bytes; an answer
	// compressed anyway reaches the stream parser as the bytes sent, and fails
	// there within its limits.
	req.Header.Set("Accept-Encoding", "identity")
	return req, nil
}

// forwardable reports whether a caller's header may go to a provider: not a
// credential (route.IsCredentialName), not the caller's OpenAI organisation
// or project, not hop-by-hop, and nothing the transport computes.
func forwardable(name string) bool {
	if route.IsCredentialName(name) {
		return false
	}
	switch http.CanonicalHeaderKey(name) {
	case "Openai-Organization", "Openai-Project", "Host", "Content-Length", "Content-Type", "Accept",
		"Accept-Encoding", "Connection", "Keep-Alive", "Te", "Trailer", "Transfer-Encoding", "Upgrade",
		"X-Stainless-Retry-Count", "X-Stainless-Timeout":
		return false
	}
	return true
}

// prefixCacheKey returns a cache key for requests without one: a hash of the
// first message when it is long enough for providers to cache (about 1,024
// tokens and up) and more messages follow it. Short prompts get no key.
//
// It reads body through a string view, as readRequest does (the call does
// not modify body), and hashes the message where it lies, without a copy.
// The hash is the message's CRC-32C and CRC-32 (IEEE) side by side, 64 bits
// that the CPU's CRC instructions compute at gigabytes a second: FNV-1a, a
// byte at a time, took 23 µs over a 16 KiB system prompt, and copying the
// message twice 18 KiB (BenchmarkPrefixCacheKey: 34–38 µs before, 5 after). A key only
// steers affinity, so a collision costs a cache miss, not a wrong answer.
func prefixCacheKey(body []byte) string {
	js := unsafe.String(unsafe.SliceData(body), len(body))
	first := gjson.Get(js, "messages.0")
	if len(first.Raw) < minCachePrefixBytes {
		return ""
	}
	// The message where gjson found it (an Index of 0 would be unknown, but
	// the body is an object, so the message is never at 0); in the valid
	// body readRequest checked, another message follows if a comma does.
	i, end := first.Index, first.Index+len(first.Raw)
	if i <= 0 || end > len(body) {
		return ""
	}
	if end += skipSpace(body[end:]); end >= len(body) || body[end] != ',' {
		return ""
	}
	raw := body[i : i+len(first.Raw)]
	h := uint64(crc32.Checksum(raw, castagnoli))<<32 | uint64(crc32.ChecksumIEEE(raw))
	return "prefix:" + strconv.FormatUint(h, 16)
}

// castagnoli is CRC-32C's table (prefixCacheKey).
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// minCachePrefixBytes is about 1,024 tokens of English text, the smallest
// prefix OpenAI-style prompt caches keep.
const minCachePrefixBytes = 4096

// upstreamReadBuffer is the read buffer of each upstream connection of the
// transport New builds when Config.HTTPClient sets none
// (http.Transport.ReadBufferSize; net/http's default is 4 KiB). A stream is
// read through it: with 4 KiB, each burst of events a provider writes at once
// (a chunk of the chunked body) costs a buffered read of its first 4 KiB and
// a second system call for the rest; with 64 KiB a burst of up to 64 KiB
// arrives in one. It costs 60 KiB more per open connection, idle ones
// included (docs/CONFIG.md, "Upstream connections").
const upstreamReadBuffer = 64 << 10

// upstreamTransport is the transport New builds when Config.HTTPClient sets
// none: a clone of def (http.DefaultTransport), with its dialer, proxy, TLS
// and idle settings, connections of its own and an upstreamReadBuffer read
// buffer. It returns nil when def is not an *http.Transport (a program that
// replaced http.DefaultTransport), which is then used as it is.
func upstreamTransport(def http.RoundTripper) *http.Transport {
	d, ok := def.(*http.Transport)
	if !ok {
		return nil
	}
	t := d.Clone()
	t.ReadBufferSize = upstreamReadBuffer
	return t
}
