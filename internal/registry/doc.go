// Package registry is the statistics engine behind package measure: the
// Registry, which keeps per-deployment statistics of LLM streams and
// publishes the cheap summary (Estimate) that routing reads on
// every call, and its plumbing (windows, EWMAs, change detectors, the load
// model, calls in flight, fleet deltas, state files).
//
// Its users are inside the module: the root package's Client makes one
// Registry (New, from tpsroute.Config.Measure) and records every attempt in
// it; route's Picker reads its Estimates through handles; fleet exports its
// Deltas and merges other replicas' (Exporter, MergeAt); internal/sim and
// internal/bench drive it on a virtual clock. It is internal so that the
// public API stays the vocabulary: users write measure.Options and
// measure.Key, and read measure.Snapshot, measure.Stats and
// Estimate (through tpsroute.Client), never the engine.
// docs/ARCHITECTURE.md, "The public surface", says which names went where.
//
// # Overview
//
// A Registry keeps, for each measure.Key (provider, region, model) and,
// under it, for each tps.CacheState (unknown, cold, warm):
//
//   - sliding windows (Window) of TTFT, TPS, TPOT and E2E, and per key of
//     each stream's mean gap between output chunks, answering p50/p90/p95/p99
//     within 1% relative error;
//   - time-decayed averages: a PeakEWMA of TTFT (peak-sensitive, as in
//     Finagle's and Linkerd's balancers) and EWMAs of TPS, TPOT, E2E and gaps;
//   - change detection on log TPS and log TTFT (a two-sided CUSUM scaled to
//     each series' spread), so that the Estimate describes a deployment's new
//     level two samples after it fell 3×, not after the window ages, and
//     shows a change it has begun to see before it confirms it
//     (Estimate.TPSPending, TTFTPending);
//   - counts of requests, successes, errors by tps.Phase and by class,
//     timeouts and cancellations, and a windowed error rate;
//   - an in-flight gauge (Registry.Begin), followed over time, and a load
//     model fitted from it: how a stream's TPS falls with the other calls in
//     flight, at its start or on average over its generation, whichever
//     explains more, or within each stream as others join and leave, 1/TPS
//     linear in their number (Estimate.LoadK, LoadFactor), and whether the
//     load has varied too little to tell (Estimate.LoadUntested);
//   - the start and output cap of up to 4 calls in flight
//     (Registry.BeginCallAt), so that a reader can ask how overdue the most
//     overdue of them is at the figures it expects (Overdue) before they
//     end;
//   - per prompt-size class (log2 buckets of input tokens, InputClass),
//     EWMAs of TPS and TTFT (Estimate.Input);
//   - input, cached, output and reasoning token meters, and cost from
//     per-key prices, summed exactly in picodollars (Money).
//
// What a Registry counts where, and the JSON names of its Snapshot, are the
// vocabulary's: see package measure.
//
// Registry.Estimate returns the per-key Estimate route reads on every pick,
// without locks or allocation. Registry.Handle returns an EstimateHandle that
// reads the same Estimate without hashing the key, until the key is pruned
// (EstimateHandle.Live); route's Picker reads its deployments through
// handles, which saves a map lookup per candidate (see docs/PERFORMANCE.md).
// Registry.Snapshot returns an immutable Snapshot of everything, which
// marshals to JSON.
//
// # Time
//
// Every time-dependent method has a twin taking now: RecordAt, BeginAt
// (and BeginCallAt), SnapshotAt, PruneAt, and Window and EWMA methods all take now. Record uses
// the sample's end, s.Start + s.Total (time.Now() when s.Start is zero).
// Windows are aligned on the Unix epoch, so that windows from different
// processes line up.
//
// # Windows
//
// A Window is a ring of Buckets sub-windows over Length (defaults: 10 × 30 s
// over 5 minutes). Each sub-window is a DDSketch: sketches-go's logarithmic
// index mapping, reimplemented here (1% relative accuracy), over a compact
// store of 16-bit bin counts that widen to 32 bits when needed and collapse
// the lowest bins past MaxBins, so memory stays bounded whatever is
// recorded. A query merges the live sub-windows. At time now the window
// holds the current sub-window and the Buckets-1 before it (and any newer
// than now, which a query at an earlier time does not hide): between 90%
// and 100% of Length by default. Negative, NaN and infinite values are
// rejected. store.go says why the mapping and store are not sketches-go's.
//
// Windows encode (MarshalBinary), decode and Merge, exactly: merging two
// windows gives the window of the union. That is how a fleet of instances
// can share what each has measured. Each sub-window's sketch is encoded in
// the sketches-go binary format, which sketches-go's ddsketch.DecodeDDSketch
// reads with the same counts and quantiles; the separate module in
// measure/testdata/sketchescompat tests that, since the ddsketch package needs
// google.golang.org/protobuf, which this module does not require.
//
// # Estimates and staleness
//
// Each key publishes its Estimate through an atomic pointer. While samples
// arrive it is republished at least every Options.Refresh (100 ms) of sample
// time, and on every success while it is not yet OK; Snapshot and PruneAt
// also republish it. So a published Estimate misses at most the last 100 ms of
// samples, and when samples stop it keeps describing the last ones until the
// next Record, Snapshot or Prune: Estimate.Newest gives their age. InFlight
// is read live. An Estimate is OK once the window holds Options.MinSamples
// (10) successful samples; a key with no data is never "fast".
//
// # Fleets: deltas and merges
//
// Several Registries (the replicas of a service) can pool what they measure.
// An Exporter (Registry.NewExporter) returns, per key, a Delta of what the
// Registry measured since the last committed export: the values added to
// each TTFT and TPS sub-window (exact DDSketch bins), the outcomes per
// sub-window, the weighted sums and weights the averages gained, and the
// meters' increments, cache states folded. Registry.MergeAt merges another
// Registry's Delta into a per-key remote layer that every published Estimate
// includes: quantiles over local and remote sub-windows together, the error
// rate over both, the EWMAs by sum and weight. Record does no extra work for
// either; measure.Stats.Fleet shows the remote layer. Package fleet moves Deltas
// between replicas through Redis.
//
// # State files
//
// SaveState writes every key's windows, EWMAs, change detectors, outcome
// counts, counters and meters to a versioned, checksummed binary format
// (docs/STATE.md), with times as Unix nanoseconds; RestoreState fills an
// empty Registry from it as of a given time, so a file saved three minutes
// ago restores statistics three minutes older. A malformed file is a typed
// error (measure.ErrStateFormat, ErrStateVersion, ErrStateCorrupt, ErrIncompatible)
// and restores nothing; a file that is not a state file is refused after
// its first 5 bytes. A damaged key record in a whole file is skipped
// (RestoreInfo.BadKeys) and the rest restored. Counters and meters
// saturate at what a state file holds, so a Registry never saves a state
// it would refuse. The root's Config.StateFile uses them.
//
// # Memory and speed
//
// Keys idle (no Record or Begin, nothing in flight) for longer than
// Options.TTL (15 minutes) are dropped by Record at most once per half TTL,
// and by SweepAt, which republishes every kept key's Estimate at most once
// per second so that a key left idle turns cold; the Registry starts no
// goroutines. With the default
// windows a key holds under 64 KiB after a million samples, with all three
// cache states in use. Record takes only its key's mutex and allocates
// nothing in steady state; Estimate takes no lock. See docs/PERFORMANCE.md.
//
// # Concurrency
//
// Registry and Snapshot are safe for concurrent use. Window, EWMA and
// PeakEWMA are not; the Registry guards its own with a per-key mutex.
package registry
