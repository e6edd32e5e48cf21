package route

// Request is what the caller asks of one call. The zero Request is invalid
// (it names no model); every other zero field means "no preference" or the
// Picker's default. A Request is a value; Pick does not retain or modify it,
// so one Request may be passed to concurrent Picks.
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

	// Policy overrides Options.Policy for this call; zero means the default.
	Policy Policy
	// LatencyMetric overrides Options.LatencyMetric; zero means the default.
	LatencyMetric LatencyMetric
	// Scorer, when not nil, overrides Policy and Options.Scorer for this call.
	Scorer Scorer
	// SLO adds constraints; its zero fields are taken from Options.SLO, and
	// Strict applies if either sets it.
	SLO SLO

	// ExpectedInputTokens is the prompt size, for cost; 0 means DefaultExpectedInputTokens.
	ExpectedInputTokens int64
	// ExpectedOutputTokens is the expected output size, for cost and
	// LatencyCompletion; 0 means DefaultExpectedOutputTokens.
	ExpectedOutputTokens int64

	// CacheKey, when not empty, asks for the deployment that served this key
	// recently (a prompt_cache_key, a session id or a hash of the prompt prefix);
	// see Picker.Served.
	CacheKey string
}

func (r *Request) inputTokens() int64 {
	if r.ExpectedInputTokens > 0 {
		return r.ExpectedInputTokens
	}
	return DefaultExpectedInputTokens
}

func (r *Request) outputTokens() int64 {
	if r.ExpectedOutputTokens > 0 {
		return r.ExpectedOutputTokens
	}
	return DefaultExpectedOutputTokens
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

func indexOf(list []string, s string) int {
	for i, v := range list {
		if v == s {
			return i
		}
	}
	return len(list)
}
