package redact

import (
	"context"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/tpsroute/tpsroute/route"
)

// This file redacts what the library hands back, records or logs: a header
// set, a request and a deployment, by route's credential policy
// (route.IsCredentialName, route.Redacted).

// Header returns a copy of h in which the value of every credential
// header (IsCredentialName) and of every header named in extra
// (case-insensitive) reads route.Redacted.
func Header(h http.Header, extra ...string) http.Header {
	out := make(http.Header, len(h))
	for k, v := range h {
		if route.IsCredentialName(k) || slices.ContainsFunc(extra, func(e string) bool { return strings.EqualFold(e, k) }) {
			out[k] = []string{route.Redacted}
			continue
		}
		out[k] = append([]string(nil), v...)
	}
	return out
}

// Request returns a copy of req without credentials, for errors that
// may be logged or dumped: credential headers, URL user info and credential
// query parameters read route.Redacted, and the body is dropped. A nil req returns
// nil.
func Request(req *http.Request) *http.Request {
	if req == nil {
		return nil
	}
	r := req.Clone(context.Background())
	r.Header = Header(r.Header)
	if u := r.URL; u != nil {
		if u.User != nil {
			u.User = url.User(route.Redacted)
		}
		if u.RawQuery != "" {
			q := u.Query()
			changed := false
			for k := range q {
				if route.IsCredentialName(k) {
					q.Set(k, route.Redacted)
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

// Deployment returns d as it may be handed back to a caller, logged or reported:
// APIKey cleared, and the value of every credential header (IsCredentialName)
// reading route.Redacted in a copy of Headers. Routing headers such as
// X-Route-Region are kept.
func Deployment(d route.Deployment) route.Deployment {
	d.APIKey = ""
	var h map[string]string // a copy of d.Headers, made at the first credential
	for k := range d.Headers {
		if route.IsCredentialName(k) {
			if h == nil {
				h = maps.Clone(d.Headers)
			}
			h[k] = route.Redacted
		}
	}
	if h != nil {
		d.Headers = h
	}
	return d
}
