package registry

import (
	"context"
	"errors"
	"maps"
	"math"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tpsroute/tpsroute/internal/measurekit"
	"github.com/tpsroute/tpsroute/measure"
	"github.com/tpsroute/tpsroute/tps"
)

// Registry defaults. A zero Options means these.
const (
	// DefaultMinSamples is the number of successful samples inside the window
	// before an Estimate is OK: ten calls make the median meaningful and put
	// the p95 between the two slowest, enough to rank deployments; fewer would
	// let one lucky call win all the traffic.
	DefaultMinSamples = 10
	// defaultTTL is how long a key may go without a Record or Begin before it
	// is dropped: three default windows, after which its windows are long
	// empty and only its totals would be kept.
	defaultTTL = 15 * time.Minute
	// defaultRefresh is the longest interval, in sample time, between two
	// publications of a key's Estimate while samples arrive.
	defaultRefresh = 100 * time.Millisecond
	// maxClasses bounds the distinct error classes kept per key; the rest
	// count as "other".
	maxClasses = 32
)

// normalize returns o with its zero or negative fields set to their
// defaults, and its Prices copied.
func normalize(o measure.Options) measure.Options {
	o.Window = normalizeWindow(o.Window)
	if o.HalfLife <= 0 {
		o.HalfLife = defaultHalfLife
	}
	if o.MinSamples <= 0 {
		o.MinSamples = DefaultMinSamples
	}
	if o.TTL <= 0 {
		o.TTL = defaultTTL
	}
	if o.Refresh <= 0 {
		o.Refresh = defaultRefresh
	}
	o.Prices = maps.Clone(o.Prices)
	return o
}

// classOf is the class of a failed sample recorded without one.
func classOf(err error) string {
	if errors.Is(err, context.Canceled) {
		return measure.ClassCanceled
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return measure.ClassTimeout
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return measure.ClassTimeout
	}
	return measure.ClassOther
}

// Registry keeps statistics per Key and per tps.CacheState: windows and
// EWMAs of TTFT, TPS, TPOT and E2E, a window of chunk gaps, request and error
// counts, an in-flight gauge, token meters and exact cost.
//
// Record and Begin take only the key's own mutex; Estimate takes no lock.
// The key table is an immutable map behind an atomic pointer, copied when a
// key is added or pruned. A Registry starts no goroutines: idle keys are
// dropped by Record once per half TTL, and by SweepAt, which also keeps the
// published Estimates fresh when samples stop (see SweepAt).
//
// A Registry is safe for concurrent use.
type Registry struct {
	opts      measure.Options
	mu        sync.Mutex // serialises changes to keys
	keys      atomic.Pointer[map[measure.Key]*entry]
	nextPrune atomic.Int64 // UnixNano; 0 means at the first Record
	nextSweep atomic.Int64 // UnixNano; 0 means at the first SweepAt
	restored  atomic.Int64 // UnixNano of the restored state's save, rebased; 0 none (state.go)
}

// New returns an empty Registry configured by o.
func New(o measure.Options) *Registry {
	r := &Registry{opts: normalize(o)}
	m := map[measure.Key]*entry{}
	r.keys.Store(&m)
	return r
}

// entry holds one key's statistics.
type entry struct {
	key      measure.Key
	price    measurekit.TokenPrice
	inflight atomic.Int64
	est      atomic.Pointer[Estimate]
	pruned   atomic.Bool // set with dead; read by handles without the lock

	mu          sync.Mutex
	dead        bool // pruned; Record and Begin look the key up again
	lastSeen    int64
	newest      int64 // UnixNano of the newest sample
	lastRefresh int64
	states      [3]*stateStats // by tps.CacheState, allocated on first use
	gaps        Window
	gapE        EWMA
	ttftE       PeakEWMA // the key-level TTFT EWMA; the others combine the states'
	tpsShift    shift    // change detection on log TPS (shift.go)
	ttftShift   shift    // change detection on log TTFT
	tpsSince    int64    // UnixNano of the latest TPS change; 0 none
	ttftSince   int64    // UnixNano of the latest TTFT change; 0 none
	classes     map[string]int64
	implausible int64                    // samples whose usage tps found implausible (Stats.ImplausibleUsage)
	remote      *folded                  // merged from other Registries (MergeAt); nil until then
	load        loadTrack                // in flight over time (load.go)
	fit         loadFit                  // TPS against the load at each stream's start (load.go)
	fitGen      loadFit                  // TPS against the mean load over each stream's generation (load.go)
	within      withinFit                // chunk gaps against the load within each stream (within.go)
	inputs      [InputClasses]inputClass // by prompt size (input.go)
	inU         EWMA                     // unloaded TPS over every class
	// flights are the calls in flight with an output cap (overdue.go),
	// last: between inflight and est they put the two that Estimate and
	// every pick read on different cache lines (docs/PERFORMANCE.md, "After
	// the stalled-call rule").
	flights [overdueSlots]flightSlot
	tpg     atomic.Uint64 // tokens per chunk gap (live.go), float64 bits; 0 none
}

// stateStats holds one key's statistics for one cache state.
type stateStats struct {
	ttft, tps, tpot, e2e  Window
	ttftE                 PeakEWMA
	tpsE, tpotE, e2eE     EWMA
	requests, successes   int64
	errors, canceled      int64
	timeouts              int64
	byPhase               [5]int64 // by tps.Phase
	input, cached, output int64
	reasoning             int64
	cost                  measure.Money
	ring                  outcomeRing
}

// outcomeRing counts outcomes per sub-window, aligned with the windows.
type outcomeRing struct {
	width int64
	slots []outcomeSlot
}

type outcomeSlot struct {
	epoch         int64
	ok, fail, any int64 // any > 0 marks the slot valid
}

// add counts one call's outcome at now (UnixNano).
func (o *outcomeRing) add(now int64, ok bool) {
	if ok {
		o.addEpoch(floorDiv(now, o.width), 1, 0)
	} else {
		o.addEpoch(floorDiv(now, o.width), 0, 1)
	}
}

// addEpoch adds counts (non-negative) to the slot of epoch e, if still
// inside the ring; each count saturates at maxOutcomes.
func (o *outcomeRing) addEpoch(e, ok, fail int64) {
	s := &o.slots[mod(e, int64(len(o.slots)))]
	if s.any == 0 || s.epoch < e {
		*s = outcomeSlot{epoch: e}
	} else if s.epoch > e {
		return // older than the window
	}
	s.ok = addCapped(s.ok, ok, maxOutcomes)
	s.fail = addCapped(s.fail, fail, maxOutcomes)
	s.any = s.ok + s.fail
}

func (o *outcomeRing) sum(now int64) (ok, fail int64) {
	e := floorDiv(now, o.width)
	for i := range o.slots {
		s := &o.slots[i]
		if s.any > 0 && s.epoch > e-int64(len(o.slots)) {
			ok += s.ok
			fail += s.fail
		}
	}
	return ok, fail
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b < 0 {
		q--
	}
	return q
}

func mod(a, b int64) int64 {
	m := a % b
	if m < 0 {
		m += b
	}
	return m
}

func (r *Registry) newEntry(k measure.Key) *entry {
	e := &entry{key: k, price: perToken(r.opts.Prices[k]), lastRefresh: math.MinInt64 / 2}
	e.gaps.init(r.opts.Window)
	hl := r.opts.HalfLife
	e.gapE.HalfLife, e.ttftE.HalfLife, e.inU.HalfLife = hl, hl, hl
	return e
}

func (r *Registry) newState() *stateStats {
	s := &stateStats{}
	for _, w := range []*Window{&s.ttft, &s.tps, &s.tpot, &s.e2e} {
		w.init(r.opts.Window)
	}
	hl := r.opts.HalfLife
	s.ttftE.HalfLife, s.tpsE.HalfLife, s.tpotE.HalfLife, s.e2eE.HalfLife = hl, hl, hl, hl
	s.ring = outcomeRing{width: s.ttft.width, slots: make([]outcomeSlot, r.opts.Window.Buckets)}
	return s
}

// lookup returns k's entry, or nil.
func (r *Registry) lookup(k measure.Key) *entry {
	return (*r.keys.Load())[k]
}

// locked returns k's live entry, created if needed, with its mutex held.
func (r *Registry) locked(k measure.Key) *entry {
	for {
		e := r.lookup(k)
		if e == nil {
			r.mu.Lock()
			old := *r.keys.Load()
			if e = old[k]; e == nil {
				m := make(map[measure.Key]*entry, len(old)+1)
				maps.Copy(m, old)
				e = r.newEntry(k)
				m[k] = e
				r.keys.Store(&m)
			}
			r.mu.Unlock()
		}
		e.mu.Lock()
		if !e.dead {
			return e
		}
		e.mu.Unlock()
		// A prune holds r.mu until it has published the map without e:
		// wait for it rather than spin on e's mutex.
		r.mu.Lock()
		r.mu.Unlock() //lint:ignore SA2001 a barrier: the prune has published its map
	}
}

// Record adds one finished call of key k. The sample's time is
// s.Start + s.Total (the end of the stream), or time.Now() when s.Start is
// zero. See RecordAt.
func (r *Registry) Record(k measure.Key, s tps.Sample) { r.RecordClass(k, s, "") }

// RecordClass is Record for a sample whose error class its caller has
// already determined: class names it in Stats.ErrorsByClass (ClassTimeout,
// ClassCanceled, ClassOther or a caller's own name; at most 32 distinct
// names per key of at most 256 bytes each, the rest count as ClassOther)
// instead of one read from s.Err. It is ignored for a successful sample; ""
// means classify s.Err as Record does.
func (r *Registry) RecordClass(k measure.Key, s tps.Sample, class string) {
	now := time.Now()
	if !s.Start.IsZero() {
		now = s.Start.Add(max(s.Total, s.E2E, s.TTFT, 0))
	}
	r.RecordClassAt(now, k, s, class)
}

// RecordAt adds one finished call of key k, observed at now. It is safe for
// concurrent use, and allocates nothing once the key and its cache state
// have been seen.
//
// What counts where:
//   - Every sample counts in Requests, tokens and cost, whatever its outcome:
//     tokens delivered before an error were generated and billed. Counts
//     and meters saturate at 2^62-1 (what a state file holds) rather than
//     wrap; a negative count counts as 0.
//   - A sample whose usage tps did not trust (s.Implausible) counts in
//     ImplausibleUsage.
//   - A sample fails when s.Err is non-nil or s.ErrPhase is not PhaseNone.
//     A failure counts in Errors, ErrorsByPhase, ErrorsByClass and the
//     windowed error rate, except the ClassCanceled class (the caller gave
//     up), which counts only in Canceled and ErrorsByClass, and the
//     ClassCaller class (the caller's input was refused), which counts only
//     in ErrorsByClass: neither is the deployment's failure.
//   - TTFT counts whenever the first output chunk arrived (s.TTFT > 0), even
//     if the stream failed later: it was a real time to first token. An
//     unstreamed sample (s.Unstreamed: a plain upstream call) has none: its
//     TTFT is the whole answer's latency, which counts in E2E.
//   - TPS, TPOT, E2E and the chunk gap count only for successful samples,
//     since a cut-off stream would bias them; TPS only when s.TPSOK.
//   - The chunk gap recorded is the stream's mean gap between output chunks
//     (s.Gaps.Sum / s.Gaps.Count), one value per stream.
//   - Durations enter in seconds; negative, NaN or infinite values are
//     dropped. The sample's cache state selects the per-state statistics.
func (r *Registry) RecordAt(now time.Time, k measure.Key, s tps.Sample) {
	r.RecordClassAt(now, k, s, "")
}

// RecordClassAt is RecordAt with the sample's error class given, as in
// RecordClass.
func (r *Registry) RecordClassAt(now time.Time, k measure.Key, s tps.Sample, class string) {
	// RecordClassAt is long (about 130 lines, complexity about 43) because
	// it files every part of a sample under one hold of the key's lock, in
	// the order the parts depend on: a change the TTFT or TPS detector sees
	// resets the prompt-size classes before this sample joins its class,
	// and forces the refresh at the end. It is the list that RecordAt's
	// comment documents, kept in one place.
	t := now.UnixNano()
	r.maybePrune(now, t)
	failed := s.Err != nil || s.ErrPhase != tps.PhaseNone
	if failed && class == "" {
		class = classOf(s.Err) // outside the key's lock
	}
	if len(class) > maxClassString {
		class = measure.ClassOther // a state file holds no longer name
	}
	e := r.locked(k)
	defer e.mu.Unlock()

	cs := s.Cache
	if cs > tps.CacheWarm {
		cs = tps.CacheUnknown
	}
	st := e.states[cs]
	if st == nil {
		st = r.newState()
		e.states[cs] = st
	}
	e.lastSeen = max(e.lastSeen, t)
	e.newest = max(e.newest, t)

	addCount(&st.requests, 1)
	if failed {
		switch class {
		case measure.ClassCanceled:
			addCount(&st.canceled, 1)
		case measure.ClassCaller: // in ErrorsByClass only
		default:
			addCount(&st.errors, 1)
			if p := s.ErrPhase; p > tps.PhaseNone && int(p) < len(st.byPhase) {
				addCount(&st.byPhase[p], 1)
			}
			if class == measure.ClassTimeout {
				addCount(&st.timeouts, 1)
			}
			st.ring.add(t, false)
		}
		if e.classes == nil {
			e.classes = make(map[string]int64)
		}
		if _, ok := e.classes[class]; !ok && len(e.classes) >= maxClasses {
			class = measure.ClassOther
		}
		e.classes[class] = addCapped(e.classes[class], 1, maxCount)
	} else {
		addCount(&st.successes, 1)
		st.ring.add(t, true)
	}
	if s.Implausible != tps.ImplausibleNone {
		addCount(&e.implausible, 1)
	}

	addCount(&st.input, s.InputTokens)
	addCount(&st.cached, s.CachedTokens)
	addCount(&st.output, s.OutputTokens)
	addCount(&st.reasoning, s.ReasoningTokens)
	addPico(&st.cost, e.price.Cost(s.InputTokens, s.CachedTokens, s.OutputTokens))

	shifted := false
	ic := InputClass(s.InputTokens)
	var classTTFT float64
	if s.TTFT > 0 && !s.Unstreamed {
		v := s.TTFT.Seconds()
		if st.ttft.Add(now, v) {
			st.ttftE.Update(now, v)
			e.ttftE.Update(now, v)
			// Only successful calls' TTFT feeds the detector: a failing
			// stream's first token says little about the level.
			if !failed && e.ttftShift.add(v) {
				e.ttftSince, shifted = t, true
			}
			if !failed {
				classTTFT = v
			}
		}
	}
	if !failed {
		var unloaded float64
		if s.TPSOK && s.TPS > 0 && st.tps.Add(now, s.TPS) {
			st.tpsE.Update(now, s.TPS)
			e.addTokensPerGap(s.TPS, s.Gaps.Sum, s.Gaps.Count)
			// The detector sees the sample at the key's reference load and
			// prompt-size mix (load.go, input.go), so that neither a load
			// swing nor a change of prompt mix reads as a change of level.
			xs, xg, ok := r.sampleLoad(e, &s)
			k, ref, gen := e.loadModel()
			x := xs
			if gen {
				x = xg
			}
			unloaded = s.TPS * loadFactor(k, x, 0)
			v := s.TPS * loadFactor(k, x, ref)
			if s.InputTokens > 0 {
				v *= e.classNorm(ic, r.opts.MinSamples)
			}
			if e.tpsShift.add(v) {
				e.tpsSince, shifted = t, true
			}
			if ok {
				e.fit.add(t, loadHalfLives*float64(r.opts.HalfLife), xs, s.TPS)
				e.fitGen.add(t, loadHalfLives*float64(r.opts.HalfLife), xg, s.TPS)
			}
		}
		if shifted {
			e.resetInputs()
		}
		if s.InputTokens > 0 && (unloaded > 0 || classTTFT > 0) {
			e.addInput(now, ic, unloaded, classTTFT)
		}
		if s.TPOT > 0 {
			v := s.TPOT.Seconds()
			if st.tpot.Add(now, v) {
				st.tpotE.Update(now, v)
			}
		}
		if s.E2E > 0 {
			v := s.E2E.Seconds()
			if st.e2e.Add(now, v) {
				st.e2eE.Update(now, v)
			}
		}
		if s.Gaps.Count > 0 && s.Gaps.Sum > 0 {
			v := s.Gaps.Sum.Seconds() / float64(s.Gaps.Count)
			if e.gaps.Add(now, v) {
				e.gapE.Update(now, v)
			}
		}
	}

	// Refresh every Refresh of sample time, and on each success while not OK
	// (there are fewer than MinSamples of those per window, and one of them
	// makes the key OK). Samples a little out of order (concurrent streams
	// end in any order) do not force a refresh; a clock stepped back by more
	// than a window does.
	if p := e.est.Load(); p == nil || shifted || (!p.OK && !failed) || t-e.lastRefresh >= int64(r.opts.Refresh) ||
		t < e.lastRefresh-int64(r.opts.Window.Length) {
		r.refresh(e, now)
	}
}

// combined returns the EWMA of one metric over all cache states.
func (e *entry) combined(f func(*stateStats) *EWMA) (float64, bool) {
	var es [3]*EWMA
	for i, s := range e.states {
		if s != nil {
			es[i] = f(s)
		}
	}
	return combineEWMA(es[:]...)
}

// Begin marks one call to k as in flight until end is called; end is
// idempotent and safe to call from any goroutine. Begin uses time.Now() for
// the key's idle time; see BeginAt.
func (r *Registry) Begin(k measure.Key) (end func()) { return r.BeginAt(time.Now(), k) }

// BeginAt is Begin at time now. A key with calls in flight is never pruned.
//
// The end func takes the key's lock briefly: the Registry follows the
// in-flight count over time to measure the load each stream started at
// (Estimate.LoadK). The end's time is now plus the monotonic time elapsed
// since BeginAt was called.
func (r *Registry) BeginAt(now time.Time, k measure.Key) (end func()) { return r.begin(now, k, 0) }

// begin is BeginAt, tracking the call with its output cap out when
// positive (BeginCallAt).
func (r *Registry) begin(now time.Time, k measure.Key, out int64) (end func()) {
	return r.beginTracked(now, k, out, nil, nil)
}

// beginTracked is begin that also tells a Flight its entry and slot (when
// ep and slotp are not nil).
func (r *Registry) beginTracked(now time.Time, k measure.Key, out int64, ep **entry, slotp *int) (end func()) {
	wall := time.Now()
	t0 := now.UnixNano()
	e := r.locked(k)
	e.lastSeen = max(e.lastSeen, t0)
	e.inflight.Add(1)
	e.load.begin(t0)
	slot := e.track(t0, out)
	e.mu.Unlock()
	if ep != nil {
		*ep, *slotp = e, slot
	}
	var done atomic.Bool
	return func() {
		if done.CompareAndSwap(false, true) {
			t := t0 + int64(time.Since(wall))
			e.mu.Lock()
			if slot >= 0 {
				e.within.add(t, loadHalfLives*float64(r.opts.HalfLife), &e.flights[slot].load)
			}
			e.untrack(slot)
			e.load.end(t)
			e.inflight.Add(-1)
			e.mu.Unlock()
		}
	}
}

// sampleLoad returns the number of other calls in flight on e when s
// started (just after its start, where its own Begin is) and their mean
// over its generation (from its first output chunk to its last), and false
// when s has no start time or no generation phase, or e's marks do not
// reach back to its start. e.mu must be held.
//
// Each feeds its own fit, and the one whose line explains more of the
// variance of 1/TPS is used (entry.loadModel): a provider that batches live
// slows every running stream as others join, so a stream's speed follows
// the mean load over its life; one whose streams keep the speed they began
// with follows the load at the start, and there the mean over the life
// depends on the stream's own length (a fast stream that began alone and
// was followed by a crowd averages a high load at a high speed), which
// blurs that fit.
func (r *Registry) sampleLoad(e *entry, s *tps.Sample) (start, gen float64, ok bool) {
	if s.Start.IsZero() || s.Last <= s.TTFT {
		return 0, 0, false
	}
	t0 := s.Start.UnixNano() + int64(min(time.Millisecond, max(s.TTFT, 0)))
	n, ok := e.load.countAt(t0)
	if !ok {
		return 0, 0, false
	}
	m, ok := e.load.meanOver(s.Start.UnixNano()+int64(max(s.TTFT, 0)), s.Start.UnixNano()+int64(s.Last))
	if !ok {
		return 0, 0, false
	}
	// The stream itself is in flight over its generation.
	return float64(max(n-1, 0)), max(m-1, 0), true
}

// loadModel returns the key's load model: K, the reference load and
// whether the samples are read at the mean load over their generation. The
// slope within the streams (withinFit) comes first: when it establishes a
// load dependence, K is its own and the reference load the generation
// fit's samples' under that K (a stream that slows within itself is read
// over its generation). Otherwise the fit, start or generation, whose line
// explains more of the variance of 1/TPS (see sampleLoad), with K and the
// reference load as loadFit.model gives them; without a load dependence in
// either, the start fit's (K 0). e.mu must be held.
func (e *entry) loadModel() (k, ref float64, gen bool) {
	if kw := e.within.model(); kw > 0 {
		return kw, e.fitGen.refAt(kw), true
	}
	k, ref, r2 := e.fit.modelR2()
	if kg, refg, r2g := e.fitGen.modelR2(); r2g > r2 {
		return kg, refg, true
	}
	return k, ref, false
}

// loadUntested reports whether no fit of e rules out a load dependence as
// strong as K loadProbeK: not the slope within the streams, nor either fit
// across them (Estimate.LoadUntested, with no load model).
func (e *entry) loadUntested() bool {
	return !e.within.rulesOut(loadProbeK) && !e.fit.rulesOut(loadProbeK) && !e.fitGen.rulesOut(loadProbeK)
}

// Estimate returns k's latest published Estimate, with InFlight read live,
// and reports whether it is OK (enough successful samples in the window).
// An unknown key gives the zero Estimate and false; a known key with too
// few samples gives its partial Estimate and false.
//
// It takes no lock and allocates nothing. The published estimate lags the
// samples by at most Options.Refresh of sample time while samples arrive;
// when they stop, it is refreshed by the next Record, SweepAt, Snapshot or
// Prune, so check Estimate.Newest for the age of the data.
func (r *Registry) Estimate(k measure.Key) (Estimate, bool) {
	var est Estimate
	e := (*r.keys.Load())[k]
	if e == nil {
		return est, false
	}
	ok := (*handle)(e).read(&est)
	return est, ok
}

// ReadEstimate sets *est to the Estimate h.Estimate returns and returns its
// ok. For a handle from Registry.Handle it copies the published Estimate
// once, straight into *est, rather than through a return value; est can
// stay on the caller's stack. route's Picker reads one per candidate on
// every pick.
func ReadEstimate(h EstimateHandle, est *Estimate) bool {
	if rh, ok := h.(*handle); ok {
		return rh.read(est)
	}
	var ok bool
	*est, ok = h.Estimate()
	return ok
}

// PublishedEstimate returns the Estimate a live handle from Registry.Handle
// last published, without copying it, and the key's calls in flight now; it
// returns nil and 0 for any other handle, once the key is pruned (Live is
// false) and while nothing is published: then read h with ReadEstimate, or
// ask for a new handle. The Estimate is shared and immutable: the caller
// must not modify it, and its InFlight is as published, not live. Every
// change of the key's figures publishes a new Estimate, so a caller that
// reads the same keys on every request can keep what it derives from one,
// keyed by the pointer, until the pointer changes: route's Picker does.
func PublishedEstimate(h EstimateHandle) (e *Estimate, inFlight int64) {
	rh, ok := h.(*handle)
	if !ok || rh.pruned.Load() {
		return nil, 0
	}
	if e = rh.est.Load(); e == nil {
		return nil, 0
	}
	return e, rh.inflight.Load()
}

// Handle returns a handle on k's Estimate, or nil when k is not kept (never
// recorded or begun, or pruned since). The handle stays valid until k is
// pruned; see EstimateHandle.Live. It takes no lock and allocates nothing.
func (r *Registry) Handle(k measure.Key) EstimateHandle {
	e := (*r.keys.Load())[k]
	if e == nil {
		return nil
	}
	return (*handle)(e)
}

// handle is an entry seen through EstimateHandle.
type handle entry

func (h *handle) Estimate() (Estimate, bool) {
	var est Estimate
	ok := h.read(&est)
	return est, ok
}

func (h *handle) read(est *Estimate) bool {
	if p := h.est.Load(); p != nil {
		*est = *p
	} else {
		*est = Estimate{}
	}
	est.InFlight = h.inflight.Load()
	return est.OK
}

func (h *handle) Live() bool { return !h.pruned.Load() }

var estimateQs = []float64{0.5, 0.95}

// refresh publishes e's Estimate at now. e.mu must be held.
func (r *Registry) refresh(e *entry, now time.Time) {
	t := now.UnixNano()
	var est Estimate
	var tq, pq query
	var ok, fail int64
	for _, st := range e.states {
		if st == nil {
			continue
		}
		tq.add(&st.ttft, now)
		pq.add(&st.tps, now)
		o, f := st.ring.sum(t)
		ok += o
		fail += f
	}
	rs := e.remote
	if rs != nil {
		tq.add(&rs.ttft, now)
		pq.add(&rs.tps, now)
		o, f := rs.ring.sum(t)
		ok += o
		fail += f
	}
	var out [2]float64
	if tq.n > 0 {
		tq.quantiles(estimateQs, out[:])
		est.TTFTP50, est.TTFTP95 = out[0], out[1]
	}
	if pq.n > 0 {
		pq.quantiles(estimateQs, out[:])
		est.TPSP50, est.TPSP95 = out[0], out[1]
	}
	est.TTFTEWMA, _ = e.ttftE.Value()
	est.TPSEWMA, _ = e.combined(func(s *stateStats) *EWMA { return &s.tpsE })
	newest := e.newest
	if rs != nil {
		hl := float64(r.opts.HalfLife)
		if v, ok := rs.ttftE.add(e.ttftE.e.state(), hl).value(); ok {
			est.TTFTEWMA = v
		}
		tpsE := rs.tpsE
		for _, st := range e.states {
			if st != nil {
				tpsE = tpsE.add(st.tpsE.state(), hl)
			}
		}
		if v, ok := tpsE.value(); ok {
			est.TPSEWMA = v
		}
		newest = max(newest, rs.newest)
	}
	// After a change of level, until the window holds only samples of the
	// new level, the level describes the key better than the window does;
	// so it does once the window is empty (the key went unused), rather
	// than an EWMA that still remembers the level before the change.
	if e.tpsSince != 0 && (t-e.tpsSince < int64(r.opts.Window.Length) || pq.n == 0) && e.tpsShift.n > 0 {
		est.TPSP50, est.TPSP95, est.TPSEWMA = e.tpsShift.rebase(est.TPSP50, est.TPSP95)
	} else if l, drifting, learnt := e.tpsShift.drifted(); learnt && (drifting || e.tpsSince != 0) && rs == nil && est.TPSEWMA > l {
		// While the detector sees a drift, and once it has seen a change
		// (after the window holds only later samples), the TPS EWMA is at
		// most its level now: its memory is in calls (shift.go, "Drift"),
		// the EWMA's in seconds, and a slow drift moves the one within tens
		// of calls and the other only within tens of seconds; after a
		// change, a deployment that got few calls since keeps an EWMA that
		// still weighs the old level's many samples (root
		// TestThroughputFollowsDegradationAndRecovery: the degraded
		// leader took the traffic back 60 s into its slowdown). Not with
		// other Registries' samples merged in: the detector sees this
		// one's only.
		est.TPSEWMA = l
	}
	if e.ttftSince != 0 && (t-e.ttftSince < int64(r.opts.Window.Length) || tq.n == 0) && e.ttftShift.n > 0 {
		est.TTFTP50, est.TTFTP95, est.TTFTEWMA = e.ttftShift.rebase(est.TTFTP50, est.TTFTP95)
	}
	if ok+fail > 0 {
		est.ErrorRate = float64(fail) / float64(ok+fail)
	}
	est.LoadK, est.LoadRef, _ = e.loadModel()
	est.LoadUntested = est.LoadK == 0 && e.loadUntested()
	est.TPSPending, est.TTFTPending = e.tpsShift.pending(), e.ttftShift.pending()
	pub := &published{}
	warm := e.fillInputs(&pub.tab, t, r.opts.MinSamples, int64(r.opts.Window.Length), est.LoadK, est.LoadRef, est.TPSEWMA)
	est.Samples = ok
	est.TPSSamples = int64(pq.n)
	if newest != 0 {
		est.Newest = time.Unix(0, newest)
	}
	est.OK = ok >= int64(r.opts.MinSamples) && tq.n > 0
	sanitize(&est)
	e.lastRefresh = t
	pub.est = est
	if warm {
		// On pub.est, not est: est passed to a function value would escape
		// to the heap, one allocation more per refresh.
		pub.est.inputs = &pub.tab
	}
	e.est.Store(&pub.est)
}

func (r *Registry) maybePrune(now time.Time, t int64) {
	next := r.nextPrune.Load()
	if next != 0 && t < next {
		return
	}
	if !r.nextPrune.CompareAndSwap(next, t+int64(r.opts.TTL/2)) {
		return
	}
	if next != 0 {
		r.prune(now, false)
	}
}

// SweepAt keeps the published Estimates fresh as of now: at most once per
// second of sample time it runs PruneAt(now), which republishes every kept
// key's Estimate, so that a key that gets no traffic (because it was slow)
// sees its old samples leave the window: its Estimate is no longer OK (route
// keeps ranking a deployment it compared before on the level it last
// showed, and re-measures it by exploration).
// Other calls within the second cost one atomic load; the first call only
// starts the clock. Call it where Estimates are about to be read: the
// tpsroute Client calls it before every pick.
func (r *Registry) SweepAt(now time.Time) {
	t := now.UnixNano()
	next := r.nextSweep.Load()
	if t < next || !r.nextSweep.CompareAndSwap(next, t+int64(sweepInterval)) {
		return
	}
	if next != 0 {
		r.PruneAt(now)
	}
}

// sweepInterval is how often SweepAt republishes the Estimates: often enough
// that a deployment left idle turns cold within a second of its samples
// leaving the window, rare enough to cost nothing per call.
const sweepInterval = time.Second

// Prune drops keys idle for longer than Options.TTL at time.Now(); see PruneAt.
func (r *Registry) Prune() int { return r.PruneAt(time.Now()) }

// PruneAt drops every key that has no call in flight and no Record or Begin
// within Options.TTL before now, refreshes the Estimates of the others, and
// returns how many keys it dropped. A dropped key's totals are lost; if it
// is recorded again it starts afresh. Record also prunes (without
// refreshing the others), at most once per half TTL.
func (r *Registry) PruneAt(now time.Time) int { return r.prune(now, true) }

func (r *Registry) prune(now time.Time, refresh bool) int {
	t := now.UnixNano()
	r.mu.Lock()
	defer r.mu.Unlock()
	old := *r.keys.Load()
	var drop []measure.Key
	for k, e := range old {
		e.mu.Lock()
		if e.inflight.Load() == 0 && t-e.lastSeen > int64(r.opts.TTL) {
			e.dead = true
			e.pruned.Store(true)
			drop = append(drop, k)
		} else if refresh {
			r.refresh(e, now)
		}
		e.mu.Unlock()
	}
	if len(drop) > 0 {
		m := maps.Clone(old)
		for _, k := range drop {
			delete(m, k)
		}
		r.keys.Store(&m)
	}
	return len(drop)
}

// Len returns the number of keys currently kept.
func (r *Registry) Len() int { return len(*r.keys.Load()) }
