package executor

import (
	"context"
	"log/slog"
	"math"
	"net/http"
	"time"

	"github.com/tpsroute/tpsroute/fallback"
	"github.com/tpsroute/tpsroute/internal/sse"
	"github.com/tpsroute/tpsroute/measure"
	"github.com/tpsroute/tpsroute/route"
	"github.com/tpsroute/tpsroute/tps"
)

// Default values used for zero fields of fallback.Options, stated in each
// field's comment and docs/CONFIG.md.
const (
	// defaultHeadersTimeout bounds the wait for response headers. Providers send
	// headers as soon as they accept a streaming request, well under a second
	// when healthy; 15 s leaves room for a congested gateway while a silent
	// provider cannot hold a call for minutes.
	defaultHeadersTimeout = 15 * time.Second
	// defaultTTFTTimeout bounds the wait for the first output chunk, from the
	// start of the attempt. It is above the p99 TTFT of interactive chat on a
	// healthy provider. It only fails over when there is somewhere to go: on
	// the last deployment of a plan the slow answer is awaited, unless it
	// is silent for defaultSilence.
	defaultTTFTTimeout = 15 * time.Second
	// defaultTTFTMultiple and defaultTTFTFloor make a warm deployment's TTFT
	// deadline: defaultTTFTMultiple times its measured TTFT p95 (see
	// Hooks.MeasuredTTFT), at least defaultTTFTFloor, at most the
	// configured TTFT deadline. Three times the p95 is above the p99 of the
	// TTFT distributions providers show (a long tail of about twice the p95),
	// so a deployment's normal answers are never cut, while one that
	// answers in 300 ms but hangs is left after 3 s instead of 15 s.
	defaultTTFTMultiple = 3
	// defaultTTFTFloor is the least TTFT deadline a measured deployment gets.
	defaultTTFTFloor = 3 * time.Second
	// defaultStallTimeout is the longest silence (no output chunk) after the
	// first one. Healthy streams have sub-second gaps; content filters make
	// them bursty by a few seconds.
	defaultStallTimeout = 20 * time.Second
	// defaultMaxDuration is the ceiling on one attempt, from sending the
	// request to the end of its stream, whatever arrives meanwhile
	// (docs/STREAM_QUIRKS.md Q2, Q27: keep-alive comments can flow for tens of
	// minutes, or forever). It is far above any real generation (a 32k-token
	// answer at 20 tokens/s takes 27 min) so that it never cuts a healthy
	// stream; its job is to release the connection, the in-flight slot and
	// the caller of a stream that would otherwise never end.
	defaultMaxDuration = 30 * time.Minute
	// defaultSilence bounds a last attempt's silence before its first
	// output (Deadlines.Silence). It is far above the TTFT deadline, so
	// that a slow answer with nowhere else to go is still awaited, and
	// above the time a reasoning model at its default effort thinks
	// without sending anything; it is far below defaultMaxDuration, which
	// was all that ended a silent upstream before it.
	defaultSilence = 2 * time.Minute
	// defaultFinishGrace is how long a stream that has finished (a
	// finish_reason for every choice, or "[DONE]") may stay silent, comments
	// not counted, before it is ended as a success without waiting for EOF.
	// Providers send the trailing usage chunk (docs/STREAM_QUIRKS.md Q10) and "[DONE]" within
	// milliseconds of the finish chunk; 2 s leaves room for a congested proxy
	// and is all a caller loses to a provider that never closes the stream
	// (Q2, Q5).
	defaultFinishGrace = 2 * time.Second
	// defaultMaxEvent is Limits.Event's default: sse.MaxEvent, 4 MiB.
	defaultMaxEvent = sse.MaxEvent
	// defaultMaxHeld is Limits.Held's default, 1 MiB: what a streaming
	// call holds before its first output chunk is a role chunk, a few
	// annotations and keep-alive comments, a few KiB even after minutes in
	// a provider's queue.
	defaultMaxHeld = 1 << 20
	// defaultMaxAnswer is Limits.Answer's default, 32 MiB: the stream of a
	// 128k-token answer at about 250 bytes per chunk.
	defaultMaxAnswer = 32 << 20
	// defaultAttemptsPerDeployment is how often one deployment is tried in one call.
	defaultAttemptsPerDeployment = 2
	// defaultBackoffBase is the base of the full-jitter backoff between
	// attempts on one deployment: a uniform draw in [0, min(max, base·2^n)).
	defaultBackoffBase = 250 * time.Millisecond
	// defaultBackoffMax caps the full-jitter backoff.
	defaultBackoffMax = 5 * time.Second
	// defaultMaxWait is the longest the executor waits for a cooling or
	// rate-limited deployment when nothing else is available.
	defaultMaxWait = 10 * time.Second
	// defaultPenaltyCooldown is how long a deployment that answered 401, 403,
	// 404 or 429 insufficient_quota is left alone.
	defaultPenaltyCooldown = 5 * time.Minute
	// defaultBreakerTimeout is a breaker's first open interval.
	defaultBreakerTimeout = time.Second
	// defaultBreakerMultiplier grows the open interval on consecutive trips.
	defaultBreakerMultiplier = 2
	// defaultBreakerMaxTimeout caps the open interval.
	defaultBreakerMaxTimeout = time.Minute
	// defaultBreakerProbeShare bounds the open interval by traffic: a probe
	// at least every 50 calls kept off the deployment (2% of them), so that
	// at 10 calls/s a recovered deployment serves again within about 5 s,
	// whatever the length of its outage.
	defaultBreakerProbeShare = 0.02
	// maxAttemptsCap bounds the retries that the default MaxAttempts allows
	// on top of one attempt per deployment.
	maxAttemptsCap = 10
)

// Default values of RescueOptions' zero fields.
const (
	// defaultRescueRatio is the share of its deployment's expected TPS
	// under which a committed stream is slow: a quarter. A stream at a
	// quarter of its usual rate takes four times as long to finish; the
	// normal variation of a provider's rate within one answer (batching,
	// long contexts) stays well above it.
	defaultRescueRatio = 0.25
	// defaultRescueWindow is how long a stream must stay under the ratio
	// before it is rescued: 3 s, long enough that a pause behind a content
	// filter or a burst of long tokens does not count.
	defaultRescueWindow = 3 * time.Second
	// defaultRescueSpeedup is how much faster than the slow stream's rate a
	// target must be expected to be: twice, so that the TTFT the target
	// costs is paid back on any answer with more than a few seconds to go.
	defaultRescueSpeedup = 2
)

// rescueBytesPerToken is the text that counts as one token when a slow
// stream's rate is measured: OpenAI's rule of thumb for English, so that a
// provider that sends several tokens per chunk is not taken for a slow one.
const rescueBytesPerToken = 4

// maxMalformed is the number of malformed data events at which a stream fails
// under MalformedSkip.
const maxMalformed = 3

// openInterval returns how long the breaker stays open after its n-th
// consecutive trip (n from 1), outage after the first of them, with calls
// kept off the deployment or sent to it as probes since then: the doubling
// from Timeout, at most MaxTimeout, a quarter of the outage and the time
// calls took to number 1/ProbeShare, at least Timeout.
func openInterval(b fallback.BreakerSettings, n int, outage time.Duration, calls int64) time.Duration {
	d := float64(b.Timeout)
	for i := 1; i < n && d < float64(b.MaxTimeout); i++ {
		d *= b.Multiplier
	}
	// Never more than a quarter of the outage so far: a deployment that
	// recovers waits at most about a quarter of its outage for its next
	// probe, whatever the phase of the doubling.
	d = min(d, float64(b.MaxTimeout), max(float64(b.Timeout), float64(outage)/4))
	if b.ProbeShare > 0 && calls > 0 {
		d = min(d, max(float64(b.Timeout), float64(outage)/(float64(calls)*b.ProbeShare)))
	}
	return time.Duration(d)
}

// breakerDefaults returns b with each zero field set to its default.
func breakerDefaults(b fallback.BreakerSettings) fallback.BreakerSettings {
	if b.ConsecutiveFailures == 0 {
		b.ConsecutiveFailures = 5
	}
	if b.FailureRatio <= 0 {
		b.FailureRatio = 0.5
	}
	if b.MinRequests == 0 {
		b.MinRequests = 10
	}
	if b.Window <= 0 {
		b.Window = 60 * time.Second
	}
	if b.BucketPeriod <= 0 {
		b.BucketPeriod = 10 * time.Second
	}
	if b.MaxRequests == 0 {
		b.MaxRequests = 1
	}
	if b.Timeout <= 0 {
		b.Timeout = defaultBreakerTimeout
	}
	if !(b.Multiplier >= 1) {
		b.Multiplier = defaultBreakerMultiplier
	}
	if b.MaxTimeout <= 0 {
		b.MaxTimeout = defaultBreakerMaxTimeout
	}
	b.MaxTimeout = max(b.MaxTimeout, b.Timeout)
	switch {
	case b.ProbeShare == 0 || math.IsNaN(b.ProbeShare):
		b.ProbeShare = defaultBreakerProbeShare
	case b.ProbeShare > 1:
		b.ProbeShare = 1
	}
	return b
}

// defaultDeadlines are the deadlines of the zero Options.
var defaultDeadlines = fallback.Deadlines{
	Headers: defaultHeadersTimeout, TTFT: defaultTTFTTimeout, Stall: defaultStallTimeout,
	MaxDuration: defaultMaxDuration, FinishGrace: defaultFinishGrace, Silence: defaultSilence,
}

// hedgeEnabled reports whether h turns hedging on.
func hedgeEnabled(h fallback.HedgeOptions) bool { return h.Delay > 0 || h.DelayFunc != nil }

// limitsDefaults returns l with every field that is not positive set to its
// default.
func limitsDefaults(l fallback.Limits) fallback.Limits {
	if l.Event <= 0 {
		l.Event = defaultMaxEvent
	}
	if l.Held <= 0 {
		l.Held = defaultMaxHeld
	}
	if l.Answer <= 0 {
		l.Answer = defaultMaxAnswer
	}
	return l
}

// BuildFunc builds the HTTP request for one attempt from one deployment and the
// request body (already carrying "stream": true). It must use nothing but d
// for the URL, credentials and headers. It is called from concurrent calls and
// must be safe for concurrent use.
type BuildFunc func(ctx context.Context, d route.Deployment, body []byte) (*http.Request, error)

// Hooks connect an Executor to the rest of a program: the transport that
// sends attempts, the measured TTFT it reads, the observers it tells, its
// logger, tokenizer and fleet state. The zero Hooks is
// http.DefaultTransport, no measured TTFT, no observers, silent, and no
// fleet. Every function is called from concurrent calls and must be safe for
// concurrent use.
type Hooks struct {
	// Transport sends every attempt. Nil means http.DefaultTransport.
	Transport http.RoundTripper
	// MeasuredTTFT returns a deployment's measured TTFT p95 (from sending
	// the request to the first output chunk, as tps measures it), with ok
	// false while it has too few samples; the root Client reads it from
	// measure. It is called once per attempt, from concurrent calls: it must
	// be safe for concurrent use and must not block. Nil means every
	// deployment gets the configured fallback.Deadlines.TTFT.
	MeasuredTTFT func(d route.Deployment) (p95 time.Duration, ok bool)
	// Tokenizer, if not nil, is passed to every tps.Tap.
	Tokenizer tps.Tokenizer
	// OnAttempt is called after every attempt ends, including skipped
	// deployments, on the goroutine that ended it. It must not block. Nil
	// means no hook.
	OnAttempt func(fallback.Attempt)
	// OnStateChange is called when a key's breaker changes state. It runs
	// under the breaker's lock: it must not block or call the Executor. Nil
	// means no hook.
	OnStateChange func(k measure.Key, from, to route.BreakerState)
	// Logger receives one debug record per failed attempt. Nil means silent.
	Logger *slog.Logger
	// Shared, if not nil, shares breaker and limit state with the executors
	// of other processes (fleet mode); see Shared. Nil means this Executor
	// decides alone.
	Shared Shared
}

// Call is one chat-completion call. Zero override fields inherit the
// Executor's fallback.Options. A Call is a value; Do neither keeps nor modifies it, so
// one Call may be passed to concurrent Do calls.
type Call struct {
	// Body is the caller's JSON chat-completion request (logical model). It
	// is always sent with "stream": true; the executor does not modify it.
	Body []byte
	// Stream is true for a streaming caller: the call commits at the first
	// output chunk. False commits at the end: the whole stream is buffered so
	// that any failure before the end fails over invisibly.
	Stream bool
	// Assemble, for a non-streaming chat or Responses call, makes
	// Result.Body the answer instead of the buffered stream: for chat, the
	// chat.completion JSON that the stream's chunks add up to
	// (answer.Accumulator), built from each chunk as the tap scans it; for
	// Responses, the response object of the final event (response.completed
	// or response.incomplete, payload.Chunk.Answer), kept as the tap scans it,
	// and a stream that ends without one fails with fallback.ErrMalformed.
	// The call holds the answer and none of the stream,
	// fallback.Limits.Answer bounds both the stream read and the answer, and
	// Result.ContentLength is the answer's length. A string of the answer
	// that holds the deployment's credential reads "REDACTED", as in a
	// stream. Ignored when Stream is true, and for Messages (Result.Body is
	// then the buffered stream).
	Assemble bool
	// Plain, for a non-streaming call, sends every attempt as a plain
	// upstream call ("stream": false), as to a deployment that declares
	// route.Capabilities.NoStream: the call then costs what a plain client's
	// does, and is timed as total latency only (docs/CONFIG.md, "Plain
	// upstream calls"). Ignored when Stream is true.
	Plain bool
	// Build builds each attempt's request. Nil means DefaultBuild.
	Build BuildFunc
	// Protocol is the API whose stream each attempt answers with, which the
	// tap times and checks by that API's events (tps.WithProtocol): a
	// Responses or Messages stream commits at its first output delta and
	// fails on its failure events. The zero value is chat completions.
	// Assemble is for chat and Responses (see Assemble). A mid-stream
	// continuation is for chat and Messages streams (splice.go): a Responses
	// stream's failure after the commit point ends it with a
	// fallback.ErrMidStream error whose Continuation is
	// fallback.ContinuationUnsupported.
	// Every attempt of a tps.ProtocolEmbeddings call is a plain call (its
	// answer never streams), framed for the tap as one event
	// (sse.AppendEvent); its Sample is not Unstreamed: its TTFT is the
	// answer's latency, which routing compares.
	Protocol tps.Protocol
	// Deadlines override fallback.Options.Deadlines for this call, field by field:
	// a zero field inherits, a negative one turns that deadline off.
	Deadlines fallback.Deadlines
	// MidStream overrides fallback.Options.MidStream;
	// fallback.MidStreamDefault inherits.
	MidStream fallback.MidStreamPolicy
	// NoHedge disables hedging for this call.
	NoHedge bool
	// NoFallback tries only the plan's first deployment (retries included).
	NoFallback bool
	// MinTPS is the SLO's least generation rate for this call, in tokens/s
	// (route.SLO.MinTPS); zero means none. A slow stream is rescued only
	// below it as well (fallback.RescueOptions).
	MinTPS float64
	// EstimatedInputTokens is charged to the deployment's TPM limiter at the
	// start and corrected with the reported usage at the end. Zero charges
	// nothing up front.
	EstimatedInputTokens int64
	// Feedback, if not nil, is told of each attempt's start and end (and of
	// every output chunk gap): the one channel through which a call's
	// outcomes leave the Executor. See Feedback.
	Feedback Feedback
}

// Assembles reports whether a non-streaming call of protocol p gets its
// answer assembled as the tap scans the stream (Call.Assemble): chat
// completions and Responses. For another protocol Result.Body is the
// buffered stream, which the caller folds into its answer.
func Assembles(p tps.Protocol) bool {
	return p == tps.ProtocolChat || p == tps.ProtocolResponses
}
