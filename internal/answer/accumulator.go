package answer

import (
	"slices"
	"strconv"

	"github.com/tpsroute/tpsroute/internal/payload"
)

// Accumulator builds the chat.completion a non-streaming call answers from
// the chunks of a stream, as payload.ParseChunk scanned them: text, reasoning,
// refusal, tool calls and logprobs per choice (every choice of an n>1
// request, in index order) with each choice's finish reason; id, model,
// created, system_fingerprint and service_tier; and the last usage object,
// passed through as the provider sent it (never summed).
//
// Strings are kept as sent, still JSON-escaped, and joined without being
// decoded: a chunk costs a copy of its text and no allocation once the
// buffers have grown, and the answer is as long as its text plus a fixed
// frame. The zero value is ready to use. An Accumulator is not safe for
// concurrent use.
type Accumulator struct {
	id, model, fingerprint, serviceTier []byte
	created                             int64
	usage                               []byte
	choices                             []choiceAcc // in order of arrival
	byIndex                             positions
	size                                int
	chunk                               payload.Chunk // Add's scratch
}

// positions finds an element by its index among the elements of a slice in
// order of arrival: the last one found, then a scan of a few, then a map
// made once there are more, so that a stream of many choices or tool calls
// in any order costs linear work.
type positions struct {
	last int
	m    map[int64]int
}

// find returns the position of index i among n elements whose indexes
// at(p) gives, or -1.
func (ps *positions) find(i int64, n int, at func(p int) int64) int {
	if ps.last < n && at(ps.last) == i {
		return ps.last
	}
	if ps.m == nil && n > 8 {
		ps.m = make(map[int64]int, 2*n)
		for p := range n {
			ps.m[at(p)] = p
		}
	}
	p := -1
	if ps.m != nil {
		if q, ok := ps.m[i]; ok {
			p = q
		}
	} else {
		for q := range n {
			if at(q) == i {
				p = q
				break
			}
		}
	}
	if p >= 0 {
		ps.last = p
	}
	return p
}

// added notes that the element with index i was added at position p.
func (ps *positions) added(i int64, p int) {
	ps.last = p
	if ps.m != nil {
		ps.m[i] = p
	}
}

// order returns the positions of n elements sorted by their index, or nil
// when they arrived in order.
func order(n int, at func(p int) int64) []int {
	sorted := true
	for p := 1; p < n && sorted; p++ {
		sorted = at(p-1) < at(p)
	}
	if sorted {
		return nil
	}
	ps := make([]int, n)
	for p := range ps {
		ps[p] = p
	}
	slices.SortFunc(ps, func(x, y int) int { return cmpInt(at(x), at(y)) })
	return ps
}

// choiceAcc is one choice of the answer; text fields are raw JSON string
// bodies, joined.
type choiceAcc struct {
	index                       int64
	content, reasoning, refusal []byte
	hasContent                  bool // a content string was sent, even ""
	finish                      []byte
	logprobs                    bool
	lpContent, lpRefusal        []byte    // elements, comma-separated
	hasLPContent, hasLPRefusal  bool      // an array (not null) was sent
	tools                       []toolAcc // in order of arrival
	byIndex                     positions
	reasoningSeen, refusalSeen  bool
}

// toolAcc is one tool call of a choice, joined from its fragments.
type toolAcc struct {
	index               int64
	id, typ, name, args []byte
	typeSeen            bool
}

// Add parses data, one chunk (the data of one SSE event, without "data:"),
// and folds it in as AddChunk does. A payload that is not a JSON object,
// and [DONE], adds nothing.
func (a *Accumulator) Add(data []byte) {
	if payload.ParseChunk(data, &a.chunk) == nil {
		a.AddChunk(&a.chunk)
	}
}

// AddChunk folds in one chunk as payload.ParseChunk (or a Tap's observer) read it.
// It copies what it keeps: c may be reused once AddChunk returns.
func (a *Accumulator) AddChunk(c *payload.Chunk) {
	if len(c.ID) > 0 && len(a.id) == 0 {
		a.id = a.keep(a.id, c.ID)
	}
	if len(c.Model) > 0 {
		a.model = a.keep(a.model, c.Model)
	}
	if c.Created > 0 && a.created == 0 {
		a.created = c.Created
	}
	if len(c.SystemFingerprint) > 0 {
		a.fingerprint = a.keep(a.fingerprint, c.SystemFingerprint)
	}
	if len(c.ServiceTier) > 0 {
		a.serviceTier = a.keep(a.serviceTier, c.ServiceTier)
	}
	if c.HasUsage && len(c.UsageRaw) > 0 {
		a.usage = a.keep(a.usage, c.UsageRaw) // the last one wins, never summed
	}
	for i := range c.Choices {
		a.addChoice(&c.Choices[i])
	}
	for i := range c.ToolCalls {
		a.addTool(&c.ToolCalls[i])
	}
}

// Reset empties a for another answer and keeps its buffers, so that an
// Accumulator reused for answers of a similar size (from a pool) no longer
// allocates for their text.
func (a *Accumulator) Reset() {
	for i := range a.choices {
		a.choices[i].reset()
	}
	a.id, a.model, a.fingerprint, a.serviceTier = a.id[:0], a.model[:0], a.fingerprint[:0], a.serviceTier[:0]
	a.created, a.usage, a.size = 0, a.usage[:0], 0
	a.choices, a.byIndex = a.choices[:0], positions{}
}

// reset empties ch and keeps its buffers.
func (ch *choiceAcc) reset() {
	*ch = choiceAcc{content: ch.content[:0], reasoning: ch.reasoning[:0], refusal: ch.refusal[:0],
		finish: ch.finish[:0], lpContent: ch.lpContent[:0], lpRefusal: ch.lpRefusal[:0], tools: ch.tools[:0]}
}

// keep returns v copied into old's storage, unless it is already equal (a
// model name repeated in every chunk costs nothing).
func (a *Accumulator) keep(old, v []byte) []byte {
	if string(old) == string(v) {
		return old
	}
	a.size += len(v) - len(old)
	return append(old[:0], v...)
}

// add appends v to dst and counts it.
func (a *Accumulator) add(dst, v []byte) []byte {
	a.size += len(v)
	return append(dst, v...)
}

// choice returns the choice with index i, added if new.
func (a *Accumulator) choice(i int64) *choiceAcc {
	p := a.byIndex.find(i, len(a.choices), a.choiceIndex)
	if p < 0 {
		p = len(a.choices)
		if p < cap(a.choices) { // a choice Reset emptied: its buffers serve again
			a.choices = a.choices[:p+1]
			a.choices[p].index = i
		} else {
			a.choices = append(a.choices, choiceAcc{index: i})
		}
		a.byIndex.added(i, p)
		a.size += choiceFrame
	}
	return &a.choices[p]
}

func (a *Accumulator) choiceIndex(p int) int64 { return a.choices[p].index }

func (ch *choiceAcc) toolIndex(p int) int64 { return ch.tools[p].index }

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// choiceFrame and toolFrame bound what a choice and a tool call add to the
// answer beyond their text, for Size: their JSON, and their own memory.
const (
	choiceFrame = 320
	toolFrame   = 160
)

func (a *Accumulator) addChoice(d *payload.ChoiceDelta) {
	ch := a.choice(d.Index)
	if d.Content != nil {
		ch.content = a.add(ch.content, d.Content)
		ch.hasContent = true
	}
	if len(d.Reasoning) > 0 {
		ch.reasoning = a.add(ch.reasoning, d.Reasoning)
		ch.reasoningSeen = true
	}
	if len(d.Refusal) > 0 {
		ch.refusal = a.add(ch.refusal, d.Refusal)
		ch.refusalSeen = true
	}
	if len(d.FinishReason) > 0 {
		ch.finish = a.keep(ch.finish, d.FinishReason)
	}
	if d.Logprobs {
		ch.logprobs = true
		ch.lpContent, ch.hasLPContent = a.elements(ch.lpContent, ch.hasLPContent, d.LogprobsContent)
		ch.lpRefusal, ch.hasLPRefusal = a.elements(ch.lpRefusal, ch.hasLPRefusal, d.LogprobsRefusal)
	}
}

// elements appends the array elements v (nil: none sent) to dst, a
// comma-separated list, and reports whether an array was ever sent.
func (a *Accumulator) elements(dst []byte, had bool, v []byte) ([]byte, bool) {
	if v == nil {
		return dst, had
	}
	if len(v) > 0 {
		if len(dst) > 0 {
			dst = a.add(dst, comma)
		}
		dst = a.add(dst, v)
	}
	return dst, true
}

var comma = []byte{','}

func (a *Accumulator) addTool(t *payload.ToolCallDelta) {
	ch := a.choice(t.Choice)
	p := ch.byIndex.find(t.Index, len(ch.tools), ch.toolIndex)
	if p < 0 {
		p = len(ch.tools)
		ch.tools = append(ch.tools, toolAcc{index: t.Index})
		ch.byIndex.added(t.Index, p)
		a.size += toolFrame
	}
	tc := &ch.tools[p]
	if len(t.ID) > 0 {
		tc.id = a.keep(tc.id, t.ID)
	}
	if len(t.Type) > 0 {
		tc.typ = a.keep(tc.typ, t.Type)
		tc.typeSeen = true
	}
	if len(t.Name) > 0 {
		tc.name = a.keep(tc.name, t.Name)
	}
	tc.args = a.add(tc.args, t.Arguments)
}

// Size returns how many bytes JSON would return now, at most: what was kept
// of the chunks plus a bound on the JSON around it. A caller bounding the
// answer's memory checks it after each chunk.
func (a *Accumulator) Size() int {
	return a.size + choiceFrame
}

// JSON returns the chat.completion accumulated so far, as JSON (see
// AppendJSON).
func (a *Accumulator) JSON() []byte { return a.AppendJSON(nil) }

// AppendJSON appends the chat.completion accumulated so far, as JSON, to dst
// and returns the extended slice: a message per choice with "content" (null
// when no content string was streamed, not even "", and the choice has tool
// calls or a refusal, as providers answer them), "reasoning_content" when
// any reasoning was streamed, "refusal", "tool_calls" when any were; each
// choice's "logprobs" (null unless asked for) and "finish_reason"; and
// "usage" when a chunk carried one. Strings are as the provider escaped
// them.
func (a *Accumulator) AppendJSON(dst []byte) []byte {
	dst = append(dst, `{"id":`...)
	dst = appendStr(dst, a.id)
	dst = append(dst, `,"object":"chat.completion","created":`...)
	dst = strconv.AppendInt(dst, a.created, 10)
	dst = append(dst, `,"model":`...)
	dst = appendStr(dst, a.model)
	if len(a.fingerprint) > 0 {
		dst = append(dst, `,"system_fingerprint":`...)
		dst = appendStr(dst, a.fingerprint)
	}
	if len(a.serviceTier) > 0 {
		dst = append(dst, `,"service_tier":`...)
		dst = appendStr(dst, a.serviceTier)
	}
	dst = append(dst, `,"choices":[`...)
	sorted := order(len(a.choices), a.choiceIndex)
	for i := range a.choices {
		if i > 0 {
			dst = append(dst, ',')
		}
		p := i
		if sorted != nil {
			p = sorted[i]
		}
		dst = a.choices[p].appendJSON(dst)
	}
	dst = append(dst, ']')
	if len(a.usage) > 0 {
		dst = append(dst, `,"usage":`...)
		dst = append(dst, a.usage...)
	}
	return append(dst, '}')
}

func (ch *choiceAcc) appendJSON(dst []byte) []byte {
	dst = append(dst, `{"index":`...)
	dst = strconv.AppendInt(dst, ch.index, 10)
	dst = append(dst, `,"message":{"role":"assistant","content":`...)
	if ch.hasContent || len(ch.tools) == 0 && !ch.refusalSeen {
		dst = appendStr(dst, ch.content)
	} else {
		dst = append(dst, "null"...)
	}
	if ch.reasoningSeen {
		dst = append(dst, `,"reasoning_content":`...)
		dst = appendStr(dst, ch.reasoning)
	}
	dst = append(dst, `,"refusal":`...)
	if ch.refusalSeen {
		dst = appendStr(dst, ch.refusal)
	} else {
		dst = append(dst, "null"...)
	}
	if len(ch.tools) > 0 {
		dst = append(dst, `,"tool_calls":[`...)
		sorted := order(len(ch.tools), ch.toolIndex)
		for i := range ch.tools {
			t := &ch.tools[i]
			if sorted != nil {
				t = &ch.tools[sorted[i]]
			}
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = append(dst, `{"id":`...)
			dst = appendStr(dst, t.id)
			dst = append(dst, `,"type":`...)
			if t.typeSeen {
				dst = appendStr(dst, t.typ)
			} else {
				dst = append(dst, `"function"`...)
			}
			dst = append(dst, `,"function":{"name":`...)
			dst = appendStr(dst, t.name)
			dst = append(dst, `,"arguments":`...)
			dst = appendStr(dst, t.args)
			dst = append(dst, "}}"...)
		}
		dst = append(dst, ']')
	}
	dst = append(dst, `},"logprobs":`...)
	if ch.logprobs {
		dst = append(dst, `{"content":`...)
		dst = appendArray(dst, ch.hasLPContent, ch.lpContent)
		dst = append(dst, `,"refusal":`...)
		dst = appendArray(dst, ch.hasLPRefusal, ch.lpRefusal)
		dst = append(dst, '}')
	} else {
		dst = append(dst, "null"...)
	}
	dst = append(dst, `,"finish_reason":`...)
	if len(ch.finish) > 0 {
		dst = appendStr(dst, ch.finish)
	} else {
		dst = append(dst, "null"...)
	}
	return append(dst, '}')
}

// appendStr appends raw, a JSON string body as sent, in quotes.
func appendStr(dst, raw []byte) []byte {
	dst = append(dst, '"')
	dst = append(dst, raw...)
	return append(dst, '"')
}

// appendArray appends the elements in brackets, or null when no array was
// sent.
func appendArray(dst []byte, sent bool, elems []byte) []byte {
	if !sent {
		return append(dst, "null"...)
	}
	dst = append(dst, '[')
	dst = append(dst, elems...)
	return append(dst, ']')
}
