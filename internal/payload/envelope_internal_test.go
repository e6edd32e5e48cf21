package payload

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestEnvelopeLearnedAndUsed looks inside the remembered envelope, which
// TestParseChunkReusedEqualsFresh cannot see (a memory that is never used
// gives the same results): what a payload teaches it, that a payload which
// repeats it is read from it, and that one which does not is scanned.
func TestEnvelopeLearnedAndUsed(t *testing.T) {
	const head = `{"id":"c1" , "object":"chat.completion.chunk","created":17,"model":"m",`
	payload := []byte(head + `"choices":[{"index":0,"delta":{"content":"a"}}]}`)
	var c Chunk
	require.NoError(t, ParseChunk(payload, &c))
	assert.Equal(t, head, string(c.env.raw), "through the comma after the last member, space before it kept")
	assert.Equal(t, 4, c.env.n)
	assert.Equal(t, "c1", string(c.env.id.of(payload)))

	c.env.created = 99 // a mark that only the remembered envelope carries
	c.shape = shape{}  // which would read the whole payload first
	require.NoError(t, ParseChunk(payload, &c))
	assert.EqualValues(t, 99, c.Created, "a payload that repeats the envelope is read from it")
	assert.Equal(t, "c1", string(c.ID))
	assert.Equal(t, "m", string(c.Model))

	other := []byte(strings.Replace(string(payload), `"c1"`, `"c2"`, 1))
	require.NoError(t, ParseChunk(other, &c))
	assert.EqualValues(t, 17, c.Created, "other bytes are scanned")
	assert.Equal(t, "c2", string(c.ID))

	c.env.created = 99
	require.ErrorIs(t, ParseChunk([]byte(strings.Replace(head, "c1", "c2", 1)), &c), ErrMalformed, "the envelope alone, ending at its comma")
	assert.EqualValues(t, 17, c.Created, "a payload no longer than the envelope is scanned, not read from it")
}

// TestEnvelopeNotLearned: no envelope is kept when the payload opens with
// a member it cannot hold, when nothing follows the leading members, or
// past maxEnvelope; exactly maxEnvelope bytes are kept.
func TestEnvelopeNotLearned(t *testing.T) {
	for _, tc := range []struct {
		name    string
		payload string
		kept    bool
	}{
		{"choices first", `{"choices":[],"id":"x"}`, false},
		{"leading members only", `{"id":"x","model":"m"}`, false},
		{"usage second", `{"id":"x","usage":null,"choices":[]}`, true},
		{"malformed after them", `{"id":"x","choices":[}`, true},
	} {
		var c Chunk
		_ = ParseChunk([]byte(tc.payload), &c)
		assert.Equal(t, tc.kept, len(c.env.raw) > 0, tc.name)
	}
	// An "id" long enough that the comma after it is the envelope's
	// maxEnvelope-th byte, then one byte longer.
	for _, extra := range []int{0, 1} {
		id := strings.Repeat("x", maxEnvelope-len(`{"id":"",`)+extra)
		var c Chunk
		require.NoError(t, ParseChunk([]byte(`{"id":"`+id+`","choices":[]}`), &c))
		assert.Equal(t, extra == 0, len(c.env.raw) == maxEnvelope, "extra %d: kept %d bytes", extra, len(c.env.raw))
		assert.LessOrEqual(t, len(c.env.raw), maxEnvelope)
	}
}
