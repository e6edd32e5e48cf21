// Tpsbench measures OpenAI-compatible providers under your own traffic:
// TTFT, generation tokens/s, TPOT and end-to-end latency at p50/p90/p95/p99,
// cold and warm prompt caches, closed- and open-loop load, goodput under an
// SLO, with terminal, JSON, CSV and HTML reports. It also scores routing
// policies in simulated fleets. It is a thin shell around internal/bench and
// internal/sim, and reads its router configuration with package config.
//
// Usage:
//
//	tpsbench run     [flags]   one configuration (compare mode unless -routed)
//	tpsbench compare [flags]   every deployment pinned in turn, same load
//	tpsbench sweep   [flags]   several -concurrency levels or -rate values
//	tpsbench report  FILE      re-render a report.json (table, CSV, HTML)
//	tpsbench sim     [flags] SCENARIO...  score routing policies in a simulated fleet
//	tpsbench sim     -random N [-seed S] [-class C] [-calls K]
//
// # Measuring
//
// run, compare and sweep take the deployments from -config FILE (the schema
// of docs/CONFIG.md; each key from the environment variable the file names)
// or from --demo (four simulated deployments in memory: no network, no
// keys). The load is closed-loop at each -concurrency level, or open-loop at
// each -rate (evenly spaced, or Poisson with -poisson). run and compare take
// one level and sweep at least two. compare pins each deployment (or each of
// -targets) in turn under the same load, without failover; run does too, or
// with -routed sends through the router, which picks and fails over; sweep
// does either. Each prints a table, and with -o DIR writes report.json,
// results.csv and report.html. report reads a report.json written before,
// judges it against a new -slo if one is given, prints its table, and with
// -o DIR writes the three files again.
//
// # Simulating
//
// sim runs each SCENARIO (a JSON file or a bundled name) through a real
// tpsroute.Client over simulated deployments, in real time, and scores the
// Client's defaults against an oracle and the common baselines (-policies
// picks some); it prints a table (-format table, markdown or json) and with
// -o DIR writes report.json and report.html. sim -random N instead scores N
// fleets drawn by the generator from seed S on, in virtual time, and prints
// each policy's ratio to the oracle over all fleets and per class.
//
// Exit codes: 0 success; 1 the run failed (no request succeeded, a file
// could not be written); 2 bad usage or config; 3 an -slo was given and a
// configuration missed it; 130 interrupted (partial results written).
//
// See docs/BENCH.md for every flag and the report schema.
package main
