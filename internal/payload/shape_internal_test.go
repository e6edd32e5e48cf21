package payload

import (
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestShapeLearnedAndUsed looks inside the remembered shape, which
// TestParseChunkReusedEqualsFresh cannot see: what a lone text delta
// teaches it, that a payload which repeats it around other text is read
// from it (and the members after "choices" still scanned), and that one
// which does not is scanned.
func TestShapeLearnedAndUsed(t *testing.T) {
	const (
		head = `{"id":"c1","created":17,"model":"m","choices":[{"index":2,"delta":{"content":"`
		tail = `"},"finish_reason":null}]`
	)
	var c Chunk
	require.NoError(t, ParseChunk([]byte(head+`a`+tail+`,"usage":null}`), &c))
	assert.Equal(t, head, string(c.shape.head), "through the text's opening quote")
	assert.Equal(t, tail, string(c.shape.tail), "from its closing quote through the end of choices")
	assert.Equal(t, 4, c.shape.n)
	assert.Equal(t, byte('c'), c.shape.kind)

	c.shape.created = 99 // a mark that only the remembered shape carries
	require.NoError(t, ParseChunk([]byte(head+`b\"c`+tail+`,"usage":{"completion_tokens":3},"model":"m2"}`), &c))
	assert.EqualValues(t, 99, c.Created, "a payload that repeats the shape is read from it")
	assert.Equal(t, `b\"c`, string(c.Content))
	assert.Equal(t, []ChoiceDelta{{Index: 2, Content: []byte(`b\"c`)}}, c.Choices)
	assert.Equal(t, "c1", string(c.ID))
	assert.Equal(t, "m2", string(c.Model), "members after choices are scanned")
	assert.True(t, c.HasUsage)
	assert.EqualValues(t, 3, c.Usage.CompletionTokens)
	assert.Equal(t, 4, c.OutputBytes)
	assert.Zero(t, c.shape.misses, "a use resets the misses")

	for name, payload := range map[string]string{
		"empty text":       head + tail + `}`,
		"another tail":     head + `b"},"finish_reason":"stop"}]}`,
		"a quote in it":    head + `b"c` + tail + `}`,
		"the tail cut":     head + `b"},"finish_reason":null}`,
		"another identity": strings.Replace(head, "c1", "c2", 1) + `b` + tail + `}`,
	} {
		c.shape.created = 99
		_ = ParseChunk([]byte(payload), &c)
		assert.NotEqualValues(t, 99, c.Created, "%s: scanned, not read from the shape", name)
	}

	// Long enough for the first length check, one byte short of the tail
	// after a two-byte text, with the missing byte just past the slice's
	// length: the tail is compared within the payload, never beyond it.
	var fresh Chunk
	require.NoError(t, ParseChunk([]byte(head+`a`+tail+`}`), &fresh))
	whole := []byte(head + `bc` + tail)
	fresh.shape.created = 99
	_ = ParseChunk(whole[:len(whole)-1], &fresh)
	assert.NotEqualValues(t, 99, fresh.Created, "a tail one byte short is not the shape's")
}

// TestShapeKinds: reasoning and refusal deltas are remembered as content
// is, with the fields each sets.
func TestShapeKinds(t *testing.T) {
	for _, tc := range []struct {
		key  string
		kind byte
	}{{"content", 'c'}, {"reasoning_content", 'r'}, {"reasoning", 'r'}, {"refusal", 'f'}} {
		var c Chunk
		payload := func(text string) []byte {
			return []byte(`{"choices":[{"delta":{"` + tc.key + `":"` + text + `"}}]}`)
		}
		require.NoError(t, ParseChunk(payload("a"), &c), tc.key)
		require.Equal(t, tc.kind, c.shape.kind, tc.key)
		var fresh Chunk
		require.NoError(t, ParseChunk(payload("bcd"), &fresh), tc.key)
		c.shape.created = 99
		require.NoError(t, ParseChunk(payload("bcd"), &c), tc.key)
		assert.EqualValues(t, 99, c.Created, "%s: read from the shape", tc.key)
		c.Created = 0
		assert.Equal(t, fresh.Choices, c.Choices, tc.key)
		assert.Equal(t, [...]any{fresh.Output, fresh.OutputDeltas, string(fresh.Content), fresh.OutputBytes, fresh.Reasoning, fresh.ReasoningBytes},
			[...]any{c.Output, c.OutputDeltas, string(c.Content), c.OutputBytes, c.Reasoning, c.ReasoningBytes}, tc.key)
	}
}

// TestShapeNotLearned: no shape is kept unless the payload is a lone text
// delta after identity members only.
func TestShapeNotLearned(t *testing.T) {
	for _, payload := range []string{
		`{"choices":[{"delta":{"content":""}}]}`,
		`{"choices":[{"delta":{"content":"a"},"finish_reason":"stop"}]}`,
		`{"choices":[{"delta":{"content":"a"}},{"index":1,"delta":{"content":"b"}}]}`,
		`{"choices":[{"delta":{"content":"a","tool_calls":[{"index":0}]}}]}`,
		`{"choices":[{"delta":{"content":"a"},"logprobs":{"content":[]}}]}`,
		`{"choices":[{"delta":{"content":"a","reasoning_content":"r"}}]}`,
		`{"choices":[{"delta":{"content":"a","content":"b"}}]}`,
		`{"choices":[{"delta":{"content":"a","refusal":""}}]}`,
		`{"usage":null,"choices":[{"delta":{"content":"a"}}]}`,
		`{"error":null,"choices":[{"delta":{"content":"a"}}]}`,
		`{"choices":[{"delta":{"content":"a"}}`,
		`{"id":"` + strings.Repeat("x", maxShape) + `","choices":[{"delta":{"content":"a"}}]}`,
	} {
		var c Chunk
		_ = ParseChunk([]byte(payload), &c)
		assert.Empty(t, c.shape.head, payload)
	}
	var c Chunk
	require.NoError(t, ParseChunk([]byte(`{"id":"x","choices":[{"delta":{"content":"a"}}],"usage":null}`), &c))
	assert.NotEmpty(t, c.shape.head, "members after choices do not matter")
}

// TestRelearnPacing: a memo that keeps missing is learned at the 1st, 2nd,
// 4th, 8th... miss, and at the first one again after it served.
func TestRelearnPacing(t *testing.T) {
	var r relearn
	var learned []int
	for i := 1; i <= 40; i++ {
		if r.miss() {
			learned = append(learned, i)
		}
	}
	assert.Equal(t, []int{1, 2, 4, 8, 16, 32}, learned)
	r.hit()
	assert.True(t, r.miss())
}

// TestShapeRelearnedAtPace: chunks whose heads all differ (a "created" per
// chunk) relearn the shape about log2(n) times, not n times.
func TestShapeRelearnedAtPace(t *testing.T) {
	var c Chunk
	learned := 0
	for i := range 1000 {
		before := string(c.shape.head)
		payload := `{"created":` + strconv.Itoa(i) + `,"choices":[{"delta":{"content":"a"}}]}`
		require.NoError(t, ParseChunk([]byte(payload), &c))
		if string(c.shape.head) != before {
			learned++
		}
	}
	assert.LessOrEqual(t, learned, 11)
}

// TestShapeRest: the members after "choices" that set nothing are
// remembered with the shape, and a payload that repeats them too is read
// whole; members that set something are not.
func TestShapeRest(t *testing.T) {
	const head = `{"id":"c","choices":[{"delta":{"content":"`
	var c Chunk
	require.NoError(t, ParseChunk([]byte(head+`a"}}],"usage":null,"obfuscation":"x"}`), &c))
	assert.True(t, c.shape.restOK)
	assert.Equal(t, `,"usage":null,"obfuscation":"x"}`, string(c.shape.rest))

	c.shape.rest = []byte(`,"model":"m"}`) // a mark: scanned, these bytes would set the model
	require.NoError(t, ParseChunk([]byte(head+`b"}}],"model":"m"}`), &c))
	assert.Equal(t, "b", string(c.Content))
	assert.Nil(t, c.Model, "read whole, not scanned")
	assert.True(t, c.shape.restOK)

	require.ErrorIs(t, ParseChunk([]byte(head+`b"}}],"model":"m"}x`), &c), ErrMalformed, "other bytes are scanned")
	require.NoError(t, ParseChunk([]byte(head+`b"}}],"usage":null,"obfuscation":"z"}`), &c))
	assert.Equal(t, `,"usage":null,"obfuscation":"z"}`, string(c.shape.rest), "relearned after a payload that repeated the shape")

	for _, after := range []string{`,"usage":{"total_tokens":2}}`, `,"id":"d"}`, `,"model":null}`, `,"error":null}`, `,"choices":[]}`, `,"x_groq":null}`} {
		require.NoError(t, ParseChunk([]byte(head+`b"}}]`+after), &c), after)
		assert.False(t, c.shape.restOK, after)
	}
}

// TestShapeSizeLimits: a shape whose head and tail hold maxShape bytes
// together is remembered and one byte more is not; the same for the
// members after "choices" (rest).
func TestShapeSizeLimits(t *testing.T) {
	const (
		pre  = `{"id":"`
		post = `","choices":[{"delta":{"content":"`
		tail = `"}}]`
	)
	for _, extra := range []int{0, 1} {
		id := strings.Repeat("i", maxShape-len(pre)-len(post)-len(tail)+extra)
		var c Chunk
		require.NoError(t, ParseChunk([]byte(pre+id+post+`a`+tail+`}`), &c))
		assert.Equal(t, extra == 0, len(c.shape.head) > 0, "head and tail of maxShape%+d bytes", extra)
		if extra == 0 {
			assert.Equal(t, maxShape, len(c.shape.head)+len(c.shape.tail))
		}
	}
	const head = `{"id":"c","choices":[{"delta":{"content":"`
	for _, extra := range []int{0, 1} {
		rest := `,"x":"` + strings.Repeat("r", maxShape-len(`,"x":""}`)+extra) + `"}`
		var c Chunk
		require.NoError(t, ParseChunk([]byte(head+`a"}}]`+rest), &c))
		require.NotEmpty(t, c.shape.head)
		assert.Equal(t, extra == 0, c.shape.restOK, "rest of maxShape%+d bytes", extra)
	}
}
