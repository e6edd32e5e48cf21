package jsoncheck

import (
	"bytes"
	"encoding/json"
	"errors"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"
)

// chatBody is a typical chat-completion request of about 4 KB.
var chatBody = func() []byte {
	var b strings.Builder
	b.WriteString(`{"model":"gpt-4o-mini","stream":true,"max_tokens":512,"temperature":0.7,"prompt_cache_key":"user-42",`)
	b.WriteString(`"tools":[{"type":"function","function":{"name":"lookup","parameters":{"type":"object","properties":{"q":{"type":"string"},"n":{"type":"integer","minimum":1}},"required":["q"]}}}],`)
	b.WriteString(`"messages":[{"role":"system","content":"You are a helpful assistant. Answer briefly."}`)
	for b.Len() < 4000 {
		b.WriteString(`,{"role":"user","content":"Explain, with an example, why the sky looks blue at noon and red at dusk. \u00e9\n"}`)
		b.WriteString(`,{"role":"assistant","content":[{"type":"text","text":"Rayleigh scattering: shorter wavelengths scatter more (~1/λ^4), 5.5e-7 m."}]}`)
	}
	b.WriteString(`]}`)
	return []byte(b.String())
}()

func nested(open string, n int) []byte { return bytes.Repeat([]byte(open), n) }

func TestValid(t *testing.T) {
	deep := func(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }
	deepObj := func(n int) string { return strings.Repeat(`{"a":`, n) + "1" + strings.Repeat("}", n) }
	for _, tc := range []struct {
		name, in string
		ok       bool
	}{
		{"chat body", string(chatBody), true},
		{"empty object", `{}`, true},
		{"empty array spaced", " [ \t\n\r] ", true},
		{"scalars", `[1,-0,0.5,1e9,-2E-3,1.5e+2,true,false,null,"",""]`, true},
		{"escapes", `"\"\\\/\b\f\n\r\t\u00E9\uD83D\uDE00"`, true},
		{"raw utf8 and invalid utf8", "\"é\xff\"", true},
		{"object nesting", `{"a":{"b":[{"c":{}}],"d":[]},"e":"f"}`, true},
		{"depth at the limit", deep(MaxDepth), true},
		{"object depth at the limit", deepObj(MaxDepth), true},
		{"empty", ``, false},
		{"space only", `  `, false},
		{"trailing data", `{} {}`, false},
		{"trailing comma array", `[1,]`, false},
		{"trailing comma object", `{"a":1,}`, false},
		{"missing colon", `{"a" 1}`, false},
		{"non-string key", `{1:2}`, false},
		{"unclosed", `{"a":[1,2}`, false},
		{"mismatched", `[}`, false},
		{"control char in string", "\"a\x01\"", false},
		{"bad escape", `"\x"`, false},
		{"short unicode escape", `"\u12"`, false},
		{"leading zero", `01`, false},
		{"bare minus", `-`, false},
		{"dot without digits", `1.`, false},
		{"exponent without digits", `1e+`, false},
		{"plus sign", `+1`, false},
		{"bad literal", `tru`, false},
		{"single quotes", `'a'`, false},
		{"unterminated string", `"abc`, false},
		{"nested unterminated", `[[[`, false},
		{"depth over the limit", deep(MaxDepth + 1), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Valid([]byte(tc.in))
			if tc.ok {
				assert.NoError(t, err)
			} else {
				var e *Error
				require.ErrorAs(t, err, &e)
				assert.True(t, strings.HasPrefix(err.Error(), "jsoncheck: "), err.Error())
			}
			if len(tc.in) > 0 && strings.Count(tc.in, "[")+strings.Count(tc.in, "{") <= MaxDepth {
				assert.Equal(t, gjson.Valid(tc.in), err == nil, "gjson.Valid disagrees")
			}
		})
	}
}

// TestNestedBodies: megabytes of '[' are refused at the first bracket past
// MaxDepth, with ErrTooDeep, and without growing the stack. (gjson.ValidBytes
// recurses once per bracket: about 900 MiB of stack for 4 MiB, and a fatal
// stack overflow past 1 GiB.)
func TestNestedBodies(t *testing.T) {
	for _, size := range []int{4 << 20, 8 << 20} {
		for _, open := range []string{"[", `{"a":`} {
			body := nested(open, size/len(open))
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			err := Valid(body)
			runtime.ReadMemStats(&after)
			require.ErrorIs(t, err, ErrTooDeep)
			var e *Error
			require.ErrorAs(t, err, &e)
			assert.Equal(t, MaxDepth*len(open), e.Offset, "stops at the first bracket past the limit")
			assert.Less(t, after.StackInuse, before.StackInuse+1<<20, "stack growth")
		}
	}
}

func TestValidAllocatesNothing(t *testing.T) {
	assert.Zero(t, testing.AllocsPerRun(100, func() { _ = Valid(chatBody) }))
}

// FuzzValid checks Valid against encoding/json.Valid (which does not check
// UTF-8 either) on every input nesting at most MaxDepth levels, and that a
// refusal is an *Error inside the input.
func FuzzValid(f *testing.F) {
	for _, s := range []string{
		string(chatBody), `{}`, `[]`, `""`, `0`, `-1.5e-3`, `[1,[2,{"a":null}]]`, `{"a":"\u00e9\n"}`,
		`[1,]`, `{"a"}`, `01`, "\"\x00\"", `"\ud800"`, strings.Repeat("[", MaxDepth+1), ` true `, `nul`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		err := Valid(data)
		if err != nil {
			var e *Error
			if !errors.As(err, &e) || e.Offset < 0 || e.Offset > len(data) {
				t.Fatalf("Valid(%q) = %v: want an *Error within the input", data, err)
			}
			if errors.Is(err, ErrTooDeep) {
				return
			}
		}
		if got, want := err == nil, json.Valid(data); got != want {
			t.Fatalf("Valid(%q) = %v, encoding/json.Valid = %v", data, err, want)
		}
	})
}

// BenchmarkValid compares Valid with gjson.ValidBytes, which the root package
// and the gateway used before, on a typical 4 KB chat body.
func BenchmarkValid(b *testing.B) {
	for _, v := range []struct {
		name string
		fn   func([]byte) bool
	}{
		{"jsoncheck", func(d []byte) bool { return Valid(d) == nil }},
		{"gjson", gjson.ValidBytes},
	} {
		b.Run(v.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(chatBody)))
			for b.Loop() {
				if !v.fn(chatBody) {
					b.Fatal("invalid")
				}
			}
		})
	}
}
