// Package telemetry exports what tpsroute measures through the OpenTelemetry
// API: the GenAI client metrics and spans of the OpenTelemetry semantic
// conventions (version SemconvVersion), and tpsroute's own instruments under
// the "tpsroute." prefix. It depends on the API packages only; without an SDK
// installed every instrument and span is a no-op.
//
// The root package creates one Telemetry per Client (Config.MeterProvider,
// Config.TracerProvider) and one Call per routed call, which the fallback
// executor feeds through the root's executor.Feedback where each attempt
// ends. Users
// do not need this package unless they read its names and bucket boundaries.
//
// # Instruments
//
// Operation (one routed call, as the caller sees it), with the attributes
// gen_ai.operation.name ("chat", for chat completions, the Responses and the
// Messages APIs; "embeddings"), gen_ai.provider.name, gen_ai.request.model,
// gen_ai.response.model, server.address, server.port and tpsroute.region of
// the last deployment tried, and error.type on failure:
//
//   - gen_ai.client.operation.duration (s, DurationBuckets)
//   - gen_ai.client.token.usage ({token}, TokenBuckets), with gen_ai.token.type
//     input or output: the tokens of every attempt that started, as billed
//   - gen_ai.client.operation.time_to_first_chunk (s, DurationBuckets), from
//     the call's start to its first output chunk, streaming calls only
//   - gen_ai.client.operation.time_per_output_chunk (s, ChunkBuckets), the gap
//     before each output chunk after an attempt's first, streaming calls only;
//     recorded per chunk, it carries only gen_ai.operation.name,
//     gen_ai.provider.name, gen_ai.request.model, server.address and
//     server.port
//
// Attempts and routing, with the deployment's attributes (provider, region,
// models, server) and no operation name:
//
//   - tpsroute.attempts ({attempt}), with tpsroute.outcome, tpsroute.class and
//     tpsroute.phase
//   - tpsroute.attempt.time_to_first_chunk (s, DurationBuckets)
//   - tpsroute.generation.tps ({token}/s, TPSBuckets)
//   - tpsroute.failovers ({failover}), with tpsroute.from and tpsroute.class
//   - tpsroute.continuations ({continuation})
//   - tpsroute.rescues ({rescue}): a stream too slow, left for a faster
//     deployment (fallback.Attempt.Rescued), on the slow deployment
//   - tpsroute.route.decisions ({decision}), with tpsroute.reason
//   - tpsroute.breaker.state ({state}: 0 closed, 1 half-open, 2 open)
//   - tpsroute.inflight ({request})
//   - tpsroute.cost (USD)
//   - tpsroute.usage.implausible ({attempt}), with tpsroute.reason: an
//     attempt whose reported usage was not trusted (tps.Sample.Implausible:
//     over-streamed, negative or no-visible), as measure counts
//     Stats.ImplausibleUsage
//
// # Cardinality
//
// Every attribute value comes from the configured deployments or from fixed
// names. A model that a wildcard deployment served and no deployment names is
// reported as Other ("_OTHER"), so callers that invent model names cannot
// create series.
//
// # Spans
//
// A call is a client span named "chat {model}" under the span of the
// caller's context. Each attempt is a child span "tpsroute.attempt" with the
// deployment, outcome, class and phase, and a "tpsroute.first_output_chunk"
// event. The call's span gets "tpsroute.failover" and "tpsroute.continuation"
// events when an attempt follows a failed one.
package telemetry
