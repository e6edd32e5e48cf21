package fallback

import (
	"cmp"
	"context"
	"log/slog"
	"math"
	"net/http"
	"time"

	"github.com/tpsroute/tpsroute/measure"
	"github.com/tpsroute/tpsroute/route"
	"github.com/tpsroute/tpsroute/tps"
)

// Default values used for zero fields of Options.
const (
	// DefaultHeadersTimeout bounds the wait for response headers. Providers send
	// headers as soon as they accept a streaming request, well under a second
	// when healthy; 15 s leaves room for a congested gateway while a silent
	// provider cannot hold a call for minutes.
	DefaultHeadersTimeout = 15 * time.Second
	// DefaultTTFTTimeout bounds the wait for the first output chunk, from the
	// start of the attempt. It is above the p99 TTFT of interactive chat on a
	// healthy provider. It only fails over when there is somewhere to go: on
	// the last deployment of a plan the slow answer is awaited, unless it
	// is silent for DefaultSilence.
	DefaultTTFTTimeout = 15 * time.Second
	// DefaultTTFTMultiple and DefaultTTFTFloor make a warm deployment's TTFT
	// deadline: DefaultTTFTMultiple times its measured TTFT p95 (see
	// Hooks.MeasuredTTFT), at least DefaultTTFTFloor, at most the
	// configured TTFT deadline. Three times the p95 is above the p99 of the
	// TTFT distributions providers show (a long tail of about twice the p95),
	// so a deployment's normal answers are never cut, while one that
	// answers in 300 ms but hangs is left after 3 s instead of 15 s.
	DefaultTTFTMultiple = 3
	// DefaultTTFTFloor is the least TTFT deadline a measured deployment gets.
	DefaultTTFTFloor = 3 * time.Second
	// DefaultStallTimeout is the longest silence (no output chunk) after the
	// first one. Healthy streams have sub-second gaps; content filters make
	// them bursty by a few seconds.
	DefaultStallTimeout = 20 * time.Second
	// DefaultMaxDuration is the ceiling on one attempt, from sending the
	// request to the end of its stream, whatever arrives meanwhile
	// (docs/STREAM_QUIRKS.md Q2, Q27: keep-alive comments can flow for tens of
	// minutes, or forever). It is far above any real generation (a 32k-token
	// answer at 20 tokens/s takes 27 min) so that it never cuts a healthy
	// stream; its job is to release the connection, the in-flight slot and
	// the caller of a stream that would otherwise never end.
	DefaultMaxDuration = 30 * time.Minute
	// DefaultSilence bounds a last attempt's silence before its first
	// output (Deadlines.Silence). It is far above the TTFT deadline, so
	// that a slow answer with nowhere else to go is still awaited, and
	// above the time a reasoning model at its default effort thinks
	// without sending anything; it is far below DefaultMaxDuration, which
	// was all that ended a silent upstream before it.
	DefaultSilence = 2 * time.Minute
	// DefaultFinishGrace is how long a stream that has finished (a
	// finish_reason for every choice, or "[DONE]") may stay silent, comments
	// not counted, before it is ended as a success without waiting for EOF.
	// Providers send the trailing usage chunk (docs/STREAM_QUIRKS.md Q10) and "[DONE]" within
	// milliseconds of the finish chunk; 2 s leaves room for a congested proxy
	// and is all a caller loses to a provider that never closes the stream
	// (Q2, Q5).
	DefaultFinishGrace = 2 * time.Second
	// DefaultMaxEvent is Limits.Event's default: tps.MaxEvent, 4 MiB.
	DefaultMaxEvent = tps.MaxEvent
	// DefaultMaxHeld is Limits.Held's default, 1 MiB: what a streaming
	// call holds before its first output chunk is a role chunk, a few
	// annotations and keep-alive comments, a few KiB even after minutes in
	// a provider's queue.
	DefaultMaxHeld = 1 << 20
	// DefaultMaxAnswer is Limits.Answer's default, 32 MiB: the stream of a
	// 128k-token answer at about 250 bytes per chunk.
	DefaultMaxAnswer = 32 << 20
	// DefaultAttemptsPerDeployment is how often one deployment is tried in one call.
	DefaultAttemptsPerDeployment = 2
	// DefaultBackoffBase is the base of the full-jitter backoff between
	// attempts on one deployment: a uniform draw in [0, min(max, base·2^n)).
	DefaultBackoffBase = 250 * time.Millisecond
	// DefaultBackoffMax caps the full-jitter backoff.
	DefaultBackoffMax = 5 * time.Second
	// DefaultMaxWait is the longest the executor waits for a cooling or
	// rate-limited deployment when nothing else is available.
	DefaultMaxWait = 10 * time.Second
	// DefaultPenaltyCooldown is how long a deployment that answered 401, 403,
	// 404 or 429 insufficient_quota is left alone.
	DefaultPenaltyCooldown = 5 * time.Minute
	// DefaultBreakerTimeout is a breaker's first open interval.
	DefaultBreakerTimeout = time.Second
	// DefaultBreakerMultiplier grows the open interval on consecutive trips.
	DefaultBreakerMultiplier = 2
	// DefaultBreakerMaxTimeout caps the open interval.
	DefaultBreakerMaxTimeout = time.Minute
	// DefaultBreakerProbeShare bounds the open interval by traffic: a probe
	// at least every 50 calls kept off the deployment (2% of them), so that
	// at 10 calls/s a recovered deployment serves again within about 5 s,
	// whatever the length of its outage.
	DefaultBreakerProbeShare = 0.02
	// maxAttemptsCap bounds the retries that the default MaxAttempts allows
	// on top of one attempt per deployment.
	maxAttemptsCap = 10
)

// MidStreamPolicy says what happens when a stream fails after the commit point.
// It is a plain value, safe for concurrent use.
type MidStreamPolicy uint8

const (
	// MidStreamDefault in Call means "use Options.MidStream"; in Options it
	// means MidStreamSameModel.
	MidStreamDefault MidStreamPolicy = iota
	// MidStreamError ends the stream with a *Error of phase PhaseMidStream
	// (errors.Is(err, ErrMidStream)). It is never a clean end of stream.
	MidStreamError
	// MidStreamContinue re-issues the request on the next deployment of the
	// plan, of any model, that declares Capabilities.AssistantPrefill (the
	// deployment that was cut last, within AttemptsPerDeployment and its
	// breaker), with
	// the text delivered so far (byte for byte what the caller has read) as
	// a final assistant message, and splices its stream on, so that the
	// caller reads one continuous SSE stream. Streams that carried tool
	// calls, reasoning or more than one choice, and calls with no
	// prefill-capable deployment left, get the MidStreamError behaviour. A
	// deployment that rejected a prefill (a 400 naming the assistant message
	// or the prefill) is remembered by the Executor and never offered a
	// continuation again. When the continuation fails, the caller gets the
	// original mid-stream error.
	MidStreamContinue
	// MidStreamSameModel is MidStreamContinue restricted to deployments of
	// the same logical model and revision as the one that failed, so that
	// the answer is finished by the model that began it; with none, it is
	// MidStreamError. It is the default.
	MidStreamSameModel
)

// MalformedPolicy says what a stream does with a data event that is not one
// valid JSON object. It is a plain value, safe for concurrent use.
type MalformedPolicy uint8

const (
	// MalformedSkip, the default, drops a malformed data event from the
	// bytes the caller reads, counts it in tps.Sample.Malformed and reads
	// on, before and after the first output chunk alike. The MaxMalformed-th
	// malformed event of one stream fails the stream with ErrMalformed
	// (and a line or event longer than Limits.Event with ErrTooLarge):
	// before the first output chunk the call fails over invisibly, after it
	// the mid-stream policy applies.
	MalformedSkip MalformedPolicy = iota
	// MalformedFail fails the stream with ErrMalformed at its first
	// malformed event. The whole events before it are still delivered.
	MalformedFail
)

// MaxMalformed is the number of malformed data events at which a stream fails
// under MalformedSkip.
const MaxMalformed = 3

// BreakerSettings configures the circuit breaker kept per measure.Key. A zero
// field means its default. It is a value read once by New; safe to share.
type BreakerSettings struct {
	// ConsecutiveFailures trips the breaker after this many failures in a row.
	// Default 5.
	ConsecutiveFailures uint32
	// FailureRatio trips the breaker when failures/requests in the rolling
	// Window reach it, once MinRequests were seen. Default 0.5. Outcomes the
	// breaker excludes (a Class.CallerFault, a 429, a cancellation) count as
	// neither.
	FailureRatio float64
	// MinRequests is the number of requests in Window before FailureRatio
	// applies. Default 10.
	MinRequests uint32
	// Window is the rolling window for FailureRatio. Default 60 s.
	Window time.Duration
	// BucketPeriod is the granularity of the rolling window (gobreaker
	// BucketPeriod). Default 10 s.
	BucketPeriod time.Duration
	// MaxRequests is the number of probes let through while half-open.
	// Default 1.
	MaxRequests uint32
	// Timeout is how long the breaker stays open after its first trip
	// before it lets a probe through (half-open). Default 1 s: a deployment
	// back from a short outage gets traffic again within about a second.
	Timeout time.Duration
	// Multiplier grows the open interval on each trip that follows a failed
	// probe, without the breaker closing in between: Timeout, then
	// Timeout·Multiplier, Timeout·Multiplier², ... up to MaxTimeout (outlier
	// ejection as Envoy does it), and never more than a quarter of the time
	// since the first of these trips, so that a recovered deployment waits
	// at most about a quarter of its outage for its next probe. A close
	// starts again from Timeout. Values below 1 mean the default, 2.
	Multiplier float64
	// MaxTimeout caps the open interval. Default 60 s: a deployment down
	// for long and called rarely costs one probe a minute, and is back
	// within a minute of its recovery (ProbeShare shortens the interval
	// under traffic). A MaxTimeout below Timeout is raised to Timeout.
	MaxTimeout time.Duration
	// ProbeShare makes the open interval traffic-proportional: it is never
	// longer than the time that 1/ProbeShare calls for the deployment took,
	// at their mean rate since the breaker's first trip, and never shorter
	// than Timeout. The calls counted are those its open breaker kept off it
	// (an Executor.Do plan that lists it in Plan.Excluded as
	// route.ReasonOpen, or an attempt its breaker refused) and its probes.
	// Once the outage is long enough for the doubling and the quarter to
	// exceed it, probes take ProbeShare of the calls that would have gone
	// to it (more before, as without the bound), or one per Timeout when
	// that is fewer: a busy deployment is re-measured within seconds of its
	// recovery whatever the length of its outage, and a dead one under
	// heavy traffic gets one probe per Timeout, not a storm. Default
	// DefaultBreakerProbeShare (2%): at 10 calls/s a probe every 5 s, at
	// 50 calls/s and more one a second, and at 1 call/s (50 s) the time
	// rule above mostly decides. A negative value turns the bound off (the
	// interval is then time-based only); values above 1 mean 1.
	ProbeShare float64
}

// openInterval returns how long the breaker stays open after its n-th
// consecutive trip (n from 1), outage after the first of them, with calls
// kept off the deployment or sent to it as probes since then: the doubling
// from Timeout, at most MaxTimeout, a quarter of the outage and the time
// calls took to number 1/ProbeShare, at least Timeout.
func (b BreakerSettings) openInterval(n int, outage time.Duration, calls int64) time.Duration {
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

func (b BreakerSettings) withDefaults() BreakerSettings {
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
		b.Timeout = DefaultBreakerTimeout
	}
	if !(b.Multiplier >= 1) {
		b.Multiplier = DefaultBreakerMultiplier
	}
	if b.MaxTimeout <= 0 {
		b.MaxTimeout = DefaultBreakerMaxTimeout
	}
	b.MaxTimeout = max(b.MaxTimeout, b.Timeout)
	switch {
	case b.ProbeShare == 0 || math.IsNaN(b.ProbeShare):
		b.ProbeShare = DefaultBreakerProbeShare
	case b.ProbeShare > 1:
		b.ProbeShare = 1
	}
	return b
}

// Deadlines bound one attempt: the wait for its response headers and for its
// first output chunk, the silence between chunks, its whole length, and how
// long a finished stream may stay silent. The same value configures an
// Executor (Options.Deadlines, where a zero field means its Default*), one
// call (Call.Deadlines, where a zero field keeps the Executor's), the root
// Client's per-call WithDeadlines and a config file's "fallback" section. A
// negative field turns that deadline off. The caller's context deadline
// applies as well. It is a value and safe to share.
type Deadlines struct {
	// Headers bounds the wait for response headers. Default
	// DefaultHeadersTimeout.
	Headers time.Duration
	// TTFT bounds the wait for the first output chunk, from the start of the
	// attempt. It fails over only when another deployment is left to try;
	// on the last one the slow answer is awaited, within Silence.
	// For a deployment whose TTFT was measured (Hooks.MeasuredTTFT), it is
	// a cap: the deadline is DefaultTTFTMultiple times the measured p95, at
	// least DefaultTTFTFloor, plus 0.5 ms per Call.EstimatedInputTokens, at
	// most TTFT. When the call must answer by a time (the caller's context
	// deadline, or, for a cold deployment, TTFT after the call's start), an
	// attempt that may fail over is also left early enough for the next
	// deployment's expected TTFT and answer, but never before twice its own
	// expected TTFT (at least DefaultTTFTFloor); docs/CONFIG.md has the
	// rule. Default DefaultTTFTTimeout.
	TTFT time.Duration
	// Stall bounds the silence between output chunks after the first. SSE
	// comments and non-output chunks do not reset it. Default
	// DefaultStallTimeout.
	Stall time.Duration
	// MaxDuration bounds one attempt from sending its request to the end of
	// its stream; data events and comments do not extend it. Before the
	// commit point it fails over like the TTFT deadline, after it the stream
	// ends with a mid-stream error (ErrMaxDuration), unless the stream had
	// finished, which ends it as a success. Each continuation is a new
	// attempt with its own ceiling. Default DefaultMaxDuration.
	MaxDuration time.Duration
	// Silence bounds, on an attempt with nowhere left to fail over to, how
	// long nothing at all (no event, no comment) may arrive before the
	// first output chunk, from the headers or the last byte read: past it
	// the attempt ends with ErrSilent. An upstream that shows life (a
	// provider's queue sends keep-alives every few seconds) is awaited up
	// to MaxDuration. Default DefaultSilence.
	Silence time.Duration
	// FinishGrace is how long a finished stream (a finish_reason for every
	// choice, or "[DONE]") may go without a data event before it ends as a
	// success, with whatever usage arrived, instead of waiting for an EOF
	// that may never come. Every data event (a trailing usage chunk,
	// docs/STREAM_QUIRKS.md Q10) restarts it; comments do not. When it is
	// off, a finished stream that goes silent ends, as a success, at the
	// stall deadline or MaxDuration. Default DefaultFinishGrace.
	FinishGrace time.Duration
}

// Or returns d with each zero field taken from def.
func (d Deadlines) Or(def Deadlines) Deadlines {
	return Deadlines{
		Headers: cmp.Or(d.Headers, def.Headers), TTFT: cmp.Or(d.TTFT, def.TTFT), Stall: cmp.Or(d.Stall, def.Stall),
		MaxDuration: cmp.Or(d.MaxDuration, def.MaxDuration), FinishGrace: cmp.Or(d.FinishGrace, def.FinishGrace),
		Silence: cmp.Or(d.Silence, def.Silence),
	}
}

// defaultDeadlines are the deadlines of the zero Options.
var defaultDeadlines = Deadlines{
	Headers: DefaultHeadersTimeout, TTFT: DefaultTTFTTimeout, Stall: DefaultStallTimeout,
	MaxDuration: DefaultMaxDuration, FinishGrace: DefaultFinishGrace, Silence: DefaultSilence,
}

// HedgeOptions configures hedging: when no output arrives within a delay, the
// next deployment is started in parallel; the first to produce output wins and
// the other is cancelled. The zero value disables hedging. It is a value read
// once by New; DelayFunc must be safe for concurrent use.
type HedgeOptions struct {
	// Delay is a fixed hedge delay. Zero means use DelayFunc; if both are
	// unset, hedging is off.
	Delay time.Duration
	// DelayFunc returns the hedge delay for a deployment, for example its TTFT
	// p95 from measure, with ok false when it has no estimate (then Delay, if
	// set, is used). Called once per hedge decision; it must be safe for
	// concurrent use. Nil means use Delay.
	DelayFunc func(d route.Deployment) (delay time.Duration, ok bool)
	// Budget is the largest share of calls that may hedge, in (0, 1]. Zero
	// means 0.1.
	Budget float64
}

func (h HedgeOptions) enabled() bool { return h.Delay > 0 || h.DelayFunc != nil }

// BuildFunc builds the HTTP request for one attempt from one deployment and the
// request body (already carrying "stream": true). It must use nothing but d
// for the URL, credentials and headers. It is called from concurrent calls and
// must be safe for concurrent use.
type BuildFunc func(ctx context.Context, d route.Deployment, body []byte) (*http.Request, error)

// PrefillFunc turns a request body into a continuation request: the same
// request with text as a final assistant message to be continued. It must be
// safe for concurrent use and must not modify body.
type PrefillFunc func(body []byte, text string) ([]byte, error)

// Options tunes an Executor. The zero Options consists entirely of default
// values: the Default* deadlines, breakers and backoff, no hedging,
// MidStreamSameModel, MalformedSkip. Options is a value that New copies; the
// functions it holds (Prefill, Hedge.DelayFunc) are called from concurrent
// calls and must be safe for concurrent use. What the Executor is connected
// to (transport, observers, logger, tokenizer, fleet) is in Hooks.
type Options struct {
	// Deadlines bound each attempt; a zero field means its Default*
	// deadline, a negative one turns that deadline off.
	Deadlines Deadlines
	// AttemptsPerDeployment bounds the attempts on one deployment in one call.
	// Zero means DefaultAttemptsPerDeployment.
	AttemptsPerDeployment int
	// MaxAttempts bounds the attempts in one call, skipped deployments not
	// counted. Zero means len(plan)+AttemptsPerDeployment-1, at most 10.
	MaxAttempts int
	// BackoffBase and BackoffMax shape the full-jitter backoff between
	// attempts on one deployment. Zero means DefaultBackoffBase and
	// DefaultBackoffMax.
	BackoffBase, BackoffMax time.Duration
	// MaxWait is the longest the executor waits for a deployment that is
	// cooling down (Retry-After) or out of rate-limit budget, when nothing
	// else is available and the wait fits the caller's deadline. Zero means
	// DefaultMaxWait; negative never waits.
	MaxWait time.Duration
	// PenaltyCooldown is how long a deployment is left alone after 401, 403,
	// 404 or 429 insufficient_quota. Zero means DefaultPenaltyCooldown.
	PenaltyCooldown time.Duration
	// MidStream is the policy after the commit point. Zero means
	// MidStreamSameModel.
	MidStream MidStreamPolicy
	// Malformed says what happens to a data event that is not valid JSON.
	// Zero means MalformedSkip.
	Malformed MalformedPolicy
	// Prefill builds the continuation body for MidStreamContinue. Nil means
	// DefaultPrefill.
	Prefill PrefillFunc
	// Hedge configures hedging. The zero value disables it.
	Hedge HedgeOptions
	// Breaker configures the per-key circuit breakers.
	Breaker BreakerSettings
	// Seed seeds the jitter random source; runs with the same seed and the
	// same faults back off identically. Zero is a valid seed.
	Seed uint64
	// Limits bound the bytes one attempt holds, whatever its upstream
	// sends. The zero value means the Default* limits.
	Limits Limits
	// Rescue configures the slow-stream rescue. The zero value is on with
	// the DefaultRescue* settings; a negative Ratio turns it off.
	Rescue RescueOptions
}

// Limits bound the bytes one attempt holds, whatever the upstream sends, so
// that memory per call in flight is a constant (docs/CONFIG.md). Past a
// limit the attempt fails at once with ErrTooLarge: before the commit point
// it fails over like any fault before output; after it the caller gets a
// mid-stream error. A zero or negative field means its Default*. Limits is a
// value and safe to share.
type Limits struct {
	// Event bounds one SSE line, and the data lines of one event together,
	// in bytes; the stream fails when the cap is passed, not at the line's
	// end. Default DefaultMaxEvent.
	Event int
	// Held bounds the bytes of whole events a streaming call holds back
	// before its first output chunk; the event still arriving is bounded
	// by Event, so one call holds at most Held + Event. Default
	// DefaultMaxHeld.
	Held int
	// Answer bounds the bytes of whole events of a non-streaming call's
	// stream, which is held whole until it ends (the commit point); with
	// Call.Assemble, the bytes of stream read and the answer built from
	// them. Default DefaultMaxAnswer.
	Answer int
}

// withDefaults returns l with every field that is not positive set to its
// default.
func (l Limits) withDefaults() Limits {
	if l.Event <= 0 {
		l.Event = DefaultMaxEvent
	}
	if l.Held <= 0 {
		l.Held = DefaultMaxHeld
	}
	if l.Answer <= 0 {
		l.Answer = DefaultMaxAnswer
	}
	return l
}

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
	// deployment gets the configured Deadlines.TTFT.
	MeasuredTTFT func(d route.Deployment) (p95 time.Duration, ok bool)
	// Tokenizer, if not nil, is passed to every tps.Tap.
	Tokenizer tps.Tokenizer
	// OnAttempt is called after every attempt ends, including skipped
	// deployments, on the goroutine that ended it. It must not block. Nil
	// means no hook.
	OnAttempt func(Attempt)
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
// Executor's Options. A Call is a value; Do neither keeps nor modifies it, so
// one Call may be passed to concurrent Do calls.
type Call struct {
	// Body is the caller's JSON chat-completion request (logical model). It
	// is always sent with "stream": true; the executor does not modify it.
	Body []byte
	// Stream is true for a streaming caller: the call commits at the first
	// output chunk. False commits at the end: the whole stream is buffered so
	// that any failure before the end fails over invisibly.
	Stream bool
	// Assemble, for a non-streaming call, makes Result.Body the
	// chat.completion JSON that the stream's chunks add up to
	// (tps.Accumulator), built from each chunk as the tap scans it, instead
	// of the buffered stream: the call holds the answer and none of the
	// stream, Limits.Answer bounds both the stream read and the answer, and
	// Result.ContentLength is the answer's length. A string of the answer
	// that holds the deployment's credential reads "REDACTED", as in a
	// stream. Ignored when Stream is true.
	Assemble bool
	// Plain, for a non-streaming call, sends every attempt as a plain
	// upstream call ("stream": false), as to a deployment that declares
	// Capabilities.NoStream: the call then costs what a plain client's
	// does, and is timed as total latency only (docs/CONFIG.md, "Plain
	// upstream calls"). Ignored when Stream is true.
	Plain bool
	// Build builds each attempt's request. Nil means DefaultBuild.
	Build BuildFunc
	// Protocol is the API whose stream each attempt answers with, which the
	// tap times and checks by that API's events (tps.WithProtocol): a
	// Responses or Messages stream commits at its first output delta and
	// fails on its failure events. The zero value is chat completions.
	// Assemble and a mid-stream continuation are for chat streams only: with
	// another protocol Assemble is ignored (Result.Body is the buffered
	// stream) and a failure after the commit point ends the stream with an
	// ErrMidStream error whose Continuation is ContinuationUnsupported.
	// Every attempt of a tps.ProtocolEmbeddings call is a plain call (its
	// answer never streams), framed for the tap as one event
	// (tps.AppendEvent); its Sample is not Unstreamed: its TTFT is the
	// answer's latency, which routing compares.
	Protocol tps.Protocol
	// Deadlines override Options.Deadlines for this call, field by field:
	// a zero field inherits, a negative one turns that deadline off.
	Deadlines Deadlines
	// MidStream overrides Options.MidStream; MidStreamDefault inherits.
	MidStream MidStreamPolicy
	// NoHedge disables hedging for this call.
	NoHedge bool
	// NoFallback tries only the plan's first deployment (retries included).
	NoFallback bool
	// MinTPS is the SLO's least generation rate for this call, in tokens/s
	// (route.SLO.MinTPS); zero means none. A slow stream is rescued only
	// below it as well (RescueOptions).
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
