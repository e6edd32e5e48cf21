package executor

import (
	"time"

	"github.com/tpsroute/tpsroute/fallback"

	"github.com/tpsroute/tpsroute/measure"
	"github.com/tpsroute/tpsroute/tps"
)

// hedgeDelay returns the hedge delay for the run's deployment, or 0 when this
// call does not hedge.
func (cl *call) hedgeDelay(a *run) time.Duration {
	h := &cl.e.opts.Hedge
	if !cl.hedge || !cl.stream {
		return 0
	}
	if h.DelayFunc != nil {
		if d, ok := h.DelayFunc(*a.d); ok && d > 0 {
			return d
		}
	}
	return h.Delay
}

// takeHedge spends one hedge from the budget, if the budget allows.
func (e *Executor) takeHedge() bool {
	for {
		n := e.hedges.Load()
		if float64(n+1) > e.opts.Hedge.Budget*float64(e.calls.Load()) {
			return false
		}
		if e.hedges.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// hedgeCandidate prepares a run on the next deployment that can take a
// hedge, or returns nil.
func (cl *call) hedgeCandidate(first int) *run {
	if cl.real >= cl.maxAttempts {
		return nil
	}
	now := time.Now()
	for j := range cl.plan {
		if j == first || !cl.eligible(j) {
			continue
		}
		d := cl.plan[j].Deployment
		st := cl.e.state(d)
		done, ok := cl.admit(d.Key(), st, now)
		if !ok {
			continue
		}
		if !cl.e.takeHedge() {
			st.release()
			done(&classified{fallback.ClassSkipped})
			return nil
		}
		cl.real++
		cl.slots[j].tries++
		return cl.newRun(j, d, st, done, cl.body, cl.remaining(j))
	}
	return nil
}

// admit is take for an attempt that must not wait (a hedge or a
// continuation): ok is false, with nothing held, also when the deployment
// is cooling down.
func (cl *call) admit(k measure.Key, st *keyState, now time.Time) (done func(error), ok bool) {
	if _, cooling := st.cooling(now); cooling {
		return nil, false
	}
	done, r, _ := cl.take(k, st, now)
	return done, r == admitted
}

type hedgeOutcome struct {
	r  *run
	ok bool
}

// open opens a, hedging it with the next deployment when the call hedges and
// a has no output within the hedge delay. It returns the committed run, or
// nil with a's failure in a.att. Every goroutine it starts has ended when it
// returns, and the losing run is cancelled and finalized.
func (cl *call) open(a *run) *run {
	delay := cl.hedgeDelay(a)
	if delay <= 0 {
		if a.open(cl.stream) {
			return a
		}
		return nil
	}
	ch := make(chan hedgeOutcome, 2)
	go func() { ch <- hedgeOutcome{a, a.open(true)} }()
	timer := time.NewTimer(delay)
	defer timer.Stop()
	var second, winner *run
	running, fired := 1, false
	for running > 0 {
		select {
		case <-timer.C:
			fired = true
			if second = cl.hedgeCandidate(a.i); second != nil {
				running++
				go func(b *run) { ch <- hedgeOutcome{b, b.open(true)} }(second)
			}
		case o := <-ch:
			running--
			switch {
			case o.ok && winner == nil:
				winner = o.r
				if o.r == a && second != nil {
					second.cancel(fallback.ErrHedgeLost)
				} else if o.r != a {
					a.cancel(fallback.ErrHedgeLost)
				}
			case o.ok: // both committed at once: the later one loses
				o.r.cancel(fallback.ErrHedgeLost)
				o.r.fail(tps.PhaseFirstToken, o.r.resp.StatusCode, fallback.ClassCanceled, fallback.ErrHedgeLost)
			}
			if !fired && running == 0 {
				timer.Stop()
			}
		}
	}
	if second != nil && second != winner {
		cl.slots[second.i].excluded = true
	}
	return winner
}
