package fallback

import (
	"cmp"
	"time"

	"github.com/tpsroute/tpsroute/route"
)

// MidStreamPolicy says what happens when a stream fails after the commit point.
// It is a plain value, safe for concurrent use.
type MidStreamPolicy uint8

const (
	// MidStreamDefault in a call's override means "use Options.MidStream";
	// in Options it means MidStreamSameModel.
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
	// caller reads one continuous SSE stream (for the Messages API, one
	// Messages stream). Streams that carried tool calls, reasoning or more
	// than one choice, Responses API streams, and calls with no
	// prefill-capable deployment left, get the MidStreamError behaviour. A
	// deployment that rejected a prefill (a 400 naming the assistant message
	// or the prefill) is remembered by the Client and never offered a
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
	// on, before and after the first output chunk alike. The third
	// malformed event of one stream fails the stream with ErrMalformed
	// (and a line or event longer than Limits.Event with ErrTooLarge):
	// before the first output chunk the call fails over invisibly, after it
	// the mid-stream policy applies.
	MalformedSkip MalformedPolicy = iota
	// MalformedFail fails the stream with ErrMalformed at its first
	// malformed event. The whole events before it are still delivered.
	MalformedFail
)

// BreakerSettings configures the circuit breaker kept per measure.Key. A zero
// field means its default. It is a value read once when the Client is made;
// safe to share.
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
	// (a call whose plan lists it in Plan.Excluded as
	// route.ReasonOpen, or an attempt its breaker refused) and its probes.
	// Once the outage is long enough for the doubling and the quarter to
	// exceed it, probes take ProbeShare of the calls that would have gone
	// to it (more before, as without the bound), or one per Timeout when
	// that is fewer: a busy deployment is re-measured within seconds of its
	// recovery whatever the length of its outage, and a dead one under
	// heavy traffic gets one probe per Timeout, not a storm. Default
	// 0.02 (2%): at 10 calls/s a probe every 5 s, at
	// 50 calls/s and more one a second, and at 1 call/s (50 s) the time
	// rule above mostly decides. A negative value turns the bound off (the
	// interval is then time-based only); values above 1 mean 1.
	ProbeShare float64
}

// Deadlines bound one attempt: the wait for its response headers and for its
// first output chunk, the silence between chunks, its whole length, and how
// long a finished stream may stay silent. The same value configures the
// Client (Options.Deadlines, where a zero field means the default its
// comment states), one call (the root Client's per-call WithDeadlines, where
// a zero field keeps the configured one) and a config file's "fallback"
// section. A
// negative field turns that deadline off. The caller's context deadline
// applies as well. It is a value and safe to share.
type Deadlines struct {
	// Headers bounds the wait for response headers. Default 15 s: providers
	// send headers well under a second when healthy, which leaves room for
	// a congested gateway while a silent provider cannot hold a call for
	// minutes.
	Headers time.Duration
	// TTFT bounds the wait for the first output chunk, from the start of the
	// attempt. It fails over only when another deployment is left to try;
	// on the last one the slow answer is awaited, within Silence.
	// For a deployment whose TTFT was measured (the Client measures every
	// stream), it is a cap: the deadline is 3 times the measured p95, at
	// least 3 s, plus 0.5 ms per estimated prompt token, at most TTFT. When the call must answer by a time (the caller's context
	// deadline, or, for a cold deployment, TTFT after the call's start), an
	// attempt that may fail over is also left early enough for the next
	// deployment's expected TTFT and answer, but never before twice its own
	// expected TTFT (at least 3 s); docs/CONFIG.md has the rule. Default
	// 15 s, above the p99 TTFT of interactive chat on a healthy provider.
	TTFT time.Duration
	// Stall bounds the silence between output chunks after the first. SSE
	// comments and non-output chunks do not reset it. Default 20 s: healthy
	// streams have sub-second gaps, content filters make them bursty by a
	// few seconds.
	Stall time.Duration
	// MaxDuration bounds one attempt from sending its request to the end of
	// its stream; data events and comments do not extend it. Before the
	// commit point it fails over like the TTFT deadline, after it the stream
	// ends with a mid-stream error (ErrMaxDuration), unless the stream had
	// finished, which ends it as a success. Each continuation is a new
	// attempt with its own ceiling. Default 30 min, far above any real
	// generation (a 32k-token answer at 20 tokens/s takes 27 min): it
	// releases a stream that would otherwise never end
	// (docs/STREAM_QUIRKS.md Q2, Q27).
	MaxDuration time.Duration
	// Silence bounds, on an attempt with nowhere left to fail over to, how
	// long nothing at all (no event, no comment) may arrive before the
	// first output chunk, from the headers or the last byte read: past it
	// the attempt ends with ErrSilent. An upstream that shows life (a
	// provider's queue sends keep-alives every few seconds) is awaited up
	// to MaxDuration. Default 2 min, above the time a reasoning model at
	// its default effort thinks without sending anything.
	Silence time.Duration
	// FinishGrace is how long a finished stream (a finish_reason for every
	// choice, or "[DONE]") may go without a data event before it ends as a
	// success, with whatever usage arrived, instead of waiting for an EOF
	// that may never come. Every data event (a trailing usage chunk,
	// docs/STREAM_QUIRKS.md Q10) restarts it; comments do not. When it is
	// off, a finished stream that goes silent ends, as a success, at the
	// stall deadline or MaxDuration. Default 2 s.
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

// HedgeOptions configures hedging: when no output arrives within a delay, the
// next deployment is started in parallel; the first to produce output wins and
// the other is cancelled. The zero value disables hedging. It is a value read
// once when the Client is made; DelayFunc must be safe for concurrent use.
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

// PrefillFunc turns a request body into a continuation request: the same
// request with text as a final assistant message to be continued. It must be
// safe for concurrent use and must not modify body.
type PrefillFunc func(body []byte, text string) ([]byte, error)

// Options tunes failover (tpsroute.Config.Fallback). The zero Options
// consists entirely of default values: the deadlines, breakers, backoff and
// limits each field's comment states, no hedging, MidStreamSameModel,
// MalformedSkip. Options is a value that the Client copies when it is made;
// the functions it holds (Prefill, Hedge.DelayFunc) are called from
// concurrent calls and must be safe for concurrent use. What the executor is
// connected to (transport, observers, logger, tokenizer, fleet) is the
// Client's (tpsroute.Config).
type Options struct {
	// Deadlines bound each attempt; a zero field means its default
	// deadline, a negative one turns that deadline off.
	Deadlines Deadlines
	// AttemptsPerDeployment bounds the attempts on one deployment in one call.
	// Zero means 2.
	AttemptsPerDeployment int
	// MaxAttempts bounds the attempts in one call, skipped deployments not
	// counted. Zero means len(plan)+AttemptsPerDeployment-1, at most 10.
	MaxAttempts int
	// BackoffBase and BackoffMax shape the full-jitter backoff between
	// attempts on one deployment: a uniform draw in [0, min(BackoffMax,
	// BackoffBase·2^n)). Zero means 250 ms and 5 s.
	BackoffBase, BackoffMax time.Duration
	// MaxWait is the longest a call waits, after its latest attempt, for a
	// deployment that is cooling down (Retry-After), out of rate-limit
	// budget, at its Limits.MaxInFlight or at a concurrency limit learnt
	// from its 429s, when nothing else is available; never past the
	// caller's deadline. A wait for a full deployment ends as soon as one of
	// its calls ends. Zero means 10 s; negative never waits.
	MaxWait time.Duration
	// PenaltyCooldown is how long a deployment is left alone after 401, 403,
	// 404 or 429 insufficient_quota. Zero means 5 min.
	PenaltyCooldown time.Duration
	// MidStream is the policy after the commit point. Zero means
	// MidStreamSameModel.
	MidStream MidStreamPolicy
	// Malformed says what happens to a data event that is not valid JSON.
	// Zero means MalformedSkip.
	Malformed MalformedPolicy
	// Prefill builds the continuation body of a chat stream for
	// MidStreamContinue and MidStreamSameModel. Nil appends
	// {"role":"assistant","content":text,"prefix":true} to the body's
	// messages: the shape DeepSeek and Mistral accept for assistant
	// prefill, and a final assistant message that vLLM, SGLang and
	// Anthropic-style servers continue. A deployment that needs another
	// shape (for example vLLM's "continue_final_message") gets it here.
	// A Messages API stream is continued by the Messages API's own prefill
	// (the text appended to a final assistant message, without its
	// trailing whitespace), never by this function.
	Prefill PrefillFunc
	// Hedge configures hedging. The zero value disables it.
	Hedge HedgeOptions
	// Breaker configures the per-key circuit breakers.
	Breaker BreakerSettings
	// Seed seeds the jitter random source; runs with the same seed and the
	// same faults back off identically. Zero is a valid seed.
	Seed uint64
	// Limits bound the bytes one attempt holds, whatever its upstream
	// sends. The zero value means the default limits its fields state.
	Limits Limits
	// Rescue configures the slow-stream rescue. The zero value is on with
	// the defaults its fields state; a negative Ratio turns it off.
	Rescue RescueOptions
}

// Limits bound the bytes one attempt holds, whatever the upstream sends, so
// that memory per call in flight is a constant (docs/CONFIG.md). Past a
// limit the attempt fails at once with ErrTooLarge: before the commit point
// it fails over like any fault before output; after it the caller gets a
// mid-stream error. A zero or negative field means the default its comment
// states. Limits is a value and safe to share.
type Limits struct {
	// Event bounds one SSE line, and the data lines of one event together,
	// in bytes; the stream fails when the cap is passed, not at the line's
	// end. Default 4 MiB, a Tap's default (tps.WithMaxEvent). A plain JSON answer (embeddings, a
	// plain upstream call, a provider that ignored "stream") is bounded by
	// Answer instead, as one body: an embeddings batch may be one answer
	// of tens of MiB.
	Event int
	// Held bounds the bytes of whole events a streaming call holds back
	// before its first output chunk; the event still arriving is bounded
	// by Event, so one call holds at most Held + Event. Default
	// 1 MiB: what a streaming call holds before its first output chunk is
	// a role chunk, a few annotations and keep-alive comments, a few KiB
	// even after minutes in a provider's queue.
	Held int
	// Answer bounds the bytes of whole events of a non-streaming call's
	// stream, which is held whole until it ends (the commit point); with
	// an assembled answer (the root's non-streaming doors), the bytes of
	// stream read and the answer built from them. Default 32 MiB: the
	// stream of a 128k-token answer at about 250 bytes per chunk.
	Answer int
}
