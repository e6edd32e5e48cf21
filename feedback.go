package tpsroute

import (
	"time"

	"github.com/tpsroute/tpsroute/fallback"
	"github.com/tpsroute/tpsroute/internal/executor"
	"github.com/tpsroute/tpsroute/route"
	"github.com/tpsroute/tpsroute/tps"
)

// Begin starts one attempt of the call on d: it counts the attempt in flight
// in measure, with the body's output cap (max_tokens) when it states one
// (internal/registry's Registry.BeginCallAt: a stalled attempt then ranks its
// deployment lower before it ends), and in telemetry, and returns the
// attempt's completion handle,
// which carries the attempt's outcome everywhere it is learnt from: the
// sample to measure, with the error class the Executor gave the attempt
// (fallback.Attempt.ErrorClass), the end of the in-flight count, the
// attempt's telemetry, and, for a success, cache affinity in the Picker and
// the fleet. It implements executor.Feedback.
func (cl *call) Begin(i int, d *route.Deployment) executor.Done {
	c, k := cl.c, d.Key()
	f := c.reg.BeginFlightAt(time.Now(), k, cl.out)
	if i >= 0 && i < liveAttempts {
		cl.flights[i] = f
	}
	c.tel.InFlight(k, 1)
	return func(a fallback.Attempt, s *tps.Sample) {
		c.reg.RecordClass(k, *s, a.ErrorClass())
		f.End()
		c.tel.InFlight(k, -1)
		cl.cfg.tel.AttemptEnd(i, a, s)
		if a.Err == nil && cl.info.api() == route.APIResponses {
			c.ownResponse(&cl.info, s.ID, k)
		}
		if a.Err == nil && cl.cacheKey != "" {
			now := time.Now()
			if p := c.pickerOf(k.API); p != nil {
				p.Served(cl.cacheKey, k, now)
			}
			if c.fleet != nil && k.API == "" { // the fleet shares chat affinity only
				c.fleet.Served(cl.cacheKey, k, now)
			}
		}
	}
}

// Skip records an attempt that never started in the call's telemetry. It
// implements executor.Feedback.
func (cl *call) Skip(i int, a fallback.Attempt) { cl.cfg.tel.AttemptEnd(i, a, nil) }

// liveAttempts is how many of a call's attempts report their output gaps
// to measure (live speed); later ones are counted in flight only.
const liveAttempts = 4

// OutputGap records the gap before one output chunk of attempt i, in
// telemetry and in measure's live speed. It implements executor.Feedback.
func (cl *call) OutputGap(i int, gap time.Duration) {
	cl.cfg.tel.OutputGap(i, gap)
	if i >= 0 && i < liveAttempts {
		cl.flights[i].Gap(gap)
	}
}

var _ executor.Feedback = (*call)(nil)
