package executor

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"math"
	"math/rand/v2"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tpsroute/tpsroute/fallback"
	"github.com/tpsroute/tpsroute/internal/routekit"

	"github.com/tidwall/gjson"

	"github.com/tpsroute/tpsroute/measure"
	"github.com/tpsroute/tpsroute/route"
	"github.com/tpsroute/tpsroute/tps"
)

// Executor walks a route.Plan: it tries deployments in order under breakers,
// rate limiters, Retry-After cooldowns, backoff and deadlines, and commits to
// the first stream that produces output. An Executor is safe for concurrent
// use; one should serve a whole process so that breakers and cooldowns see
// every call.
type Executor struct {
	opts      fallback.Options
	hooks     Hooks
	transport http.RoundTripper
	statesMu  sync.RWMutex
	states    map[measure.Key]*keyState
	bufs      sync.Pool  // *[]byte stream buffers
	reads     sync.Pool  // *[]byte read buffers of assembling runs, answerRead bytes
	accs      sync.Pool  // *answer.Accumulator of assembling runs, Reset, buffers kept
	noPrefill sync.Map   // measure.Key -> struct{}: rejected a prefill
	freed     slotSignal // wakes the calls waiting for an in-flight slot (call.waitReady)

	rngMu sync.Mutex
	rng   *rand.Rand

	calls, hedges atomic.Int64
}

// New returns an Executor tuned by opts and connected by hooks; zero fields
// of either take their defaults.
func New(opts fallback.Options, hooks Hooks) *Executor {
	opts.Deadlines = opts.Deadlines.Or(defaultDeadlines)
	if opts.AttemptsPerDeployment <= 0 {
		opts.AttemptsPerDeployment = defaultAttemptsPerDeployment
	}
	if opts.BackoffBase <= 0 {
		opts.BackoffBase = defaultBackoffBase
	}
	if opts.BackoffMax <= 0 {
		opts.BackoffMax = defaultBackoffMax
	}
	opts.MaxWait = cmp.Or(opts.MaxWait, defaultMaxWait) // negative: never wait
	if opts.PenaltyCooldown <= 0 {
		opts.PenaltyCooldown = defaultPenaltyCooldown
	}
	opts.MidStream = cmp.Or(opts.MidStream, fallback.MidStreamSameModel)
	if opts.Prefill == nil {
		opts.Prefill = DefaultPrefill
	}
	if opts.Hedge.Budget <= 0 || opts.Hedge.Budget > 1 {
		opts.Hedge.Budget = 0.1
	}
	opts.Breaker = breakerDefaults(opts.Breaker)
	opts.Limits = limitsDefaults(opts.Limits)
	opts.Rescue = rescueDefaults(opts.Rescue)
	e := &Executor{opts: opts, hooks: hooks, transport: hooks.Transport, states: map[measure.Key]*keyState{}}
	e.bufs.New = func() any { b := make([]byte, 0, 4096); return &b }
	e.reads.New = func() any { b := make([]byte, 0, answerRead); return &b }
	if e.transport == nil {
		e.transport = http.DefaultTransport
	}
	e.rng = rand.New(rand.NewPCG(opts.Seed, opts.Seed^0x9e3779b97f4a7c15))
	return e
}

// jitter returns a full-jitter backoff for the n-th retry (n from 0):
// uniform in [0, min(BackoffMax, BackoffBase·2^n)).
func (e *Executor) jitter(n int) time.Duration {
	ceil := e.opts.BackoffBase << min(n, 30)
	if ceil <= 0 || ceil > e.opts.BackoffMax {
		ceil = e.opts.BackoffMax
	}
	e.rngMu.Lock()
	f := e.rng.Float64()
	e.rngMu.Unlock()
	return time.Duration(f * float64(ceil))
}

// call is the state of one Do.
type call struct {
	e     *Executor
	ctx   context.Context
	plan  []route.Candidate
	body  []byte
	build BuildFunc
	est   int64

	start      time.Time          // when Do began
	minTPS     float64            // Call.MinTPS
	committed  bool               // a Result was returned: runs from now on continue it
	dl         fallback.Deadlines // this call's, defaults filled in
	choices    int64              // the request's n: finish_reasons that end the stream
	mid        fallback.MidStreamPolicy
	malformed  fallback.MalformedPolicy
	keepText   bool // a continuation may follow: runs keep their text
	stream     bool
	assemble   bool // a non-streaming call's Body is the answer (Call.Assemble)
	plain      bool // Call.Plain
	protocol   tps.Protocol
	noFallback bool
	hedge      bool
	fb         Feedback

	mu          sync.Mutex // attempts: appended by Read during a continuation
	attempts    []fallback.Attempt
	attemptsBuf [2]fallback.Attempt
	pending     atomic.Int32 // runs started and not yet recorded (the committed one while it streams)
	cause       error        // why nothing was tried, when nothing was

	slots       []slot
	slotBuf     [4]slot
	real        int // attempts made (skips not counted)
	maxAttempts int
	minContext  int64               // after context_length_exceeded: only larger windows
	ctxModels   []*route.Deployment // deployments whose model (and revision) exceeded its context
	ctxExceeded bool
	waited      time.Duration // waiting to attribute to the next attempt
}

// slot is the call's bookkeeping for one plan entry.
type slot struct {
	tries    int  // attempts made
	excluded bool // not to be tried again in this call
	skipped  bool // a skip was recorded
}

// Do runs the call c over plan and returns the committed attempt's Result, or
// a *Error listing every attempt. A streaming call (c.Stream) returns at its
// first output chunk; a non-streaming call returns once the whole stream was
// read. The caller must Close Result.Body. ctx bounds the whole call,
// including reading the Body.
func (e *Executor) Do(ctx context.Context, plan route.Plan, c Call) (*Result, error) {
	body, err := streamBody(c.Body)
	if err != nil {
		return nil, &fallback.Error{Attempts: []fallback.Attempt{{Class: fallback.ClassInvalid, Err: err}}}
	}
	n := len(plan.Deployments)
	cl := &call{
		e: e, ctx: ctx, start: time.Now(), plan: plan.Deployments, body: body, build: c.Build, est: c.EstimatedInputTokens,
		dl:         c.Deadlines.Or(e.opts.Deadlines),
		choices:    max(1, gjson.GetBytes(body, "n").Int()),
		mid:        c.MidStream,
		stream:     c.Stream,
		assemble:   c.Assemble && !c.Stream && Assembles(c.Protocol),
		plain:      c.Plain,
		protocol:   c.Protocol,
		noFallback: c.NoFallback,
		hedge:      !c.NoHedge && hedgeEnabled(e.opts.Hedge),
		fb:         c.Feedback,
		minTPS:     c.MinTPS,
	}
	cl.attempts = cl.attemptsBuf[:0]
	if n <= len(cl.slotBuf) {
		cl.slots = cl.slotBuf[:n]
	} else {
		cl.slots = make([]slot, n)
	}
	if cl.build == nil {
		cl.build = DefaultBuild
	}
	cl.mid = cmp.Or(cl.mid, e.opts.MidStream)
	cl.malformed = e.opts.Malformed
	cl.maxAttempts = e.opts.MaxAttempts
	if cl.maxAttempts <= 0 {
		// Every deployment once, whatever the plan's length; the retries
		// on top stop at the cap.
		cl.maxAttempts = max(n, min(n+e.opts.AttemptsPerDeployment-1, maxAttemptsCap))
	}
	cl.keepText = cl.mayContinue()
	e.calls.Add(1)
	e.keepOff(plan.Excluded)
	if n == 0 {
		cl.cause = route.ErrNoDeployment
		return nil, cl.err()
	}
	return cl.run()
}

// keepOff counts a call whose plan left deployments out for their open
// breakers (route.ReasonOpen) against each of them, for
// BreakerSettings.ProbeShare.
func (e *Executor) keepOff(excluded []route.Candidate) {
	for i := range excluded {
		if excluded[i].Reason != route.ReasonOpen {
			continue
		}
		if st := e.existing(excluded[i].Key()); st != nil {
			st.keptOff.Add(1)
		}
	}
}

func (cl *call) err() *fallback.Error {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	e := &fallback.Error{Attempts: append([]fallback.Attempt(nil), cl.attempts...)}
	if cl.real == 0 && len(e.Attempts) > 0 || cl.cause != nil {
		setCause(e, cmp.Or(cl.cause, route.ErrNoDeployment))
	}
	if last, ok := e.Last(); ok && last.Class != fallback.ClassCanceled && errors.Is(last.Err, fallback.ErrMidStream) {
		// Failed after output that never reached the caller: the call
		// failed over instead. A stream's Read replaces it with why its
		// delivered text was not continued (noContinuation).
		if last.Class.CallerFault() {
			setContinuation(e, fallback.ContinuationPointless, errPointless)
		} else {
			setContinuation(e, fallback.ContinuationUncommitted, errUncommitted)
		}
	}
	return e
}

// record appends attempt a on plan entry i, which never started, and tells
// Feedback.Skip and the hooks.
func (cl *call) record(i int, a fallback.Attempt) { cl.recordAs(i, a, nil, nil, false) }

// recordRun records the end of a run started by newRun and calls its
// completion handle fb with its sample s.
func (cl *call) recordRun(a fallback.Attempt, s *tps.Sample, fb Done) { cl.recordAs(0, a, s, fb, true) }

func (cl *call) recordAs(i int, a fallback.Attempt, s *tps.Sample, fb Done, run bool) {
	cl.mu.Lock()
	cl.attempts = append(cl.attempts, a)
	if run {
		cl.pending.Add(-1)
	}
	cl.mu.Unlock()
	switch {
	case run && fb != nil:
		fb(a, s)
	case !run && cl.fb != nil:
		cl.fb.Skip(i, a)
	}
	if h := cl.e.hooks.OnAttempt; h != nil {
		h(a)
	}
	if l := cl.e.hooks.Logger; l != nil && a.Err != nil {
		l.LogAttrs(cl.ctx, slog.LevelDebug, "fallback: attempt failed",
			slog.String("deployment", a.Key.String()), slog.String("class", a.Class.String()),
			slog.Int("status", a.Status), slog.Duration("duration", a.Duration), slog.String("err", a.Err.Error()))
	}
}

func (cl *call) skip(i int, err error) {
	if cl.slots[i].skipped {
		return
	}
	cl.slots[i].skipped = true
	cl.record(i, fallback.Attempt{Key: cl.plan[i].Deployment.Key(), Class: fallback.ClassSkipped, Err: err})
}

// eligible reports whether candidate i may still be tried in this call.
func (cl *call) eligible(i int) bool {
	if cl.slots[i].excluded || cl.slots[i].tries >= cl.e.opts.AttemptsPerDeployment {
		return false
	}
	if cl.noFallback && i > 0 {
		return false
	}
	if cl.ctxExceeded {
		// Only a larger known window, or, when windows are unknown,
		// another of the models the caller listed (a plan holds several
		// logical models only when the caller gave them, in order).
		d := cl.plan[i].Deployment
		switch w := d.ContextWindow; {
		case w > cl.minContext:
		case w == 0 && !cl.exceededModel(d):
		default:
			return false
		}
	}
	return true
}

// exceededModel reports whether d's logical model (and revision) answered
// context_length_exceeded in this call.
func (cl *call) exceededModel(d *route.Deployment) bool {
	return slices.ContainsFunc(cl.ctxModels, func(x *route.Deployment) bool {
		return x.Model == d.Model && x.Revision == d.Revision
	})
}

// ttftFor returns the TTFT deadline of attempt on candidate i (deployment
// d), which starts at start and may fail over when canFailover.
//
// Its base is the configured deadline (the cap), or, once d's TTFT was
// measured, defaultTTFTMultiple times its p95 but at least defaultTTFTFloor,
// plus the call's prompt read at ttftPrefillRate (a long prompt takes longer
// than the measured ones), whichever is shorter.
//
// When the call must answer by a time (the caller's context deadline, or,
// for a cold d, the call's start plus the configured TTFT deadline), the
// attempt may fail over and it is not a continuation, the deadline also leaves the next deployment time
// for its expected TTFT and answer (reserve), but never goes below
// ttftNormalMultiple times d's own expected TTFT (at least
// defaultTTFTFloor): a slow deployment's normal answer is never cut to make
// room.
func (cl *call) ttftFor(i int, d *route.Deployment, canFailover bool, start time.Time) time.Duration {
	cfg := cl.dl.TTFT
	if cfg <= 0 {
		return cfg
	}
	var p95 time.Duration
	warm := false
	if f := cl.e.hooks.MeasuredTTFT; f != nil {
		p95, warm = f(*d)
		warm = warm && p95 > 0
	}
	base := cfg
	if warm && cfg > defaultTTFTFloor {
		prompt := time.Duration(min(cl.est, 1<<30)) * (time.Second / ttftPrefillRate)
		base = min(cfg, max(defaultTTFTFloor, defaultTTFTMultiple*p95)+prompt)
	}
	if !canFailover || cl.committed {
		// A continuation's answer began long ago: the room is for the
		// first answer only.
		return base
	}
	by, ok := cl.ctx.Deadline()
	if !ok {
		if warm {
			return base
		}
		by = cl.start.Add(cfg)
	}
	next := cl.next(i)
	if next < 0 {
		return base
	}
	normal := p95
	if x := &cl.plan[i].Expected; x.TTFTOK {
		normal = max(normal, seconds(x.TTFT))
	}
	floor := max(defaultTTFTFloor, ttftNormalMultiple*normal)
	return min(base, max(by.Sub(start)-cl.reserve(next), floor))
}

// ttftNormalMultiple times a deployment's expected TTFT (its p95) is the
// shortest TTFT deadline that leaving room for the next deployment may give
// it: about the p99 of the TTFT distributions providers show, so that its
// normal answers are not cut.
const ttftNormalMultiple = 2

// reserveTTFT and reserveTPS stand for a next deployment whose TTFT or TPS
// is neither measured nor given by a prior: a typical interactive
// deployment's TTFT p95 and a slow one's generation rate.
const (
	reserveTTFT = time.Second
	reserveTPS  = 50
)

// reserve returns the time candidate j needs for a normal answer: its
// expected TTFT (measured, or its prior, else reserveTTFT) plus
// routekit.ExpectedOutputTokens at its expected TPS (else reserveTPS).
func (cl *call) reserve(j int) time.Duration {
	x := &cl.plan[j].Expected
	ttft := reserveTTFT
	switch {
	case x.TTFTOK:
		ttft = seconds(x.TTFT)
	case cl.e.hooks.MeasuredTTFT != nil:
		if p95, ok := cl.e.hooks.MeasuredTTFT(*cl.plan[j].Deployment); ok && p95 > 0 {
			ttft = p95
		}
	}
	tps := float64(reserveTPS)
	if x.TPSOK && x.TPS > 0 {
		tps = x.TPS
	}
	return ttft + seconds(routekit.ExpectedOutputTokens/tps)
}

// seconds converts s seconds to a Duration, saturating.
func seconds(s float64) time.Duration {
	if !(s < float64(math.MaxInt64)/float64(time.Second)) {
		return math.MaxInt64
	}
	return time.Duration(max(s, 0) * float64(time.Second))
}

// next returns the candidate the walk would try after i: the first eligible
// one after it, else before it; -1 when none is left.
func (cl *call) next(i int) int {
	for k := 1; k < len(cl.plan); k++ {
		if j := (i + k) % len(cl.plan); cl.eligible(j) {
			return j
		}
	}
	return -1
}

// ttftPrefillRate is the prompt reading speed, in tokens/s, that a measured
// TTFT deadline allows for on top of the measured figure: slower than any
// provider reads a prompt, so that a long prompt is never cut.
const ttftPrefillRate = 2000

// untried returns how many candidates other than i are eligible and have had
// no attempt yet in this call.
func (cl *call) untried(i int) int {
	n := 0
	for j := range cl.slots {
		if j != i && cl.slots[j].tries == 0 && cl.eligible(j) {
			n++
		}
	}
	return n
}

// remaining reports whether a candidate other than i could still be tried.
// It is called after the attempt on i was counted. Deployments that are open
// or cooling down do not count: abandoning a slow answer for them would leave
// nothing.
func (cl *call) remaining(i int) bool {
	if cl.real >= cl.maxAttempts {
		return false
	}
	now := time.Now()
	for j := range cl.plan {
		if j == i || !cl.eligible(j) {
			continue
		}
		st := cl.e.existing(cl.plan[j].Deployment.Key())
		if st == nil {
			return true
		}
		if _, cooling := st.cooling(now); !cooling && st.breakerAt(now) != route.BreakerOpen {
			return true
		}
	}
	return false
}

// run walks the plan in passes; between passes it may wait for a cooldown,
// a limiter or a freed in-flight slot (waitReady). A pass that follows a
// freed slot and tries nothing (another waiting call took the slot first)
// does not count against the passes.
func (cl *call) run() (*Result, error) {
	e := cl.e
	progress := time.Now() // the end of the latest pass that tried a deployment
	freed := false         // the wait before this pass ended on a freed slot
	for pass := 0; pass <= cl.maxAttempts+1; pass++ {
		before := cl.real
		for i := range cl.plan {
			if !cl.eligible(i) {
				continue
			}
			if cl.real >= cl.maxAttempts {
				return nil, cl.err()
			}
			d := cl.plan[i].Deployment
			st := e.state(d)
			now := time.Now()
			if _, ok := st.cooling(now); ok {
				cl.skip(i, fallback.ErrCoolingDown)
				continue
			}
			if ok, _, _ := st.headroom(now, cl.est); !ok {
				cl.skip(i, fallback.ErrNoBudget)
				continue
			}
			res, stop := cl.tryDeployment(i, d, st)
			if res != nil {
				return res, nil
			}
			if stop {
				return nil, cl.err()
			}
		}
		if cl.real > before {
			progress = time.Now()
		} else if freed {
			pass--
		}
		// Come back to deployments that were rate limited, cooling or
		// full, if nothing else answered and the wait fits.
		var ok bool
		if ok, freed = cl.waitReady(progress); !ok {
			return nil, cl.err()
		}
	}
	return nil, cl.err()
}

// readyAt returns the earliest time an eligible deployment is free of its
// cooldown and limiters (zero when none will be at a known time), and
// whether one is full of calls in flight, which frees it when one of them
// ends.
func (cl *call) readyAt() (t time.Time, full bool) {
	now := time.Now()
	for i := range cl.plan {
		if !cl.eligible(i) {
			continue
		}
		st := cl.e.state(cl.plan[i].Deployment)
		r := now
		if u, ok := st.cooling(now); ok {
			r = u
		} else if ok, h, f := st.headroom(now, cl.est); !ok {
			full = full || f
			if h.IsZero() {
				continue
			}
			r = h
		}
		if t.IsZero() || r.Before(t) {
			t = r
		}
	}
	return t, full
}

// waitReady waits until an eligible deployment may take the call: its
// cooldown or its limiters' wait is over, or, for one full of calls in
// flight, one of the Executor's calls ends (slotSignal) and leaves it room.
// It waits until MaxWait after progress (the end of the call's latest pass
// that tried a deployment) at most, and never past the caller's deadline.
// It reports false when no deployment will have room by then (nothing is
// waited then) or the caller gave up, and whether the wait ended on a freed
// slot.
func (cl *call) waitReady(progress time.Time) (ok, freed bool) {
	if cl.e.opts.MaxWait < 0 {
		return false, false
	}
	limit := progress.Add(cl.e.opts.MaxWait)
	byDeadline := false // the caller's deadline, not MaxWait, ends the wait
	if dl, ok := cl.ctx.Deadline(); ok && dl.Before(limit) {
		limit, byDeadline = dl, true
	}
	start := time.Now()
	defer func() { cl.waited += time.Since(start) }()
	for {
		switch cl.waitStep(limit, byDeadline) {
		case stepReady:
			return true, freed
		case stepFreed:
			freed = true
		default:
			return false, false
		}
	}
}

// stepEnd is what one step of waitReady's wait ended on.
type stepEnd int

const (
	stepGiveUp stepEnd = iota // no room by limit, or the caller gave up (cl.cause set then)
	stepReady                 // a deployment has room now
	stepFreed                 // a call ended: look again
)

// waitStep waits once, until limit at most: for the earliest time an
// eligible deployment is free of its cooldown and limiters, or, when one is
// full of calls in flight, for any call of the Executor to end. It
// subscribes before it looks, so that a slot freed in between is not
// missed. A wait that only the caller's deadline ends (byDeadline, nothing
// timed before it) is ended by ctx.Done, so that the call fails with the
// deadline, not with a timer of its own that fires at the same instant.
func (cl *call) waitStep(limit time.Time, byDeadline bool) stepEnd {
	signal := cl.e.freed.subscribe()
	defer cl.e.freed.unsubscribe()
	at, full := cl.readyAt()
	now := time.Now()
	timed := !at.IsZero() && !at.After(limit)
	switch {
	case !timed && !full:
		return stepGiveUp
	case cl.ctx.Err() != nil:
		cl.cause = context.Cause(cl.ctx)
		return stepGiveUp
	case timed && !at.After(now):
		return stepReady
	case !limit.After(now):
		return stepGiveUp
	}
	var expired <-chan time.Time
	if timed || !byDeadline {
		wake := limit
		if timed {
			wake = at
		}
		t := time.NewTimer(wake.Sub(now))
		defer t.Stop()
		expired = t.C
	}
	select {
	case <-expired:
		if !timed {
			return stepGiveUp // no slot freed within MaxWait
		}
		return stepReady
	case <-signal:
		return stepFreed
	case <-cl.ctx.Done():
		cl.cause = context.Cause(cl.ctx)
		return stepGiveUp
	}
}

// wait sleeps d if it fits MaxWait and the caller's deadline.
func (cl *call) wait(d time.Duration) bool {
	d = max(d, 0)
	if cl.e.opts.MaxWait < 0 || d > cl.e.opts.MaxWait {
		return false
	}
	if dl, ok := cl.ctx.Deadline(); ok && time.Now().Add(d).After(dl) {
		return false
	}
	if d == 0 {
		if cl.ctx.Err() != nil {
			cl.cause = context.Cause(cl.ctx)
			return false
		}
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		cl.waited += d
		return true
	case <-cl.ctx.Done():
		cl.cause = context.Cause(cl.ctx)
		return false
	}
}

// tryDeployment runs attempts on candidate i until one commits, the class says
// move on (stop false) or stop the call (stop true).
func (cl *call) tryDeployment(i int, d *route.Deployment, st *keyState) (res *Result, stop bool) {
	e := cl.e
	for cl.eligible(i) && cl.real < cl.maxAttempts {
		if cl.ctx.Err() != nil {
			cl.record(i, fallback.Attempt{Key: d.Key(), Class: fallback.ClassCanceled, Err: context.Cause(cl.ctx), Waited: cl.waited})
			return nil, true
		}
		done, r, err := cl.take(d.Key(), st, time.Now())
		switch r {
		case refusedLocal:
			st.keptOff.Add(1)
			cl.skip(i, fallback.ErrOpen)
			cl.slots[i].excluded = true
			return nil, false
		case refusedShared:
			cl.skip(i, err)
			cl.slots[i].excluded = errors.Is(err, fallback.ErrOpen)
			return nil, false
		case refusedBudget:
			cl.skip(i, fallback.ErrNoBudget)
			return nil, false
		}
		cl.real++
		cl.slots[i].tries++
		a := cl.newRun(i, d, st, done, cl.body, cl.remaining(i))
		if w := cl.open(a); w != nil {
			return cl.commit(w), false
		}
		att := a.att
		switch att.Class {
		case fallback.ClassRetry:
			if cl.slots[i].tries >= e.opts.AttemptsPerDeployment {
				cl.slots[i].excluded = true
				return nil, false
			}
			if cl.real+cl.untried(i) >= cl.maxAttempts {
				// A retry now would take the place of an untried
				// deployment: move on, and come back in a later pass if
				// the budget is not spent by then.
				return nil, false
			}
			wait := e.jitter(cl.slots[i].tries - 1)
			if u, ok := st.cooling(time.Now()); ok {
				wait = max(wait, time.Until(u))
			}
			if !cl.wait(wait) {
				if cl.ctx.Err() != nil {
					return nil, true
				}
				cl.slots[i].excluded = true
				return nil, false
			}
		case fallback.ClassRateLimited:
			return nil, false // cooling down; a later pass may come back
		case fallback.ClassContextLength:
			cl.slots[i].excluded = true
			cl.ctxExceeded = true
			cl.minContext = max(cl.minContext, d.ContextWindow)
			if !cl.exceededModel(d) {
				cl.ctxModels = append(cl.ctxModels, d)
			}
			return nil, false
		case fallback.ClassInvalid, fallback.ClassPolicy, fallback.ClassCanceled:
			return nil, true
		default: // Next, Auth, Unavailable, MidStream (non-streaming)
			cl.slots[i].excluded = true
			return nil, false
		}
	}
	return nil, false
}

// refusal says which admission step refused an attempt (take).
type refusal uint8

const (
	admitted      refusal = iota
	refusedLocal          // the deployment's own breaker (ErrOpen)
	refusedShared         // Hooks.Shared (take returns its error)
	refusedBudget         // the limiters (ErrNoBudget)
)

// take takes, in this order, the breaker permission of k (state st), the
// fleet's (Hooks.Shared) and the limiter budget for an attempt that starts
// now, and reports which refused, with nothing held then (a breaker
// permission taken is given back as skipped). Admitted, the caller owns
// done and the in-flight slot, which the run's finalize gives back; err is
// Hooks.Shared's refusal when r is refusedShared. This is the one admission
// sequence: every attempt (first tries, retries, hedges, continuations)
// goes through it.
func (cl *call) take(k measure.Key, st *keyState, now time.Time) (done func(error), r refusal, err error) {
	done, err = st.allow(now)
	if err != nil {
		return nil, refusedLocal, nil
	}
	if done, err = cl.e.admitShared(k, cl.est, done); err != nil {
		done(&classified{fallback.ClassSkipped})
		return nil, refusedShared, err
	}
	if !st.acquire(now, cl.est) {
		done(&classified{fallback.ClassSkipped})
		return nil, refusedBudget, nil
	}
	return done, admitted, nil
}

// commit turns a committed run into the Result.
func (cl *call) commit(a *run) *Result {
	cl.committed = true
	r := &Result{Header: relayHeader(a.resp.Header, a.sc), StatusCode: a.resp.StatusCode, ContentLength: -1, cl: cl}
	if cl.assemble {
		r.ContentLength = int64(a.rel - a.off)
		r.Header.Set("Content-Type", "application/json")
	}
	s := &stream{res: r, cur: a}
	s.active.Store(a)
	r.Body = s
	r.dep, r.sample = *a.d, a.sample
	return r
}
