package tpsroute

import (
	"errors"
	"net/http"

	"github.com/tpsroute/tpsroute/fallback"
	"github.com/tpsroute/tpsroute/internal/executor"
	"github.com/tpsroute/tpsroute/internal/redact"
	"github.com/tpsroute/tpsroute/internal/telemetry"
	"github.com/tpsroute/tpsroute/measure"
	"github.com/tpsroute/tpsroute/route"
	"github.com/tpsroute/tpsroute/tps"
)

// CallOption changes how one call is routed. Options apply in order; a later
// option of the same kind replaces an earlier one, except WithHeader, which
// adds. CallOptions are values and safe to reuse across calls and
// goroutines.
//
// The routing of a call is one route.Request. WithRequest sets it whole;
// WithPin, WithRegion, WithProviders, WithOnly, WithIgnore, WithPolicy,
// WithSLO, WithPriceCap, WithModels, WithCacheKey and WithoutFallback are
// thin shorthands that each set one of its fields (and nothing else), so
// that a later one changes that field of an earlier WithRequest. The other
// options (WithHedge, WithDeadlines, WithHeader, WithOutcome) are about the
// call, not its routing.
type CallOption func(*callConfig)

// callConfig is the per-call state the options build.
type callConfig struct {
	req       route.Request // Model is filled from the request body
	hedge     bool
	plain     bool
	deadlines fallback.Deadlines
	hdr       http.Header     // WithHeader's, forwarded as the Transport's caller headers are
	outcome   *Outcome        // WithOutcome's, filled by endCall
	tel       *telemetry.Call // set by Client.do; ended by endCall
}

func buildCallConfig(opts []CallOption) callConfig {
	var c callConfig
	for _, o := range opts {
		if o != nil {
			o(&c)
		}
	}
	return c
}

// WithRequest sets this call's routing to r, whole: the form for code that
// builds a route.Request, such as a gateway translating a request's routing
// fields. r.Model is ignored: the request body names the model (fallback
// models go in r.Models). Zero ExpectedInputTokens and ExpectedOutputTokens
// are estimated from the body (its size, max_tokens), and an empty CacheKey
// is taken from the body (see WithCacheKey). It replaces every field that
// earlier options set; later shorthands (WithPin, WithRegion, ...) change
// single fields of it. r's slices are shared, not copied: do not modify them
// while a call may be using them.
func WithRequest(r route.Request) CallOption {
	return func(c *callConfig) { c.req = r }
}

// WithPin puts the deployment of provider in region first, ahead of what the
// policy would choose. An empty region matches any region of provider.
// Failover to the rest of the plan is still allowed unless WithoutFallback is
// also given. A pin that matches no deployment of the model fails the call
// with a *route.PinError. It sets route.Request.Pin.
func WithPin(provider, region string) CallOption {
	return func(c *callConfig) { c.req.Pin = route.Pin{Provider: provider, Region: region} }
}

// WithRegion restricts the call to deployments in one of regions (data
// residency, for example). Failover stays inside the set. No regions means no
// restriction.
// It sets route.Request.Regions.
func WithRegion(regions ...string) CallOption {
	return func(c *callConfig) { c.req.Regions = append([]string(nil), regions...) }
}

// WithProviders sets a preferred provider order: deployments of order[0]
// first, then order[1], and so on, then the rest. Health and the SLO still
// come first.
// It sets route.Request.Providers.
func WithProviders(order ...string) CallOption {
	return func(c *callConfig) { c.req.Providers = append([]string(nil), order...) }
}

// WithOnly keeps only the deployments of these providers.
// It sets route.Request.Only.
func WithOnly(providers ...string) CallOption {
	return func(c *callConfig) { c.req.Only = append([]string(nil), providers...) }
}

// WithIgnore drops the deployments of these providers.
// It sets route.Request.Ignore.
func WithIgnore(providers ...string) CallOption {
	return func(c *callConfig) { c.req.Ignore = append([]string(nil), providers...) }
}

// WithPolicy orders the deployments for this call by p instead of
// Config.Route.Policy.
// It sets route.Request.Policy.
func WithPolicy(p route.Policy) CallOption {
	return func(c *callConfig) { c.req.Policy = p }
}

// WithSLO adds constraints for this call. Its zero fields are taken from
// Config.Route.SLO; Strict applies if either sets it. Without Strict a deployment
// that misses them is demoted, not dropped: route.SLO{MinTPS: 100} prefers
// deployments expected to generate at least 100 tokens/s, route.SLO{MaxTTFT:
// 800 * time.Millisecond} those expected to answer within 800 ms, and
// route.SLO{MaxPrice: 2} those whose output price is at most 2 USD per
// million tokens (the soft price control; WithPriceCap is the hard one).
// It sets route.Request.SLO.
func WithSLO(slo route.SLO) CallOption {
	return func(c *callConfig) { c.req.SLO = slo }
}

// WithPriceCap drops, for this call, every deployment whose configured
// Price.Input is above input or whose Price.Output is above output, both in
// US dollars per million tokens: the hard price control, where the SLO's
// MaxPrice (WithSLO, Config.Route.SLO) is the soft one that demotes. Zero or
// negative means no cap on that price; a deployment without a configured
// price is kept. When nothing is left the call fails with an error wrapping
// route.ErrNoDeployment (503). It sets route.Request.PriceCap (whose
// CachedInput field caps the cached-input price too).
func WithPriceCap(input, output float64) CallOption {
	return func(c *callConfig) {
		c.req.PriceCap = measure.Price{Input: max(input, 0), Output: max(output, 0)}
	}
}

// WithModels adds logical models to fall back through, in order, after the
// requested model's deployments. Each may be "model@revision".
// It sets route.Request.Models.
func WithModels(fallbackModels ...string) CallOption {
	return func(c *callConfig) { c.req.Models = append([]string(nil), fallbackModels...) }
}

// WithCacheKey names the prompt-cache or session key of this call. The router
// prefers the deployment that served the key recently (cache affinity), and a
// deployment that declares Capabilities.CacheControl receives it as
// prompt_cache_key unless the request already carries one. Without it the key
// is the request's prompt_cache_key, if any, or a hash of a long first message.
// It sets route.Request.CacheKey.
func WithCacheKey(key string) CallOption {
	return func(c *callConfig) { c.req.CacheKey = key }
}

// WithHedge lets this call hedge: if no first token arrives within the hedge
// delay, the next deployment of the plan starts in parallel, the first to
// produce output wins and the other is cancelled. The delay is
// Config.Fallback.Hedge's, or else the deployment's measured TTFT p95 (a
// deployment not yet measured is not hedged). Hedges are capped by
// Config.Fallback.Hedge.Budget (default 10% of calls). When
// Config.Fallback.Hedge sets a Delay or DelayFunc every call may hedge and
// this option changes nothing.
func WithHedge() CallOption {
	return func(c *callConfig) { c.hedge = true }
}

// WithPlainUpstream sends every attempt of a non-streaming call as a plain
// upstream call ("stream": false), as to a deployment that declares
// route.Capabilities.NoStream: the call costs about what a plain client's
// does, where by default it streams underneath so that it is timed. It is
// then timed as total latency only: the deployment's TTFT and TPS figures
// do not learn from it, and the headers and TTFT deadlines do not apply
// (MaxDuration and the context do). It still fails over on errors
// (docs/CONFIG.md, "Plain upstream calls"). Ignored for a streaming call.
func WithPlainUpstream() CallOption {
	return func(c *callConfig) { c.plain = true }
}

// WithDeadlines overrides the fallback deadlines for this call, for example
// a tighter TTFT for an interactive request or a longer MaxDuration for a
// long generation: WithDeadlines(fallback.Deadlines{TTFT: 2 * time.Second}).
// Zero fields keep Config.Fallback.Deadlines; negative ones turn them off. A
// later WithDeadlines replaces an earlier one as a whole. The caller's
// context deadline applies as well, whatever these say.
func WithDeadlines(d fallback.Deadlines) CallOption {
	return func(c *callConfig) { c.deadlines = d }
}

// WithHeader adds a header to every attempt of this call, through every
// door (the Chat service, Do, the Transport), as the Transport forwards its
// caller's headers: the deployment's own headers, URL, key and model id win,
// and a credential header (route.IsCredentialName), OpenAI-Organization,
// OpenAI-Project or a hop-by-hop header is never forwarded. Extra body fields
// go in the params themselves, with openai-go's SetExtraFields.
func WithHeader(name, value string) CallOption {
	return func(c *callConfig) {
		if c.hdr == nil {
			c.hdr = make(http.Header)
		}
		c.hdr.Add(name, value)
	}
}

// WithoutFallback limits the call to the first deployment of the plan (the
// pinned one with WithPin): no failover to another deployment.
// It sets route.Request.NoFallbacks.
func WithoutFallback() CallOption {
	return func(c *callConfig) { c.req.NoFallbacks = true }
}

// Outcome is what became of one call: the deployment that answered, its
// timing and usage, every attempt and the call's error. Every door gives it
// in this one type: Stream.Outcome and Response.Outcome while the call runs
// and after it, and WithOutcome for the doors that return only the answer
// (Chat.Completions.New, Embeddings.New, the Transport). It is a plain value;
// its Attempts slice is the caller's own copy.
type Outcome struct {
	// Deployment answered the call (after a mid-stream continuation, the one
	// that continued), without credentials (APIKey empty, credential
	// headers "REDACTED"). For a wildcard deployment, Model is the model
	// requested. Zero if none answered.
	Deployment route.Deployment
	// Sample is the answering attempt's timing and usage: TTFT, generation
	// TPS, tokens, cache state. It is complete once the call has ended.
	Sample tps.Sample
	// Attempts lists every attempt of the call, in order: failed ones,
	// deployments skipped for an open breaker or a cooldown, and the one
	// that answered, which is listed once its stream has ended.
	Attempts []fallback.Attempt
	// AttemptCount is how many attempts reached a provider, skipped
	// deployments not counted and the answering one included from its start:
	// the count a *fallback.Error's message gives.
	AttemptCount int
	// Err is the call's error: nil while the call runs, after a clean end and
	// after an early Close.
	Err error
}

// WithOutcome fills o once the call has ended: the deployment that answered,
// its tps.Sample, every attempt and the error. It is how a caller of New, which
// returns only the completion, or of the Transport learns what happened; a
// Stream or a Response also gives it with its Outcome method. The call's
// goroutine writes *o once: read it after New returned, after the Stream ended
// or was closed, or after the response body reached EOF or was closed. A nil o
// is ignored.
func WithOutcome(o *Outcome) CallOption {
	return func(c *callConfig) { c.outcome = o }
}

// endCall ends a call with the outcome res or err: its telemetry, then the
// caller's Outcome. Every path that ends a call goes through it once.
func endCall(cc *callConfig, res *executor.Result, err error) {
	cc.tel.End(err)
	if cc.outcome != nil {
		*cc.outcome = outcomeOf(res, err)
	}
}

// outcomeOf is the outcome of a call that committed res (nil if none did)
// and has so far failed with err.
func outcomeOf(res *executor.Result, err error) Outcome {
	o := Outcome{Err: err}
	if res != nil {
		o.Deployment = redact.Deployment(res.Deployment())
		o.Sample = res.Sample()
		o.Attempts = res.Attempts()
		o.AttemptCount = res.AttemptCount()
		return o
	}
	var fe *fallback.Error
	if errors.As(err, &fe) {
		o.Attempts = append([]fallback.Attempt(nil), fe.Attempts...)
	}
	for _, a := range o.Attempts {
		if a.Class != fallback.ClassSkipped {
			o.AttemptCount++
		}
	}
	return o
}
