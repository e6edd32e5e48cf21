// Package tps measures one streamed chat completion: time to first token,
// generation-phase tokens per second, time per output token, token counts,
// cache state and how the stream ended. It is the measurement every other
// tpsroute package builds on, and it follows the conventions of vLLM, AIPerf
// and Artificial Analysis (docs/METRICS.md has the exact definitions).
//
// # Two doors, one measurement
//
// Wrap times an openai-go stream (*ssestream.Stream[openai.ChatCompletionChunk])
// and keeps its Next/Current/Err/Close shape. NewTap times a raw
// Server-Sent Events body (an io.ReadCloser) for HTTP transports and
// gateways; its bytes pass through unchanged. Both decode every chunk with
// the module's one chunk parser (internal/payload) and feed one measurement
// core, so they measure identically. Each ends with a Sample.
//
// # The measurement core
//
// Under both doors an unexported timer is fed exact times (headers,
// comments, events, failures, the end), so every metric is tested on exact
// values. Recording an output chunk takes a few tens of nanoseconds and
// does not allocate.
//
// # What counts as output
//
// A chunk carries output when any choice has non-empty delta.content,
// reasoning_content, reasoning or refusal, or a tool-call fragment. Role-only
// chunks, empty or null content, annotation chunks without a delta, usage-only
// chunks and SSE comments do not count, and do not start TTFT.
//
// # Tokens
//
// OutputTokens is the last usage.completion_tokens seen (never summed), else a
// Tokenizer's count (WithTokenizer), else the number of output deltas;
// Sample.TokenSource says which was used. stream_options.include_usage asks
// the server for usage (the Client sets it; with Wrap, set it on the
// params). Usage is used only when the stream could have carried it: the
// visible tokens it reports, less reasoning that was never streamed
// (Sample.HiddenTokens, left out of TPS), fit in the output bytes streamed
// plus a slack of 32 tokens; otherwise Sample.Implausible says why
// (docs/METRICS.md, "Plausible usage").
//
// # Errors and endings
//
// A payload with a top-level "error", an "event: error" frame, or a
// non-standard "error:" field becomes a *StreamError with the phase the
// stream had reached. A read error is an error, never a success. A clean end
// without a finish_reason is flagged as Sample.Truncated. Nothing in this
// package panics on any input.
//
// # Framing, parsing and accumulation
//
// The Tap frames with the library's one SSE framer (internal/sse, whose
// buffer and reader forms the root's Stream, the executor and replay use)
// and parses with its one chunk parser (internal/payload, which the root's
// Stream, the executor and replay use too). The chunks it parses are
// folded into the chat.completion a non-streaming call answers by
// internal/answer's Accumulator, which the Client feeds from a Tap's
// observer.
//
// # Observers
//
// WithCommentObserver calls a function synchronously for every SSE comment,
// after the measurement saw it. The observer of every parsed chunk, through
// which the Client's executor finds its commit point, stall deadlines and
// in-stream errors, is internal (internal/tpsseam), since the chunk it hands
// over is the internal parser's.
package tps
