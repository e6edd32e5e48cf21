package fallback

import (
	"bytes"
	"context"
	"net/http"
	"net/url"
	"strings"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/tpsroute/tpsroute/route"
)

// DefaultBuild builds a POST to d.BaseURL+"/chat/completions" with body's
// "model" set to d.WireModel(), "stream_options.include_usage" set unless d
// declares Capabilities.NoStreamOptions, "Authorization: Bearer d.APIKey" (when
// not empty) and d.Headers. It reads nothing but d, so no credential or
// routing header of one deployment can reach another.
func DefaultBuild(ctx context.Context, d route.Deployment, body []byte) (*http.Request, error) {
	b, err := sjson.SetBytes(body, "model", d.WireModel())
	if err != nil {
		return nil, err
	}
	if !d.Capabilities.NoStreamOptions && !gjson.GetBytes(b, "stream_options.include_usage").Bool() {
		if b, err = sjson.SetBytes(b, "stream_options.include_usage", true); err != nil {
			return nil, err
		}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimSuffix(d.BaseURL, "/")+"/chat/completions", bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	if d.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+d.APIKey)
	}
	for k, v := range d.Headers {
		req.Header.Set(k, v)
	}
	return req, nil
}

// DefaultPrefill appends {"role":"assistant","content":text,"prefix":true} to
// the body's messages: the shape DeepSeek and Mistral accept for assistant
// prefill, and a final assistant message that vLLM, SGLang and Anthropic-style
// servers continue. A deployment that needs another shape (for example vLLM's
// "continue_final_message") gets it from Options.Prefill.
func DefaultPrefill(body []byte, text string) ([]byte, error) {
	msg := map[string]any{"role": "assistant", "content": text, "prefix": true}
	return sjson.SetBytes(body, "messages.-1", msg)
}

// streamBody returns body with "stream": true, copying only when needed.
func streamBody(body []byte) ([]byte, error) {
	if gjson.GetBytes(body, "stream").Type == gjson.True {
		return body, nil
	}
	return sjson.SetBytes(body, "stream", true)
}

// redacted returns a copy of req without credentials, for errors that may be
// logged or dumped: credential headers (Authorization, Cookie, and any whose
// name mentions a key, token, secret, password, signature or credential),
// URL user info and query parameters with such names are replaced by
// "REDACTED", and the body is dropped.
func redacted(req *http.Request) *http.Request {
	if req == nil {
		return nil
	}
	r := req.Clone(context.Background())
	for k := range r.Header {
		if IsCredentialName(k) {
			r.Header.Set(k, "REDACTED")
		}
	}
	if u := r.URL; u != nil {
		if u.User != nil {
			u.User = url.User("REDACTED")
		}
		if u.RawQuery != "" {
			q := u.Query()
			changed := false
			for k := range q {
				if IsCredentialName(k) {
					q.Set(k, "REDACTED")
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

// IsCredentialName reports whether a header or query parameter name suggests a
// credential ("Authorization", "api-key", "X-Goog-Api-Key", "Cookie", a
// "token" or "signature" parameter, ...): its value is redacted wherever
// fallback or the root package hands a request or a deployment back. The
// match is by case-insensitive substring, so it errs towards redacting.
func IsCredentialName(name string) bool {
	n := strings.ToLower(name)
	for _, w := range [...]string{"auth", "cookie", "key", "token", "secret", "password", "signature", "credential"} {
		if strings.Contains(n, w) {
			return true
		}
	}
	return false
}

// scrub replaces d's credentials in s, a provider's message that may echo
// them, by "REDACTED". Values shorter than 8 bytes are left alone: they are
// not credentials and would mangle the message.
func scrub(s string, d *route.Deployment) string {
	if len(d.APIKey) >= 8 {
		s = strings.ReplaceAll(s, d.APIKey, "REDACTED")
	}
	for k, v := range d.Headers {
		if len(v) >= 8 && IsCredentialName(k) {
			s = strings.ReplaceAll(s, v, "REDACTED")
		}
	}
	return s
}

// scrub replaces d's credentials in every field of pe, so that neither the
// error's message nor the *openai.Error built from it (Message, RawJSON)
// repeats a key the provider echoed.
func (pe *providerError) scrub(d *route.Deployment) {
	pe.Code, pe.Type = scrub(pe.Code, d), scrub(pe.Type, d)
	pe.Message, pe.Param, pe.Raw = scrub(pe.Message, d), scrub(pe.Param, d), scrub(pe.Raw, d)
}
