package payload

// shape remembers the bytes around the text of the last lone text delta
// ParseChunk read: a payload whose members before "choices" set nothing
// but the chunk's identity (the envelope's members), and whose "choices"
// held one choice with one non-empty text field (content, reasoning or
// refusal) and nothing else that ParseChunk records but its index. That is
// nearly every chunk of a stream, and the chunks of one stream repeat those
// bytes exactly: head is the payload through the opening quote of the text,
// tail runs from its closing quote through the end of the "choices" value.
//
// A payload that starts with head, goes on with a well-formed non-empty
// string and repeats tail after its closing quote scans, up to the end of
// "choices", to the same result as the payload it was learned from, but
// for the text: the scan's state after the string does not depend on its
// bytes once it is non-empty, and its bytes are only stored. read fills
// that result and ParseChunk goes on scanning the members after
// "choices" (usage, obfuscation, anything else) as usual, unless they
// repeat too, byte for byte, members of the payload before that set
// nothing (rest: "usage":null, unknown keys): then the result is complete. So a memo that
// is never used, or used, gives the same results
// (TestParseChunkReusedEqualsFresh, FuzzParseChunkReused).
type shape struct {
	head, tail          []byte
	rest                []byte // the members after "choices", when they set nothing
	restOK              bool   // rest holds them
	n                   int    // members through "choices"
	kind                byte   // which text field: 'c' content, 'r' reasoning, 'f' refusal
	index               int64
	id, model, fp, tier span
	created             int64
	misses              relearn
}

// maxShape bounds the bytes a shape remembers (head and tail together).
const maxShape = 2048

// relearn paces the learning of a memo (envelope, shape) that payloads
// keep missing: a stream whose leading members change in every chunk (a
// "created" or an id per chunk) would otherwise copy them after every
// parse for nothing. It counts the misses since the memo last served and
// allows learning at the 1st, 2nd, 4th, 8th... of them, about ten times in
// a 1,000-chunk stream that never repeats itself, while a stream whose
// chunks change once relearns at its first miss.
type relearn uint32

// miss counts a payload that did not repeat the memo and reports whether
// it should be learned.
func (r *relearn) miss() bool {
	if *r < 1<<31 {
		*r++
	}
	return *r&(*r-1) == 0
}

// hit notes that the memo served a payload.
func (r *relearn) hit() { *r = 0 }

// read fills c from data when data repeats the shape around new text, and
// returns where the scan goes on: just after the "choices" value. whole
// reports that the rest of data repeats rest too, members that set
// nothing: c is then complete. It returns -1, having changed nothing in c,
// when data does not repeat the shape.
func (sh *shape) read(data []byte, c *Chunk) (at int, whole bool) {
	h, t := len(sh.head), len(sh.tail)
	if h == 0 || len(data) < h+1+t || string(data[:h]) != string(sh.head) {
		return -1, false
	}
	s := scanner{b: data, i: h - 1} // at the text's opening quote
	v := s.str()
	q := s.i - 1 // the closing quote
	if s.bad || len(v) == 0 || len(data)-q < t || string(data[q:q+t]) != string(sh.tail) {
		return -1, false
	}
	sh.misses.hit()
	c.ID, c.Model = sh.id.of(data), sh.model.of(data)
	c.SystemFingerprint, c.ServiceTier = sh.fp.of(data), sh.tier.of(data)
	c.Created = sh.created
	cd := ChoiceDelta{Index: sh.index}
	switch sh.kind {
	case 'c':
		cd.Content = v
	case 'r':
		cd.Reasoning = v
		c.Reasoning, c.ReasoningBytes = true, len(v)
	default:
		cd.Refusal = v
	}
	c.Choices = append(c.Choices, cd)
	c.Output, c.OutputDeltas, c.Content, c.OutputBytes = true, 1, v, len(v)
	return q + t, sh.restOK && string(data[q+t:]) == string(sh.rest)
}

// consider learns the shape of data, whose "choices" value, the n-th
// member, ends at end, when what ParseChunk read into c up to there is a
// lone text delta (see shape) and the pacing allows it, and reports
// whether it did.
func (sh *shape) consider(data []byte, end, n int, c *Chunk) bool {
	if len(c.Choices) != 1 || len(c.ToolCalls) > 0 || !c.Output || c.OutputDeltas != 1 ||
		c.ToolCall || c.FinishReason != nil || c.HasServer || c.Error || c.bufInUse {
		return false
	}
	cd := &c.Choices[0]
	if cd.FinishReason != nil || cd.Logprobs || cd.LogprobsContent != nil || cd.LogprobsRefusal != nil {
		return false
	}
	var kind byte
	var v []byte
	switch {
	case cd.Content != nil && cd.Reasoning == nil && cd.Refusal == nil:
		kind, v = 'c', cd.Content
	case cd.Content == nil && cd.Reasoning != nil && cd.Refusal == nil:
		kind, v = 'r', cd.Reasoning
	case cd.Content == nil && cd.Reasoning == nil && cd.Refusal != nil:
		kind, v = 'f', cd.Refusal
	default:
		return false
	}
	reasoning := 0
	if kind == 'r' {
		reasoning = len(v)
	}
	at := offsetIn(data, v)
	if len(v) == 0 || at < 0 || !sameBytes(c.Content, v) || c.OutputBytes != len(v) ||
		c.Reasoning != (kind == 'r') || c.ReasoningBytes != reasoning {
		return false
	}
	q := at + len(v) // the closing quote
	if at+end-q > maxShape || !sh.misses.miss() {
		return false
	}
	var ok [4]bool
	var sp [4]span
	for i, f := range [4][]byte{c.ID, c.Model, c.SystemFingerprint, c.ServiceTier} {
		sp[i], ok[i] = spanIn(data[:at], f)
	}
	if ok != [4]bool{true, true, true, true} {
		return false
	}
	sh.head = append(sh.head[:0], data[:at]...)
	sh.tail = append(sh.tail[:0], data[q:end]...)
	sh.n, sh.kind, sh.index, sh.created = n, kind, cd.Index, c.Created
	sh.id, sh.model, sh.fp, sh.tier = sp[0], sp[1], sp[2], sp[3]
	sh.restOK = false
	return true
}

// learnRest remembers data[at:], the members after "choices" of a payload
// that repeated the shape or taught it, when quiet reports that they set
// nothing; the next payload that repeats both is read whole from the memo.
func (sh *shape) learnRest(data []byte, at int, quiet bool) {
	sh.restOK = quiet && len(data)-at <= maxShape
	if sh.restOK {
		sh.rest = append(sh.rest[:0], data[at:]...)
	}
}

// offsetIn returns where v, a non-empty sub-slice of data as the scanner
// returns them, starts in data, or -1 when it is not one.
func offsetIn(data, v []byte) int {
	at := cap(data) - cap(v)
	if len(v) == 0 || at < 0 || at+len(v) > len(data) || &data[at] != &v[0] {
		return -1
	}
	return at
}

// sameBytes reports whether a and b are the same non-empty slice of memory.
func sameBytes(a, b []byte) bool {
	return len(a) == len(b) && len(a) > 0 && &a[0] == &b[0]
}

// spanIn locates v, nil or a string's raw bytes sliced from data by the
// scanner, in data: the zero span for nil, and false when v is not in
// data.
func spanIn(data, v []byte) (span, bool) {
	if v == nil {
		return span{}, true
	}
	at := cap(data) - cap(v) // data's capacity runs on past its length
	if at <= 0 || at+len(v) > len(data) || len(v) > 0 && &data[at] != &v[0] {
		return span{}, false
	}
	return span{lo: int32(at), hi: int32(at + len(v))}, true
}
