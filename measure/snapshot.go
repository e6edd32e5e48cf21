package measure

import (
	"encoding/json"
	"iter"
	"slices"
	"time"

	"github.com/tpsroute/tpsroute/internal/measurekit"
)

// Dist summarises one metric's distribution. Times are in seconds (as
// OpenTelemetry does), rates in tokens per second. Count, the quantiles and
// Mean cover the window (Options.Window); EWMA is the time-decayed average
// (for TTFT, a peak-sensitive one that jumps up at once) and may outlive the window. Empty
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

	// Fleet is what other replicas measured for this key and this one
	// merged (fleet mode, package fleet), nil when nothing was: everything
	// above is this process's own. Routing (the Registry's Estimate) reads both.
	Fleet *FleetStats `json:"fleet,omitempty"`
}

// FleetStats are the statistics other replicas contributed to one key
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

// Snapshot is an immutable view of the statistics at one time
// (tpsroute.Client.Stats). Each key is read under its own lock, so each
// key's Stats are consistent, but different keys may be read a few
// microseconds apart. The zero Snapshot is empty.
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

func init() {
	measurekit.NewSnapshot = func(at time.Time, keys []Key, stats map[Key]Stats) Snapshot {
		return Snapshot{at: at, keys: keys, stats: stats}
	}
}
