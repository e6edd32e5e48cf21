// Package route orders the deployments that can serve a call: by measured
// throughput, latency or cost, under the caller's pins and SLO, with cache
// affinity, cold-start probing and a small exploration share.
//
// # Deployments and keys
//
// A Deployment is one provider, region and model with everything needed to
// call it. Its Key (a measure.Key) names its statistics; a pinned Revision is
// part of the key, so two revisions are measured apart. A deployment whose
// Model is "*" (Wildcard) serves any model; per request it becomes a concrete
// deployment (Deployment.ForModel) whose key carries the requested model.
// NewPicker validates every deployment and rejects duplicate keys, naming the
// field at fault in a *DeploymentError.
//
// # Picking
//
// Picker.Pick returns a Plan: the deployments to try, in order, each with the
// reason for its place and the values that decided it, and the deployments
// left out. Plan.Explain renders it on one line for logs. Pick never blocks: it
// reads each candidate's statistics from a Source (*measure.Registry) and its
// state from a Health (the fallback package's executor), and allocates once
// (twice when a wildcard deployment serves the call): each Candidate points to
// the Picker's read-only copy of its Deployment instead of copying it.
// PickAt is the same at a given time.
//
// The order is decided in this sequence:
//
//  1. Model: Request.Model, then Request.Models, in order.
//  2. Health: closed breakers first, then half-open (but see the half-open
//     probe below), then deployments cooling
//     down after a Retry-After, out of limiter headroom or rate-limited by the
//     provider. Open breakers are excluded, unless every candidate is open:
//     then all are tried last (fail-open), best score first.
//  3. SLO: violators go behind compliant deployments, or are dropped with
//     SLO.Strict.
//  4. Request.Providers: the listed providers first, in that order.
//  5. Warm before cold: a deployment without enough samples is never scored
//     as fast. Under Cost the score needs no samples, so cold deployments are
//     still ordered by expected cost among themselves.
//  6. Score: the Policy (Throughput, Latency, Cost) or a custom Scorer.
//
// The first place may then be changed, in this priority: cache affinity
// (Request.CacheKey served recently by a healthy, compliant deployment, see
// Picker.Served), a half-open probe (a half-open deployment of the leading
// model, put first at most once per Options.HalfOpenProbeInterval, default
// 1 s, so that its breaker gets the call it needs to close again and a
// recovered provider wins its traffic back), a cold probe (see below), the
// exploration share (Options.Exploration, default 5%), or a draw weighted by
// Deployment.Weight among candidates within Options.Band of the best score,
// so that many callers do not herd onto one deployment. When every candidate
// of the leading tier is cold and its probes are spent, nothing ranks them, so
// the first place is drawn by weight among all of them; under Cost they are
// ranked by price, so the cheapest leads, with exploration and the band
// applying as for warm deployments.
//
// # Cold probes
//
// A cold deployment (its Estimate is not OK: too few samples) ranks behind
// warm ones, so without probes it would never be measured. A cold probe puts
// it first. Probes are limited per Options.ColdProbeInterval (default 10 s)
// in two ways:
//
//   - per deployment, by Options.ColdProbes (default 10, the samples measure
//     needs by default, so a cold deployment can be compared with warm ones
//     within one interval when traffic allows);
//   - per Picker, by Options.ColdShare (default 25%) of the interval's picks,
//     so that probing follows the traffic rather than a fixed rate: at 1
//     pick/s ten probes per 10 s would take nearly every call from the
//     measured deployments.
//
// A deployment's first probe of an interval is always given, so a new or
// recovered deployment gets its first sample quickly at any traffic; the
// probes beyond it go on while the interval's probes, other than its first,
// are fewer than ColdShare times its picks. Over K picks with D cold
// deployments that is at most ceil(ColdShare*K)+D probes. At 20 picks/s a
// cold deployment gets its ten probes within about 2 s; at 5 picks/s within
// about 7 s; at 1 pick/s about four probes per interval in all. The share
// counts with atomics and a compare-and-swap, so Pick still takes no lock.
// It applies only while a warm deployment leads: when every leading
// candidate is cold, a probe takes no call from a measured deployment, and
// only ColdProbes limits it.
//
// Very low traffic has a limit no probing removes: a deployment that gets
// fewer calls than measure's MinSamples within measure's window (by default
// 10 in 5 minutes, about 2 a minute) never becomes warm, so every deployment
// stays cold and picks are draws weighted by Deployment.Weight (by price
// under Cost). Lower measure.Options.MinSamples or lengthen the window for
// such traffic.
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
// "How estimates adapt"); a demoted deployment gets those calls only from
// exploration, so in the sim at 2 calls/s a recovered leader regains its
// share after about a minute. TTFT is read at p95 and TPS at p50 unless
// Options say otherwise.
//
// # Sources and handles
//
// A Source gives a deployment's measure.Estimate by key; *measure.Registry
// is one. A Source that is also a HandleSource (the Registry is) hands out a
// measure.EstimateHandle per key: the Picker keeps one per configured
// deployment, resolved the first time it is needed and again when it stops
// being Live (the key was pruned), so a pick reads each estimate through an
// atomic pointer instead of hashing its key. NewPicker decides once which
// kind of Source it has, and a plain Source is read through Estimate with no
// handle bookkeeping. Wildcard deployments, whose key depends on the
// request, are always read through Estimate.
//
// # Custom scorers
//
// A Scorer replaces the built-in policies. Package routetest checks one
// against the contract the Picker relies on.
//
// # Concurrency
//
// A Picker is safe for concurrent use. Its random draws come from a PCG
// generator seeded per pick from Options.Seed and an atomic counter, so a
// sequence of picks is reproducible and no lock is taken.
package route
