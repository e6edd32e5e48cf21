// Package fleet makes the replicas of a service act as one router: they
// share measurements, breakers, rate limits, cache affinity and which
// deployment holds each stored Responses API response through Redis.
//
// # Model
//
// A Fleet joins one tpsroute.Client (set Config.Fleet; tpsroute.New calls
// Join). One background goroutine per Fleet, stopped by Close, talks to
// Redis every Options.Sync (default 1 s):
//
//   - Measurements: it exports what the Client's statistics Registry
//     (internal/registry) measured since the last successful publish (its
//     Exporter: new DDSketch bins per sub-window, outcomes, EWMA sums and
//     weights, meters), appends them to the fleet's stream, reads what the
//     other replicas appended, and merges it into the Registry
//     (Registry.MergeAt). A replica routes on the merge of the fleet's data
//     and its own newest samples.
//   - Breakers: a breaker that trips on one replica is recorded with its
//     half-open time; the others keep the deployment off until then, and
//     exactly one replica (the one whose SET NX wins) sends the half-open
//     probe. A failed probe reopens it for the interval the prober's own
//     breaker reports when that breaker set the record's interval
//     (fallback.BreakerSettings: traffic-proportional), else for twice as
//     long, at most 60 s.
//   - Limits: Deployment.Limits.RPM and TPM hold across the fleet. Each
//     replica leases small batches of units from a GCRA kept in Redis (a Lua
//     script, atomic) and spends them locally.
//   - Cache affinity: the cache keys a deployment served (hashed by the
//     Client) are shared, so the next call with that key on any replica
//     prefers the same deployment.
//   - Responses state: which deployment holds each stored Responses API
//     response and conversation (Owned) is written to Redis for
//     Options.ResponseTTL (30 days), so that a follow-up landing on
//     another replica goes to that deployment (Owner).
//
// # Failure
//
// Redis is never on a call's critical path: calls read only memory
// (executor.Shared's methods, Served and Owned). The one bounded exception
// is Owner, for a Responses id the Client does not know: one GET, at most
// 50 ms, and none while the last round found Redis unreachable. When Redis is slow or down, the
// round fails, the Fleet logs once, Status says Connected false, and every
// replica routes, trips breakers and limits alone (with the local
// x/time/rate limiters); when Redis is back the next round rejoins.
//
// go-redis itself logs failed dials through its package-level logger
// (redis.SetLogger), which this package leaves alone since other code in the
// program may use go-redis; a program that wants only the Fleet's line
// silences it, as the gateway does.
//
// # Safety
//
// Keys are "tpsroute:v<SchemaVersion>:<name>:..."; values hold numbers,
// deployment keys (provider/region/model) and hashed cache keys, never API
// keys, prompts or completions. Every key expires when no replica refreshes
// it. The URL may carry AUTH (redis://user:pass@host) and TLS (rediss://);
// beyond loopback use both: whoever can write the fleet's keys can steer its
// routing.
//
// Redis cannot exhaust the process: every reply is checked as it is read,
// and the replies to one request may declare at most 64 MiB (go-redis
// would otherwise allocate what a reply header claims, 4.9 GiB for
// "*2000000000"). A reply past a limit, or one that is not RESP2, fails the
// round like an unreachable Redis, and the replicas route on local data.
// docs/FLEET.md has the trust model.
//
// See docs/FLEET.md for the merge semantics, memory per key and a
// three-replica example.
package fleet
