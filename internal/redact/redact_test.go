package redact

import (
	"net/http"
	"net/url"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/tpsroute/tpsroute/route"
)

// TestRedact: what a header set, a request, a deployment and a message look
// like once redacted by route's credential policy.
func TestRedact(t *testing.T) {
	h := Header(http.Header{
		"Authorization":     {"Bearer sk-live-123456"},
		"Set-Cookie":        {"a=b"},
		"X-Tenant":          {"acme"},
		"X-Route-Region":    {"eu"},
		"X-Ratelimit-Reset": {"1s"},
	}, "x-tenant")
	assert.Equal(t, http.Header{
		"Authorization":     {route.Redacted},
		"Set-Cookie":        {route.Redacted},
		"X-Tenant":          {route.Redacted},
		"X-Route-Region":    {"eu"},
		"X-Ratelimit-Reset": {"1s"},
	}, h)

	req, _ := http.NewRequest(http.MethodPost, "https://user:pw@example.com/v1?sig=1&signature=abc&api-version=2", http.NoBody)
	req.Header.Set("Authorization", "Bearer sk-live-123456")
	req.Header.Set("X-Route-Region", "eu")
	r := Request(req)
	assert.Equal(t, route.Redacted, r.Header.Get("Authorization"))
	assert.Equal(t, "eu", r.Header.Get("X-Route-Region"))
	assert.Equal(t, route.Redacted, r.URL.User.Username())
	q, _ := url.ParseQuery(r.URL.RawQuery)
	assert.Equal(t, url.Values{"sig": {"1"}, "signature": {route.Redacted}, "api-version": {"2"}}, q)
	assert.Nil(t, r.Body)
	assert.Equal(t, "Bearer sk-live-123456", req.Header.Get("Authorization"), "the original is untouched")
	assert.Nil(t, Request(nil))

	d := route.Deployment{APIKey: "sk-live-123456", Headers: map[string]string{"api-key": "azure-key-1", "X-Route-Region": "eu"}}
	pub := Deployment(d)
	assert.Empty(t, pub.APIKey)
	assert.Equal(t, map[string]string{"api-key": route.Redacted, "X-Route-Region": "eu"}, pub.Headers)
	assert.Equal(t, "azure-key-1", d.Headers["api-key"], "the original's headers are untouched")

	sc := NewScrubber(d, route.Deployment{APIKey: "sk-live-123456789", Headers: map[string]string{"X-Goog-Api-Key": "abcd", "X-Route-Region": "euro"}})
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
