package payload

// ParseMessagesEvent parses the data of one Anthropic Messages stream event
// (POST /v1/messages with "stream": true) into c, overwriting everything c
// held, by the rules chat chunks follow (docs/METRICS.md). The event's kind
// is read from the data's "type", which repeats the SSE event name:
//
//   - output: a content_block_delta whose delta is a non-empty text_delta
//     (text, in Content), thinking_delta (thinking, in Content, Reasoning)
//     or input_json_delta (partial_json; ToolCall, not in Content).
//     message_start, content_block_start, a signature_delta, citations,
//     content_block_stop and ping carry none, so TTFT starts at none of
//     them. OutputDeltas is 1 for an output event.
//   - usage: message_start's message.usage gives the input side:
//     PromptTokens is input_tokens + cache_read_input_tokens +
//     cache_creation_input_tokens (Anthropic's input_tokens excludes both,
//     OpenAI's includes the cached ones: tpsroute's InputTokens is every
//     input token), CachedTokens is cache_read_input_tokens and
//     CacheCreationTokens cache_creation_input_tokens; its output_tokens is a
//     placeholder and is not reported. message_delta's usage.output_tokens
//     is the real, cumulative output count (CompletionReported), with the
//     input side again when it repeats it. tps's timer with
//     tps.WithProtocol(tps.ProtocolMessages) merges the two (usage split and
//     cumulative: never added up).
//   - the end: message_delta's delta.stop_reason is FinishReason, and
//     message_stop sets Done, as "[DONE]" does in a chat stream.
//   - failures: an "error" event (also framed "event: error", which a Tap
//     reads as an error whatever its data) is an Error whose ErrorBody is the
//     whole data: {"type":"error","error":{"type":"overloaded_error",...}}.
//   - ID and Model are message.id and message.model of message_start.
//
// Unknown events and keys are skipped. It does not allocate, and it never
// panics; the only error is ErrMalformed, for data that is not one
// well-formed JSON object.
func ParseMessagesEvent(data []byte, c *Chunk) error {
	if c.tmpl.read(protoMessages, data, c) {
		return nil
	}
	c.Reset()
	s := scanner{b: data}
	c.tmpl.begin(&s)
	if !s.open('{') {
		return ErrMalformed
	}
	var typ []byte
	var d messagesDelta
	var usage Usage
	usageHas := false
	for n := 0; s.more(n, '}'); n++ {
		switch string(s.key()) {
		case "type":
			typ = s.optStr()
		case "delta":
			s.messagesDelta(&d)
		case "usage":
			if s.peek() == '{' {
				at := s.i
				usageHas = s.messagesUsage(&usage, true)
				c.UsageRaw = s.b[at:s.i]
			} else {
				s.skip(1)
			}
		case "message":
			if s.peek() != '{' {
				s.skip(1)
				continue
			}
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
						usageHas = s.messagesUsage(&usage, false)
						c.UsageRaw = s.b[at:s.i]
					} else {
						s.skip(2)
					}
				default:
					s.skip(2)
				}
			}
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
	case "content_block_delta":
		switch string(d.typ) {
		case "text_delta":
			c.outputText(d.text, len(d.text) > 0, false)
		case "thinking_delta":
			c.outputText(d.thinking, len(d.thinking) > 0, true)
		case "input_json_delta":
			if len(d.json) > 0 {
				c.Output, c.OutputDeltas, c.ToolCall = true, 1, true
				c.OutputBytes = len(d.json)
			}
		}
	case "message_delta":
		c.FinishReason = d.stop
	case "message_stop":
		c.Done = true
	case "error":
		c.Error = true
		c.ErrorBody = data
	}
	c.tmpl.learn(protoMessages, data, &s, c)
	return nil
}

// messagesDelta is what a Messages event's "delta" object carried: raw,
// still JSON-escaped string bodies, nil when absent.
type messagesDelta struct {
	typ, text, thinking, json, stop []byte
}

// messagesDelta reads a "delta" object into d.
func (s *scanner) messagesDelta(d *messagesDelta) {
	if s.peek() != '{' {
		s.skip(1)
		return
	}
	s.i++
	for n := 0; s.more(n, '}'); n++ {
		switch string(s.key()) {
		case "type":
			d.typ = s.optStr()
		case "text":
			d.text = s.optStr()
		case "thinking":
			d.thinking = s.optStr()
		case "partial_json":
			d.json = s.optStr()
		case "stop_reason":
			d.stop = s.optStr()
		default:
			s.skip(2)
		}
	}
}

// messagesUsage reads a Messages usage object into u and reports whether it
// was one. output_tokens is reported only when output is true (message_delta's
// count; message_start's is a placeholder).
func (s *scanner) messagesUsage(u *Usage, output bool) bool {
	if !s.open('{') {
		return false
	}
	var input int64
	inputHas := false
	for n := 0; s.more(n, '}'); n++ {
		switch string(s.key()) {
		case "input_tokens":
			if s.peek() != 'n' {
				input, inputHas = s.int(), true
			} else {
				s.skip(3)
			}
		case "cache_read_input_tokens":
			if s.peek() != 'n' {
				u.CachedTokens, u.CachedReported = s.int(), true
			} else {
				s.skip(3)
			}
		case "cache_creation_input_tokens":
			u.CacheCreationTokens = s.int()
		case "output_tokens":
			if output && s.peek() != 'n' {
				u.CompletionTokens, u.CompletionReported = s.int(), true
			} else {
				s.skip(3)
			}
		default:
			s.skip(3)
		}
	}
	if inputHas || u.CachedReported || u.CacheCreationTokens > 0 {
		u.PromptTokens = input + u.CachedTokens + u.CacheCreationTokens
	}
	return !s.bad
}

// MergeMessages folds a Messages stream's later usage src into u: the input
// side when src reports it (PromptTokens or a cached count), the output count
// when src reports it. Counts are totals, never added up.
func (u *Usage) MergeMessages(src *Usage) {
	if src.PromptTokens > 0 || src.CachedReported {
		u.PromptTokens, u.CachedTokens, u.CachedReported = src.PromptTokens, src.CachedTokens, src.CachedReported
		u.CacheCreationTokens = src.CacheCreationTokens
	}
	if src.CompletionReported {
		u.CompletionTokens, u.CompletionReported = src.CompletionTokens, true
	}
}
