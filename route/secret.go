package route

import (
	"context"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
)

// This file is the library's one credential policy: which header and query
// parameter names carry a secret, what a redacted value reads, how a request
// and a deployment are redacted and how a message is scrubbed of keys. fallback,
// the root package, replay's recorder and attempt log and the config file all
// call it; a rule changes here or nowhere.

// Redacted is what every redacted credential reads, in errors, deployments
// handed back to callers, cassettes and replay's attempt log.
const Redacted = "REDACTED"

// minSecretLen is the shortest value Scrubber replaces: shorter values are not
// credentials and replacing them would mangle the message.
const minSecretLen = 4

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

// RedactHeader returns a copy of h in which the value of every credential
// header (IsCredentialName) and of every header named in extra
// (case-insensitive) reads Redacted.
func RedactHeader(h http.Header, extra ...string) http.Header {
	out := make(http.Header, len(h))
	for k, v := range h {
		if IsCredentialName(k) || slices.ContainsFunc(extra, func(e string) bool { return strings.EqualFold(e, k) }) {
			out[k] = []string{Redacted}
			continue
		}
		out[k] = append([]string(nil), v...)
	}
	return out
}

// RedactRequest returns a copy of req without credentials, for errors that
// may be logged or dumped: credential headers, URL user info and credential
// query parameters read Redacted, and the body is dropped. A nil req returns
// nil.
func RedactRequest(req *http.Request) *http.Request {
	if req == nil {
		return nil
	}
	r := req.Clone(context.Background())
	r.Header = RedactHeader(r.Header)
	if u := r.URL; u != nil {
		if u.User != nil {
			u.User = url.User(Redacted)
		}
		if u.RawQuery != "" {
			q := u.Query()
			changed := false
			for k := range q {
				if IsCredentialName(k) {
					q.Set(k, Redacted)
					changed = true
				}
			}
			if changed {
				u.RawQuery = q.Encode()
			}
		}
	}
	r.Body, r.GetBody = nil, nil
	return r
}

// Redact returns d as it may be handed back to a caller, logged or reported:
// APIKey cleared, and the value of every credential header (IsCredentialName)
// reading Redacted in a copy of Headers. Routing headers such as
// X-Route-Region are kept.
func Redact(d Deployment) Deployment {
	d.APIKey = ""
	var h map[string]string // a copy of d.Headers, made at the first credential
	for k := range d.Headers {
		if IsCredentialName(k) {
			if h == nil {
				h = maps.Clone(d.Headers)
			}
			h[k] = Redacted
		}
	}
	if h != nil {
		d.Headers = h
	}
	return d
}
