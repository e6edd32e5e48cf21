package tps

import (
	"strconv"
	"time"
)

// TokenSource says where Sample.OutputTokens came from.
type TokenSource uint8

const (
	// TokenSourceNone means no output was seen.
	TokenSourceNone TokenSource = iota
	// TokenSourceUsage means the server's usage.completion_tokens (the last one seen).
	TokenSourceUsage
	// TokenSourceTokenizer means the configured Tokenizer counted the output text.
	TokenSourceTokenizer
	// TokenSourceChunks means the count of output-bearing chunks, a lower bound.
	TokenSourceChunks
)

// Implausible says why a Timer did not trust the server's
// usage.completion_tokens (docs/METRICS.md, "Plausible usage"). Its zero
// value, ImplausibleNone, means that usage was trusted, or that none
// reported completion_tokens.
type Implausible uint8

const (
	// ImplausibleNone means the reported count was used, or there was none.
	ImplausibleNone Implausible = iota
	// ImplausibleOverStreamed means the reported count, less the reasoning
	// tokens that were not streamed, is more than the output bytes streamed
	// plus a slack of 32 tokens: more tokens than the stream could have carried.
	ImplausibleOverStreamed
	// ImplausibleNegative means a negative completion_tokens or
	// reasoning_tokens.
	ImplausibleNegative
	// ImplausibleNoVisible means output was streamed but the reported count
	// leaves no token for it (completion_tokens 0, or all of it reasoning
	// that was not streamed).
	ImplausibleNoVisible
)

// usageSlack is how many more tokens than streamed output bytes a stream's
// visible output may be reported to hold: tokens that real servers count
// but do not stream, such as chat-template and channel markers (gpt-oss's
// harmony format adds about ten per answer), the end-of-sequence token and
// the <think> tags a reasoning parser strips (docs/METRICS.md, "Plausible
// usage"). Tool calls need none: their streamed JSON is counted whole.
const usageSlack = 32

// CacheState says whether the provider served the prompt from its prefix cache.
type CacheState uint8

const (
	// CacheUnknown means the provider did not report cached tokens.
	CacheUnknown CacheState = iota
	// CacheCold means usage reported zero cached prompt tokens.
	CacheCold
	// CacheWarm means usage reported more than zero cached prompt tokens.
	CacheWarm
)

// Phase says how far a stream got before it failed.
type Phase uint8

const (
	// PhaseNone means no error.
	PhaseNone Phase = iota
	// PhaseConnect means the connection could not be made or the request not written.
	PhaseConnect
	// PhaseHeaders means the connection was made but response headers never arrived
	// or carried an error status.
	PhaseHeaders
	// PhaseFirstToken means headers arrived but the stream failed before its first
	// output chunk.
	PhaseFirstToken
	// PhaseMidStream means the stream failed after at least one output chunk.
	PhaseMidStream
)

// End says how a stream ended.
type End uint8

const (
	// EndNone means the stream has not ended.
	EndNone End = iota
	// EndDone means the "data: [DONE]" sentinel was read (Tap only).
	EndDone
	// EndEOF means the body reached a clean EOF without "[DONE]" (Tap), which
	// several servers do (docs/STREAM_QUIRKS.md Q5). Check FinishReason or Truncated.
	EndEOF
	// EndStream means openai-go's stream ended without an error (Stream).
	// openai-go hides whether "[DONE]" or a bare EOF ended it.
	EndStream
	// EndError means the stream failed: a read error, a decode error or an
	// in-stream error event. Err says which.
	EndError
	// EndClosed means the consumer closed the stream before its end.
	EndClosed
)

// String returns the lower-case name of e ("done", "eof", ...).
func (e End) String() string {
	return enumString(uint8(e), "End", "none", "done", "eof", "stream", "error", "closed")
}

// Sample is the measurement of one streamed chat completion.
// All durations are measured from Start on the client's monotonic clock.
// A zero duration means the event did not happen.
// Sample is a value; it is safe to copy and to share once the stream has ended.
type Sample struct {
	Start     time.Time     // just before the request was written
	Headers   time.Duration // response headers arrived
	FirstByte time.Duration // first SSE event or comment
	TTFT      time.Duration // first output-bearing chunk
	Last      time.Duration // last output-bearing chunk
	E2E       time.Duration // last output chunk - Start
	Total     time.Duration // end of stream (EOF, [DONE], error or Close) - Start

	TPS    float64       // (OutputTokens - HiddenTokens - FirstChunkTokens) / (Last - TTFT) in tokens/s; 0 unless TPSOK
	TPSOK  bool          // two or more output chunks, Last > TTFT and streamed tokens after the first chunk
	TPOT   time.Duration // (Last - TTFT) / (OutputTokens - HiddenTokens - 1); zero when undefined
	E2ETPS float64       // OutputTokens / E2E, includes TTFT

	OutputTokens     int64       // last plausible usage.completion_tokens, else Tokenizer count, else output deltas
	TokenSource      TokenSource // where OutputTokens came from
	FirstChunkTokens int64       // first output chunk: Tokenizer count, else 1 per delta (vLLM/AIPerf)
	InputTokens      int64       // usage.prompt_tokens
	CachedTokens     int64       // prompt_tokens_details.cached_tokens or prompt_cache_hit_tokens
	ReasoningTokens  int64       // completion_tokens_details.reasoning_tokens; 0 when usage was implausible
	Cache            CacheState  // warm, cold or unknown, from the cached-token field

	// ID is the id of the answer a Responses or Messages stream carried
	// (response.id, message.id; the last non-empty one), which a later
	// Responses call names as previous_response_id. Empty for chat streams.
	ID string

	// CacheCreationTokens is the part of InputTokens written to the
	// provider's prompt cache (a Messages stream's
	// cache_creation_input_tokens); 0 when not reported.
	CacheCreationTokens int64

	// Unstreamed reports an answer that came in one piece, not as a stream
	// (a plain upstream call, or a JSON answer to a streaming request): its
	// TTFT, Last and E2E are the whole answer's latency and its TPS, TPOT
	// and gaps were not seen. Set by the caller of the Tap that read it
	// (fallback), since the Tap reads the answer as a stream of one chunk.
	Unstreamed bool

	// HiddenTokens is the part of OutputTokens made before the first output
	// and never streamed: reasoning tokens beyond what the streamed
	// reasoning text could hold (docs/METRICS.md, "Plausible usage"). TPS
	// and TPOT count only the streamed rest; 0 unless usage was trusted.
	HiddenTokens int64
	// Implausible says why the reported usage.completion_tokens was not
	// used for OutputTokens (TokenSource then says what was);
	// ImplausibleNone when it was, or when none was reported.
	Implausible Implausible

	Chunks       int64    // every data event decoded, output-bearing or not
	OutputChunks int64    // chunks that carried output
	Comments     int64    // SSE comments (keep-alives, processing notices)
	Malformed    int64    // data events that could not be decoded
	Gaps         GapStats // gaps between consecutive output chunks

	FinishReason      string       // last non-null choices[].finish_reason
	Model             string       // last non-empty "model"
	SystemFingerprint string       // last non-empty "system_fingerprint"
	Server            ServerTiming // server-reported timings, last non-zero value of each

	// NonStandard counts SSE lines with a field name other than data,
	// event, id and retry (docs/STREAM_QUIRKS.md Q3). An "error:" field is also
	// reported as a StreamError.
	NonStandard int64

	// End says how the stream ended; EndNone while it runs.
	End End
	// Truncated reports a stream that ended without an error (EndDone,
	// EndEOF or EndStream) but without any finish_reason: the answer may
	// have been cut short, or an error was dropped by the server
	// (docs/STREAM_QUIRKS.md Q3, Q5).
	// It is not an error; the consumer decides.
	Truncated bool

	// Err is the first failure: a read error (wrapped, "tps: reading
	// stream: ..."), openai-go's decode error, or a *StreamError for an
	// in-stream error event. Nil for a clean end and for EndClosed.
	Err      error
	ErrPhase Phase // how far the stream got before Err; PhaseNone when Err is nil
}

// GapStats summarises the gaps between consecutive output chunks without keeping
// every gap.
// GapStats is a value and safe to copy.
type GapStats struct {
	Count int64         // number of gaps: OutputChunks - 1, or 0
	Sum   time.Duration // Last - TTFT
	Min   time.Duration // smallest gap; zero when Count is 0
	Max   time.Duration // largest gap; zero when Count is 0
}

// Mean returns the mean gap (AIPerf's inter-chunk latency) and false when
// there is no gap.
func (g GapStats) Mean() (time.Duration, bool) {
	if g.Count == 0 {
		return 0, false
	}
	return g.Sum / time.Duration(g.Count), true
}

// ServerTiming holds timing a server reported about itself, when it did
// (llama.cpp "timings", Groq "x_groq.usage"). Zero fields were not reported.
// A ServerTiming is a value and safe to copy.
type ServerTiming struct {
	Queue              time.Duration
	Prompt             time.Duration
	Completion         time.Duration
	Total              time.Duration
	PredictedPerSecond float64
	CacheN             int64
}

// String returns "none", "usage", "tokenizer" or "chunks".
func (t TokenSource) String() string {
	return enumString(uint8(t), "TokenSource", "none", "usage", "tokenizer", "chunks")
}

// String returns "none", "over-streamed", "negative" or "no-visible".
func (i Implausible) String() string {
	return enumString(uint8(i), "Implausible", "none", "over-streamed", "negative", "no-visible")
}

// String returns "unknown", "cold" or "warm".
func (c CacheState) String() string {
	return enumString(uint8(c), "CacheState", "unknown", "cold", "warm")
}

// String returns "none", "connect", "headers", "first-token" or "mid-stream".
func (p Phase) String() string {
	return enumString(uint8(p), "Phase", "none", "connect", "headers", "first-token", "mid-stream")
}

// enumString returns names[v], or "typ(v)" for a value outside names.
func enumString(v uint8, typ string, names ...string) string {
	if int(v) < len(names) {
		return names[v]
	}
	return typ + "(" + strconv.Itoa(int(v)) + ")"
}
