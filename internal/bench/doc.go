// Package bench measures OpenAI-compatible providers under your own traffic,
// with the same measurement (package tps) that routes production calls.
//
// # Workloads
//
// A Workload sends prompts loaded from JSONL (LoadPrompts) or synthetic
// prompts of given token lengths, deterministic for a seed, with an optional
// system prompt of a given length (KV-cache pressure) and an output cap.
//
// # Load
//
// Closed loop (Config.Concurrency) runs C workers that each send the next
// request when the previous one ends. Open loop (Config.Rates) sends on a
// schedule, evenly spaced or Poisson (seeded), whether or not earlier requests
// have ended; every Result records its schedule lag, and TTFT and E2E are
// also measured from the scheduled time, so queueing is not hidden
// (coordinated omission). Several levels make a sweep. Warmup requests are
// excluded, and at least DefaultRequests (20) measured requests are required
// per configuration and target unless Config.Force is set.
//
// # Prompt cache
//
// Cold gives each request a unique nonce at the start of its prompt, so
// nothing is served from a prefix cache. Warm shares one prefix across the
// requests of a configuration and primes it with one request first. Each
// configuration is reported separately, with the cached-token counts the
// providers returned.
//
// # Targets
//
// Compare mode (the default) pins each deployment in turn, without retries
// or failover; routed mode lets the configured policy choose and fail over.
// Both send through tpsroute.Client.Do as a stream, drain the body without
// decoding it, and take the measurement from Response.Sample: every chunk is
// timed once, by the router's own tps.Tap. Errors are classified from the
// Client's typed errors. Run builds a fresh Client per configuration and
// target, so breakers and statistics never carry over.
//
// # Results
//
// Run returns a Report: a Result per measured request (schedule, timings,
// tokens, deployment, error class) and a Summary per configuration and
// target with exact percentiles (p50/p90/p95/p99, mean) of TTFT, TPS, TPOT
// and E2E, errors by class, aggregate tokens/s and goodput under an SLO.
// Reports are written as a terminal table, JSON (schema in docs/BENCH.md),
// CSV and a self-contained HTML page with inline SVG plots.
//
// # Demo
//
// Demo returns a router config of four simulated deployments (two providers
// in two regions, with prompt caches) that runs in memory, with no network
// and no keys; `tpsbench compare --demo` uses it.
package bench
