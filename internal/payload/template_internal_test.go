package payload

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestTemplateLearnedAndUsed looks inside the template, which
// TestProtocolParseReusedEqualsFresh cannot see: what a lone text delta
// teaches it, that an event repeating it around new values is read from
// it, that held values settle into the literal runs after `settled` reads
// and that a value changing after that makes it miss once and relearn.
func TestTemplateLearnedAndUsed(t *testing.T) {
	ev := func(seq int, item, text string) []byte {
		return fmt.Appendf(nil, `{"type":"response.output_text.delta","sequence_number":%d,"item_id":"%s","output_index":0,"content_index":0,"delta":"%s","logprobs":[],"obfuscation":"o%d"}`, seq, item, text, seq)
	}
	var c Chunk
	require.NoError(t, ParseResponsesEvent(ev(1, "msg_1", "abc"), &c))
	require.Len(t, c.tmpl.holes, 6, "sequence_number, item_id, two indexes, the text, obfuscation")
	assert.Equal(t, `{"type":"response.output_text.delta","sequence_number":,"item_id":,"output_index":,"content_index":,"delta":,"logprobs":[],"obfuscation":}`, string(c.tmpl.lits))
	assert.Equal(t, []byte{'0', '"', '0', '0', 't', '"'}, kinds(c.tmpl.holes))

	read := func(data []byte) bool {
		c.tmpl.reasoning = true // a mark only the template sets
		require.NoError(t, ParseResponsesEvent(data, &c))
		c.tmpl.reasoning = false
		return c.Reasoning
	}
	for i := 2; i < 2+settled; i++ {
		assert.True(t, read(ev(i, "msg_1", `b\"c`)), "read %d from the template", i)
		assert.Equal(t, `b\"c`, string(c.Content))
	}
	assert.Equal(t, []byte{'0', 't', '"'}, kinds(c.tmpl.holes), "the item id and indexes settled")
	assert.Contains(t, string(c.tmpl.lits), `"item_id":"msg_1","output_index":0,"content_index":0,"delta":`)
	assert.True(t, read(ev(100, "msg_1", "d")))

	assert.False(t, read(ev(101, "msg_2", "efg")), "another item id: scanned")
	assert.Equal(t, "efg", string(c.Content))
	assert.Len(t, c.tmpl.holes, 6, "and relearned at once, the template having served")
	assert.True(t, read(ev(102, "msg_2", "f")))

	for name, data := range map[string]string{
		"empty text":            string(ev(103, "msg_2", "")),
		"a string for a number": strings.Replace(string(ev(104, "msg_2", "g")), `"sequence_number":104`, `"sequence_number":"104"`, 1),
		"a bad escape":          string(ev(105, "msg_2", `\q`)),
		"trailing bytes":        string(ev(106, "msg_2", "h")) + " ",
		"cut":                   strings.TrimSuffix(string(ev(107, "msg_2", "i")), "}"),
		"another type":          strings.Replace(string(ev(108, "msg_2", "j")), "output_text", "refusal", 1),
	} {
		c.tmpl.reasoning = true
		_ = ParseResponsesEvent([]byte(data), &c)
		c.tmpl.reasoning = false
		assert.False(t, c.Reasoning, "%s: scanned, not read from the template", name)
	}

	var m Chunk
	require.NoError(t, ParseMessagesEvent([]byte(`{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"x"}}`), &m))
	assert.True(t, m.tmpl.reasoning)
	assert.Equal(t, []byte{'0', 't'}, kinds(m.tmpl.holes))
	assert.False(t, m.tmpl.read(protoResponses, []byte(`{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"y"}}`), &m), "another protocol")
	require.NoError(t, ParseMessagesEvent([]byte(`{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"y"}}`), &m))
	assert.True(t, m.Reasoning)
	assert.Equal(t, 1, m.ReasoningBytes)
}

// TestTemplateBounds: an event over maxTemplate bytes, or with more values
// skipped than maxTemplateHoles allows, is not learned; a tool-call delta,
// a delta with usage or an identity is not either.
func TestTemplateBounds(t *testing.T) {
	for name, data := range map[string]string{
		"long":       `{"type":"response.output_text.delta","item_id":"` + strings.Repeat("x", maxTemplate) + `","delta":"a"}`,
		"many holes": `{"type":"response.output_text.delta","x":[` + strings.TrimSuffix(strings.Repeat("1,", maxTemplateHoles), ",") + `],"delta":"a"}`,
		"tool call":  `{"type":"response.function_call_arguments.delta","delta":"{"}`,
		"usage":      `{"type":"response.output_text.delta","delta":"a","response":{"usage":{"output_tokens":1}}}`,
		"identity":   `{"type":"response.output_text.delta","delta":"a","response":{"id":"r"}}`,
	} {
		var c Chunk
		require.NoError(t, ParseResponsesEvent([]byte(data), &c), name)
		assert.Empty(t, c.tmpl.holes, name)
	}
	var c Chunk
	require.NoError(t, ParseResponsesEvent([]byte(`{"type":"response.output_text.delta","x":[`+strings.TrimSuffix(strings.Repeat("1,", maxTemplateHoles-1), ",")+`],"delta":"a"}`), &c))
	assert.Len(t, c.tmpl.holes, maxTemplateHoles, "at the bound")
}

// TestTemplateNumbers: a number hole takes any JSON number, whatever digit
// or sign it starts with, and one that repeats the learned value is
// compared only when nothing after it could continue it (1 is not the
// start of 100).
func TestTemplateNumbers(t *testing.T) {
	ev := func(seq string) []byte {
		return []byte(`{"type":"content_block_delta","index":` + seq + `,"delta":{"type":"text_delta","text":"xy"}}`)
	}
	var c Chunk
	require.NoError(t, ParseMessagesEvent(ev("5"), &c))
	require.Len(t, c.tmpl.holes, 2)
	for _, seq := range []string{"0", "9", "-3", "1", "100", "1.5e3", "5"} {
		c.tmpl.reasoning = true
		require.NoError(t, ParseMessagesEvent(ev(seq), &c))
		c.tmpl.reasoning = false
		assert.True(t, c.Reasoning, "index %s read from the template", seq)
		assert.Equal(t, "xy", string(c.Content))
	}
	for _, seq := range []string{"+1", "x", `"1"`, "-"} {
		c.tmpl.reasoning = true
		_ = ParseMessagesEvent(ev(seq), &c)
		c.tmpl.reasoning = false
		assert.False(t, c.Reasoning, "index %s scanned", seq)
	}
	assert.True(t, continuesNumber([]byte("12"), 1))
	assert.False(t, continuesNumber([]byte("12"), 2), "past the end")
	for _, b := range "0123456789.eE+-" {
		assert.True(t, continuesNumber([]byte{byte(b)}, 0), "%c", b)
	}
	for _, b := range ",}] \"a" {
		assert.False(t, continuesNumber([]byte{byte(b)}, 0), "%c", b)
	}
}

// TestTemplateShortEvents: an event that stops inside a literal run or a
// learned value, in a slice with no capacity beyond it, misses without
// reading past its end.
func TestTemplateShortEvents(t *testing.T) {
	full := `{"type":"content_block_delta","index":7,"delta":{"type":"text_delta","text":"xy"}}`
	var c Chunk
	require.NoError(t, ParseMessagesEvent([]byte(full), &c))
	for n := range len(full) {
		data := []byte(full[:n])
		data = data[:n:n]
		c.tmpl.reasoning = true
		_ = ParseMessagesEvent(data, &c)
		c.tmpl.reasoning = false
		assert.False(t, c.Reasoning, "%q", data)
	}
}

// TestTemplateSizeBound: an event of exactly maxTemplate bytes is learned,
// one byte longer is not.
func TestTemplateSizeBound(t *testing.T) {
	for _, tt := range []struct {
		size    int
		learned bool
	}{{maxTemplate, true}, {maxTemplate + 1, false}} {
		head, tail := `{"type":"content_block_delta","index":0,"pad":"`, `","delta":{"type":"text_delta","text":"xy"}}`
		data := head + strings.Repeat("p", tt.size-len(head)-len(tail)) + tail
		require.Len(t, data, tt.size)
		var c Chunk
		require.NoError(t, ParseMessagesEvent([]byte(data), &c))
		assert.Equal(t, tt.learned, len(c.tmpl.holes) > 0, "%d bytes", tt.size)
	}
}

func kinds(hs []hole) []byte {
	var b []byte
	for _, h := range hs {
		b = append(b, h.kind)
	}
	return b
}
