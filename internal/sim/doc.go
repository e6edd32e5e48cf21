// Package sim scores routing policies in simulated fleets against an oracle
// and the common baselines.
//
// A Scenario (JSON; see Bundled and ParseScenario) describes deployments
// whose time to first token and per-stream speed depend on the phase of the
// scenario, their own concurrent streams, the prompt size and random slow
// periods, with failure rates by kind, and a workload (closed loop or open
// loop) of bench prompts. Run sends the workload through a real
// tpsroute.Client whose HTTP transport reaches the simulated deployments in
// memory (replay handlers with a replay.Func script), so the Client's
// routing, fallback, breakers and measurement are the production code.
//
// # Policies
//
// A Policy chooses each call's deployment; the call is then pinned to it with
// tpsroute.WithPin, failover still allowed, so every policy is served by the
// same Client and only the first choice differs. Defaults lets the Client
// route on its own. The baselines follow their published behaviour:
// RoundRobin, Random, LiteLLM (latency-based routing), P2C (power of two
// choices with peak-EWMA latency), OpenRouter (price-weighted inverse
// square with outage demotion and percentile cutoffs) and Mean10 (the mean
// TPS of each deployment's last 10 calls, random within 10% of the best). Oracle knows every
// deployment's true parameters at each call and picks the best under the
// scenario's objective; each call of any policy records whether it went to
// that truly best deployment (Call.TrueBest, Summary.TrueBest).
//
// # Random fleets
//
// Generate draws a fleet and workload from a documented space (Space,
// Classes: drift, batching, width, steps, tails, limits, cuts), seeded and
// reproducible; generated scenarios are Live (each chunk paced at the
// deployment's speed of that moment). ScoreFleet scores the policies on
// one fleet against the oracle, and a Distribution summarises many: the
// median, p10 and worst ratio and the share of fleets in which a baseline
// beats the defaults by more than 5%, overall and per class, and the class
// checks. "tpsbench sim -random N" prints it.
//
// # Time
//
// Run uses the real clock: inside a testing/synctest bubble a scenario of
// any length runs in virtual time, instantly and deterministically; outside,
// as in "tpsbench sim", it runs in real time.
//
// # Reports
//
// Compare runs several policies and fills ratios; a Report writes a table,
// JSON, Markdown or, with WriteHTML, an offline page with inline SVG plots of
// each deployment's share and the delivered TPS over time.
package sim
