package replay

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tpsroute/tpsroute/internal/payload"
)

// TestMessageTextBytes checks the copy-free text against the decoded one for
// the contents it takes and the ones it leaves to json.Unmarshal.
func TestMessageTextBytes(t *testing.T) {
	for name, content := range map[string]string{
		"plain":        `"hello there"`,
		"escaped":      `"say \"hi\"\n"`,
		"unicode":      `"caf\u00e9 ☕"`,
		"invalid_utf8": "\"a\xffb\"",
		"parts":        `[{"type":"text","text":"ab"},{"type":"image_url"},{"type":"text","text":"c"}]`,
		"null":         `null`,
		"empty":        ``,
		"number":       `12`,
	} {
		t.Run(name, func(t *testing.T) {
			m := chatMessage{Content: json.RawMessage(content)}
			assert.Equal(t, m.text(), string(m.textBytes()))
		})
	}
	// The copy-free path is taken: the text is the content's own bytes.
	m := chatMessage{Content: json.RawMessage(`"hello"`)}
	assert.Same(t, &m.Content[1], &m.textBytes()[0])
}

// TestPromptTokensOnce checks the estimate is kept after its first count.
func TestPromptTokensOnce(t *testing.T) {
	var c chatRequest
	require.NoError(t, json.Unmarshal([]byte(`{"messages":[{"role":"user","content":"abcdefgh"}]}`), &c))
	assert.Equal(t, 3+4+2, c.promptTokens())
	c.Messages = nil // a second count would give 3
	assert.Equal(t, 9, c.promptTokens())
}

// TestPrefixCacheSameText checks that a prompt cache hit takes the same
// text however its JSON escapes it, as a provider's cache of the tokens does.
func TestPrefixCacheSameText(t *testing.T) {
	var a, b chatRequest
	require.NoError(t, json.Unmarshal([]byte(`{"messages":[{"role":"system","content":"abcd"},{"role":"user","content":"q1"}]}`), &a))
	require.NoError(t, json.Unmarshal([]byte(`{"messages":[{"role":"system","content":"ab\u0063d"},{"role":"user","content":"q2"}]}`), &b))
	var st modelState
	assert.Equal(t, 0, st.cache(&a, 1))
	assert.Equal(t, 4+1, st.cache(&b, 1), "the system message's tokens are cached")
}

// FuzzMessageText checks, for any content a request body can carry, that
// textBytes is text's bytes.
func FuzzMessageText(f *testing.F) {
	for _, s := range []string{`"plain"`, `"a\"b"`, `"\ud83d\ude00"`, "\"\xff\"", `[{"type":"text","text":"x"}]`, `null`} {
		f.Add([]byte(`{"messages":[{"role":"user","content":` + s + `}]}`))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var c chatRequest
		if json.Unmarshal(body, &c) != nil {
			return
		}
		for _, m := range c.Messages {
			if string(m.textBytes()) != m.text() {
				t.Fatalf("textBytes %q, text %q", m.textBytes(), m.text())
			}
		}
	})
}

// FuzzJSONString checks that jsonString, which quotes on the stack up to 64
// bytes, gives payload.AppendQuoted's bytes (FuzzAppendQuoted checks those
// against encoding/json) at every length.
func FuzzJSONString(f *testing.F) {
	for _, s := range []string{"w1 w2 ", `a"b`, `a\b`, "a<b", "\n", "é", "\u2028", "\xff", "", strings.Repeat("x", 62), strings.Repeat("\"", 40)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := jsonString(s), string(payload.AppendQuoted(nil, s)); got != want {
			t.Fatalf("jsonString(%q) = %s, AppendQuoted %s", s, got, want)
		}
	})
}
