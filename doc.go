// Package tpsroute routes chat-completion calls across OpenAI-compatible
// providers on what it measures of each call under your own conditions.
//
// The same model served by two providers, or by one provider in two regions,
// can differ twofold in tokens per second. tpsroute times every stream
// (package tps), keeps per-deployment statistics (package measure), orders the
// deployments for each call (package route), and walks that order with circuit
// breakers, Retry-After, backoff and deadlines (package fallback). Package
// replay records real provider streams and replays them, with faults, for tests.
//
// # Data flow
//
//	caller -> route.Picker.Pick -> fallback walks the Plan -> provider
//	       <- tps times the stream <- measure.Registry.Record(key, sample)
package tpsroute
