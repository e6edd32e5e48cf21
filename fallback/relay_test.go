package fallback

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/tpsroute/tpsroute/route"
)

func TestScrubEvents(t *testing.T) {
	const key = "sk-relay-0123456789"
	sc := route.NewScrubber(route.Deployment{APIKey: key})
	for _, c := range []struct{ name, in, want string }{
		{"clean", "data: {\"a\":1}\n\n", "data: {\"a\":1}\n\n"},
		{"comment", ": " + key + "\n\ndata: {}\n\n", "\ndata: {}\n\n"},
		{"id-and-unknown", "id: " + key + "\r\nfoo: " + key + "\r\ndata: {}\r\n\r\n", "data: {}\r\n\r\n"},
		{"event-name", "event: " + key + "\rdata: {}\r\r", "data: {}\r\r"},
		{"data-field", `data: {"x":"sk\u002drelay-0123456789","y":2}` + "\n\n", `data: {"x":"REDACTED","y":2}` + "\n\n"},
		{"data-not-json", "data: " + key + "\n\n", "data: REDACTED\n\n"},
		{"last-line-unterminated", "data: [DONE]\n\n: " + key, "data: [DONE]\n\n"},
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
	sc := route.NewScrubber(route.Deployment{APIKey: key})
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
	assert.Equal(t, http.Header{
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
	sc := route.NewScrubber(route.Deployment{APIKey: "sk-proj-0123456789abcdefghijklmnopqrstuvwxyz"})
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
	sc := route.NewScrubber(route.Deployment{APIKey: key})
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
