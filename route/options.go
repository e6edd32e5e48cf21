package route

import "time"

// Off turns off the Options share or count it is assigned to (Exploration,
// Band, ColdProbes, ColdShare), whose zero value means the default: any
// negative value does, and Off names it. A config file spells it "off".
const Off = -1

// Options configures the ordering of deployments: tpsroute.Config.Route,
// read by the Client's picker (internal/picker). A zero Options consists entirely of default
// values: every deployment healthy, Throughput, LatencyTTFT, TTFT read at
// P95 and TPS at P50, no SLO, exploration capped at 20% of picks, a 5% band, up to 10 cold
// probes per deployment per 10 s within a 25% share of the picks (but at
// least one per deployment), a half-open probe per deployment at most every 1 s,
// and a 5-minute cache affinity over at most 10,000 keys.
type Options struct {
	// Policy is the default ordering; zero means Throughput.
	Policy Policy
	// LatencyMetric is what Latency minimises by default; zero means LatencyTTFT.
	LatencyMetric LatencyMetric
	// Scorer, when not nil, replaces Policy as the default ordering.
	Scorer Scorer
	// TTFTPercentile is the TTFT percentile blended with the EWMA; zero means P95.
	TTFTPercentile Percentile
	// TPSPercentile is the TPS percentile blended with the EWMA; zero means P50.
	TPSPercentile Percentile
	// SLO applies to every request; a Request's SLO fields override it.
	SLO SLO
	// Exploration caps, in [0,1], the share of picks that explore: put first
	// a healthy deployment of the leading model other than the best, warm
	// (cold ones have cold probes), compliant with the SLO or not, to
	// re-measure it. A pick explores each such deployment with the chance
	// that it would now lead, Thompson-style: its gap to the leader (score,
	// or distance from the SLO) against their uncertainty, which grows with
	// the time since its newest sample; a deployment that led within the
	// last 10 minutes is also judged, more likely the longer it goes
	// unseen, at its best remembered level (the package documentation,
	// Exploration, has the rule). Zero means 20%, a cap that binds at low
	// traffic (far fewer picks explore in a steady fleet); Off
	// (any negative value) disables exploration.
	Exploration float64
	// Band is the relative score distance, in [0,1], within which candidates
	// count as near-equal; the first place is then drawn among them, weighted by
	// Deployment.Weight, so callers do not herd onto one deployment.
	// Zero means 5%; Off (any negative value) always takes the
	// best.
	Band float64
	// ColdProbes is at most how many picks per ColdProbeInterval put one cold
	// deployment (one whose Estimate is not OK) first, per configured
	// deployment, within ColdShare. Zero means 10 (the Registry's default MinSamples,
	// the samples a deployment needs to be compared, so that a cold one can
	// collect them within one interval when traffic allows); Off (any negative value) disables
	// cold probes (cold deployments then only go behind warm ones). A cold
	// deployment with a call in flight (measure.Estimate.InFlight) gets no
	// probe until that call has answered: probes are one at a time.
	ColdProbes int
	// ColdProbeInterval is the window ColdProbes and ColdShare count over;
	// zero means 10 s.
	ColdProbeInterval time.Duration
	// ColdShare caps, in [0,1], the share of the picks in a ColdProbeInterval
	// (all picks of the picker, whatever the model) that are cold probes, so
	// that probing follows the traffic: a deployment's first probe of an
	// interval is always given, so a cold deployment gets its first sample
	// quickly at any traffic, and counts; a further probe is given only while
	// the interval's probes other than its first are fewer than ColdShare
	// times its picks, this one included. Over an interval of K picks with D
	// cold deployments there are thus at most ceil(ColdShare*K)+D probes.
	// The cap protects measured traffic, so it applies to picks that a warm
	// deployment leads: when every leading candidate is cold, a probe takes
	// no call from a measured one, and only ColdProbes limits it (it is not
	// counted in the share).
	// Zero means 25% (the warm deployments then keep about three calls in
	// four once every cold one had its first probe of the interval); Off (any negative value) removes the
	// share cap (ColdProbes alone limits probes).
	ColdShare float64
	// HalfOpenProbeInterval is the least time between two picks that put the
	// same half-open deployment (Status.Breaker == BreakerHalfOpen) first, as
	// a probe: a half-open breaker lets a probe through and closes again only
	// when it succeeds, yet ranks behind every closed deployment, so without
	// probes it would never get the call it needs. A deployment is probed
	// whatever its score (the breaker decides), but only when a healthy,
	// compliant deployment of the same model leads, it complies with the SLO
	// itself, the request has no cache-affinity hit and allows fallbacks
	// (a probe that fails, or that the breaker turns away because another
	// probe is in flight, fails over to the next deployment). Zero means
	// 1 s; a negative value disables these
	// probes (half-open deployments then only go behind closed ones).
	HalfOpenProbeInterval time.Duration
	// AffinityTTL is how long a cache key stays with the deployment that served
	// it; zero means 5 minutes (about as long as providers keep a prompt
	// prefix cached), a negative value disables affinity.
	AffinityTTL time.Duration
	// AffinityEntries caps the cache keys remembered; the least recently
	// served go first, and every entry is released at its TTL. An entry
	// holds a 64-bit hash of its key, never the key (about 100 bytes each,
	// whatever the key's length). Zero means 10,000.
	AffinityEntries int
	// Seed seeds the picks' random draws, so tests are deterministic; zero
	// means a random seed.
	Seed uint64
}

// Stats counts what the Client's picker did since it was made
// (tpsroute.Client.RouteStats sums them over its pickers). It is a snapshot value,
// safe for concurrent reads. It marshals to JSON with snake_case names.
type Stats struct {
	Picks          uint64 `json:"picks"`            // picks that returned a Plan
	NoDeployment   uint64 `json:"no_deployment"`    // picks that returned ErrNoDeployment
	AffinityHits   uint64 `json:"affinity_hits"`    // picks that put the cache key's deployment first
	AffinityMisses uint64 `json:"affinity_misses"`  // picks with a CacheKey and no live entry
	AffinityBroken uint64 `json:"affinity_broken"`  // picks whose cache key's deployment was unhealthy, off-SLO, expired or not eligible
	ColdProbes     uint64 `json:"cold_probes"`      // picks that put a cold deployment first
	Explorations   uint64 `json:"explorations"`     // picks that put a deployment first to re-measure it (Options.Exploration)
	BandPicks      uint64 `json:"band_picks"`       // picks whose first place was drawn among near-equal candidates and was not the top score
	HalfOpenProbes uint64 `json:"half_open_probes"` // picks that put a half-open deployment first (Options.HalfOpenProbeInterval)
}
