package tps

import "github.com/tpsroute/tpsroute/internal/payload"

// ErrMalformed is the error for a stream event whose data is not one
// well-formed JSON object (a Client's Stream returns it). It is the chunk
// parser's (internal/payload) own value, whose message keeps the "tps: "
// prefix for that reason.
var ErrMalformed = payload.ErrMalformed

// Usage is a chunk's usage block, as a Client's Stream.Delta reports it.
// Zero fields were absent or zero. A Usage is a value and safe to copy.
type Usage struct {
	PromptTokens     int64 // usage.prompt_tokens
	CompletionTokens int64 // usage.completion_tokens, includes reasoning tokens
	TotalTokens      int64 // usage.total_tokens
	// CachedTokens is prompt_tokens_details.cached_tokens, or DeepSeek's
	// prompt_cache_hit_tokens when that is present instead.
	CachedTokens int64
	// CachedReported reports whether either cached-token field was present
	// (so CachedTokens == 0 means a cold cache rather than "unknown").
	CachedReported bool
	// ReasoningTokens is completion_tokens_details.reasoning_tokens.
	ReasoningTokens int64
	// CacheCreationTokens is a Messages stream's cache_creation_input_tokens:
	// input tokens written to the provider's cache (ProtocolMessages).
	CacheCreationTokens int64
	// CompletionReported reports whether completion_tokens was present.
	CompletionReported bool
}

// The parser's usage block converts to Usage (the root's Stream.Delta hands
// a *Usage over a parsed chunk's): a compile error here means the two
// definitions drifted apart.
var _ = Usage(payload.Usage{})
