// Package measure is the vocabulary of tpsroute's statistics: what a user
// writes to configure them (Options, WindowOptions, Price) and reads back
// (Snapshot, Stats, Money), and the names they are kept under
// (Key, the error classes).
//
// # Overview
//
// The Client keeps, for each Key (provider, region, model, API) and, under
// it, for each tps.CacheState (unknown, cold, warm): sliding windows of
// TTFT, TPS, TPOT and E2E and of each stream's mean gap between output
// chunks, answering p50/p90/p95/p99 within 1% relative error (WindowOptions);
// time-decayed averages (Options.HalfLife); change detection, so that the
// figures routing reads describe a deployment's new level two samples after
// it fell 3×; counts of requests, successes, errors by tps.Phase and by
// class; an in-flight gauge and a load model; per prompt-size class figures;
// and token meters and exact cost from per-key prices (Price, Money).
//
// tpsroute.Config.Measure configures it; Client.Stats returns a Snapshot of
// everything, which marshals to JSON; the picker reads a per-deployment
// summary (internal/registry's Estimate) on every pick. The engine that does the
// measuring (the Registry, its windows and averages, fleet deltas, state
// files) is internal to the module (internal/registry): docs/METRICS.md
// describes what it measures, docs/STATE.md its state file.
//
// # What counts where
//
// Every sample counts in Requests, tokens and cost. A sample fails when its
// Err is set or its ErrPhase is not tps.PhaseNone; failures count in Errors,
// ErrorsByPhase, ErrorsByClass and the error rate, except those of class
// ClassCanceled (the caller gave up), which count in Canceled and
// ErrorsByClass only, and those of class ClassCaller (the caller's input was
// refused), which count in ErrorsByClass only. A failure's class is the
// one the Client gives it (the class the fallback Executor made of the
// attempt, fallback.Attempt.ErrorClass) or, for a sample recorded without
// one, one read from its Err. TTFT counts whenever a first token arrived,
// even if the stream failed later; TPS, TPOT, E2E and chunk gaps
// count for successful samples only, and TPS only when the sample's TPSOK
// is true.
//
// # Snapshot JSON
//
// A Snapshot marshals as {"at": time, "keys": [stats...]}, keys sorted by
// provider, region and model. These names are stable:
//
//	stats:       key {provider, region, model}, ttft, tps, tpot, e2e, chunk_gap,
//	             requests, successes, errors, canceled, timeouts, error_rate,
//	             errors_by_phase {connect, headers, first_token, mid_stream},
//	             errors_by_class {class: count}, implausible_usage,
//	             in_flight, newest,
//	             input_tokens, cached_tokens, output_tokens, reasoning_tokens,
//	             cost_usd, cost_exact {dollars, picodollars},
//	             cache_unknown, cache_cold, cache_warm (the same fields per
//	             cache state, without key, chunk_gap, errors_by_class,
//	             in_flight and newest)
//	distribution (ttft, tps, tpot, e2e, chunk_gap):
//	             count, p50, p90, p95, p99, mean, ewma
//
// Times are in seconds, rates in tokens per second, cost in US dollars.
// Counters are totals since the key was first seen; distributions and
// error_rate cover the window. No field is ever NaN or Inf: empty values are 0.
//
// # Concurrency
//
// Every type of the package is a plain value, safe for concurrent reads;
// Snapshot is safe for concurrent use.
package measure
