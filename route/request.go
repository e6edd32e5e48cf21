package route

import (
	"github.com/tpsroute/tpsroute/internal/routekit"
	"github.com/tpsroute/tpsroute/measure"
)

// Request is what the caller asks of one call. The zero Request is invalid
// (it names no model); every other zero field means "no preference" or the
// default in Options. A Request is a value; a pick does not retain or modify
// it, so one Request may be passed to concurrent picks.
type Request struct {
	// Model is the logical model, optionally "model@revision".
	Model string
	// Models is an ordered list of models to fall back through, each optionally
	// "model@revision"; the deployments of Model (if set) come first, then those
	// of Models[0], Models[1], ... Every model must be configured (or a
	// wildcard deployment must exist); an unknown one is an ErrNoDeployment.
	Models []string
	// Revision pins a revision for every model that does not carry its own "@revision".
	Revision string

	// Providers is a preferred provider order: deployments of Providers[0] come
	// first, then Providers[1], ..., then the rest (health and SLO still come first).
	Providers []string
	// Only, when not empty, keeps only deployments of these providers.
	Only []string
	// Ignore drops deployments of these providers.
	Ignore []string
	// Regions, when not empty, keeps only deployments in one of these regions.
	Regions []string
	// NoFallbacks limits the Plan to its first deployment: no failover.
	NoFallbacks bool
	// Pin, when not zero, puts the deployments of Pin.Provider (in
	// Pin.Region, when not empty) first, ahead of the policy's order, and
	// keeps the rest behind them for failover (with NoFallbacks, only the
	// first pinned one). A pinned deployment that an open breaker or a
	// strict SLO excluded is still used: the pin is the caller's explicit
	// choice. A pin that matches no candidate is a *PinError.
	Pin Pin
	// PriceCap drops every deployment whose configured price is above it, a
	// field at a time: Price.Input above PriceCap.Input, Price.Output above
	// PriceCap.Output, or the cached-input price it charges (Price.CachedInput,
	// or Price.Input without one) above PriceCap.CachedInput. A zero field
	// caps nothing, and a deployment without a configured price is kept. It
	// is the hard price control; SLO.MaxPrice is the soft one, which demotes
	// (drops only under a Strict SLO). When the cap leaves nothing, the pick
	// returns an error wrapping ErrNoDeployment.
	PriceCap measure.Price

	// Policy overrides Options.Policy for this call; zero means the default.
	Policy Policy
	// LatencyMetric overrides Options.LatencyMetric; zero means the default.
	LatencyMetric LatencyMetric
	// Scorer, when not nil, overrides Policy and Options.Scorer for this call.
	Scorer Scorer
	// SLO adds constraints; its zero fields are taken from Options.SLO, and
	// Strict applies if either sets it.
	SLO SLO

	// ExpectedInputTokens is the prompt size, for cost; 0 means 1,000.
	ExpectedInputTokens int64
	// ExpectedOutputTokens is the expected output size, for cost and
	// LatencyCompletion; 0 means 250.
	ExpectedOutputTokens int64

	// CacheKey, when not empty, asks for the deployment that served this key
	// recently (a prompt_cache_key, a session id or a hash of the prompt prefix);
	// the Client records it when a call succeeds.
	CacheKey string
}

func (r *Request) inputTokens() int64 {
	if r.ExpectedInputTokens > 0 {
		return r.ExpectedInputTokens
	}
	return routekit.ExpectedInputTokens
}

func (r *Request) outputTokens() int64 {
	if r.ExpectedOutputTokens > 0 {
		return r.ExpectedOutputTokens
	}
	return routekit.ExpectedOutputTokens
}

// Pin names the deployments a Request puts first: those of Provider, in
// Region when it is not empty. The zero Pin pins nothing. It is a value,
// safe to copy.
type Pin struct {
	Provider string
	Region   string // empty matches any region of Provider
}

// matches reports whether d is pinned by p.
func (p Pin) matches(d *Deployment) bool {
	return d.Provider == p.Provider && (p.Region == "" || d.Region == p.Region)
}

// overCap reports whether a deployment priced at price is above cap (see
// Request.PriceCap).
func overCap(price, cap *measure.Price) bool {
	cached := price.CachedInput
	if cached == 0 {
		cached = price.Input
	}
	return (cap.Input > 0 && price.Input > cap.Input) ||
		(cap.Output > 0 && price.Output > cap.Output) ||
		(cap.CachedInput > 0 && cached > cap.CachedInput)
}
