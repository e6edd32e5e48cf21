package registry

import (
	"cmp"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/tpsroute/tpsroute/measure"
	"github.com/tpsroute/tpsroute/tps"
)

func compareKeys(a, b measure.Key) int {
	return cmp.Or(strings.Compare(a.Provider, b.Provider), strings.Compare(a.Region, b.Region), strings.Compare(a.Model, b.Model), strings.Compare(a.API, b.API))
}

// Snapshot returns the statistics of every key at time.Now(); see SnapshotAt.
func (r *Registry) Snapshot() measure.Snapshot { return r.SnapshotAt(time.Now()) }

// SnapshotAt returns the statistics of every key with windows read at now.
// It also refreshes each key's published Estimate. It does not prune.
func (r *Registry) SnapshotAt(now time.Time) measure.Snapshot {
	m := *r.keys.Load()
	stats := make(map[measure.Key]measure.Stats, len(m))
	for k, e := range m {
		stats[k] = r.stats(e, now)
	}
	return newSnapshot(now, slices.SortedFunc(maps.Keys(m), compareKeys), stats)
}

var distQs = []float64{0.5, 0.9, 0.95, 0.99}

func dist(q *query, ewma float64) measure.Dist {
	d := measure.Dist{Count: int64(q.n), EWMA: finite(ewma)}
	if q.n > 0 {
		var out [4]float64
		q.quantiles(distQs, out[:])
		d.P50, d.P90, d.P95, d.P99 = finite(out[0]), finite(out[1]), finite(out[2]), finite(out[3])
		d.Mean = finite(q.sum / float64(q.n))
	}
	return d
}

func ewmaValue(v float64, _ bool) float64 { return v }

func (r *Registry) stats(e *entry, now time.Time) measure.Stats {
	e.mu.Lock()
	defer e.mu.Unlock()
	r.refresh(e, now)
	t := now.UnixNano()
	st := measure.Stats{Key: e.key, InFlight: e.inflight.Load(), ErrorsByClass: maps.Clone(e.classes), ImplausibleUsage: e.implausible}
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
		fs := &measure.FleetStats{Requests: rs.requests, Errors: rs.errors, InputTokens: rs.input, CachedTokens: rs.cached,
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
func cacheStats(now time.Time, states ...*stateStats) measure.CacheStats {
	var cs measure.CacheStats
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
		addMoney(&cs.CostExact, s.cost)
	}
	if ok+fail > 0 {
		cs.ErrorRate = float64(fail) / float64(ok+fail)
	}
	for j, d := range []*measure.Dist{&cs.TTFT, &cs.TPS, &cs.TPOT, &cs.E2E} {
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
