package route

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const testKey = "sk-live/abc_0123456789"

// escapeAll writes every byte of s as \u00XX.
func escapeAll(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		fmt.Fprintf(&b, `\u%04x`, s[i])
	}
	return b.String()
}

// keyForms are the encodings of testKey that a JSON or HTTP reader decodes
// back into it.
func keyForms() map[string]string {
	return map[string]string{
		"raw":           testKey,
		"escape-one":    `sk\u002dlive/abc_0123456789`,
		"escape-upper":  `sk\u002Dlive/abc_0123456789`,
		"escape-all":    escapeAll(testKey),
		"solidus":       `sk-live\/abc_0123456789`,
		"percent":       url.QueryEscape(testKey),
		"percent-all":   "%73%6b%2d" + testKey[3:],
		"nested-escape": `sk\\u002dlive/abc_0123456789`,                     // a string holding an escape
		"percent-json":  `%5Cu0073k-live/abc_0123456789`,                    // percent around a JSON escape
		"json-percent":  strings.ReplaceAll(testKey, "-", `\u00252d`),       // JSON escape around a percent
		"mixed-case":    `sk-live\u002Fabc_0123456789`,                      // \u002F is '/'
		"all-then-pct":  strings.ReplaceAll(escapeAll(testKey), `\`, `%5C`), // every escape percent-encoded
	}
}

func TestScrubberFindsEveryForm(t *testing.T) {
	sc := NewScrubber(Deployment{APIKey: testKey})
	for name, form := range keyForms() {
		t.Run(name, func(t *testing.T) {
			for _, wrap := range []string{"%s", "Incorrect API key provided: %s.", `{"error":{"type":"%s"}}`, "\U0001F600 %s \u00e9"} {
				in := fmt.Sprintf(wrap, form)
				assert.True(t, sc.Contains([]byte(in)), in)
				out := sc.Scrub(in)
				assert.False(t, sc.Contains([]byte(out)), out)
				assert.Contains(t, out, Redacted)
				js := sc.ScrubJSON([]byte(in))
				assert.False(t, sc.Contains(js), string(js))
			}
		})
	}
}

func TestScrubberKeepsWhatHoldsNoKey(t *testing.T) {
	sc := NewScrubber(Deployment{APIKey: testKey})
	for _, in := range []string{
		"",
		`{"choices":[{"delta":{"content":"50% of \"sk-live\" \u00e9\n"}}]}`,
		`sk-live/abc_012345678`, // one byte short
		`%zz \u12 \uZZZZ \`,     // malformed escapes
		`\ud83d\ude00 \ud800 lone`,
	} {
		assert.False(t, sc.Contains([]byte(in)), in)
		assert.Equal(t, in, sc.Scrub(in))
		assert.Equal(t, in, string(sc.ScrubJSON([]byte(in))))
	}
	var zero *Scrubber
	assert.False(t, zero.Contains([]byte(testKey)))
	assert.Equal(t, testKey, zero.Scrub(testKey))
}

func TestScrubJSONKeepsJSONValid(t *testing.T) {
	sc := NewScrubber(Deployment{APIKey: testKey, Headers: map[string]string{"X-Api-Key": "hdr-secret-42"}})
	for name, form := range keyForms() {
		t.Run(name, func(t *testing.T) {
			in := fmt.Sprintf(`{"error":{"message":"bad","type":"%s","param":"%s","code":"x%sy","%s":1},"id":"hdr-secret-42"}`, form, form, form, form)
			require.True(t, json.Valid([]byte(in)), in)
			out := sc.ScrubJSON([]byte(in))
			require.True(t, json.Valid(out), string(out))
			assert.False(t, sc.Contains(out), string(out))
			var v struct {
				Error map[string]any `json:"error"`
				ID    string         `json:"id"`
			}
			require.NoError(t, json.Unmarshal(out, &v))
			assert.Equal(t, "bad", v.Error["message"])
			assert.Equal(t, Redacted, v.Error["type"])
			assert.Equal(t, Redacted, v.Error["param"])
			assert.Equal(t, "x"+Redacted+"y", v.Error["code"])
			assert.Contains(t, v.Error, Redacted)
			assert.Equal(t, Redacted, v.ID)
		})
	}
}

func TestScrubberUnicodeEscapes(t *testing.T) {
	sc := NewScrubber(Deployment{APIKey: "key-\U0001F600-long"})
	in := `{"x":"key-\ud83d\ude00-long"}`
	assert.True(t, sc.Contains([]byte(in)))
	assert.Equal(t, `{"x":"REDACTED"}`, string(sc.ScrubJSON([]byte(in))))
	// A risky credential (it holds a quote) hides behind any backslash.
	risky := NewScrubber(Deployment{APIKey: `ab"cd-1234`})
	assert.True(t, risky.Contains([]byte(`{"x":"ab\"cd-1234"}`)))
	assert.False(t, risky.Contains(risky.ScrubJSON([]byte(`{"x":"ab\"cd-1234"}`))))
}

func TestScrubberDeepNestingReadsRedacted(t *testing.T) {
	sc := NewScrubber(Deployment{APIKey: testKey})
	s := testKey
	for range 6 { // deeper than maxDecodeRounds
		s = url.QueryEscape(s)
		s = strings.ReplaceAll(s, "%", "%25")
	}
	out := sc.Scrub(s)
	assert.False(t, sc.Contains([]byte(out)))
}

// FuzzScrubber holds the property the relay relies on: nothing the Scrubber
// returns holds a credential in a form it finds, and what holds none comes
// back unchanged.
func FuzzScrubber(f *testing.F) {
	for _, form := range keyForms() {
		f.Add(form)
		f.Add(`{"error":{"code":"` + form + `"}}`)
		f.Add(": " + form)
	}
	f.Add(`{"choices":[{"delta":{"content":"hi \u00e9 50%"}}]}`)
	f.Add(`\`)
	f.Add(`"\`)
	sc := NewScrubber(Deployment{APIKey: testKey, Headers: map[string]string{"Api-Key": "k\"ey\\9"}})
	f.Fuzz(func(t *testing.T, in string) {
		out := sc.Scrub(in)
		js := sc.ScrubJSON([]byte(in))
		if sc.Contains([]byte(out)) || sc.Contains(js) {
			t.Fatalf("credential survives: %q -> %q / %q", in, out, js)
		}
		if !sc.Contains([]byte(in)) && (out != in || string(js) != in) {
			t.Fatalf("changed without a credential: %q -> %q / %q", in, out, js)
		}
		if json.Valid([]byte(in)) && !json.Valid(js) && !strings.Contains(in, `k"ey`) {
			t.Fatalf("ScrubJSON broke JSON: %q -> %q", in, js)
		}
	})
}
