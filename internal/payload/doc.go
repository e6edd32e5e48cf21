// Package payload is the one parser of what an SSE event of a provider's
// stream carries: a chat-completion chunk (ParseChunk), a Responses,
// Messages or embeddings event mapped onto the same Chunk (ParseEvent), an
// error body of any shape seen in the wild (ParseErrorBody), the JSON
// string's one decoder and one encoder (AppendUnescaped, AppendQuoted), and
// the answer helper built on the same scanner (AppendCompletionEvents).
//
// tps's Tap and Stream time every stream with it; internal/answer folds its
// Chunks into a non-streaming answer, internal/executor classifies error
// bodies and frames plain answers with it, and replay reads cassettes with
// it. It is internal because users read the timing (tps.Sample) and the
// answers (openai-go's types, the root's Stream.Delta), never a parsed
// Chunk: it moved here from tps in issue 27's third round of the public
// surface.
//
// The parsers do not allocate once a Chunk's scratch buffer has grown and
// never panic on any input. A Chunk is not safe for concurrent use; the
// functions are.
package payload
