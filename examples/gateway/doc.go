// Command gateway is an OpenAI-compatible HTTP gateway built on tpsroute: any
// language's OpenAI client points its base URL at it and gets measured
// routing, failover before the first token, honest mid-stream errors and a
// live view of every deployment.
//
// # Running
//
// The gateway is a module of its own (its go.mod replaces tpsroute with the
// checkout two directories up), so that the OpenTelemetry SDK and the
// Prometheus client stay out of the core module's go.mod:
//
//	cd examples/gateway
//	go run . -config gateway.json      # the shared schema of docs/CONFIG.md
//	go run . -demo                     # simulated providers, no network, no keys
//
// Flags: -addr host:port (default 127.0.0.1:8080, loopback), -auth-token-env
// NAME (accepted bearer tokens, comma-separated, in that variable), -max-body
// bytes (default 4 MiB), -max-in-flight N (chat-completion requests served at
// once, default 1024; one more is answered 429 with Retry-After: 1 before its
// body is read), -drain duration (default 30s), -otlp URL (export a
// trace per call over OTLP/HTTP), -state FILE (the routing statistics kept
// across restarts, docs/STATE.md), -v (log each request).
// SIGINT or SIGTERM stops accepting connections, lets in-flight streams finish
// until -drain has passed, then cuts the rest, which cancels their upstream
// calls; /healthz answers 503 while draining. With -state the statistics are
// then written one last time.
//
// # Endpoints
//
//   - POST /v1/chat/completions, streaming or not. Fields the gateway does not
//     know pass through byte for byte; "models" and "provider" are read and
//     removed.
//   - POST /v1/embeddings, a batch kept whole, the provider's answer as sent.
//   - POST /v1/responses (OpenAI's Responses API) and POST /v1/messages
//     (Anthropic's Messages API), streaming or not, with the same
//     directives, limits, metrics and debug page, routed only to the
//     deployments that declare the API ("apis" in the config file); nothing
//     is translated between APIs (a model not served on the API is a 404
//     api_not_served; on /v1/messages a not_found_error). Every error on
//     /v1/messages, before the stream or inside it, is in Anthropic's shape
//     ({"type":"error","error":{"type","message"}}, 529 overloaded_error
//     where the other doors answer 503), so anthropic-sdk-go reads it. Their
//     streams are relayed as sent: no [DONE] is added, and a failure after
//     the first output ends the stream with the API's own error event
//     ("event: error", in the Responses or the Messages shape). On /v1/messages the caller's anthropic-version and
//     anthropic-beta go upstream (a deployment's own anthropic-version
//     wins), and the gateway's token may come as x-api-key.
//   - GET /v1/models: the logical models.
//   - GET /healthz: no authentication.
//   - GET /debug/tpsroute: a JSON snapshot (per deployment: breaker, traffic
//     share, in-flight, error rate, TTFT and TPS percentiles; the Picker's
//     counters under "route", with snake_case keys such as "picks" and
//     "cold_probes"; measure's full Snapshot).
//   - GET /debug/tpsroute/ui: a page whose plain script (ui/ui.js, no build
//     step, no external asset) polls GET /debug/tpsroute/history every 2 s and
//     redraws in place: per deployment, traffic share, TTFT p50 and TPS p50
//     over the last five minutes as inline SVG sparklines, breaker state,
//     error rate, in-flight; and the recent failovers.
//   - GET /debug/tpsroute/history: the page's data (samples every 2 s, kept
//     for five minutes, and the last 20 failed attempts).
//   - GET /metrics: the Client's OpenTelemetry metrics (GenAI semantic
//     conventions and tpsroute's own, docs/OBSERVABILITY.md) in the
//     Prometheus exposition format, through the OpenTelemetry Prometheus
//     exporter, plus the Go runtime and process collectors.
//
// Another method on a known endpoint is a 405 with an Allow header; an
// unknown endpoint is a 404. Every JSON name is snake_case.
//
// # Routing directives
//
// In the body, following OpenRouter's conventions: "models" (ordered model
// fallbacks; the first is the model when "model" is absent) and "provider":
// order, allow_fallbacks, only, ignore, sort (price, throughput, latency),
// max_price (USD per million tokens: a number for output, or {prompt,
// completion}; a hard cap), preferred_min_throughput (tokens/s) and
// preferred_max_latency (seconds to first token), which demote the
// deployments that miss them. Headers: X-Route-Region (a region, or a
// comma-separated list) and X-Route-Provider ("provider" or
// "provider/region": tried first). prompt_cache_key and cache_control are
// sent only to deployments that declare the cache_control capability, and
// prompt_cache_key also keeps a conversation on the deployment that served
// it. Unknown provider fields, unknown providers and regions, and malformed
// values are 400 errors naming the field. Each list ("models", order, only,
// ignore, X-Route-Region) holds at most 128 distinct entries (a repeated one
// is dropped), and a body nesting arrays and objects deeper than 128 levels is
// refused before anything parses it (docs/CONFIG.md, Limits).
//
// Every answer names the deployment that served it in X-Tpsroute-Deployment
// ("provider/region/model") and the upstream attempts in X-Tpsroute-Attempts.
//
// # Failures
//
// Before the first output chunk a failure fails over invisibly. After it, by
// default (fallback.mid_stream "same_model"), the stream continues on a
// deployment of the same model with assistant_prefill, from exactly the text
// the client has received; with none (or with "error") the client receives
// data: {"error":{...,"code":"stream_interrupted"}} and no [DONE]. With
// "continue" deployments of other models may continue it too; the log record
// of a stream that failed names why it was not continued (no_continuation=).
// A call that nothing
// answered gets an OpenAI-shaped error with the last attempt's HTTP status,
// or 503 when no deployment gave one (on /v1/messages Anthropic's shape, and
// 529 overloaded_error for that 503). Upstream API keys are never forwarded
// to another deployment, and never appear in answers or logs.
//
// # Composition
//
// The gateway sits on tpsroute.Client, built with tpsroute.New from the
// tpsroute.Config that config.ParseLookup reads. Each request's directives
// become one route.Request (Models, Providers, Only, Ignore, Policy, SLO for
// preferred_*, PriceCap for max_price, Regions, Pin, NoFallbacks), passed
// whole with tpsroute.WithRequest, and Client.Do returns the
// committed attempt's SSE bytes, relayed untouched, with the deployment that
// answered and the attempts. Client.HTTPError maps failures to statuses, the
// same mapping as Client.Transport; the debug endpoints read Client.Stats,
// Client.RouteStats and Client.Status.
package main
