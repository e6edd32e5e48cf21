package route

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestCredentialPolicy is the table of the library's one credential policy:
// which names are credentials (internal/redact's TestRedact shows what a
// request, a header set, a deployment and a message look like once
// redacted).
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
}
