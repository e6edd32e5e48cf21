package executor

import (
	"bytes"
	"net/http"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tpsroute/tpsroute/fallback"
	"github.com/tpsroute/tpsroute/internal/redact"
	"github.com/tpsroute/tpsroute/route"
)

func TestScrubEvents(t *testing.T) {
	const key = "sk-relay-0123456789"
	sc := redact.NewScrubber(route.Deployment{APIKey: key})
	for _, c := range []struct{ name, in, want string }{
		{"clean", "data: {\"a\":1}\n\n", "data: {\"a\":1}\n\n"},
		{"comment", ": " + key + "\n\ndata: {}\n\n", "\ndata: {}\n\n"},
		{"id-and-unknown", "id: " + key + "\r\nfoo: " + key + "\r\ndata: {}\r\n\r\n", "data: {}\r\n\r\n"},
		{"event-name", "event: " + key + "\rdata: {}\r\r", "data: {}\r\r"},
		{"data-field", `data: {"x":"sk\u002drelay-0123456789","y":2}` + "\n\n", `data: {"x":"REDACTED","y":2}` + "\n\n"},
		{"data-not-json", "data: " + key + "\n\n", "data: REDACTED\n\n"},
		{"last-line-unterminated", "data: [DONE]\n\n: " + key, "data: [DONE]\n\n"},
		{"after-a-blank-line", "data: {}\n\n: " + key + "\n\ndata: {}\n\n", "data: {}\n\n\ndata: {}\n\n"},
		{"cr-at-the-end", "data: {}\r\r: " + key + "\r", "data: {}\r\r"},
		{"crlf-kept-beside-a-data-line", "data: {\"k\":\"" + key + "\"}\r\n\r\n", "data: {\"k\":\"REDACTED\"}\r\n\r\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			out, changed := scrubEvents(sc, []byte(c.in))
			assert.Equal(t, c.want, string(out))
			assert.Equal(t, c.in != c.want, changed)
			assert.False(t, sc.Contains(out))
		})
	}
}

func TestRelayHeader(t *testing.T) {
	const key = "sk-relay-0123456789"
	sc := redact.NewScrubber(route.Deployment{APIKey: key})
	long := make([]byte, maxRelayedHeader+1)
	for i := range long {
		long[i] = 'a'
	}
	h := http.Header{
		"X-Request-Id":                   {"req-1", "req-2"},
		"Request-Id":                     {"Bearer%20sk-relay-0123456789"},
		"X-Ratelimit-Remaining-Requests": {"7"},
		"Anthropic-Ratelimit-Tokens":     {string(long)},
		"Retry-After":                    {"2"},
		"Set-Cookie":                     {"a=b"},
		"X-Upstream-Debug":               {"gpu-3"},
		"Www-Authenticate":               {"Bearer realm=x"},
	}
	h["X-Ratelimit-Limit-Tokens"] = []string{string(long[:maxRelayedHeader])} // at the bound: relayed
	h["Openai-Version"] = []string{}                                          // no value: dropped
	assert.Equal(t, http.Header{
		"X-Ratelimit-Limit-Tokens":       {string(long[:maxRelayedHeader])},
		"X-Request-Id":                   {"req-1"},
		"Request-Id":                     {route.Redacted},
		"X-Ratelimit-Remaining-Requests": {"7"},
		"Retry-After":                    {"2"},
	}, relayHeader(h, sc))
}

// BenchmarkScrubEvents is the scrub's cost per released event: a typical
// chunk, one whose text a server escaped (ensure_ascii), and one that holds
// the key.
func BenchmarkScrubEvents(b *testing.B) {
	sc := redact.NewScrubber(route.Deployment{APIKey: "sk-proj-0123456789abcdefghijklmnopqrstuvwxyz"})
	for _, c := range []struct{ name, ev string }{
		{"clean", `data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":" word"},"finish_reason":null}],"usage":null}` + "\n\n"},
		{"escaped", `data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":" caf\u00e9 \u4f60\u597d"},"finish_reason":null}],"usage":null}` + "\n\n"},
		{"key", `data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"sk-proj-0123456789abcdefghijklmnopqrstuvwxyz"},"finish_reason":null}],"usage":null}` + "\n\n"},
	} {
		ev := []byte(c.ev)
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(ev)))
			for b.Loop() {
				scrubEvents(sc, ev)
			}
		})
	}
}

// FuzzParseErrorBody holds the error-body parser to two properties on any
// bytes an upstream may send: it never panics, and once scrubbed nothing it
// returns, nor the *openai.Error built from it, holds the deployment's key
// in any form.
func FuzzParseErrorBody(f *testing.F) {
	const key = "sk-fuzz-0123456789"
	for _, s := range []string{
		`{"error":{"message":"bad key sk-fuzz-0123456789","type":"sk\u002dfuzz-0123456789","code":401}}`,
		`[{"error":{"message":"x","status":"429"}}]`,
		`{"error":"sk-fuzz-0123456789","error_type":"auth"}`,
		`{"message":"{\"error\":{\"message\":\"inner sk%2Dfuzz-0123456789\"}}"}`,
		`{"error":{"message":"\u0073\u006b-fuzz-0123456789","http_status_code":422}}`,
		`not json sk-fuzz-0123456789`, ``, `[]`, `{"error":null}`,
	} {
		f.Add([]byte(s))
	}
	sc := redact.NewScrubber(route.Deployment{APIKey: key})
	f.Fuzz(func(t *testing.T, b []byte) {
		pe := parseErrorBody(b)
		pe.scrub(sc)
		for _, v := range []string{pe.Message, pe.Type, pe.Code, pe.Param, pe.Raw} {
			if sc.Contains([]byte(v)) {
				t.Fatalf("key survives in %q from %q", v, b)
			}
		}
		e := newAPIError(400, &pe, nil, nil)
		for _, v := range []string{e.Message, e.Type, e.Code, e.Param, e.RawJSON()} {
			if sc.Contains([]byte(v)) {
				t.Fatalf("key survives in the *openai.Error's %q from %q", v, b)
			}
		}
	})
}

// TestLoneCRToLF: every CR not followed by LF becomes LF, in place, at the
// start, in the middle and at the end; CRLF and LF stay as they are.
func TestLoneCRToLF(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"", ""},
		{"data: a\n\n", "data: a\n\n"},
		{"\rdata: a\r\r", "\ndata: a\n\n"},
		{"data: a\r\n\r\n", "data: a\r\n\r\n"},
		{"data: a\r\rdata: b\r\n\r", "data: a\n\ndata: b\r\n\n"},
		{"\r", "\n"},
	} {
		b := []byte(c.in)
		loneCRToLF(b)
		assert.Equal(t, c.want, string(b), "%q", c.in)
	}
}

// TestScrubberForFollowsTheKey: a key state makes its Scrubber once and
// again only when the deployment's API key changed, so that a rotated key is
// scrubbed from the first attempt that carries it.
func TestScrubberForFollowsTheKey(t *testing.T) {
	var st keyState
	d := route.Deployment{APIKey: "sk-old-0123456789"}
	first := st.scrubberFor(&d)
	require.True(t, first.Contains([]byte("sk-old-0123456789")))
	assert.Same(t, first, st.scrubberFor(&d), "made once per key")
	d.APIKey = "sk-new-0123456789"
	rotated := st.scrubberFor(&d)
	assert.True(t, rotated.Contains([]byte("sk-new-0123456789")))
	assert.NotSame(t, first, rotated)
}

// TestLimitsDefaults: a zero or negative limit is its Default*, a positive
// one is kept.
func TestLimitsDefaults(t *testing.T) {
	def := fallback.Limits{Event: defaultMaxEvent, Held: defaultMaxHeld, Answer: defaultMaxAnswer}
	assert.Equal(t, def, limitsDefaults(fallback.Limits{}))
	assert.Equal(t, def, limitsDefaults(fallback.Limits{Event: -1, Held: -1, Answer: -1}))
	assert.Equal(t, fallback.Limits{Event: 1, Held: 2, Answer: 3}, limitsDefaults(fallback.Limits{Event: 1, Held: 2, Answer: 3}))
}

// TestParseErrorBodyDeepNesting: an upstream's error body (an in-stream
// error event may be megabytes, up to Limits.Event) of nested '[' is read
// with a small, fixed stack; a recursive validator overflowed the 32 MiB
// stack this test allows, one frame per bracket.
func TestParseErrorBodyDeepNesting(t *testing.T) {
	old := debug.SetMaxStack(32 << 20)
	defer debug.SetMaxStack(old)
	for _, body := range [][]byte{bytes.Repeat([]byte("["), 4<<20), []byte(`{"error":` + strings.Repeat("[", 1<<20) + `}`)} {
		pe := parseErrorBody(body)
		assert.NotEmpty(t, pe.Message)
		assert.LessOrEqual(t, len(pe.Message), 310)
		e := newAPIError(500, &pe, nil, nil)
		assert.Equal(t, 500, e.StatusCode)
	}
}
