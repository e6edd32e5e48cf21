package executor

import (
	"math"
	"time"
)

// limitTTL is how long a learnt concurrency limit lasts without a 429 that
// confirms it or a success that raises it: long enough to span the
// deployment's calls, short enough that a limit the provider lifted is not
// remembered for good.
const limitTTL = 5 * time.Minute

// concurrency is a deployment's concurrency limit as learnt from its 429s,
// zero when none is known. A provider that admits only L concurrent streams
// answers the L+1-th 429, often with a Retry-After of seconds that says
// nothing about when one of the L streams ends. The zero value knows no
// limit. It is guarded by keyState.mu.
type concurrency struct {
	limit   int64         // streams the provider admitted; 0: none learnt
	probeAt time.Time     // from then one stream above limit may be tried
	wait    time.Duration // the last 429's Retry-After (or backoff)
	seen    time.Time     // the last 429 or success that set limit
}

// limited learns from a 429 answered while others of our calls were in
// flight to the deployment at now, with Retry-After ra (or the backoff that
// stands for it). With at least one other call in flight the 429 is read as
// the concurrency signal it is: the limit becomes others, held strictly
// until now+ra, and one stream above it is tried from then on; limited
// reports true and the caller sets no cooldown, so the deployment takes
// calls again as soon as one of its streams ends. With none in flight (or
// others < 1) it learns nothing and reports false: the 429 is a rate limit,
// honoured as a cooldown for its Retry-After. A rate limit per minute
// answered while calls are in flight lowers the limit at each 429 until one
// comes with none in flight, and is then cooled down as before.
func (c *concurrency) limited(now time.Time, others int64, ra time.Duration) bool {
	if others < 1 {
		return false
	}
	ra = min(max(ra, 0), limitTTL)
	c.limit, c.wait, c.seen = others, ra, now
	c.probeAt = now.Add(ra)
	return true
}

// admitted learns from a success (response headers 2xx) at now with others
// of our calls in flight: at or above the limit, the provider admits more
// than learnt, and the limit rises to others+1, so that it climbs one stream
// per success while probes above it succeed.
func (c *concurrency) admitted(now time.Time, others int64) {
	if c.expired(now) {
		c.limit = 0 // forgotten, not revived
		return
	}
	if others >= c.limit && others < math.MaxInt64 {
		c.limit, c.seen = others+1, now
	}
}

// expired reports whether no limit is known at now: none was learnt, or it
// was neither confirmed nor raised for limitTTL.
func (c *concurrency) expired(now time.Time) bool {
	return c.limit <= 0 || now.Sub(c.seen) > limitTTL
}

// full reports whether inFlight calls fill the learnt limit at now, and if
// so when to come back: the end of the last 429's Retry-After, or one more
// Retry-After from now once the probe above the limit is also in flight.
// After limitTTL without a 429 or success that set it, the limit is
// forgotten: full then reports gone, and never full.
func (c *concurrency) full(now time.Time, inFlight int64) (full bool, at time.Time, gone bool) {
	if c.expired(now) {
		return false, time.Time{}, true
	}
	if now.Before(c.probeAt) {
		if inFlight < c.limit {
			return false, time.Time{}, false
		}
		return true, c.probeAt, false
	}
	if inFlight <= c.limit {
		return false, time.Time{}, false
	}
	return true, now.Add(max(c.wait, time.Millisecond)), false
}
