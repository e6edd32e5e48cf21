package route

import (
	"time"
)

// BreakerState is a deployment's circuit-breaker state as route sees it. It
// is a value and safe for concurrent use.
type BreakerState uint8

const (
	// BreakerClosed lets all traffic through.
	BreakerClosed BreakerState = iota
	// BreakerHalfOpen lets a few probes through.
	BreakerHalfOpen
	// BreakerOpen lets nothing through until its timeout passes.
	BreakerOpen
)

// String returns "closed", "half-open" or "open".
func (b BreakerState) String() string {
	switch b {
	case BreakerOpen:
		return "open"
	case BreakerHalfOpen:
		return "half-open"
	}
	return "closed"
}

// Status is what a Health source knows about one deployment at one moment.
// The zero Status is healthy. It is a value, safe for concurrent reads.
type Status struct {
	Breaker      BreakerState
	CoolingUntil time.Time // a Retry-After cooldown; zero or past means none
	NoHeadroom   bool      // the RPM/TPM limiter, in-flight cap or learnt concurrency limit has no budget now
	RateLimited  bool      // the provider's x-ratelimit-remaining-* headers said 0
}
