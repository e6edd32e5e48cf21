// Package picker is route's engine: the Picker, which orders the
// deployments that can serve a call into a route.Plan. It reads each
// candidate's statistics from a Source (measure's Registry) and its breaker
// and limiter state from a Health (fallback's executor), scores and
// ranks them, chooses the first place (cache affinity, half-open and cold
// probes, exploration, the weighted band) and materialises the Plan. The
// rules it follows, and what each Options field tunes, are route's
// documentation.
//
// # Who uses it
//
// The tpsroute Client builds one Picker per API it serves in tpsroute.New
// and calls Pick for every call; fleet, internal/sim and internal/bench
// reach it through the Client. It is internal so that the module's public
// API stays the vocabulary users write and read (route.Deployment,
// route.Request, route.Options, route.Plan): nothing outside the module
// needs the engine itself.
//
// # Sources and handles
//
// A Source gives a deployment's registry.Estimate by key; *registry.Registry
// is one. A Source that is also a HandleSource (the Registry is) hands out a
// registry.EstimateHandle per key: the Picker keeps one per configured
// deployment, resolved the first time it is needed and again when it stops
// being Live (the key was pruned), so a pick reads each estimate through an
// atomic pointer instead of hashing its key. New decides once which kind of
// Source it has, and a plain Source is read through Estimate with no handle
// bookkeeping. Wildcard deployments, whose key depends on the request, are
// always read through Estimate.
//
// # The seam with route
//
// The Picker fills parts of route's types that users read but never set (an
// Expected's call factors, a Candidate's precomputed key) and applies rules
// kept with those types (an SLO's check, a Policy's score). route hands
// them over unexported, through internal/routekit (kernel.go here), so none
// of it is on the public surface.
//
// # Concurrency
//
// A Picker is safe for concurrent use: Pick never blocks and takes no lock.
// Its random draws come from a PCG generator seeded per pick from
// route.Options.Seed and an atomic counter, so a sequence of picks is
// reproducible.
package picker
