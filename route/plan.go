package route

// Plan is route's answer for one call: deployments in the order to try them.
// A Plan is immutable once returned and safe to share.
type Plan struct {
	Deployments []Candidate
}

// Candidate is one entry of a Plan with the reason for its place.
type Candidate struct {
	Deployment Deployment
	Score      float64 // higher is better; never NaN
	Reason     string  // e.g. "tps p50=112 ewma=98", "explore", "demoted: ttft p95 > slo"
	Demoted    bool    // violates a constraint or is unhealthy, placed behind compliant ones
}
