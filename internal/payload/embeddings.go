package payload

// ParseEmbeddingsEvent parses an OpenAI embeddings answer (the JSON body of
// POST /v1/embeddings, which never streams: the executor hands it to a Tap
// as one event) into c, overwriting everything c held: a
// non-empty "data" array is the output (one output event: TTFT is the
// answer's latency) and ends the answer (FinishReason "stop");
// usage.prompt_tokens is Usage.PromptTokens; a non-null top-level "error"
// is an Error. The vectors themselves, floats or base64, are skipped, never
// decoded. It does not allocate, and it never panics; the only error is
// ErrMalformed, for data that is not one well-formed JSON object.
func ParseEmbeddingsEvent(data []byte, c *Chunk) error {
	c.Reset()
	s := scanner{b: data}
	if !s.open('{') {
		return ErrMalformed
	}
	for n := 0; s.more(n, '}'); n++ {
		switch string(s.key()) {
		case "data":
			if s.peek() != '[' {
				s.skip(1)
				continue
			}
			if at := s.i; s.nonEmptyArray() {
				c.Output, c.OutputDeltas = true, 1
				c.OutputBytes = s.i - at
				c.FinishReason = stop
			}
		case "usage":
			if s.peek() != '{' {
				s.skip(1)
				continue
			}
			at := s.i
			s.i++
			for m := 0; s.more(m, '}'); m++ {
				switch string(s.key()) {
				case "prompt_tokens":
					c.Usage.PromptTokens = s.int()
					c.HasUsage = true
				case "total_tokens":
					c.Usage.TotalTokens = s.int()
				default:
					s.skip(2)
				}
			}
			c.UsageRaw = s.b[at:s.i]
		case "model":
			c.Model = s.optStr()
		case "error":
			if !s.null() {
				s.ws()
				start := s.i
				s.skip(1)
				c.Error = true
				c.ErrorBody = s.b[start:s.i]
			}
		default:
			s.skip(1)
		}
	}
	if !s.end() {
		return ErrMalformed
	}
	if !c.HasUsage {
		c.Usage, c.UsageRaw = Usage{}, nil
	}
	return nil
}

var stop = []byte("stop")
