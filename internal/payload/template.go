package payload

// template remembers the last lone text delta of a Responses or Messages
// stream (ParseResponsesEvent, ParseMessagesEvent): an event whose whole
// result is its text, with nothing else recorded (no identity, usage,
// finish reason or error). Its bytes are kept as literal runs around holes:
// the text, and every string or number value the parser skipped (a
// Responses delta's sequence_number, item_id, indexes and obfuscation, a
// Messages delta's index), whose bytes set nothing.
//
// An event that repeats every literal run byte for byte, with a well-formed
// value of the same kind in each hole and a non-empty text, scans to the
// same result but for the text: the parser reads it left to right, its
// path through the event depends only on the literal bytes and on each
// hole's kind and extent, and a skipped value's bytes are only validated.
// read checks exactly that, validating each hole as the scanner does, so a
// template that is never used, or used, gives the same results
// (TestProtocolParseReusedEqualsFresh, FuzzProtocolParseReused). The
// events of one stream differ in little else: the Responses API's
// events of a 1,000-token answer are scanned once and read from the
// template 999 times.
type template struct {
	proto     proto
	reasoning bool   // the text is reasoning (Chunk.Reasoning)
	lits      []byte // the literal runs, end to end
	vals      []byte // the values learned in the holes but the text, end to end
	holes     []hole // in order; the literal run before each ends at its lit, the last run starts at the last's
	misses    relearn
	learning  []span // the skipped values of the event being learned from
}

// hole is one value in an event a template does not compare: lit is where
// the literal run that precedes it ends in template.lits, kind is '"' for a
// string, '0' for a number and 't' for the text.
type hole struct {
	lit  int32
	val  span  // the value learned, in template.vals
	kind byte  // '"' a string, '0' a number, 't' the text
	same uint8 // consecutive reads in which the value repeated val
}

// settled is how many consecutive reads must repeat a hole's learned value
// before it becomes part of the literal run around it (compact): a
// Responses delta's item id and indexes stay the same for a whole output
// item, so comparing them as bytes is cheaper than holding them apart. A
// value that changes later makes the template miss once, and the next
// miss relearns it with the hole.
const settled = 4

// proto is a protocol's value, as ParseEvent reads it: tps.Protocol's
// values (ProtocolChat 0, ProtocolResponses 1, ProtocolMessages 2,
// ProtocolEmbeddings 3). A template keeps the protocol whose events it
// learned, so that a Chunk reused across protocols never reads one with
// the other's template.
type proto uint8

const (
	protoChat proto = iota
	protoResponses
	protoMessages
	protoEmbeddings
)

// maxTemplate bounds the literal bytes and holes a template remembers.
const (
	maxTemplate      = 2048
	maxTemplateHoles = 32
)

// read fills c from data, as the parser of t.proto would, when data
// repeats t around another text, and reports whether it did; otherwise it
// changes nothing in c.
func (t *template) read(p proto, data []byte, c *Chunk) bool {
	if t.proto != p || len(t.holes) == 0 {
		return false
	}
	s := scanner{b: data}
	var text []byte
	prev := int32(0)
	settle := false
	for k, h := range t.holes {
		lit := t.lits[prev:h.lit]
		if len(data)-s.i < len(lit) || string(data[s.i:s.i+len(lit)]) != string(lit) {
			return false
		}
		s.i += len(lit)
		prev = h.lit
		// A value that repeats the one learned (an item id, an index)
		// is the same well-formed token: compared, not scanned.
		if v := t.vals[h.val.lo:h.val.hi]; len(v) > 0 && len(data)-s.i >= len(v) && string(data[s.i:s.i+len(v)]) == string(v) &&
			(h.kind != '0' || !continuesNumber(data, s.i+len(v))) {
			s.i += len(v)
			if h.same < settled {
				t.holes[k].same++
				settle = settle || h.same+1 == settled
			}
			continue
		}
		t.holes[k].same = 0
		switch h.kind {
		case '0':
			if c := s.cur(); c != '-' && (c < '0' || c > '9') {
				return false
			}
			s.num()
		default:
			if s.cur() != '"' {
				return false
			}
			v := s.str()
			if h.kind == 't' {
				if len(v) == 0 {
					return false
				}
				text = v
			}
		}
		if s.bad {
			return false
		}
	}
	if string(data[s.i:]) != string(t.lits[prev:]) { // the run after the last hole
		return false
	}
	t.misses.hit()
	if settle {
		t.compact()
	}
	c.Reset()
	c.outputText(text, true, t.reasoning)
	return true
}

// continuesNumber reports whether data[i] could continue a number token, so
// that a number learned as 1 is not taken for the start of 100.
func continuesNumber(data []byte, i int) bool {
	if i >= len(data) {
		return false
	}
	switch c := data[i]; {
	case c >= '0' && c <= '9', c == '.', c == 'e', c == 'E', c == '+', c == '-':
		return true
	}
	return false
}

// compact folds each hole whose value has settled into the literal runs
// around it, with the value learned.
func (t *template) compact() {
	lits := make([]byte, 0, len(t.lits)+len(t.vals))
	holes := t.holes[:0]
	prev := int32(0)
	for _, h := range t.holes {
		lits = append(lits, t.lits[prev:h.lit]...)
		prev = h.lit
		if h.kind != 't' && h.same >= settled {
			lits = append(lits, t.vals[h.val.lo:h.val.hi]...)
			continue
		}
		h.lit = int32(len(lits))
		holes = append(holes, h)
	}
	t.lits, t.holes = append(lits, t.lits[prev:]...), holes
}

// begin prepares the scanner of an event the parser is about to read to
// record the values it skips, when t may learn from the event; the
// parser then calls learn.
func (t *template) begin(s *scanner) {
	if !t.misses.miss() {
		return
	}
	t.learning = t.learning[:0]
	s.skipped = &t.learning
}

// learn remembers data, which the parser of p read into c with s, when c
// is a lone text delta: Output with raw text within data, nothing else
// recorded, and a ToolCall never.
func (t *template) learn(p proto, data []byte, s *scanner, c *Chunk) {
	if s.skipped == nil {
		return
	}
	s.skipped = nil
	if !c.Output || c.ToolCall || c.HasUsage || c.UsageRaw != nil || c.ID != nil || c.Model != nil ||
		c.FinishReason != nil || c.Error || c.Done || len(c.Content) == 0 || c.bufInUse {
		return
	}
	body, ok := spanIn(data, c.Content)
	if !ok || body.lo < 1 || int(body.hi) >= len(data) || data[body.lo-1] != '"' || data[body.hi] != '"' ||
		len(t.learning)+1 > maxTemplateHoles || len(data) > maxTemplate {
		return
	}
	text := span{body.lo - 1, body.hi + 1} // with its quotes
	t.proto, t.reasoning = p, c.Reasoning
	t.lits, t.vals, t.holes = t.lits[:0], t.vals[:0], t.holes[:0]
	at := int32(0)
	add := func(v span, kind byte) {
		t.lits = append(t.lits, data[at:v.lo]...)
		h := hole{lit: int32(len(t.lits)), kind: kind}
		if kind != 't' {
			h.val.lo = int32(len(t.vals))
			t.vals = append(t.vals, data[v.lo:v.hi]...)
			h.val.hi = int32(len(t.vals))
		}
		t.holes = append(t.holes, h)
		at = v.hi
	}
	placed := false
	for _, v := range t.learning {
		if !placed && text.lo < v.lo {
			add(text, 't')
			placed = true
		}
		kind := byte('0')
		if data[v.lo] == '"' {
			kind = '"'
		}
		add(v, kind)
	}
	if !placed {
		add(text, 't')
	}
	t.lits = append(t.lits, data[at:]...)
}
