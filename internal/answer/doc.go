// Package answer builds the answer an API gives a call that did not ask
// for a stream from the events of the stream that was read instead: the
// Accumulator folds chat-completion chunks, as payload.ParseChunk scanned them,
// into one chat.completion (every choice, tool calls, logprobs, the last
// usage), and ResponsesAnswer and MessagesAnswer fold a buffered Responses
// or Messages stream into that API's own answer.
//
// It is the one home of that assembly: internal/executor builds every
// non-streaming chat call's answer with an Accumulator fed by the tap's
// observer, the root folds non-streaming Responses and Messages calls, and
// replay plays non-streamed answers with both. It is internal because
// callers read answers, never build them: the Client hands back the
// assembled JSON.
//
// Strings are kept as sent, still JSON-escaped. The functions are safe for
// concurrent use; an Accumulator is not.
package answer
