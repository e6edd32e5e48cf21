package executor

import (
	"cmp"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/tpsroute/tpsroute/fallback"
	"github.com/tpsroute/tpsroute/internal/jsoncheck"
	"github.com/tpsroute/tpsroute/internal/payload"
)

// breakerFailure reports whether the class counts as the provider's failure
// in its breaker. A CallerFault, the caller's cancellation, a 429 rate limit
// (the deployment cools down instead) and a skipped attempt do not; every
// other failure does.
func breakerFailure(c fallback.Class) bool {
	switch c {
	case fallback.ClassRetry, fallback.ClassNext, fallback.ClassAuth, fallback.ClassUnavailable, fallback.ClassMidStream:
		return true
	}
	return false
}

// providerError is what could be read from an error body of any shape.
type providerError struct {
	Code    string
	Type    string
	Message string
	Param   string
	Status  int    // a status found inside the body (in-stream errors), 0 if none
	Raw     string // the JSON object the fields came from
}

// parseErrorBody reads an error body of any shape with payload.ParseErrorBody,
// the module's one reader of provider error bodies (docs/STREAM_QUIRKS.md
// Q17, Q18, Q25).
func parseErrorBody(body []byte) providerError {
	eb := payload.ParseErrorBody(body)
	return providerError{Code: eb.Code, Type: eb.Type, Message: eb.Message, Param: eb.Param, Status: eb.Status, Raw: string(eb.Raw)}
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

func (pe *providerError) has(words ...string) bool {
	for _, f := range [...]string{pe.Code, pe.Type, pe.Message} {
		if f == "" {
			continue
		}
		l := strings.ToLower(f)
		for _, w := range words {
			if strings.Contains(l, w) {
				return true
			}
		}
	}
	return false
}

func (pe *providerError) contextLength() bool {
	return pe.has("context_length_exceeded", "context length", "context_length", "maximum context", "context window",
		"too many tokens", "prompt is too long", "string_above_max_length", "input is too long")
}

func (pe *providerError) policy() bool {
	return pe.has("content_policy", "content policy", "content_filter", "content filter", "content management policy",
		"responsibleaipolicy", "safety", "moderation", "flagged")
}

// classify maps an error status, headers and body to a Class.
func classify(status int, h http.Header, pe *providerError) fallback.Class {
	c := classifyStatus(status, pe)
	switch strings.ToLower(h.Get("x-should-retry")) {
	case "true":
		switch c {
		case fallback.ClassInvalid, fallback.ClassUnavailable, fallback.ClassNext:
			c = fallback.ClassRetry
		}
	case "false":
		if c == fallback.ClassRetry {
			c = fallback.ClassNext
		}
	}
	return c
}

func classifyStatus(status int, pe *providerError) fallback.Class {
	switch {
	case status == http.StatusTooManyRequests:
		if pe.has("insufficient_quota", "quota exceeded", "exceeded your current quota", "billing") {
			return fallback.ClassUnavailable
		}
		return fallback.ClassRateLimited
	case status == http.StatusUnauthorized, status == http.StatusForbidden:
		if status == http.StatusForbidden && pe.policy() {
			return fallback.ClassPolicy
		}
		return fallback.ClassAuth
	case status == http.StatusNotFound, status == http.StatusGone, status == http.StatusPaymentRequired:
		return fallback.ClassUnavailable
	case status == http.StatusRequestTimeout:
		return fallback.ClassNext
	case status == http.StatusConflict:
		return fallback.ClassRetry
	case status == http.StatusRequestEntityTooLarge:
		return fallback.ClassContextLength
	case status == http.StatusServiceUnavailable, status == 529:
		return fallback.ClassNext
	case status >= 500:
		if pe.contextLength() {
			// docs/STREAM_QUIRKS.md Q26: some servers report an oversized prompt as a 500.
			return fallback.ClassContextLength
		}
		return fallback.ClassRetry
	case status >= 400:
		if pe.contextLength() {
			return fallback.ClassContextLength
		}
		if pe.policy() {
			return fallback.ClassPolicy
		}
		switch {
		case pe.has("invalid_api_key", "invalid api key", "incorrect api key", "api key not valid"):
			return fallback.ClassAuth // Gemini's 400 for a bad key: the deployment's
		case pe.has("model_not_found"):
			return fallback.ClassUnavailable // a 400 for the configured model: the deployment's
		case status == http.StatusBadRequest, status == http.StatusUnprocessableEntity, status == http.StatusRequestHeaderFieldsTooLarge:
			return fallback.ClassInvalid // the request: every deployment would refuse it
		}
		// 405, 406, 411, 414, 415, 421, 451, ...: a misconfigured or
		// unwell deployment, which the caller's request does not explain.
		return fallback.ClassNext
	}
	return fallback.ClassNext
}

// newAPIError builds the provider's error as openai-go would.
func newAPIError(status int, pe *providerError, req *http.Request, resp *http.Response) *openai.Error {
	e := &openai.Error{StatusCode: status, Request: req, Response: resp}
	if pe.Raw != "" && jsoncheck.Valid([]byte(pe.Raw)) == nil {
		_ = e.UnmarshalJSON([]byte(pe.Raw))
	}
	// Fill what the generic decoder missed (int codes, {"error":"..."} shapes).
	e.Code, e.Type, e.Param = cmp.Or(e.Code, pe.Code), cmp.Or(e.Type, pe.Type), cmp.Or(e.Param, pe.Param)
	if e.Message == "" || pe.Message != "" && strings.HasPrefix(strings.TrimSpace(e.Message), "{") {
		e.Message = pe.Message
	}
	return e
}

// retryAfter parses retry-after-ms, x-ms-retry-after-ms and retry-after
// (delta-seconds or an HTTP-date) in that order of preference. ok is false when
// none is present and valid.
func retryAfter(h http.Header, now time.Time) (time.Duration, bool) {
	for _, k := range [...]string{"retry-after-ms", "x-ms-retry-after-ms"} {
		if v := h.Get(k); v != "" {
			if ms, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err == nil && ms >= 0 && ms < 1e12 {
				return time.Duration(ms * float64(time.Millisecond)), true
			}
		}
	}
	v := strings.TrimSpace(h.Get("retry-after"))
	if v == "" {
		return 0, false
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil {
		if s < 0 || s > 1e9 {
			return 0, false
		}
		return time.Duration(s * float64(time.Second)), true
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(t.Sub(now), 0), true
	}
	return 0, false
}
