package redact

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tpsroute/tpsroute/route"
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
	sc := NewScrubber(route.Deployment{APIKey: testKey})
	for name, form := range keyForms() {
		t.Run(name, func(t *testing.T) {
			for _, wrap := range []string{"%s", "Incorrect API key provided: %s.", `{"error":{"type":"%s"}}`, "\U0001F600 %s \u00e9"} {
				in := fmt.Sprintf(wrap, form)
				assert.True(t, sc.Contains([]byte(in)), in)
				out := sc.Scrub(in)
				assert.False(t, sc.Contains([]byte(out)), out)
				assert.Contains(t, out, route.Redacted)
				js := sc.ScrubJSON([]byte(in))
				assert.False(t, sc.Contains(js), string(js))
			}
		})
	}
}

func TestScrubberKeepsWhatHoldsNoKey(t *testing.T) {
	sc := NewScrubber(route.Deployment{APIKey: testKey})
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
	sc := NewScrubber(route.Deployment{APIKey: testKey, Headers: map[string]string{"X-Api-Key": "hdr-secret-42"}})
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
			assert.Equal(t, route.Redacted, v.Error["type"])
			assert.Equal(t, route.Redacted, v.Error["param"])
			assert.Equal(t, "x"+route.Redacted+"y", v.Error["code"])
			assert.Contains(t, v.Error, route.Redacted)
			assert.Equal(t, route.Redacted, v.ID)
		})
	}
}

func TestScrubberUnicodeEscapes(t *testing.T) {
	sc := NewScrubber(route.Deployment{APIKey: "key-\U0001F600-long"})
	in := `{"x":"key-\ud83d\ude00-long"}`
	assert.True(t, sc.Contains([]byte(in)))
	assert.Equal(t, `{"x":"REDACTED"}`, string(sc.ScrubJSON([]byte(in))))
	// A risky credential (it holds a quote) hides behind any backslash.
	risky := NewScrubber(route.Deployment{APIKey: `ab"cd-1234`})
	assert.True(t, risky.Contains([]byte(`{"x":"ab\"cd-1234"}`)))
	assert.False(t, risky.Contains(risky.ScrubJSON([]byte(`{"x":"ab\"cd-1234"}`))))
}

func TestScrubberDeepNestingReadsRedacted(t *testing.T) {
	sc := NewScrubber(route.Deployment{APIKey: testKey})
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
	sc := NewScrubber(route.Deployment{APIKey: testKey, Headers: map[string]string{"Api-Key": "k\"ey\\9"}})
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

// TestScrubJSONExact pins ScrubJSON's output byte for byte: only the strings
// that held a credential change, re-encoded with their quotes, backslashes
// and control characters escaped; every other string keeps its escapes, and
// a string cut at the end of the input is closed.
func TestScrubJSONExact(t *testing.T) {
	sc := NewScrubber(route.Deployment{APIKey: testKey})
	esc := `sk\u002dlive/abc_0123456789`
	for _, tt := range []struct{ name, in, want string }{
		{"other strings keep their escapes", `{"a":"say \"hi\"\n","b":"` + esc + `"}`, `{"a":"say \"hi\"\n","b":"REDACTED"}`},
		{"a member name and its value", `{"` + esc + `":"` + esc + `","c":"\u00e9"}`, `{"REDACTED":"REDACTED","c":"\u00e9"}`},
		{"re-encoded", `{"m":"line1\n` + esc + ` \"q\" \\ \t\u001f \/ end"}`, `{"m":"line1\nREDACTED \"q\" \\ \t\u001f / end"}`},
		{"cut inside the string", `{"m":"` + esc, `{"m":"REDACTED"`},
		{"cut after the key's escape", `data: {"m":"x ` + esc + `\`, `data: {"m":"x REDACTED\\"`},
		{"raw outside strings", `{"n":` + testKey + `}`, `{"n":REDACTED}`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, string(sc.ScrubJSON([]byte(tt.in))))
		})
	}
}

// TestScrubberPartialPercent: a '%' without two hex digits after it, at the
// end of the text or before one digit, is kept as it is.
func TestScrubberPartialPercent(t *testing.T) {
	sc := NewScrubber(route.Deployment{APIKey: testKey})
	for _, in := range []string{"50%", "50%4", "%", "%a", "%4g %", "a%2"} {
		assert.False(t, sc.Contains([]byte(in)), in)
		assert.Equal(t, in, sc.Scrub(in))
	}
	in := url.QueryEscape(testKey)[:len(url.QueryEscape(testKey))-1] + "%39" // the last byte encoded, at the end
	require.True(t, strings.HasSuffix(in, "%39"))
	assert.True(t, sc.Contains([]byte(in)))
	assert.Equal(t, route.Redacted, sc.Scrub(in))
}

// TestScrubberRisky: a credential holding a quote, a backslash or a control
// character can hide behind any one-letter JSON escape, so any backslash
// makes the Scrubber decode; any other credential is decoded only for \u,
// \/ or '%', and a plain \n costs it no decoding.
func TestScrubberRisky(t *testing.T) {
	for _, tt := range []struct {
		key   string
		risky bool
		form  string // key as JSON escapes it
	}{
		{testKey, false, testKey},
		{"ab cd-1234", false, "ab cd-1234"}, // a space needs no escape
		{"ab~cd-1234", false, "ab~cd-1234"},
		{`ab"cd-1234`, true, `ab\"cd-1234`},
		{`ab\cd-1234`, true, `ab\\cd-1234`},
		{"ab\tcd-1234", true, `ab\tcd-1234`},
		{"ab\x1fcd-1234", true, `ab\u001fcd-1234`},
	} {
		t.Run(tt.key, func(t *testing.T) {
			sc := NewScrubber(route.Deployment{APIKey: tt.key})
			assert.Equal(t, tt.risky, sc.risky)
			assert.Equal(t, tt.risky, sc.mayHide([]byte(`say \n`)), "a one-letter escape")
			assert.True(t, sc.mayHide([]byte(`\u0041`)))
			assert.True(t, sc.mayHide([]byte(`a\/b`)))
			assert.True(t, sc.mayHide([]byte(`100%`)))
			assert.False(t, sc.mayHide([]byte(`plain`)))
			in := `{"x":"` + tt.form + `"}`
			assert.True(t, sc.Contains([]byte(in)), in)
			assert.Equal(t, `{"x":"REDACTED"}`, string(sc.ScrubJSON([]byte(in))))
		})
	}
}

// TestRequestScrubber: the credentials a request carries, in its headers
// (with and without the scheme, a Basic value decoded), its URL's password
// and its credential query parameters; nothing else.
func TestRequestScrubber(t *testing.T) {
	req, err := http.NewRequest(http.MethodPost, "https://user:url-pass-1@example.test/v1?api-key=query-key-1&model=gpt-4o-mini", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer sk-bearer-1")
	req.Header.Set("Proxy-Authorization", "basic "+base64.StdEncoding.EncodeToString([]byte("proxyuser:proxy-pass-1")))
	req.Header.Set("X-Api-Key", "header-key-1")
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Ratelimit-Limit-Tokens", "99999999")
	sc := RequestScrubber(req)
	for _, secret := range []string{"Bearer sk-bearer-1", "sk-bearer-1", "proxyuser:proxy-pass-1", "proxyuser", "proxy-pass-1", "header-key-1", "url-pass-1", "query-key-1"} {
		assert.True(t, sc.Contains([]byte("echo: "+secret)), secret)
	}
	for _, clean := range []string{"application/json", "99999999", "gpt-4o-mini", "user", "Bearer", "example.test"} {
		assert.False(t, sc.Contains([]byte("echo: "+clean)), clean)
	}

	bad := &http.Request{Header: http.Header{"Authorization": {"Basic !!not-base64!!"}}}
	sc = RequestScrubber(bad) // no URL; an undecodable Basic value is taken whole
	assert.True(t, sc.Contains([]byte("!!not-base64!!")))
	assert.False(t, sc.Contains([]byte("Basic")))

	assert.False(t, RequestScrubber(nil).Contains([]byte("anything at all")))
	assert.Equal(t, "Bearer sk-bearer-1", RequestScrubber(nil).Scrub("Bearer sk-bearer-1"))
}

// TestUnpercent decodes every hex digit, both cases, against strconv as the
// oracle, and keeps what is not an escape.
func TestUnpercent(t *testing.T) {
	for c := range 256 {
		v, ok := unhex(byte(c))
		want, err := strconv.ParseUint(string(rune(c)), 16, 8)
		assert.Equal(t, err == nil, ok, "%q", rune(c))
		if ok {
			assert.EqualValues(t, want, v, "%q", rune(c))
		}
	}
	for in, want := range map[string]string{
		"%30%39%61%66%41%46": "09afAF",
		"%6a%6A%4f%4F":       "jjOO",
		"%2f%2F%G0%0G%":      "//%G0%0G%",
		"a%20b%2":            "a b%2",
	} {
		assert.Equal(t, want, string(unpercent([]byte(in))), in)
	}
}
