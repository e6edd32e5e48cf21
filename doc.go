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
//	caller -> the picker orders a route.Plan -> fallback walks the Plan -> provider
//	       <- tps times the stream <- the Registry records (key, sample)
//
// # Quick start
//
// A Client is configured with deployments (provider, region, model, base URL,
// key) and used like openai-go. This program runs offline against two fake
// providers and ends up sending most calls to the faster one:
//
//	fast := replay.NewServer(map[string]replay.Script{"llama": &replay.Profile{TPS: 300, OutputTokens: 60}})
//	slow := replay.NewServer(map[string]replay.Script{"llama": &replay.Profile{TPS: 60, OutputTokens: 60}})
//	defer fast.Close()
//	defer slow.Close()
//	client, err := tpsroute.New(tpsroute.Config{Deployments: []route.Deployment{
//		{Provider: "fast", Model: "llama", BaseURL: fast.URL()},
//		{Provider: "slow", Model: "llama", BaseURL: slow.URL()},
//	}})
//	if err != nil {
//		panic(err)
//	}
//	params := openai.ChatCompletionNewParams{Model: "llama", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Hi")}}
//	for range 40 {
//		if _, err := client.Chat.Completions.New(context.Background(), params); err != nil {
//			panic(err)
//		}
//	}
//	for key, st := range client.Stats().All() {
//		fmt.Printf("%-12s %2d calls  p50 %5.0f tokens/s\n", key, st.Requests, st.TPS.P50)
//	}
//
// # Calls
//
// Client.Chat.Completions.NewStreaming returns a *Stream, a pull iterator
// (Next, Current, Err, Close) like openai-go's, plus Sample (TTFT, generation
// TPS, tokens, cache state), Deployment (who answered) and Attempts.
// params.Model is the logical model, optionally "model@revision"; each
// attempt sends the chosen deployment's own model id, URL, key and headers,
// and nothing of one deployment reaches another. Failover happens before the
// first output chunk, the commit point. After it a failure ends the stream
// with a *fallback.Error (errors.Is(err, fallback.ErrMidStream)), never a
// truncated success, unless Config.Fallback.MidStream asks to continue on a
// deployment that supports assistant prefill.
//
// Client.Chat.Completions.New streams underneath and accumulates, so every
// call feeds the TPS statistics; since nothing reaches the caller before the
// end, even a mid-stream failure fails over invisibly. WithOutcome tells
// which deployment answered.
//
// Cancelling the context or closing a Stream early ends the upstream request
// at once; it counts as a cancellation, not as a provider failure. A Stream
// belongs to one goroutine (Close may come from another); the Client starts
// no goroutines of its own, so there is nothing to stop, unless
// Config.StateFile is set: then one goroutine writes the statistics to that
// file every Config.StateInterval, and Client.Close stops it and writes them
// once more, so that the next process restores them in New and routes like
// this one (docs/STATE.md).
//
// # Call options
//
// Per-call routing is one route.Request: WithRequest passes it whole, and
// these shorthands set one field each: WithPin (a provider and region first, failover still
// allowed), WithoutFallback, WithRegion (a restriction, e.g. data
// residency), WithProviders (an order), WithOnly, WithIgnore, WithPolicy,
// WithSLO (demotes deployments expected to miss a TTFT, TPS or price
// target), WithPriceCap (drops deployments priced above a cap), WithModels
// (models to fall back through),
// WithCacheKey, WithHedge, WithDeadlines (this call's headers, TTFT, stall,
// max-duration and finish-grace deadlines instead of Config.Fallback's),
// WithHeader (an extra header for every attempt) and WithOutcome.
//
// # Cache hints
//
// cache_control on messages, content parts and tools, and prompt_cache_key,
// go only to deployments whose Capabilities.CacheControl is set and are
// stripped for the others. A call with a cache key (WithCacheKey,
// prompt_cache_key, or a hash of a first message of 4 KiB or more) prefers
// the deployment that served that key recently, so the provider's prefix
// cache is hit. The statistics keep warm and cold calls apart.
//
// # Raw bodies and HTTP errors
//
// Client.Do takes a serialised chat-completions body and returns a Response:
// the committed SSE bytes (or the accumulated chat.completion JSON without
// "stream"), the deployment that answered, the attempts and the tps.Sample.
// It is the entry point of code that relays answers, such as
// examples/gateway. Client.HTTPError maps any error of a call to its HTTP
// answer in one place: 400 naming the field for a bad request (*RequestError,
// *route.PinError), 404 for an unknown model (*ModelError), the last attempt's
// status, or 503 when no deployment was usable.
//
// # Transport
//
// Client.Transport is the same flow as an http.RoundTripper, for frameworks
// that accept an *http.Client (openai-go, go-openai, langchaingo, net/http):
// POST .../chat/completions is routed, GET .../models lists the logical
// models, anything else is refused with 404. Non-streaming requests stream
// underneath and are answered with a chat.completion body. Failures are
// answered as Client.HTTPError says, with "x-should-retry: false". Per-call
// options travel in the request context (ContextWithOptions).
//
// # Configuration
//
// Config is a struct whose zero fields are documented defaults; only
// Deployments is required. Package config reads the JSON schema shared with
// the gateway and tpsbench (docs/CONFIG.md): API keys come from environment
// variables the file names, never from the file. Wildcard deployments (Model
// "*") serve any model and keep statistics per model actually requested.
//
// # Statistics
//
// Client.Stats returns a measure.Snapshot: per deployment key, percentiles
// and EWMAs of TTFT, TPS, TPOT and end-to-end time, counts, error rates,
// tokens and cost, split by cache state. Every attempt that got response
// headers is recorded, failed ones included.
//
// # OpenTelemetry
//
// The Client records the OpenTelemetry GenAI client metrics
// (gen_ai.client.operation.duration, gen_ai.client.token.usage,
// gen_ai.client.operation.time_to_first_chunk and time_per_output_chunk,
// semantic conventions v1.41.0) and its own tpsroute.* instruments, and a
// "chat {model}" span per call with a child span per attempt, through
// Config.MeterProvider and Config.TracerProvider (the globals when nil). It
// depends on the OpenTelemetry API only: without an SDK all of it is a no-op.
// Package telemetry and docs/OBSERVABILITY.md list every instrument.
package tpsroute
