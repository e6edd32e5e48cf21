package tps

import "github.com/tpsroute/tpsroute/internal/payload"

// Protocol says which API's stream a Tap reads, and so how each SSE event's
// data is parsed (by the module's one chunk parser). The framing (lines, events, comments, the
// event cap) is the same for every protocol; only the payload differs. The
// zero Protocol is ProtocolChat.
type Protocol uint8

const (
	// ProtocolChat is an OpenAI Chat Completions stream: every event is a
	// chat.completion.chunk.
	ProtocolChat Protocol = iota
	// ProtocolResponses is an OpenAI Responses stream (POST /v1/responses):
	// the output_text, refusal, reasoning and function-call argument deltas
	// are output, response.completed and response.incomplete end it with
	// their usage, response.failed and "error" are errors.
	ProtocolResponses
	// ProtocolMessages is an Anthropic Messages stream (POST /v1/messages):
	// non-empty text, thinking and input_json deltas are output, usage is
	// split between message_start (input) and message_delta (output),
	// message_stop is the end and "error" an error.
	ProtocolMessages
	// ProtocolEmbeddings is an OpenAI embeddings answer (POST
	// /v1/embeddings), which never streams: read whole and framed as one
	// event: a non-empty "data" array is the one output event (TTFT is the
	// answer's latency), usage.prompt_tokens the input tokens; the vectors
	// are skipped, never decoded.
	ProtocolEmbeddings
)

// String returns "chat", "responses", "messages" or "embeddings".
func (p Protocol) String() string {
	return enumString(uint8(p), "Protocol", "chat", "responses", "messages", "embeddings")
}

// WithProtocol makes a Tap parse its events as protocol p's payloads
// (docs/METRICS.md, "Responses and Messages streams"): the first output
// event is TTFT, usage gives the tokens, and the protocol's failure events
// are in-stream errors. A Timer fed by hand merges a Messages stream's usage
// across message_start and message_delta with it. The default is
// ProtocolChat. A Stream (openai-go's chat decoder) ignores it.
func WithProtocol(p Protocol) Option {
	return func(o *options) { o.protocol = p }
}

// parse parses one event's data as protocol p's payload into c, as a Tap
// with WithProtocol(p) does: internal/payload's ParseEvent, which reads a
// Protocol's value (TestProtocolValues pins them).
func (p Protocol) parse(data []byte, c *payload.Chunk) error {
	return payload.ParseEvent(uint8(p), data, c)
}
