// Package route is the vocabulary of routing: the deployments a call can go
// to (Deployment), what a caller asks of one call (Request, Pin, SLO), how
// deployments are ordered (Options, Policy, a custom Scorer) and the answer
// (Plan, Candidate, the Reason values), with the errors a pick returns. The
// engine that orders deployments by measured throughput, latency or cost,
// under the caller's pins and SLO, with cache affinity, cold-start probing,
// priors, and exploration where it can change the decision, is internal to
// the module (internal/picker): the tpsroute Client runs it, configured by
// Config.Route (an Options), and hands each Plan to Config.OnDecision. This
// documentation states the rules it follows, which the Options tune.
//
// # Deployments and keys
//
// A Deployment is one provider, region and model with everything needed to
// call it. Its Key (a measure.Key) names its statistics; a pinned Revision is
// part of the key, so two revisions are measured apart. A deployment whose
// Model is "*" (Wildcard) serves any model; per request it becomes a concrete
// deployment (Deployment.ForModel) whose key carries the requested model.
// Deployment.Validate checks one deployment; the Client (tpsroute.New)
// validates every deployment and rejects duplicate keys, naming the field at
// fault in a *DeploymentError.
//
// # Picking
//
// A pick returns a Plan: the deployments to try, in order, each with the
// reason for its place and the values that decided it, and the deployments
// left out. Plan.Explain renders it on one line for logs. A pick never blocks:
// it reads each candidate's statistics from measure and its state from a
// Health (the fallback package's executor), and allocates once (twice when a
// wildcard deployment serves the call): each Candidate points to the
// picker's read-only copy of its Deployment instead of copying it.
//
// The order is decided in this sequence:
//
//  1. Model: Request.Model, then Request.Models, in order.
//  2. Health: closed breakers first, then half-open (but see the half-open
//     probe below), then deployments cooling
//     down after a Retry-After, out of limiter headroom (including a
//     concurrency limit the executor learnt from 429s answered while other
//     calls were in flight to it: at the limit, a deployment is behind the
//     others until one of its calls ends) or rate-limited by the
//     provider. Open breakers are excluded, unless every candidate is open:
//     then all are tried last (fail-open), best score first.
//  3. SLO: violators go behind compliant deployments, the one closest to
//     meeting the SLO first (SLO distance: the log excess over each violated
//     limit), or are dropped with SLO.Strict. MaxTTFT is judged on the
//     window's percentile, not the peak-sensitive EWMA, so one slow first
//     token does not demote a deployment.
//  4. Request.Providers: the listed providers first, in that order.
//  5. Warm before cold: a deployment with fewer than 3 successful samples
//     in its window, no prior (Deployment.Expected) and no earlier
//     measurement is cold and never scored as fast. Under Cost the score
//     needs no samples, so cold deployments are still ordered by expected
//     cost among themselves. A deployment measured before stays warm when
//     its window empties: it is ranked on the level it last showed and
//     re-measured by exploration, not probed as new.
//  6. Score: the Policy (Throughput, Latency, Cost) or a custom Scorer.
//
// The first place may then be changed, in this priority: cache affinity
// (Request.CacheKey served recently, within Options.AffinityTTL, by a
// healthy, compliant deployment whose call succeeded), a half-open probe (a half-open deployment of the leading
// model, put first at most once per Options.HalfOpenProbeInterval, default
// 1 s, so that its breaker gets the call it needs to close again and a
// recovered provider wins its traffic back), a cold probe (see below),
// exploration (see below), or a draw weighted by
// Deployment.Weight among candidates within Options.Band of the best score,
// so that many callers do not herd onto one deployment. When every candidate
// of the leading tier is cold and its probes are spent, nothing ranks them, so
// the first place is drawn by weight among all of them; under Cost they are
// ranked by price, so the cheapest leads, with exploration and the band
// applying as for warm deployments.
//
// # Exploration
//
// A pick re-measures a deployment other than the leader with the chance
// that it would now lead, as Thompson sampling would: every warm, healthy
// deployment of the leading model, compliant or not, has a level (log TPS,
// log TTFT, or its SLO distance) uncertain by its per-sample spread over its
// samples plus a drift that grows with the time since its newest sample,
// and it is explored with the normal tail probability of its gap to the
// leader. A clearly worse deployment measured recently is therefore almost
// never explored, so exploration does not inflate the tail; a near-equal or
// long-unseen one is (unseen five minutes counts as one more sample's
// spread). A deployment that led within the last 10 minutes and fell
// behind is also judged at its best remembered level (a running mean of
// its better levels, not the luckiest estimate) with weight
// min(1, unseen/50 s), so that at r picks/s a demoted leader is re-measured
// about every sqrt(100/r) seconds (10 s at 1/s, 3 s at 10/s) and regains
// the lead within seconds of recovering: when its newest sample begins a
// change back toward its best (registry.Estimate.TPSPending), the next pick
// that finds it with no call in flight re-measures it, until the change is
// confirmed or refuted. Under Cost a cheaper deployment that would comply is
// judged by its margin inside the SLO, and a dearer deployment is
// never explored (its cost is known). A leader with calls in flight whose
// load dependence is untested (every call at one steady load, so nothing
// shows whether its streams slow as others join) gives the next candidate
// at least a 10% chance, so that its load varies and the slope shows or is
// ruled out. Options.Exploration caps the share of picks that explore
// (default 20%); in a steady fleet far fewer do.
// Half-open deployments have their own probes (above).
//
// # Priors
//
// Deployment.Expected gives figures (TPS, TTFT) to expect before
// measurements, worth 3 samples: the Expected statistics are the geometric
// mix of the prior and the measurements, the prior weighted 3/(3+n) with n
// samples in the window, so a new deployment is ranked (and may lead) from
// its first pick and its prior fades as it is measured.
//
// # Cold probes
//
// A cold deployment (no successful sample, no prior, never measured
// before) ranks behind warm ones, so without probes it would never
// be measured. A cold probe puts it first: of the leading tier's cold
// deployments with no call in flight, the one with the fewest samples, so
// that they are probed in turn, one call at a time each, and compared,
// their remaining uncertainty left to exploration, after one sample each. Probes are limited per Options.ColdProbeInterval
// (default 10 s) in two ways:
//
//   - per deployment, by Options.ColdProbes (default 10);
//   - per picker (the Client has one per API it serves), by
//     Options.ColdShare (default 25%) of the interval's picks,
//     so that probing follows the traffic rather than a fixed rate: at 1
//     pick/s ten probes per 10 s would take nearly every call from the
//     measured deployments.
//
// A deployment's first probe of an interval is always given, so a new or
// recovered deployment gets its first sample quickly at any traffic; the
// probes beyond it go on while the interval's probes, other than its first,
// are fewer than ColdShare times its picks. Over K picks with D cold
// deployments that is at most ceil(ColdShare*K)+D probes. The share
// counts with atomics and a compare-and-swap, so a pick still takes no lock.
// It applies only while a warm deployment leads: when every leading
// candidate is cold, a probe takes no call from a measured deployment, and
// only ColdProbes limits it.
//
// Very low traffic has a limit: a deployment whose window never holds a
// successful sample (by default a 5-minute window) is cold until it does,
// and one measured before keeps the level it last showed, however old.
// Lengthen measure's window for such traffic.
//
// # Estimates
//
// A deployment's Expected statistics blend the windowed percentile with the
// EWMA and take the more pessimistic: the higher TTFT, the lower TPS. TTFT
// rises show on the next sample (the TTFT EWMA is peak-sensitive). A change
// of level is detected by measure (a CUSUM on log TPS and log TTFT): once
// detected, the Estimate reports the new level rather than the window, so a
// TPS that falls 3× shows after two of the deployment's own calls, whatever
// its history, and a recovery shows after two calls too (docs/ROUTING.md,
// "How estimates adapt"); a demoted deployment gets those calls from
// exploration (above). TTFT is read at p95 and TPS at p50 unless Options
// say otherwise.
//
// With measure's statistics (the Client's), the Expected statistics are then
// fitted to the call: a request's ExpectedInputTokens selects its prompt-size
// class, whose own TPS and TTFT ratio are used once the class is warm (10
// samples; the aggregate before), and where measure has fitted a load model
// the TPS is the EWMA scaled to the deployment's calls in flight now.
// Expected.MarginalTPS is that TPS minus the slowdown the call would cause
// the calls already there; the Throughput policy ranks by it, so traffic
// spreads off a load-sensitive leader before it saturates (docs/ROUTING.md,
// "Load and prompt size").
//
// A call in flight tells something before it ends. When the request states
// its output cap (max_tokens, through the tpsroute Client; not
// Request.ExpectedOutputTokens, an expected size that an answer may exceed),
// measure times each call in flight (Registry.BeginCallAt),
// and a pick reads how far past its time, at the deployment's call TTFT and
// TPS now, the most overdue of them is (registry.Overdue): from twice that
// time on, the call TPS is divided by the ratio, the most the stalled call
// can be getting. A deployment whose calls have stalled thus ranks below
// the others before the first of them ends and before measure has seen two
// of them (in the simulator's noisy scenario its slow calls take five
// times as long); when they end, their samples decide. The cap bounds the
// answer from above, so a call that is merely long never reads as stalled.
// TTFT and the SLO check are not affected.
//
// # Custom scorers
//
// A Scorer replaces the built-in policies (Options.Scorer, Request.Scorer).
// Package routetest checks one against the contract the picker relies on.
//
// # Concurrency
//
// Every type of the package is a value or immutable once built and safe for
// concurrent reads; each says so. The picker's random draws come from a PCG
// generator seeded per pick from Options.Seed and an atomic counter, so a
// sequence of picks is reproducible and no lock is taken.
package route
