package fallback

import (
	"cmp"
	"context"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/openai/openai-go/v3"

	"github.com/tpsroute/tpsroute/internal/jsoncheck"
	"github.com/tpsroute/tpsroute/measure"
	"github.com/tpsroute/tpsroute/tps"
)

// Class is what the executor made of one failed attempt: whether it retried the
// same deployment, moved on, or stopped. The package documentation has the full
// table of faults and classes. It is a plain value, safe for concurrent use.
type Class uint8

const (
	// ClassNone means the attempt succeeded.
	ClassNone Class = iota
	// ClassRetry retries the same deployment once after a jittered backoff, then
	// moves on: 500, 502, 504, other 5xx except 503, 409, and transport errors
	// such as a connection reset before the response headers.
	ClassRetry
	// ClassNext moves to the next deployment without retrying this one in the
	// call: 503, 529, 408, a 4xx that names no fault of the request (405,
	// 415, 421, ...: the deployment's own), the headers and TTFT deadlines, an
	// empty stream, and an in-stream error before the first output chunk.
	ClassNext
	// ClassRateLimited is a 429 rate limit: the deployment cools down until its
	// Retry-After (or a jittered backoff when absent) and the call moves on.
	// It is not counted as a breaker failure.
	ClassRateLimited
	// ClassAuth is 401, 403, or another 4xx whose body says the API key is
	// invalid (Gemini answers 400): the breaker trips, the deployment cools
	// down for Options.PenaltyCooldown, and the call moves on.
	ClassAuth
	// ClassUnavailable is a 404 (model not found), a 410, a 402, another 4xx
	// whose code is model_not_found, or a 429 insufficient_quota: the
	// deployment cools down for Options.PenaltyCooldown and the call moves on.
	ClassUnavailable
	// ClassInvalid is an invalid request, a 400, 422 or 431 (the caller's
	// headers), or a request that Call.Build could not build from the body:
	// the call stops, since every deployment would reject the same request.
	// It is a CallerFault.
	ClassInvalid
	// ClassPolicy is a content-policy rejection: the call stops, with the
	// provider's reason in the error. It is a CallerFault.
	ClassPolicy
	// ClassContextLength is context_length_exceeded: the call moves on only to
	// deployments whose ContextWindow is larger than this one's. It is a
	// CallerFault.
	ClassContextLength
	// ClassCanceled is the caller's own cancellation or deadline: the call stops
	// and no breaker counts it.
	ClassCanceled
	// ClassMidStream is a failure after the commit point: a cut, a stall, an
	// in-stream error or a malformed chunk after output was delivered.
	ClassMidStream
	// ClassSkipped means the deployment was not tried: its breaker was open, it
	// was cooling down, or it had no rate-limit budget or in-flight slot.
	ClassSkipped
)

// String returns a short lower-case name such as "rate-limited".
func (c Class) String() string {
	names := [...]string{"ok", "retry", "next", "rate-limited", "auth", "unavailable", "invalid", "policy", "context-length", "canceled", "mid-stream", "skipped"}
	if int(c) < len(names) {
		return names[c]
	}
	return "class(" + strconv.Itoa(int(c)) + ")"
}

// Timeout reports whether the attempt ended at a deadline: the caller's
// (context.DeadlineExceeded) or one of the Executor's (ErrHeadersTimeout,
// ErrTTFTTimeout, ErrStall, ErrMaxDuration). Its Class says what the
// Executor did about it: ClassNext before the commit point, ClassMidStream
// after it, ClassCanceled for the caller's deadline.
func (a Attempt) Timeout() bool {
	deadlines := []error{context.DeadlineExceeded, ErrHeadersTimeout, ErrTTFTTimeout, ErrStall, ErrMaxDuration}
	return slices.ContainsFunc(deadlines, func(d error) bool { return errors.Is(a.Err, d) })
}

// ErrorClass names the attempt's class the Client records it with: ""
// for a success, measure.ClassCaller for a CallerFault, measure.ClassTimeout
// when Timeout is true, measure.ClassCanceled for the rest of ClassCanceled
// (the caller, an early Close, a lost hedge), measure.ClassOther otherwise.
// measure counts neither ClassCaller nor ClassCanceled in the deployment's
// error rate.
func (a Attempt) ErrorClass() string {
	switch {
	case a.Class == ClassNone && a.Err == nil:
		return ""
	case a.Class.CallerFault():
		return measure.ClassCaller
	case a.Timeout():
		return measure.ClassTimeout
	case a.Class == ClassCanceled:
		return measure.ClassCanceled
	}
	return measure.ClassOther
}

// CallerFault reports whether a failure of class c names the caller's
// request rather than the deployment: ClassInvalid, ClassPolicy and
// ClassContextLength. Such a failure is charged to no deployment: it counts
// neither in the deployment's error rate (ErrorClass gives
// measure.ClassCaller) nor in its breaker, and it stops the call or moves it
// on only to a larger context window. docs/STREAM_QUIRKS.md has the table of
// statuses, classes and charges.
func (c Class) CallerFault() bool {
	switch c {
	case ClassInvalid, ClassPolicy, ClassContextLength:
		return true
	}
	return false
}

// breakerFailure reports whether the class counts as the provider's failure
// in its breaker. A CallerFault, the caller's cancellation, a 429 rate limit
// (the deployment cools down instead) and a skipped attempt do not; every
// other failure does.
func (c Class) breakerFailure() bool {
	switch c {
	case ClassRetry, ClassNext, ClassAuth, ClassUnavailable, ClassMidStream:
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

// parseErrorBody reads an error body of any shape with tps.ParseErrorBody,
// the module's one reader of provider error bodies (docs/STREAM_QUIRKS.md
// Q17, Q18, Q25).
func parseErrorBody(body []byte) providerError {
	eb := tps.ParseErrorBody(body)
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
func classify(status int, h http.Header, pe *providerError) Class {
	c := classifyStatus(status, pe)
	switch strings.ToLower(h.Get("x-should-retry")) {
	case "true":
		switch c {
		case ClassInvalid, ClassUnavailable, ClassNext:
			c = ClassRetry
		}
	case "false":
		if c == ClassRetry {
			c = ClassNext
		}
	}
	return c
}

func classifyStatus(status int, pe *providerError) Class {
	switch {
	case status == http.StatusTooManyRequests:
		if pe.has("insufficient_quota", "quota exceeded", "exceeded your current quota", "billing") {
			return ClassUnavailable
		}
		return ClassRateLimited
	case status == http.StatusUnauthorized, status == http.StatusForbidden:
		if status == http.StatusForbidden && pe.policy() {
			return ClassPolicy
		}
		return ClassAuth
	case status == http.StatusNotFound, status == http.StatusGone, status == http.StatusPaymentRequired:
		return ClassUnavailable
	case status == http.StatusRequestTimeout:
		return ClassNext
	case status == http.StatusConflict:
		return ClassRetry
	case status == http.StatusRequestEntityTooLarge:
		return ClassContextLength
	case status == http.StatusServiceUnavailable, status == 529:
		return ClassNext
	case status >= 500:
		if pe.contextLength() {
			// docs/STREAM_QUIRKS.md Q26: some servers report an oversized prompt as a 500.
			return ClassContextLength
		}
		return ClassRetry
	case status >= 400:
		if pe.contextLength() {
			return ClassContextLength
		}
		if pe.policy() {
			return ClassPolicy
		}
		switch {
		case pe.has("invalid_api_key", "invalid api key", "incorrect api key", "api key not valid"):
			return ClassAuth // Gemini's 400 for a bad key: the deployment's
		case pe.has("model_not_found"):
			return ClassUnavailable // a 400 for the configured model: the deployment's
		case status == http.StatusBadRequest, status == http.StatusUnprocessableEntity, status == http.StatusRequestHeaderFieldsTooLarge:
			return ClassInvalid // the request: every deployment would refuse it
		}
		// 405, 406, 411, 414, 415, 421, 451, ...: a misconfigured or
		// unwell deployment, which the caller's request does not explain.
		return ClassNext
	}
	return ClassNext
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
