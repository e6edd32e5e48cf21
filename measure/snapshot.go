package measure

import (
	"cmp"
	"encoding/json"
	"iter"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/tpsroute/tpsroute/tps"
)

// Dist summarises one metric's distribution. Times are in seconds (as
// OpenTelemetry does), rates in tokens per second. Count, the quantiles and
// Mean cover the Registry's window; EWMA is the time-decayed average (for
// TTFT, the peak-sensitive PeakEWMA) and may outlive the window. Empty
// fields are 0, never NaN or Inf. A Dist is a plain value, safe for
// concurrent reads.
type Dist struct {
	Count int64   `json:"count"`
	P50   float64 `json:"p50"`
	P90   float64 `json:"p90"`
	P95   float64 `json:"p95"`
	P99   float64 `json:"p99"`
	Mean  float64 `json:"mean"`
	EWMA  float64 `json:"ewma"`
}

// PhaseCounts counts failures by the phase the stream reached (tps.Phase).
// A PhaseCounts is a plain value, safe for concurrent reads.
type PhaseCounts struct {
	Connect    int64 `json:"connect"`     // tps.PhaseConnect
	Headers    int64 `json:"headers"`     // tps.PhaseHeaders
	FirstToken int64 `json:"first_token"` // tps.PhaseFirstToken
	MidStream  int64 `json:"mid_stream"`  // tps.PhaseMidStream
}

// CacheStats are the statistics of one key for one cache state, or for all
// of them. Counters (Requests through CostExact) are totals since the key was
// first seen (or last pruned); the Dists and ErrorRate cover the window.
// A CacheStats is a plain value, safe for concurrent reads.
type CacheStats struct {
	TTFT Dist `json:"ttft"` // seconds to the first output chunk
	TPS  Dist `json:"tps"`  // generation-phase tokens/s, TPSOK samples only
	TPOT Dist `json:"tpot"` // seconds per output token after the first
	E2E  Dist `json:"e2e"`  // seconds from start to the last output chunk

	Requests      int64       `json:"requests"`        // every sample recorded
	Successes     int64       `json:"successes"`       // samples without error
	Errors        int64       `json:"errors"`          // failed samples, canceled and ClassCaller ones excluded
	Canceled      int64       `json:"canceled"`        // samples whose caller gave up (ClassCanceled)
	Timeouts      int64       `json:"timeouts"`        // errors of class ClassTimeout
	ErrorRate     float64     `json:"error_rate"`      // failures / (successes + failures) in the window
	ErrorsByPhase PhaseCounts `json:"errors_by_phase"` // Errors split by tps.Phase

	InputTokens     int64 `json:"input_tokens"`     // prompt tokens, cached included
	CachedTokens    int64 `json:"cached_tokens"`    // prompt tokens served from cache
	OutputTokens    int64 `json:"output_tokens"`    // completion tokens, reasoning included
	ReasoningTokens int64 `json:"reasoning_tokens"` // reasoning part of OutputTokens

	Cost      float64 `json:"cost_usd"`   // US dollars, CostExact rounded to float64
	CostExact Money   `json:"cost_exact"` // exact US dollars
}

// Stats are one key's statistics: the aggregate over cache states, plus the
// key-level chunk gaps, error classes and in-flight gauge, plus the same
// CacheStats for each cache state. A Stats is a plain value, safe for
// concurrent reads; its ErrorsByClass map is shared with the Snapshot and
// must not be modified.
type Stats struct {
	Key Key `json:"key"`
	CacheStats
	// ChunkGap is the distribution of each successful stream's mean gap
	// between output chunks, in seconds.
	ChunkGap      Dist             `json:"chunk_gap"`
	ErrorsByClass map[string]int64 `json:"errors_by_class"` // failures (and cancellations) by class
	// ImplausibleUsage counts the samples whose reported usage tps did not
	// trust (tps.Sample.Implausible; docs/METRICS.md, "Plausible usage"):
	// a deployment that reports more tokens than it streams.
	ImplausibleUsage int64     `json:"implausible_usage"`
	InFlight         int64     `json:"in_flight"` // calls begun and not ended
	Newest           time.Time `json:"newest"`    // time of the newest sample; zero if none

	Unknown CacheStats `json:"cache_unknown"` // tps.CacheUnknown
	Cold    CacheStats `json:"cache_cold"`    // tps.CacheCold
	Warm    CacheStats `json:"cache_warm"`    // tps.CacheWarm

	// Fleet is what other Registries measured for this key and this one
	// merged (Registry.MergeAt), nil when nothing was: everything above is
	// this Registry's own. Routing (Estimate) reads both.
	Fleet *FleetStats `json:"fleet,omitempty"`
}

// FleetStats are the statistics other Registries contributed to one key
// (fleet mode), cache states folded: TTFT and TPS over the window and their
// averages, the windowed error rate, and the meters merged so far. A
// FleetStats is a plain value, safe for concurrent reads.
type FleetStats struct {
	TTFT         Dist      `json:"ttft"`
	TPS          Dist      `json:"tps"`
	ErrorRate    float64   `json:"error_rate"`
	Requests     int64     `json:"requests"`
	Errors       int64     `json:"errors"`
	InputTokens  int64     `json:"input_tokens"`
	CachedTokens int64     `json:"cached_tokens"`
	OutputTokens int64     `json:"output_tokens"`
	Cost         float64   `json:"cost_usd"`
	CostExact    Money     `json:"cost_exact"`
	Newest       time.Time `json:"newest"` // zero if none
}

// Snapshot is an immutable view of a Registry at one time. Each key is read
// under its own lock, so each key's Stats are consistent, but different keys
// may be read a few microseconds apart. The zero Snapshot is empty.
// A Snapshot is safe for concurrent use.
type Snapshot struct {
	at    time.Time
	keys  []Key // sorted
	stats map[Key]Stats
}

// At returns the time the snapshot was taken at.
func (s Snapshot) At() time.Time { return s.at }

// Len returns the number of keys.
func (s Snapshot) Len() int { return len(s.keys) }

// Lookup returns the statistics of k, and false if the registry had no k.
func (s Snapshot) Lookup(k Key) (Stats, bool) {
	st, ok := s.stats[k]
	return st, ok
}

// Keys returns the keys, sorted by provider, region and model, in a new slice.
func (s Snapshot) Keys() []Key { return slices.Clone(s.keys) }

// All iterates over the keys in Keys order with their statistics.
func (s Snapshot) All() iter.Seq2[Key, Stats] {
	return func(yield func(Key, Stats) bool) {
		for _, k := range s.keys {
			if !yield(k, s.stats[k]) {
				return
			}
		}
	}
}

// MarshalJSON encodes the snapshot as
// {"at": RFC 3339 time, "keys": [Stats, ...]} in Keys order, with the field
// names documented in the package doc.
func (s Snapshot) MarshalJSON() ([]byte, error) {
	list := make([]Stats, 0, len(s.keys))
	for _, k := range s.keys {
		list = append(list, s.stats[k])
	}
	return json.Marshal(struct {
		At   time.Time `json:"at"`
		Keys []Stats   `json:"keys"`
	}{s.at, list})
}

func compareKeys(a, b Key) int {
	return cmp.Or(strings.Compare(a.Provider, b.Provider), strings.Compare(a.Region, b.Region), strings.Compare(a.Model, b.Model), strings.Compare(a.API, b.API))
}

// Snapshot returns the statistics of every key at time.Now(); see SnapshotAt.
func (r *Registry) Snapshot() Snapshot { return r.SnapshotAt(time.Now()) }

// SnapshotAt returns the statistics of every key with windows read at now.
// It also refreshes each key's published Estimate. It does not prune.
func (r *Registry) SnapshotAt(now time.Time) Snapshot {
	m := *r.keys.Load()
	snap := Snapshot{at: now, keys: slices.SortedFunc(maps.Keys(m), compareKeys), stats: make(map[Key]Stats, len(m))}
	for k, e := range m {
		snap.stats[k] = r.stats(e, now)
	}
	return snap
}

var distQs = []float64{0.5, 0.9, 0.95, 0.99}

func dist(q *query, ewma float64) Dist {
	d := Dist{Count: int64(q.n), EWMA: finite(ewma)}
	if q.n > 0 {
		var out [4]float64
		q.quantiles(distQs, out[:])
		d.P50, d.P90, d.P95, d.P99 = finite(out[0]), finite(out[1]), finite(out[2]), finite(out[3])
		d.Mean = finite(q.sum / float64(q.n))
	}
	return d
}

func ewmaValue(v float64, _ bool) float64 { return v }

func (r *Registry) stats(e *entry, now time.Time) Stats {
	e.mu.Lock()
	defer e.mu.Unlock()
	r.refresh(e, now)
	t := now.UnixNano()
	st := Stats{Key: e.key, InFlight: e.inflight.Load(), ErrorsByClass: maps.Clone(e.classes), ImplausibleUsage: e.implausible}
	if st.ErrorsByClass == nil {
		st.ErrorsByClass = map[string]int64{}
	}
	if e.newest != 0 {
		st.Newest = time.Unix(0, e.newest).UTC()
	}
	var gq query
	gq.add(&e.gaps, now)
	st.ChunkGap = dist(&gq, ewmaValue(e.gapE.Value()))

	st.CacheStats = cacheStats(now, e.states[:]...)
	// The aggregate's TTFT EWMA is the key's own PeakEWMA, which sees every
	// sample at once, not the states' PeakEWMAs combined.
	st.TTFT.EWMA = finite(ewmaValue(e.ttftE.Value()))
	st.Unknown = cacheStats(now, e.states[tps.CacheUnknown])
	st.Cold = cacheStats(now, e.states[tps.CacheCold])
	st.Warm = cacheStats(now, e.states[tps.CacheWarm])
	if rs := e.remote; rs != nil {
		fs := &FleetStats{Requests: rs.requests, Errors: rs.errors, InputTokens: rs.input, CachedTokens: rs.cached,
			OutputTokens: rs.output, CostExact: rs.cost, Cost: rs.cost.Float()}
		var tq, pq query
		tq.add(&rs.ttft, now)
		pq.add(&rs.tps, now)
		fs.TTFT = dist(&tq, ewmaValue(rs.ttftE.value()))
		fs.TPS = dist(&pq, ewmaValue(rs.tpsE.value()))
		if o, f := rs.ring.sum(t); o+f > 0 {
			fs.ErrorRate = float64(f) / float64(o+f)
		}
		if rs.newest != 0 {
			fs.Newest = time.Unix(0, rs.newest).UTC()
		}
		st.Fleet = fs
	}
	return st
}

// cacheStats folds states (nil ones skipped) into one CacheStats at now:
// their windows read together, their EWMAs combined and their counters
// added up.
func cacheStats(now time.Time, states ...*stateStats) CacheStats {
	var cs CacheStats
	var qs [4]query
	var ews [4][]*EWMA
	var ok, fail int64
	for _, s := range states {
		if s == nil {
			continue
		}
		for j, w := range []*Window{&s.ttft, &s.tps, &s.tpot, &s.e2e} {
			qs[j].add(w, now)
		}
		for j, ew := range []*EWMA{&s.ttftE.e, &s.tpsE, &s.tpotE, &s.e2eE} {
			ews[j] = append(ews[j], ew)
		}
		o, f := s.ring.sum(now.UnixNano())
		ok += o
		fail += f
		// The states' counters add up saturating, as each of them does.
		addCount(&cs.Requests, s.requests)
		addCount(&cs.Successes, s.successes)
		addCount(&cs.Errors, s.errors)
		addCount(&cs.Canceled, s.canceled)
		addCount(&cs.Timeouts, s.timeouts)
		addCount(&cs.ErrorsByPhase.Connect, s.byPhase[tps.PhaseConnect])
		addCount(&cs.ErrorsByPhase.Headers, s.byPhase[tps.PhaseHeaders])
		addCount(&cs.ErrorsByPhase.FirstToken, s.byPhase[tps.PhaseFirstToken])
		addCount(&cs.ErrorsByPhase.MidStream, s.byPhase[tps.PhaseMidStream])
		addCount(&cs.InputTokens, s.input)
		addCount(&cs.CachedTokens, s.cached)
		addCount(&cs.OutputTokens, s.output)
		addCount(&cs.ReasoningTokens, s.reasoning)
		cs.CostExact.addMoney(s.cost)
	}
	if ok+fail > 0 {
		cs.ErrorRate = float64(fail) / float64(ok+fail)
	}
	for j, d := range []*Dist{&cs.TTFT, &cs.TPS, &cs.TPOT, &cs.E2E} {
		*d = dist(&qs[j], ewmaValue(combineEWMA(ews[j]...)))
	}
	cs.Cost = cs.CostExact.Float()
	return cs
}

// finite returns x, or 0 when x is NaN or infinite.
func finite(x float64) float64 {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return 0
	}
	return x
}
