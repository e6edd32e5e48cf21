package route

import (
	"net/http"
	"net/url"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestCredentialPolicy is the table of the library's one credential policy:
// which names are credentials, and what a request, a header set, a deployment
// and a message look like once redacted.
func TestCredentialPolicy(t *testing.T) {
	names := []struct {
		name   string
		secret bool
	}{
		{"Authorization", true},
		{"proxy-authorization", true},
		{"Api-Key", true},
		{"X-Api-Key", true},
		{"X-Goog-Api-Key", true},
		{"Cookie", true},
		{"Set-Cookie", true},
		{"X-Tenant-Secret", true},
		{"X-Auth-Token", true},
		{"signature", true},
		{"X-Amz-Credential", true},
		{"password", true},
		{"X-Route-Region", false},
		{"Content-Type", false},
		{"Openai-Organization", false},
		{"x-ratelimit-remaining-tokens", false},
		{"X-RateLimit-Limit-Tokens", false},
		{"anthropic-ratelimit-tokens-remaining", false},
		{"RateLimit-Reset", false},
	}
	for _, c := range names {
		assert.Equal(t, c.secret, IsCredentialName(c.name), c.name)
	}

	h := RedactHeader(http.Header{
		"Authorization":     {"Bearer sk-live-123456"},
		"Set-Cookie":        {"a=b"},
		"X-Tenant":          {"acme"},
		"X-Route-Region":    {"eu"},
		"X-Ratelimit-Reset": {"1s"},
	}, "x-tenant")
	assert.Equal(t, http.Header{
		"Authorization":     {Redacted},
		"Set-Cookie":        {Redacted},
		"X-Tenant":          {Redacted},
		"X-Route-Region":    {"eu"},
		"X-Ratelimit-Reset": {"1s"},
	}, h)

	req, _ := http.NewRequest(http.MethodPost, "https://user:pw@example.com/v1?sig=1&signature=abc&api-version=2", http.NoBody)
	req.Header.Set("Authorization", "Bearer sk-live-123456")
	req.Header.Set("X-Route-Region", "eu")
	r := RedactRequest(req)
	assert.Equal(t, Redacted, r.Header.Get("Authorization"))
	assert.Equal(t, "eu", r.Header.Get("X-Route-Region"))
	assert.Equal(t, Redacted, r.URL.User.Username())
	q, _ := url.ParseQuery(r.URL.RawQuery)
	assert.Equal(t, url.Values{"sig": {"1"}, "signature": {Redacted}, "api-version": {"2"}}, q)
	assert.Nil(t, r.Body)
	assert.Equal(t, "Bearer sk-live-123456", req.Header.Get("Authorization"), "the original is untouched")
	assert.Nil(t, RedactRequest(nil))

	d := Deployment{APIKey: "sk-live-123456", Headers: map[string]string{"api-key": "azure-key-1", "X-Route-Region": "eu"}}
	pub := Redact(d)
	assert.Empty(t, pub.APIKey)
	assert.Equal(t, map[string]string{"api-key": Redacted, "X-Route-Region": "eu"}, pub.Headers)
	assert.Equal(t, "azure-key-1", d.Headers["api-key"], "the original's headers are untouched")

	sc := NewScrubber(d, Deployment{APIKey: "sk-live-123456789", Headers: map[string]string{"X-Goog-Api-Key": "abcd", "X-Route-Region": "euro"}})
	for in, want := range map[string]string{
		"bad key sk-live-123456":                "bad key REDACTED",
		"bad key sk-live-123456789":             "bad key REDACTED", // the longer key whole, not a prefix of it
		"azure-key-1 and abcd rejected":         "REDACTED and REDACTED rejected",
		"region euro is a routing header value": "region euro is a routing header value",
		"abc is too short to be a key":          "abc is too short to be a key",
	} {
		assert.Equal(t, want, sc.Scrub(in), in)
	}
	assert.Equal(t, "x", (&Scrubber{}).Scrub("x"))
	assert.Equal(t, "abcd", NewScrubber().Scrub("abcd"))
}
