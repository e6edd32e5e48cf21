// Package fallback is the vocabulary of failover: what a program writes to
// tune it (Options, the tpsroute.Config.Fallback field: Deadlines, Limits,
// BreakerSettings, HedgeOptions, RescueOptions, MidStreamPolicy,
// MalformedPolicy) and what it reads back about a call (Attempt, with its
// Class, through Config.OnAttempt and a Response's attempts; the *Error of
// a failed call, its ContinuationReason, and the sentinel errors it matches
// with errors.Is).
//
// This documentation states the rules a call follows. The root Client
// applies them through its executor, which walks a route.Plan: it sends one
// call to the deployments of the plan in order, under per-deployment circuit
// breakers, rate limiters, Retry-After cooldowns, jittered backoff and
// deadlines, and commits to the first stream that produces output. The
// executor is internal to the module (internal/executor), so that the public
// API stays this vocabulary; its package documentation describes the
// mechanics. fallback imports route and tps for their vocabulary, and
// measure only for measure.Key.
//
// # The commit point
//
// A streaming call commits at the first chunk that carries
// output (content, reasoning, refusal or a tool-call fragment); role-only
// chunks and SSE comments do not count. Before the commit point every failure
// is invisible to the caller and moves on as the table below says. After it:
//
//   - MidStreamSameModel (the default): continue, as below, but only on a
//     deployment of the same logical model and revision that declares
//     assistant prefill; with none, end with the mid-stream error.
//   - MidStreamError: the stream's read returns a *Error whose deciding
//     attempt has phase tps.PhaseMidStream, the tokens received and the
//     deployment; errors.Is(err, ErrMidStream) is true. A cut stream is never
//     a clean io.EOF: a stream ends cleanly only after a finish_reason for
//     every choice, or "[DONE]".
//   - MidStreamContinue (opt-in): continue on the next deployment of the
//     plan, of any model, that declares Capabilities.AssistantPrefill.
//
// A continuation re-issues the request with the text the caller has read as
// a final assistant message (Options.Prefill), and splices its stream on,
// whole SSE events only, so the caller reads one coherent stream. The prefill
// is byte for byte the text delivered: the whole events read before the
// failure are delivered first, and nothing read after it (the failing event,
// a partial event, events behind an error in the same read) is delivered or
// counted. A Messages API stream (route.APIMessages) is continued the same
// way: its prefill leaves out the delivered text's trailing whitespace,
// which Anthropic refuses, and the caller reads one Messages stream (the
// continuation's message_start and the start of the block it continues
// dropped, its block indexes after the caller's; docs/STREAM_QUIRKS.md
// Q37). Streams that carried tool calls, reasoning text, a content block
// that is not text or more than one choice cannot be continued and get the
// mid-stream error, as do Responses API streams (that API has no assistant
// prefill) and plans without a deployment left that may continue. A deployment that rejects a
// prefill (a 400 or 422 naming the assistant message or the prefill) is
// remembered by the Client and never offered a continuation again, and a
// wildcard deployment declares prefill per model with
// route.Deployment.ModelCapabilities. If the continuation fails, the caller
// gets the original mid-stream error, never the continuation's.
//
// The targets are the other deployments of the plan, in order, and then the
// deployment that was cut: a provider that dropped one stream often serves
// the next, and a model served by one deployment has no other target. That
// second attempt counts against AttemptsPerDeployment and MaxAttempts like
// any other, and is made only while the deployment's breaker (which has
// counted the cut) lets it through.
//
// # Slow streams
//
// A committed stream that keeps flowing but slows down is rescued
// (Options.Rescue, RescueOptions): under a quarter of its deployment's
// expected TPS (Plan's Candidate.Expected), and under the SLO's MinTPS when set,
// for 3 s, it is continued from exactly the delivered text on a deployment
// of the same model that declares assistant prefill and is expected to be
// twice as fast. The slow stream is held while the target opens and goes on
// if the target fails, so a rescue never costs the caller the answer. The
// slow attempt has Attempt.Rescued and ErrRescued, class ClassCanceled.
//
// # Malformed events
//
// A data event that is not one valid JSON object is, by default
// (MalformedSkip), dropped from the bytes the caller reads, counted in
// tps.Sample.Malformed, and skipped, before and after the first output chunk
// alike. The third in one stream fails the stream with
// ErrMalformed: before the commit point it fails over invisibly, after it
// the mid-stream policy applies. MalformedFail fails at the first one.
//
// # Limits
//
// An attempt holds a bounded number of bytes whatever its upstream sends
// (Options.Limits): one line or event at most Limits.Event (4 MiB), a
// streaming call at most Limits.Held (1 MiB) of whole events before its
// first output chunk, a non-streaming call at most Limits.Answer (32 MiB)
// of stream, each plus the one event still arriving. Past one,
// the attempt fails at once with ErrTooLarge, as a fault before output
// (failover) or a mid-stream error.
//
// A non-streaming call commits at the end of the stream: the whole stream is
// buffered, so a failure at any point restarts on the next deployment. A
// non-streaming chat call through the Client holds the answer instead of the
// stream: each chunk is folded into an accumulator (internal/answer) as the tap scans it,
// and the answer is the chat.completion JSON, scrubbed of the deployment's
// credentials; Limits.Answer then bounds both the stream read and the
// answer.
//
// # Faults and what happens
//
// Retry means: the same deployment once more, after a full-jitter backoff
// (uniform in [0, min(BackoffMax, BackoffBase·2^n)), defaults 250 ms and 5 s),
// bounded by AttemptsPerDeployment (default 2). Next means: the next
// deployment of the plan. Every Retry-After on any status cools the
// deployment down until then; a cooldown is extended, never shortened.
//
//	fault                                    class               what happens                                   breaker
//	500, 502, 504, other 5xx, 409            ClassRetry          retry once, then next (see Attempts below)     failure
//	connection reset / refused before headers ClassRetry         retry once, then next (see Attempts below)     failure
//	503, 529 (overloaded), 408               ClassNext           next (cooldown if Retry-After)                 failure
//	no headers within HeadersTimeout         ClassNext           next, not retried (ErrHeadersTimeout)          failure
//	no output within the TTFT deadline       ClassNext           next if any is left, else keep waiting         failure
//	(keep-alive comments do not count)                           within Silence
//	nothing at all for Silence before        ClassNext           the call fails (ErrSilent)                     failure
//	output, on the plan's last attempt
//	a line or event past Limits.Event, or    ClassNext           next (ErrTooLarge); after output, a            failure
//	more held than Limits.Held/Answer                            mid-stream error
//	attempt longer than MaxDuration          ClassNext           next (ErrMaxDuration)                          failure
//	before output
//	in-stream error before output            ClassNext           next (ErrStreamError; context/policy as below) failure
//	empty stream, 3rd malformed event        ClassNext           next (ErrEmptyStream, ErrMalformed); a first   failure
//	                                                             or second malformed event is skipped
//	429 rate limit                           ClassRateLimited    cooldown until Retry-After (retry-after-ms,    excluded
//	                                                             x-ms-retry-after-ms, retry-after seconds or
//	                                                             HTTP-date; else jittered backoff), next; if
//	                                                             nothing else, wait when it fits MaxWait and
//	                                                             the caller's deadline; with other calls in
//	                                                             flight to it, a concurrency limit instead
//	                                                             (see Learnt concurrency limits)
//	429 insufficient_quota, 404, 410, 402,   ClassUnavailable    never this deployment: PenaltyCooldown, next   failure
//	a 4xx with code model_not_found
//	401, 403, a 4xx saying the key is bad    ClassAuth           breaker trips, PenaltyCooldown (5 min), next   trips
//	other 4xx (405, 415, 421, ...)           ClassNext           next                                           failure
//	400, 422, 431 invalid request, or a      ClassInvalid        stop: every deployment would reject it         excluded
//	body no attempt can be built from
//	content-policy rejection, as a status    ClassPolicy         stop, provider's reason in the error; after    excluded
//	or in-stream, before or after output                         output the stream ends with ErrMidStream
//	context_length_exceeded, 413             ClassContextLength  next only to a larger ContextWindow, or with   excluded
//	                                                             windows unknown to another model of the plan,
//	                                                             else stop
//	caller's cancellation or deadline        ClassCanceled       stop                                           excluded
//	cut, stall, error, 3rd malformed event   ClassMidStream      streaming: continuation on the same model if   failure
//	or MaxDuration after output, before                          one declares prefill, else mid-stream error;
//	finish                                                       non-streaming: next
//	silence (comments only) after finish     ClassNone           success after FinishGrace, usage as received   success
//	EOF without [DONE] after finish          ClassNone           success                                        success
//	breaker open, cooling, no budget         ClassSkipped        skipped for now; no request sent               -
//
// ClassInvalid, ClassPolicy and ClassContextLength name the caller's request,
// not the deployment (Class.CallerFault): besides the breaker, they stay out
// of the deployment's error rate (Attempt.ErrorClass gives
// measure.ClassCaller), as the caller's cancellation does.
// docs/STREAM_QUIRKS.md ("Who is charged") has the table with what the caller
// gets.
//
// "x-should-retry: true" turns an invalid, unavailable or next class into
// Retry; "x-should-retry: false" turns Retry into Next. Error bodies are read
// in every shape seen in the wild: {"error":{...}}, a JSON array, {"message"},
// {"error":"...","error_type"}, with codes as ints or strings and messages
// that are themselves JSON.
//
// Attempts are bounded by AttemptsPerDeployment and MaxAttempts (default: the
// plan's length plus AttemptsPerDeployment-1, at most 10 but never below the
// plan's length), and always by the caller's context. A retry on the same
// deployment never takes the place of a deployment not yet tried: it is made
// at once only while the budget still covers one attempt on each untried
// deployment, else after them, if budget is left. So with the default budget
// every deployment of the plan gets an attempt before the call fails, unless
// the caller's context ends or a ClassInvalid or ClassPolicy answer stops it.
//
// After context_length_exceeded the call moves on only to a deployment whose
// known ContextWindow is larger, or, when its window is unknown, whose logical
// model (and revision) did not exceed its context in this call: a plan holds
// several logical models only when the caller listed them (route.Request's
// Models), so the call goes on to the next listed model.
//
// A failure after output gives the same classification whichever door the
// call used: ClassMidStream and ErrMidStream for a buffered call's last
// attempt as for a stream. A committed call's attempt count and the
// *Error's message count attempts alike, the committed one included.
// Every mid-stream error says why no continuation was made:
// Error.Continuation returns a ContinuationReason (continuation off, no
// prefill-capable target, the target rejected the prefill, the budget spent,
// ...) and the message names it. Under MidStreamSameModel and
// MidStreamContinue it also matches ErrContinuation.
//
// # Deadlines
//
// The zero Options.Deadlines (a Deadlines value) give:
//
//   - Headers 15 s: a silent provider cannot hold a call for minutes.
//   - TTFT 15 s from the start of the attempt to the first output
//     chunk. It fails over only when another deployment is left, so the last
//     deployment's slow answer still arrives. A deployment whose TTFT the
//     Client has measured (measure) gets 3 times its p95, at least 3 s,
//     plus 0.5 ms per estimated prompt token, with TTFT as the cap: a deployment that answers in 300 ms but
//     hangs is left after 3 s, one whose normal TTFT is 8 s is never cut
//     before the cap. An attempt that may fail over also leaves the next
//     deployment room for its expected TTFT and answer (its plan figures,
//     measured or prior, else 1 s and 50 tokens/s, for
//     250 output tokens) before the caller's context
//     deadline, or, for a cold deployment, before TTFT from the call's
//     start, so that a fallback's normal answer ends within 15 s; never
//     below twice its own expected TTFT (at least 3 s).
//   - Stall 20 s without an output chunk after the first.
//   - MaxDuration 30 min: the ceiling on one attempt, whatever arrives. It is
//     what ends a provider that queues a call behind keep-alives for ever
//     (docs/STREAM_QUIRKS.md Q27) when there is nowhere to fail over, or that never
//     ends its stream (Q2). Before the commit point it fails over; after it
//     the stream ends with ErrMaxDuration and ErrMidStream.
//   - FinishGrace 2 s: once the stream has finished (a finish_reason for
//     every choice of an n>1 request, or "[DONE]"), it ends as a success
//     after 2 s without a data event, instead of waiting for an EOF that may
//     never come (Q2, Q5). Reading goes on until then, so a usage chunk
//     after the finish chunk (Q10) is still counted; the Sample then ends at
//     the last data event.
//
// SSE comments (keep-alives, processing notices) move none of these: they do
// not count as the first token, do not reset the stall deadline and do not
// restart the finish grace. Non-output chunks (role-only, empty content,
// usage, filter annotations) do not reset the stall deadline either. A
// stream that has finished is a success whichever of EOF, the grace, the
// stall deadline or the ceiling ends it; one that has not is never a success
// unless it ends with "[DONE]". Each deadline can be overridden per Call,
// and negative values disable it. The caller's
// context bounds everything, including reading the Body.
//
// # Breakers, limiters and health
//
// Each measure.Key (provider, region, model) has its own gobreaker
// TwoStepCircuitBreaker, so a failing model never blocks the same provider's
// other models. It trips after BreakerSettings.ConsecutiveFailures (5) in a
// row or at FailureRatio (0.5) over a rolling Window (60 s, 10 s buckets) once
// MinRequests (10) were seen. It stays open BreakerSettings.Timeout (1 s)
// after a first trip and then lets MaxRequests (1) probes through; each
// failed probe trips it again for Multiplier (2) times longer, up to
// MaxTimeout (60 s), to a quarter of the time since its first trip and to the
// time that 1/ProbeShare (50) calls for the deployment took (the calls its
// open breaker kept off it, counted from Plan.Excluded and refused attempts,
// and its probes), never below Timeout; a good probe closes it and starts the
// next trip from Timeout again, as Envoy's outlier ejection does. A
// deployment back from a short outage serves again within about a second;
// one back from a long outage waits at most about a quarter of it, and at
// most about 50 of its calls: 5 s at 10 calls/s, one Timeout at 50 calls/s
// or more. So, once its outage is long, its probes take about 2% of its
// calls, and a dead deployment under heavy traffic gets one probe per
// Timeout. One down for long and called rarely costs one probe a minute.
// The executor's health (picker.Health, which route reads) reports the
// breaker open for the whole interval and half-open once a probe may go,
// which is when route puts it first for that probe. The outcome of a
// committed stream is reported when the stream ends. Only the provider's
// faults count, see the table.
//
// Deployments with Limits get an x/time/rate limiter for RPM and one for TPM.
// TPM is charged the call's estimated prompt tokens at the start and the rest of the
// reported usage (input plus output tokens) at the end; over-estimates are
// not refunded. A deployment without budget, or at its MaxInFlight cap, is
// skipped for now and reported as NoHeadroom; the call comes back to it only
// when nothing else answered and the wait fits MaxWait. A call waiting for a
// deployment at its MaxInFlight cap (or at a learnt limit, below) wakes as
// soon as one of the Executor's calls ends, and takes the freed slot if no
// other waiting call took it first (it then waits on, and the lost race does
// not count as an attempt); with no slot freed within MaxWait it fails with
// ErrNoBudget.
//
// # Learnt concurrency limits
//
// Many providers admit only so many concurrent streams per key and answer
// the next with 429 and a Retry-After of seconds, which says nothing about
// when one of the running streams ends. A 429 answered while n ≥ 1 other
// calls of this Client are in flight to the deployment is read as that
// limit: the deployment's learnt limit becomes n, it gets no cooldown (and
// its x-ratelimit-remaining-* headers are not read), and it is reported as
// NoHeadroom and skipped while n calls are in flight to it, so it takes
// calls again as soon as one of them ends. Until the Retry-After has passed
// it is held at n; from then on one call above n is let through, and a
// success with n or more others in flight raises the limit to n+1 (so it
// climbs one call per success while the provider admits them), a 429
// there sets it again. A limit neither confirmed nor raised for 5 minutes
// is forgotten. When nothing else is available the call waits, within
// MaxWait, until one of the calls in flight to it ends or the Retry-After
// has passed (or one more Retry-After once the call above the limit is in
// flight too), whichever comes first. A 429 with no other call in
// flight is a rate limit, handled as the table says; a rate limit per
// minute answered while calls are in flight lowers the learnt limit at
// each 429 until one comes with none in flight, and is then a cooldown.
//
// # Hedging
//
// With Options.Hedge set, a streaming call whose first attempt has no output
// after the hedge delay (fixed, or per deployment, for example its TTFT p95)
// starts the next deployment in parallel. The first to produce output wins;
// the other is cancelled (ErrHedgeLost, not a breaker failure). Hedge.Budget
// caps the share of calls that hedge (default 0.1).
//
// # Errors
//
// A failed call returns a *Error listing every attempt (key, phase, status,
// class, duration, time waited, tokens, error) with a one-line message that
// never contains credentials. errors.Is finds the sentinels (ErrOpen,
// ErrMidStream, ErrStall, ErrTTFTTimeout, ...; route.ErrNoDeployment when the
// plan was empty or no deployment in it could be tried) and errors.As the
// provider's *openai.Error, most recent attempt first.
//
// # Credential isolation
//
// Each attempt is built from its own deployment
// only: URL, API key, headers and model id. Nothing of one deployment reaches
// another. Errors carry requests (also as the Response's Request) with
// credential headers, URL user info and credential query parameters
// redacted, and a provider's message that echoes the deployment's key has
// it replaced.
//
// # Concurrency
//
// Every type of this package is a value or a constant, safe for concurrent
// use once made.
// Closing a stream early cancels the upstream request at once, and the
// attempt ends as ClassCanceled with ErrClosed, which matches
// context.Canceled: an early Close is the caller's cancellation, never a
// provider failure.
package fallback
