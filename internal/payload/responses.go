package payload

// ParseResponsesEvent parses the data of one OpenAI Responses stream event
// (POST /v1/responses with "stream": true) into c, overwriting everything c
// held, by the rules chat chunks follow (docs/METRICS.md):
//
//   - output: a non-empty "delta" of response.output_text.delta,
//     response.refusal.delta, response.reasoning_summary_text.delta or
//     response.reasoning_text.delta (text, in Content; the reasoning ones
//     also set Reasoning), or of response.function_call_arguments.delta
//     (ToolCall, not in Content). Every other event (response.created,
//     response.in_progress, response.output_item.added,
//     response.content_part.added, ...) carries none, so TTFT starts at none
//     of them. OutputDeltas is 1 for an output event.
//   - the end: response.completed sets FinishReason "completed";
//     response.incomplete sets it to incomplete_details.reason (for example
//     "max_output_tokens"), an end the caller reads as it reads chat's
//     finish_reason "length", not a failure.
//   - usage: response.usage of those two events (and of response.failed):
//     input_tokens (which includes the cached ones),
//     input_tokens_details.cached_tokens, output_tokens,
//     output_tokens_details.reasoning_tokens and total_tokens, as
//     Usage.PromptTokens, CachedTokens, CompletionTokens, ReasoningTokens
//     and TotalTokens.
//   - failures: response.failed is an Error whose ErrorBody is
//     response.error (the whole data when that is null), and the flat
//     "error" event (type, code, message, param) is an Error whose ErrorBody
//     is the whole data.
//   - ID and Model are response.id and response.model where an event
//     carries the response.
//
// "sequence_number" and unknown events and keys are skipped. It does not
// allocate, and it never panics; the only error is ErrMalformed, for data
// that is not one well-formed JSON object.
func ParseResponsesEvent(data []byte, c *Chunk) error {
	if c.tmpl.read(protoResponses, data, c) {
		return nil
	}
	c.Reset()
	s := scanner{b: data}
	c.tmpl.begin(&s)
	if !s.open('{') {
		return ErrMalformed
	}
	var typ, delta, respErr, reason, resp []byte
	var usage Usage
	hasDelta, usageHas := false, false
	for n := 0; s.more(n, '}'); n++ {
		switch string(s.key()) {
		case "type":
			typ = s.optStr()
		case "delta":
			if s.peek() == '"' {
				delta, hasDelta = s.str(), true
			} else {
				s.skip(1)
			}
		case "response":
			if s.peek() != '{' {
				s.skip(1)
				continue
			}
			at := s.i
			s.i++
			for m := 0; s.more(m, '}'); m++ {
				switch string(s.key()) {
				case "id":
					c.ID = s.optStr()
				case "model":
					c.Model = s.optStr()
				case "usage":
					if s.peek() == '{' {
						at := s.i
						usageHas = s.responsesUsage(&usage)
						c.UsageRaw = s.b[at:s.i]
					} else {
						s.skip(2)
					}
				case "error":
					if s.null() {
						continue
					}
					at := s.i
					s.skip(2)
					respErr = s.b[at:s.i]
				case "incomplete_details":
					if s.peek() != '{' {
						s.skip(2)
						continue
					}
					s.i++
					for k := 0; s.more(k, '}'); k++ {
						if string(s.key()) == "reason" {
							reason = s.optStr()
						} else {
							s.skip(3)
						}
					}
				default:
					s.skip(2)
				}
			}
			resp = s.b[at:s.i] // after a syntax error, s.i is len(s.b) and the event is ErrMalformed
		default:
			s.skip(1)
		}
	}
	if !s.end() {
		return ErrMalformed
	}
	if usageHas {
		c.HasUsage, c.Usage = true, usage
	} else {
		c.UsageRaw = nil
	}
	switch string(typ) {
	case "response.output_text.delta", "response.refusal.delta":
		c.outputText(delta, hasDelta, false)
	case "response.reasoning_summary_text.delta", "response.reasoning_text.delta":
		c.outputText(delta, hasDelta, true)
	case "response.function_call_arguments.delta":
		if len(delta) > 0 {
			c.Output, c.OutputDeltas, c.ToolCall = true, 1, true
			c.OutputBytes = len(delta)
		}
	case "response.completed":
		c.FinishReason, c.Answer = completed, resp
	case "response.incomplete":
		c.FinishReason, c.Answer = reason, resp
		if len(reason) == 0 {
			c.FinishReason = incomplete
		}
	case "response.failed":
		c.Error = true
		c.ErrorBody = respErr
		if c.ErrorBody == nil {
			c.ErrorBody = data
		}
	case "error":
		c.Error = true
		c.ErrorBody = data
	}
	c.tmpl.learn(protoResponses, data, &s, c)
	return nil
}

var (
	completed  = []byte("completed")
	incomplete = []byte("incomplete")
)

// outputText records a text delta of a Responses stream.
func (c *Chunk) outputText(delta []byte, has, reasoning bool) {
	if !has || len(delta) == 0 {
		return
	}
	c.Output, c.OutputDeltas = true, 1
	c.Content = delta
	c.OutputBytes = len(delta)
	if reasoning {
		c.Reasoning = true
		c.ReasoningBytes = len(delta)
	}
}

// responsesUsage reads a Responses usage object into u and reports whether
// it was one.
func (s *scanner) responsesUsage(u *Usage) bool {
	if !s.open('{') {
		return false
	}
	for n := 0; s.more(n, '}'); n++ {
		switch string(s.key()) {
		case "input_tokens":
			u.PromptTokens = s.int()
		case "output_tokens":
			u.CompletionTokens = s.int()
			u.CompletionReported = true
		case "total_tokens":
			u.TotalTokens = s.int()
		case "input_tokens_details":
			s.detail(func(k []byte) bool {
				if string(k) == "cached_tokens" && s.peek() != 'n' {
					u.CachedTokens = s.int()
					u.CachedReported = true
					return true
				}
				return false
			})
		case "output_tokens_details":
			s.detail(func(k []byte) bool {
				if string(k) == "reasoning_tokens" {
					u.ReasoningTokens = s.int()
					return true
				}
				return false
			})
		default:
			s.skip(3)
		}
	}
	return !s.bad
}

// detail reads a nested object of counts, calling read for each key; read
// consumes the value and returns true, or returns false to have it skipped.
func (s *scanner) detail(read func(k []byte) bool) {
	if s.peek() != '{' {
		s.skip(3)
		return
	}
	s.i++
	for n := 0; s.more(n, '}'); n++ {
		if !read(s.key()) {
			s.skip(4)
		}
	}
}
