package payload

import (
	"errors"
	"math"
	"time"
)

// ErrMalformed is returned by ParseChunk for a payload that is not one
// well-formed JSON object. Its message begins "tps: " since users see it as
// tps.ErrMalformed (a Client's Stream returns it).
var ErrMalformed = errors.New("tps: malformed chunk JSON")

// Chunk is what one streamed chat-completion payload says, as far as timing,
// counting and assembling the answer (internal/answer's Accumulator) need. ParseChunk fills
// it; Tap and Stream also set Done, Malformed, Error and Event from the SSE
// framing.
//
// Byte-slice fields are views into the parsed payload or into the Chunk's own
// scratch buffer. They are valid only until the next ParseChunk on the same
// Chunk (for an observer: until it returns) and must not be modified; copy
// what you keep. A Chunk is not safe for concurrent use; reusing one across
// calls avoids allocation.
type Chunk struct {
	// Output reports whether any choice carried output: non-empty
	// delta.content (string, or a non-empty typed-content array),
	// delta.reasoning_content, delta.reasoning, delta.refusal, or a
	// non-empty delta.tool_calls (or legacy function_call).
	Output bool
	// OutputDeltas is the number of choices with output in this chunk;
	// 1 for ordinary streams, more only when n>1 choices share a chunk.
	OutputDeltas int
	// Content is the raw, still JSON-escaped text of content, reasoning and
	// refusal fields of every choice, concatenated. Use AppendText for the
	// decoded text. Nil when the chunk carried no text.
	Content []byte
	// ToolCall reports whether the chunk carried a tool-call fragment.
	ToolCall bool
	// Reasoning reports whether the chunk carried non-empty reasoning text.
	Reasoning bool
	// OutputBytes is how many bytes of output the chunk carried, as sent
	// (still JSON-escaped): every non-empty content, reasoning and refusal
	// string, and the whole JSON text of every typed-content array,
	// tool_calls array and function_call object that counted as output.
	// It bounds the tokens the chunk can have carried (docs/METRICS.md,
	// "Plausible usage").
	OutputBytes int
	// ReasoningBytes is the part of OutputBytes that may have carried
	// reasoning: reasoning strings and typed-content arrays.
	ReasoningBytes int
	// FinishReason is the raw last non-null choices[].finish_reason in the
	// chunk, nil when none.
	FinishReason []byte
	// HasUsage reports whether the chunk carried a usage object: "usage",
	// or Groq's "x_groq.usage" when "usage" is absent or null.
	HasUsage bool
	// Usage is the chunk's token usage; meaningful only if HasUsage.
	Usage Usage
	// HasServer reports whether the chunk carried server-side timings.
	HasServer bool
	// Server holds the server-side timings the chunk reported (llama.cpp
	// "timings", Groq "x_groq.usage" or "usage" time fields); zero fields
	// were not reported.
	Server ServerTiming
	// Error reports an in-stream error: a non-null top-level "error" key,
	// an SSE "event: error" frame, or a non-standard "error:" SSE field.
	Error bool
	// ErrorBody is the raw JSON of the top-level "error" value, or the whole
	// event data when the error came from the SSE framing.
	ErrorBody []byte
	// UsageRaw is the JSON text of the usage object that HasUsage reports
	// ("usage", or "x_groq.usage"), as sent; nil without one.
	UsageRaw []byte
	// ID is the raw "id" string, nil when absent or not a string.
	ID []byte
	// Created is the "created" Unix time in seconds, 0 when absent.
	Created int64
	// Model is the raw "model" string, nil when absent.
	Model []byte
	// SystemFingerprint is the raw "system_fingerprint" string, nil when
	// absent or null.
	SystemFingerprint []byte
	// ServiceTier is the raw "service_tier" string, nil when absent or
	// null.
	ServiceTier []byte
	// Done reports the SSE "[DONE]" sentinel; no other field is set then.
	// Set by Tap only; openai-go hides the sentinel from Stream.
	Done bool
	// Malformed reports a data event that was not a well-formed JSON object.
	// Set by Tap; ParseChunk reports it as ErrMalformed instead.
	Malformed bool
	// Event is the SSE event type ("error", or a non-standard field name
	// such as "error" in old llama.cpp); nil for plain data events. Set by
	// Tap, and by Stream for the error event that ends an openai-go stream.
	Event []byte
	// Start and End locate the event in the body a Tap reads: bytes
	// [Start, End) of the body, counted from its first byte, run from the
	// byte after the blank line that ended the previous event (or the
	// previous block of comments) through this event's own blank line, or
	// to the end of the body for a final event without one. Set by Tap
	// only; zero from Stream and ParseChunk.
	Start, End int64
	// Unframed reports a Malformed event that is a line or an event longer
	// than the Tap's cap (WithMaxEvent), reported when the cap was passed: its bounds are approximate and the
	// stream cannot be relied on to be framed after it. Set by Tap only.
	Unframed bool
	// Answer is the raw JSON of the whole answer an event carries, as sent:
	// the response object of a Responses API response.completed or
	// response.incomplete event (ParseResponsesEvent), which is the answer
	// of a non-streaming call. Nil for every other event and protocol.
	Answer []byte

	// Choices holds each choice of the chunk as scanned, in order: its
	// index, raw text fields and finish reason. Its byte slices follow the
	// Content rule above; its backing array is reused by the next ParseChunk.
	Choices []ChoiceDelta
	// ToolCalls holds the chunk's tool-call fragments (delta.tool_calls
	// elements) of every choice, in order; reused like Choices.
	ToolCalls []ToolCallDelta

	buf      []byte // scratch for Content when several fields are joined
	bufInUse bool
	groq     Usage
	groqHas  bool
	groqRaw  []byte
	env      envelope // the last payload's leading members; kept by reset
	shape    shape    // the bytes around the last lone text delta; kept by reset
	tmpl     template // the last lone text delta of a Responses or Messages stream; kept by reset
}

// envelope remembers the members a payload opens with, up to the first one
// whose value ParseChunk records beyond the chunk's identity: the id,
// object, created, model, system_fingerprint and service_tier that every
// chunk of a stream repeats byte for byte, and unknown keys, which set
// nothing. raw is a copy of those bytes, from the opening brace through the
// comma after the last of them, and n is how many members they are. When the
// next payload starts with the same bytes, ParseChunk takes the identity
// fields from the offsets kept here and scans only the rest: equal bytes
// scan to equal results, so this saves the work and changes nothing.
type envelope struct {
	raw                 []byte
	n                   int
	id, model, fp, tier span
	created             int64
	misses              relearn
}

// span locates a string's raw bytes in a payload; the zero span (hi == 0,
// which no string can end at) stands for an absent one.
type span struct{ lo, hi int32 }

// maxEnvelope bounds the envelope ParseChunk remembers, in bytes.
const maxEnvelope = 1024

// ChoiceDelta is what one choice of a chunk carried. Byte slices are raw,
// still JSON-escaped string bodies (use AppendUnescaped), nil when absent,
// null or not a string.
type ChoiceDelta struct {
	Index        int64  // choices[].index
	Content      []byte // delta.content
	Reasoning    []byte // delta.reasoning_content, or delta.reasoning
	Refusal      []byte // delta.refusal
	FinishReason []byte // finish_reason
	// Logprobs reports a logprobs object (asked for with "logprobs": true).
	Logprobs bool
	// LogprobsContent and LogprobsRefusal are the elements of
	// logprobs.content and logprobs.refusal: raw JSON, comma-separated,
	// without the brackets or the space around them; nil when null or not
	// an array, empty (not nil) for an empty array.
	LogprobsContent []byte
	LogprobsRefusal []byte
}

// ToolCallDelta is one tool-call fragment: an element of a choice's
// delta.tool_calls. Byte slices are raw, still JSON-escaped string bodies
// (use AppendUnescaped), nil when absent. Arguments arrive in pieces over
// many chunks; join them per (Choice, Index).
type ToolCallDelta struct {
	Choice int64 // the index of the choice it belongs to
	// Index is tool_calls[].index, or the fragment's position in its
	// array when it has none (Mistral sends whole calls without one).
	Index     int64
	ID        []byte // tool_calls[].id
	Type      []byte // tool_calls[].type
	Name      []byte // tool_calls[].function.name
	Arguments []byte // tool_calls[].function.arguments
}

// AppendUnescaped appends the text of raw, a JSON string body without its
// quotes as the Chunk fields hold it, to dst with escapes resolved, and
// returns the extended slice. Invalid surrogates become U+FFFD, as
// encoding/json does; a malformed escape is kept as it is. dst may be
// raw[:0], to decode in place.
func AppendUnescaped(dst, raw []byte) []byte { return appendUnescaped(dst, raw) }

// ServerTiming holds the timings one payload reported about the server
// (llama.cpp "timings", Groq "x_groq.usage"); zero fields were not
// reported. It has tps.ServerTiming's fields, in its order, so that tps
// converts one to the other: a Sample reports what the chunks said. A
// ServerTiming is a value and safe to copy.
type ServerTiming struct {
	Queue              time.Duration
	Prompt             time.Duration
	Completion         time.Duration
	Total              time.Duration
	PredictedPerSecond float64
	CacheN             int64
}

// Usage is a usage block. Zero fields were absent or zero. It has
// tps.Usage's fields, in its order, so that one converts to the other. A
// Usage is a value and safe to copy.
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
	// input tokens written to the provider's cache (tps.ProtocolMessages).
	CacheCreationTokens int64
	// CompletionReported reports whether completion_tokens was present.
	CompletionReported bool
}

// ParseEvent parses one event's data as protocol's payload into c,
// overwriting everything c held: ParseChunk for a chat stream, and for the
// others the same rules mapped onto the same Chunk fields (docs/METRICS.md,
// "Responses and Messages streams"). protocol is a tps.Protocol's value (0
// chat, 1 Responses, 2 Messages, 3 embeddings); an unknown one parses as
// chat. It does not allocate and never panics; the only error is
// ErrMalformed, for data that is not one well-formed JSON object.
func ParseEvent(protocol uint8, data []byte, c *Chunk) error {
	switch proto(protocol) {
	case protoResponses:
		return ParseResponsesEvent(data, c)
	case protoMessages:
		return ParseMessagesEvent(data, c)
	case protoEmbeddings:
		return ParseEmbeddingsEvent(data, c)
	}
	return ParseChunk(data, c)
}

// ParseChunk parses one chat-completion chunk payload (the data of one SSE
// event, without "data:") into c, overwriting everything c held. It does not
// allocate once c's scratch buffer has grown, and it never panics. Unknown
// keys and values of unexpected types are skipped. The only error is
// ErrMalformed, for data that is not one well-formed JSON object; c then holds
// whatever was read before the error. Done, Malformed and Event are cleared.
// A Chunk reused across the chunks of one stream reads faster: the members
// a payload opens with (id, object, created, model, system_fingerprint),
// when they repeat the previous payload's byte for byte, are taken from that
// parse instead of scanned again, and a text delta (one choice with one
// non-empty content, reasoning or refusal string) whose bytes around the
// text repeat those of an earlier one is read from that parse through the
// end of "choices"; either way with the same result.
func ParseChunk(data []byte, c *Chunk) error {
	c.Reset()
	s := scanner{b: data}
	var usage Usage
	usageHas := false
	n := 0
	// lead is the envelope this payload opens with while it is learned;
	// leading reports that every member so far belongs to it, and end is
	// where the last of them ended.
	var lead envelope
	leading, end := true, 0
	// identity reports that no member so far set anything but the chunk's
	// identity: what a shape may be learned after.
	identity := true
	// rest is where the members after "choices" start when the shape read
	// or learned this payload, and quiet that none of them set anything.
	rest, quiet := -1, true
	if at, whole := c.shape.read(data, c); whole {
		return nil
	} else if at >= 0 {
		s.i, n, leading, identity, rest = at, c.shape.n, false, false, at // at the comma or brace after "choices"
	} else if e := &c.env; len(e.raw) > 0 && len(data) > len(e.raw) && string(data[:len(e.raw)]) == string(e.raw) {
		s.i, n, leading = len(e.raw)-1, e.n, false // at the comma after it
		c.ID, c.Model = e.id.of(data), e.model.of(data)
		c.SystemFingerprint, c.ServiceTier = e.fp.of(data), e.tier.of(data)
		c.Created = e.created
		e.misses.hit()
	} else if !s.open('{') {
		return ErrMalformed
	}
	for ; s.more(n, '}'); n++ {
		k := s.key()
		if leading && !inEnvelope(k) {
			leading = false
			if n > 0 && !s.bad && c.env.misses.miss() {
				c.env.learn(data, end, n, &lead)
			}
		}
		switch string(k) {
		case "choices":
			quiet = false
			s.choices(c)
			if identity && !s.bad && c.shape.consider(data, s.i, n+1, c) {
				rest, quiet = s.i, true
			}
		case "usage":
			if s.peek() == '{' {
				quiet = false
				usage = Usage{}
				at := s.i
				usageHas = s.usage(&usage, c, 0)
				c.UsageRaw = s.b[at:s.i]
			} else {
				s.skip(1)
			}
		case "x_groq":
			quiet = false
			s.xgroq(c)
		case "timings":
			quiet = false
			s.timings(c)
		case "error":
			quiet = false
			if !s.null() {
				s.ws()
				start := s.i
				s.skip(1)
				c.Error = true
				c.ErrorBody = s.b[start:s.i]
			}
		case "id":
			quiet = false
			c.ID, lead.id = s.optSpan()
		case "created":
			quiet = false
			c.Created = s.int()
			lead.created = c.Created
		case "model":
			quiet = false
			c.Model, lead.model = s.optSpan()
		case "system_fingerprint":
			quiet = false
			c.SystemFingerprint, lead.fp = s.optSpan()
		case "service_tier":
			quiet = false
			c.ServiceTier, lead.tier = s.optSpan()
		default:
			s.skip(1)
		}
		identity = identity && inEnvelope(k)
		end = s.i
	}
	if !s.end() {
		return ErrMalformed
	}
	if rest >= 0 {
		c.shape.learnRest(data, rest, quiet)
	}
	switch {
	case usageHas:
		c.HasUsage, c.Usage = true, usage
	case c.groqHas:
		c.HasUsage, c.Usage, c.UsageRaw = true, c.groq, c.groqRaw
	default:
		c.UsageRaw = nil
	}
	return nil
}

// AppendText appends the decoded text of c.Content (content, reasoning and
// refusal; JSON escapes resolved) to dst and returns the extended slice.
func (c *Chunk) AppendText(dst []byte) []byte {
	return appendUnescaped(dst, c.Content)
}

// Reset clears every field but the scratch buffers (buf, and Choices and
// ToolCalls, emptied) and the memos (env, shape). It clears them one by
// one rather than by assigning a new Chunk, which copied all 800 bytes,
// the memos twice, with a write barrier on each pointer while the
// collector ran: a third of a remembered chunk's parse. TestResetClears
// holds it to every field.
func (c *Chunk) Reset() {
	c.Output, c.OutputDeltas, c.Content, c.ToolCall, c.Reasoning = false, 0, nil, false, false
	c.OutputBytes, c.ReasoningBytes, c.FinishReason = 0, 0, nil
	c.HasUsage, c.Usage, c.HasServer, c.Server = false, Usage{}, false, ServerTiming{}
	c.Error, c.ErrorBody, c.UsageRaw = false, nil, nil
	c.ID, c.Created, c.Model, c.SystemFingerprint, c.ServiceTier = nil, 0, nil, nil, nil
	c.Done, c.Malformed, c.Event, c.Start, c.End, c.Unframed, c.Answer = false, false, nil, 0, 0, false, nil
	c.Choices, c.ToolCalls, c.buf, c.bufInUse = c.Choices[:0], c.ToolCalls[:0], c.buf[:0], false
	c.groq, c.groqHas, c.groqRaw = Usage{}, false, nil
}

// addText joins one raw text field onto c.Content without allocating in the
// common single-field case.
func (c *Chunk) addText(v []byte) {
	switch {
	case c.Content == nil:
		c.Content = v
	case c.bufInUse:
		c.buf = append(c.buf, v...)
		c.Content = c.buf
	default:
		c.buf = append(append(c.buf[:0], c.Content...), v...)
		c.bufInUse = true
		c.Content = c.buf
	}
}

// inEnvelope reports whether a member with key k may belong to an
// envelope: any key but those whose values ParseChunk records beyond the
// chunk's identity.
func inEnvelope(k []byte) bool {
	switch string(k) {
	case "choices", "usage", "x_groq", "timings", "error":
		return false
	}
	return true
}

// learn remembers data's first n members, which end at end, with the
// identity fields lead holds for them. The comma after them is kept with
// them, so that a payload which repeats them goes on at a member boundary;
// an envelope longer than maxEnvelope is forgotten instead.
func (e *envelope) learn(data []byte, end, n int, lead *envelope) {
	for end < len(data) && isSpace(data[end]) {
		end++
	}
	if end >= maxEnvelope || end >= len(data) || data[end] != ',' {
		e.raw = e.raw[:0]
		return
	}
	raw, misses := append(e.raw[:0], data[:end+1]...), e.misses
	*e = *lead
	e.raw, e.n, e.misses = raw, n, misses
}

// of returns the bytes sp locates in data, nil for the zero span.
func (sp span) of(data []byte) []byte {
	if sp.hi == 0 {
		return nil
	}
	return data[sp.lo:sp.hi]
}

// optSpan reads a value as optStr does and also returns where the string
// lies in the payload.
func (s *scanner) optSpan() ([]byte, span) {
	v := s.optStr()
	if v == nil {
		return nil, span{}
	}
	hi := s.i - 1 // the closing quote
	return v, span{lo: int32(hi - len(v)), hi: int32(hi)}
}

// optStr reads a string, or null, or skips another value; it returns nil
// for anything but a string.
func (s *scanner) optStr() []byte {
	if s.peek() == '"' {
		return s.str()
	}
	s.skip(1)
	return nil
}

func (s *scanner) choices(c *Chunk) {
	if s.peek() != '[' {
		s.skip(1)
		return
	}
	s.i++
	for n := 0; s.more(n, ']'); n++ {
		if s.peek() != '{' {
			s.skip(1)
			continue
		}
		s.i++
		out := false
		ci := len(c.Choices)
		c.Choices = append(c.Choices, ChoiceDelta{})
		tools := len(c.ToolCalls)
		for m := 0; s.more(m, '}'); m++ {
			switch string(s.key()) {
			case "delta":
				if s.delta(c, &c.Choices[ci]) {
					out = true
				}
			case "finish_reason":
				if v := s.optStr(); v != nil {
					c.FinishReason = v
					c.Choices[ci].FinishReason = v
				}
			case "index":
				c.Choices[ci].Index = s.int()
			case "logprobs":
				s.logprobs(&c.Choices[ci])
			default:
				s.skip(1)
			}
		}
		if out {
			c.Output = true
			c.OutputDeltas++
		}
		for i := tools; i < len(c.ToolCalls); i++ { // "index" may follow "delta"
			c.ToolCalls[i].Choice = c.Choices[ci].Index
		}
	}
}

// delta reads one choice's delta into c and cd and reports whether it
// carried output.
func (s *scanner) delta(c *Chunk, cd *ChoiceDelta) bool {
	if s.peek() != '{' {
		s.skip(1)
		return false
	}
	s.i++
	out := false
	for n := 0; s.more(n, '}'); n++ {
		k := s.key()
		switch string(k) {
		case "content", "reasoning_content", "reasoning", "refusal":
			switch s.peek() {
			case '"':
				v := s.str()
				switch {
				case k[0] == 'c':
					cd.Content = v
				case k[2] == 'a':
					if len(v) > 0 || cd.Reasoning == nil {
						cd.Reasoning = v
					}
				default:
					cd.Refusal = v
				}
				if len(v) > 0 {
					out = true
					c.addText(v)
					c.OutputBytes += len(v)
					if k[0] == 'r' && k[2] == 'a' {
						c.Reasoning = true
						c.ReasoningBytes += len(v)
					}
				}
			case '[':
				// Typed content parts (Mistral magistral "thinking"/"text").
				if at := s.i; s.nonEmptyArray() {
					out = true
					c.OutputBytes += s.i - at
					c.ReasoningBytes += s.i - at
				}
			default:
				s.skip(1)
			}
		case "tool_calls":
			if s.peek() != '[' {
				s.skip(1)
			} else if at := s.i; s.toolCalls(c) {
				out = true
				c.ToolCall = true
				c.OutputBytes += s.i - at
			}
		case "function_call":
			at, obj := s.i, s.peek() == '{'
			s.skip(1)
			if obj {
				out = true
				c.ToolCall = true
				c.OutputBytes += s.i - at
			}
		default:
			s.skip(1)
		}
	}
	return out
}

// toolCalls reads a delta.tool_calls array into c.ToolCalls and reports
// whether it had an element other than null.
func (s *scanner) toolCalls(c *Chunk) bool {
	s.i++ // '['
	found := false
	for n := 0; s.more(n, ']'); n++ {
		if s.null() {
			continue
		}
		found = true
		if s.peek() != '{' {
			s.skip(1)
			continue
		}
		s.i++
		c.ToolCalls = append(c.ToolCalls, ToolCallDelta{Index: int64(n)})
		tc := &c.ToolCalls[len(c.ToolCalls)-1]
		for m := 0; s.more(m, '}'); m++ {
			switch string(s.key()) {
			case "index":
				tc.Index = s.int()
			case "id":
				tc.ID = s.optStr()
			case "type":
				tc.Type = s.optStr()
			case "function":
				if s.peek() != '{' {
					s.skip(2)
					continue
				}
				s.i++
				for f := 0; s.more(f, '}'); f++ {
					switch string(s.key()) {
					case "name":
						tc.Name = s.optStr()
					case "arguments":
						tc.Arguments = s.optStr()
					default:
						s.skip(3)
					}
				}
			default:
				s.skip(2)
			}
		}
	}
	return found && !s.bad
}

// logprobs reads a choice's logprobs object into cd.
func (s *scanner) logprobs(cd *ChoiceDelta) {
	if s.peek() != '{' { // null, or a value of another type: skipped
		s.skip(3)
		return
	}
	s.i++
	cd.Logprobs = true
	for n := 0; s.more(n, '}'); n++ {
		switch string(s.key()) {
		case "content":
			cd.LogprobsContent = s.elements()
		case "refusal":
			cd.LogprobsRefusal = s.elements()
		default:
			s.skip(3)
		}
	}
}

// elements consumes a value and, for an array, returns its elements as raw
// JSON without the brackets and the space inside them: empty, not nil, for
// an empty array; nil for anything else.
func (s *scanner) elements() []byte {
	if s.peek() != '[' {
		s.skip(3)
		return nil
	}
	at := s.i + 1
	s.skip(3)
	if s.bad {
		return nil
	}
	e := s.i - 1 // the closing bracket
	for at < e && isSpace(s.b[at]) {
		at++
	}
	for e > at && isSpace(s.b[e-1]) {
		e--
	}
	return s.b[at:e:e]
}

func isSpace(c byte) bool { return c == ' ' || c == '\n' || c == '\r' || c == '\t' }

// nonEmptyArray consumes an array and reports whether it had an element
// other than null.
func (s *scanner) nonEmptyArray() bool {
	s.i++ // '['
	found := false
	for n := 0; s.more(n, ']'); n++ {
		if !s.null() {
			s.skip(1)
			found = true
		}
	}
	return found && !s.bad
}

// usage reads a usage object into u and any time fields into c.Server.
// It reports whether the value was an object.
//
// Its complexity (about 22) is one case per usage field that providers
// send under different names and nestings (docs/STREAM_QUIRKS.md).
func (s *scanner) usage(u *Usage, c *Chunk, depth int) bool {
	if !s.open('{') {
		return false
	}
	for n := 0; s.more(n, '}'); n++ {
		switch string(s.key()) {
		case "prompt_tokens":
			u.PromptTokens = s.int()
		case "completion_tokens":
			u.CompletionTokens = s.int()
			u.CompletionReported = true
		case "total_tokens":
			u.TotalTokens = s.int()
		case "prompt_cache_hit_tokens":
			if !u.CachedReported || u.CachedTokens == 0 {
				u.CachedTokens = s.int()
			} else {
				s.skip(1)
			}
			u.CachedReported = true
		case "prompt_tokens_details":
			if s.peek() != '{' {
				s.skip(1)
				continue
			}
			s.i++
			for m := 0; s.more(m, '}'); m++ {
				if string(s.key()) == "cached_tokens" && s.peek() != 'n' {
					u.CachedTokens = s.int()
					u.CachedReported = true
				} else {
					s.skip(1)
				}
			}
		case "completion_tokens_details":
			if s.peek() != '{' {
				s.skip(1)
				continue
			}
			s.i++
			for m := 0; s.more(m, '}'); m++ {
				if string(s.key()) == "reasoning_tokens" {
					u.ReasoningTokens = s.int()
				} else {
					s.skip(1)
				}
			}
		case "queue_time":
			c.Server.Queue = seconds(s.float())
			c.HasServer = true
		case "prompt_time":
			c.Server.Prompt = seconds(s.float())
			c.HasServer = true
		case "completion_time":
			c.Server.Completion = seconds(s.float())
			c.HasServer = true
		case "total_time":
			c.Server.Total = seconds(s.float())
			c.HasServer = true
		default:
			s.skip(depth + 2)
		}
	}
	return !s.bad
}

func (s *scanner) xgroq(c *Chunk) {
	if !s.open('{') {
		return
	}
	for n := 0; s.more(n, '}'); n++ {
		if string(s.key()) == "usage" && s.peek() == '{' {
			c.groq = Usage{}
			at := s.i
			c.groqHas = s.usage(&c.groq, c, 1)
			c.groqRaw = s.b[at:s.i]
		} else {
			s.skip(2)
		}
	}
}

func (s *scanner) timings(c *Chunk) {
	if !s.open('{') {
		return
	}
	for n := 0; s.more(n, '}'); n++ {
		switch string(s.key()) {
		case "prompt_ms":
			c.Server.Prompt = millis(s.float())
			c.HasServer = true
		case "predicted_ms":
			c.Server.Completion = millis(s.float())
			c.HasServer = true
		case "predicted_per_second":
			c.Server.PredictedPerSecond = s.float()
			c.HasServer = true
		case "cache_n":
			c.Server.CacheN = s.int()
			c.HasServer = true
		default:
			s.skip(2)
		}
	}
}

func seconds(f float64) time.Duration { return clampDuration(math.Round(f * float64(time.Second))) }
func millis(f float64) time.Duration {
	return clampDuration(math.Round(f * float64(time.Millisecond)))
}

func clampDuration(f float64) time.Duration {
	switch {
	case f != f: // NaN
		return 0
	case f >= 9.2e18:
		return 1<<63 - 1
	case f <= -9.2e18:
		return -1 << 63
	}
	return time.Duration(f)
}
