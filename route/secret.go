package route

import (
	"strings"
)

// This file is the library's one credential policy: which header and query
// parameter names carry a secret and what a redacted value reads. How a
// request, a header set and a deployment are redacted and how a message is
// scrubbed of keys is internal/redact's, which applies these two rules; the
// config file, route's Validate, the root package, the executor and replay's
// recorder and attempt log all go through them: a rule changes here or
// nowhere.

// Redacted is what every redacted credential reads, in errors, deployments
// handed back to callers, cassettes and replay's attempt log.
const Redacted = "REDACTED"

// IsCredentialName reports whether a header or query parameter name carries a
// credential: its value is redacted wherever the library hands a request or a
// deployment back, records or logs it, a caller may not forward it, and a
// config file may not hold it. The match is by case-insensitive substring of
// auth, cookie, key, token, secret, password, signature or credential, so it
// errs towards redacting (Authorization, Proxy-Authorization, Api-Key,
// X-Goog-Api-Key, Cookie, Set-Cookie, a "sig" URL's "signature" parameter,
// ...). Rate-limit headers (x-ratelimit-remaining-tokens, ...) carry counts,
// not secrets, and are not credentials.
func IsCredentialName(name string) bool {
	n := strings.ToLower(name)
	if strings.Contains(n, "ratelimit") || strings.Contains(n, "rate-limit") {
		return false
	}
	for _, w := range [...]string{"auth", "cookie", "key", "token", "secret", "password", "signature", "credential"} {
		if strings.Contains(n, w) {
			return true
		}
	}
	return false
}
