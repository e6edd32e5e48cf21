// Package replay provides fake LLM providers for tests, for OpenAI's Chat
// Completions and Responses APIs, Anthropic's Messages API and embeddings:
// synthetic profiles with controlled timing, recorded cassettes replayed with
// their original timing, and composable faults.
//
// # Scripts
//
// A Handler (or a Server on 127.0.0.1) answers each request (POST
// .../chat/completions, .../responses, .../messages, .../embeddings) with the
// Script registered for the request body's model:
//
//   - *Profile: a synthetic provider streaming the deterministic Text with a
//     configured TTFT, TPS, jitter, chunking, provider dialect (Style), prompt
//     cache and behaviour that changes over time (Phase).
//   - *Cassette: a recorded stream played back byte-exact with its original
//     timing, scaled timing, or as fast as possible, as the API its recorded
//     path names (Responses, Messages and embeddings too: docs/CASSETTE.md).
//   - WithFaults(script, faults...): the script with failures injected, each
//     selected by attempt number or elapsed time.
//
// A request that does not ask for a stream gets the accumulated
// chat.completion (internal/answer's Accumulator: every choice of an n>1 answer, each with
// its text, reasoning, refusal and tool calls), with usage, at the time the
// stream would have ended; a Responses or Messages stream gives the API's
// own answer (internal/answer: ResponsesAnswer, MessagesAnswer).
//
// A request body that is not JSON gets 400, one over 64 MiB 413
// (request_too_large), a model with no Script 404, each with an
// OpenAI-shaped error body.
//
// # Fake time
//
// Handler.Transport is an in-memory http.RoundTripper: no sockets, a pipe per
// response. Inside a testing/synctest bubble every TTFT, gap, stall and
// Retry-After is virtual, so a test of a 30 s deadline runs in microseconds.
// Create the Handler inside the bubble so its clock (Phase.After, During,
// DownFor) is the bubble's.
// Hosts puts several Handlers behind one in-memory RoundTripper, each at
// its own host, for a simulated fleet of providers.
//
// # Attempts
//
// Every request is logged as an Attempt with its arrival time, redacted
// headers, a body summary, the status, the outcome and the chunks sent.
// Attempt numbers count requests per model on one Handler, from 1.
//
// # Recording
//
// A Recorder is an http.RoundTripper that writes one cassette per call with
// each event's timing as the body is read, redacting credentials. The
// cassette format is described in docs/CASSETTE.md. Bundled returns
// cassettes, embedded in the package, of quirky provider dialects.
package replay
