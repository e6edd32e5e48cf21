package payload_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"

	"github.com/tpsroute/tpsroute/internal/payload"
)

// quoteCases are strings whose quoting each escape rule decides.
var quoteCases = map[string]string{
	"":                        `""`,
	"plain ascii":             `"plain ascii"`,
	`a"b\c`:                   `"a\"b\\c"`,
	"\b\f\n\r\t":              `"\b\f\n\r\t"`,
	"\x00\x01\x1f\x7f":        "\"\\u0000\\u0001\\u001f\x7f\"",
	"<b> & </b>":              `"<b> & </b>"`,
	"héllo wörld 日本 🙂":        `"héllo wörld 日本 🙂"`,
	"bad \xff byte":           `"bad \ufffd byte"`,
	"cut \xe6\x97":            `"cut \ufffd\ufffd"`,
	"sep \u2028 and \u2029":   `"sep \u2028 and \u2029"`,
	"\u2027\u202a":            "\"\u2027\u202a\"",
	"ends with escape\n":      `"ends with escape\n"`,
	"\"":                      `"\""`,
	"surrogate \xed\xa0\x80!": `"surrogate \ufffd\ufffd\ufffd!"`,
}

func TestAppendQuoted(t *testing.T) {
	for in, want := range quoteCases {
		got := payload.AppendQuoted([]byte("x:"), in)
		assert.Equal(t, "x:"+want, string(got), "%q", in)
		assert.Equal(t, stdQuote(in), string(got[2:]), "%q: encoding/json differs", in)
	}
}

// stdQuote is encoding/json's quoting of s without HTML escapes: the oracle.
func stdQuote(s string) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // a string always encodes
	return strings.TrimSuffix(b.String(), "\n")
}

func TestAppendQuotedAllocs(t *testing.T) {
	dst := make([]byte, 0, 256)
	s := "a \"quoted\"\n line \xff with \u2028 and 日本"
	assert.Zero(t, testing.AllocsPerRun(100, func() { _ = payload.AppendQuoted(dst[:0], s) }))
}

// FuzzAppendQuoted checks AppendQuoted byte for byte against encoding/json,
// and that AppendUnescaped reads back the string (valid UTF-8 unchanged).
func FuzzAppendQuoted(f *testing.F) {
	for in := range quoteCases {
		f.Add(in)
	}
	f.Fuzz(func(t *testing.T, s string) {
		q := payload.AppendQuoted(nil, s)
		if want := stdQuote(s); string(q) != want {
			t.Fatalf("AppendQuoted(%q) = %s, encoding/json %s", s, q, want)
		}
		back := payload.AppendUnescaped(nil, q[1:len(q)-1])
		if utf8.ValidString(s) && string(back) != s {
			t.Fatalf("AppendUnescaped(AppendQuoted(%q)) = %q", s, back)
		}
	})
}
