package tpsroute

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"

	"github.com/openai/openai-go/v3"

	"github.com/tpsroute/tpsroute/fallback"
	"github.com/tpsroute/tpsroute/route"
)

// RequestError means the request itself is bad: a body that is not a JSON
// object, a field of the wrong type (or one tpsroute cannot send as written,
// such as a "stream_options" that is not an object), or a routing option
// that names a provider or region no deployment has. It is answered with
// 400, and no deployment is charged for it. It is a value and safe to share.
type RequestError struct {
	// Param names the bad field: a body field ("model", "messages",
	// "stream", "max_tokens", ...), or the call option ("region" for
	// WithRegion, "providers" for WithProviders, "only" for WithOnly). Empty
	// when the body as a whole is bad.
	Param string
	// Reason says what is wrong with it, without the "tpsroute: " prefix.
	Reason string
}

// Error returns "tpsroute: PARAM: REASON", or "tpsroute: REASON" without a Param.
func (e *RequestError) Error() string {
	if e.Param == "" {
		return "tpsroute: " + e.Reason
	}
	return "tpsroute: " + e.Param + ": " + e.Reason
}

// ModelError means a requested model is served by no deployment (and no
// wildcard deployment exists). It matches route.ErrNoDeployment with
// errors.Is and is answered with 404 model_not_found. It is a value and safe
// to share.
type ModelError struct {
	// Param is "model" for the request's model and "models" for a fallback
	// model of WithModels.
	Param string
	// Model is the unknown model, as requested ("name" or "name@revision").
	Model string
	// Capped reports that only wildcard deployments serve the model and each
	// already serves Config.MaxWildcardModels others.
	Capped bool
}

// Error returns `tpsroute: PARAM: the model "MODEL" is not served by any
// deployment`, or says that the wildcard deployments are at their cap.
func (e *ModelError) Error() string {
	if e.Capped {
		return "tpsroute: " + e.Param + ": the model " + strconv.Quote(e.Model) + " is not served: the wildcard deployments serve their maximum number of models"
	}
	return "tpsroute: " + e.Param + ": the model " + strconv.Quote(e.Model) + " is not served by any deployment"
}

// Is reports whether target is route.ErrNoDeployment.
func (e *ModelError) Is(target error) bool { return target == route.ErrNoDeployment }

// StatusClientClosedRequest is the status HTTPError gives a call that the
// caller cancelled (nginx's 499): nobody is left to read it, but logs and
// metrics can tell it from a failure.
const StatusClientClosedRequest = 499

// HTTPError is the HTTP answer to a failed call, as Client.HTTPError makes
// it: in OpenAI's error shape ({"error":{"message","type","param","code"}}),
// which openai-go reads for Chat Completions, Responses and embeddings, or,
// made for the Messages API (ForAPI), in Anthropic's
// ({"type":"error","error":{"type","message"}}). It is a value and safe to
// share once made.
type HTTPError struct {
	// Status is the HTTP status code.
	Status int
	// Type is the OpenAI error type: "invalid_request_error",
	// "service_unavailable", the provider's own type, ...
	Type string
	// Code is the OpenAI error code, or "" (sent as null).
	Code string
	// Param names the request field at fault, or "" (sent as null).
	Param string
	// Message says what happened, with every upstream API key redacted.
	Message string
	// RetryAfter is the provider's Retry-After, passed on with a final 429 or
	// 503; "" for none.
	RetryAfter string
	// API is the API whose error shape JSON writes: route.APIMessages is
	// Anthropic's, anything else (the zero value too) OpenAI's. ForAPI sets
	// it with the status and type that go with it.
	API route.API
}

// ForAPI returns a copy of e answered in api's own error shape. For
// route.APIMessages: Anthropic's body, the type Anthropic gives the status
// (400 invalid_request_error, 401 authentication_error, 403
// permission_error, 404 not_found_error, 413 request_too_large, 429
// rate_limit_error, 504 timeout_error, 529 overloaded_error, other 5xx
// api_error; a provider's own Anthropic type is kept), and 529
// overloaded_error for 503, since Anthropic answers "no capacity" with 529;
// Code and Param, which that shape has no place for, stay on the copy but
// are not written. Any other API gets e itself: OpenAI's shape. The status
// and class are those Client.HTTPError mapped: only the shape is per API.
func (e *HTTPError) ForAPI(api route.API) *HTTPError {
	if e == nil || api != route.APIMessages {
		return e
	}
	c := *e
	c.API = api
	if c.Status == http.StatusServiceUnavailable {
		c.Status = StatusOverloaded
	}
	if !anthropicTypes[c.Type] || c.Type == "invalid_request_error" {
		c.Type = anthropicType(c.Status)
	}
	return &c
}

// StatusOverloaded is the status Anthropic answers when it has no capacity
// (529, "overloaded_error"): a Messages call that no deployment could serve
// is answered with it (HTTPError.ForAPI).
const StatusOverloaded = 529

// anthropicTypes are the error types of Anthropic's API.
var anthropicTypes = map[string]bool{
	"invalid_request_error": true, "authentication_error": true, "billing_error": true,
	"permission_error": true, "not_found_error": true, "request_too_large": true,
	"rate_limit_error": true, "api_error": true, "timeout_error": true, "overloaded_error": true,
}

// anthropicType returns the Anthropic error type of an HTTP status.
func anthropicType(status int) string {
	switch status {
	case http.StatusUnauthorized:
		return "authentication_error"
	case http.StatusPaymentRequired:
		return "billing_error"
	case http.StatusForbidden:
		return "permission_error"
	case http.StatusNotFound:
		return "not_found_error"
	case http.StatusRequestEntityTooLarge:
		return "request_too_large"
	case http.StatusTooManyRequests:
		return "rate_limit_error"
	case http.StatusGatewayTimeout:
		return "timeout_error"
	case StatusOverloaded:
		return "overloaded_error"
	}
	if status >= 400 && status < 500 && status != StatusClientClosedRequest {
		return "invalid_request_error"
	}
	return "api_error"
}

// Error returns Message.
func (e *HTTPError) Error() string { return e.Message }

// JSON returns the body: OpenAI's shape, {"error":{"message":...,
// "type":...,"param":...,"code":...}} with null for an empty Param or Code;
// or, when API is route.APIMessages, Anthropic's, {"type":"error",
// "error":{"type":...,"message":...}}.
func (e *HTTPError) JSON() []byte {
	if e.API == route.APIMessages {
		type inner struct {
			Type    string `json:"type"`
			Message string `json:"message"`
		}
		out, _ := json.Marshal(struct {
			Type  string `json:"type"`
			Error inner  `json:"error"`
		}{"error", inner{e.Type, e.Message}})
		return out
	}
	var b struct {
		Error struct {
			Message string  `json:"message"`
			Type    string  `json:"type"`
			Param   *string `json:"param"`
			Code    *string `json:"code"`
		} `json:"error"`
	}
	b.Error.Message, b.Error.Type = e.Message, e.Type
	if e.Param != "" {
		b.Error.Param = &e.Param
	}
	if e.Code != "" {
		b.Error.Code = &e.Code
	}
	out, _ := json.Marshal(b) // strings only: cannot fail
	return out
}

// Header returns the answer's headers: the JSON content type and length,
// Retry-After when set, and "X-Should-Retry: false", because failover has
// already happened.
func (e *HTTPError) Header(body []byte) http.Header {
	h := http.Header{
		"Content-Type":   {"application/json"},
		"Content-Length": {strconv.Itoa(len(body))},
		"X-Should-Retry": {"false"},
	}
	if e.RetryAfter != "" {
		h.Set("Retry-After", e.RetryAfter)
	}
	return h
}

// Write answers with e on w: Header, Status and JSON.
func (e *HTTPError) Write(w http.ResponseWriter) {
	body := e.JSON()
	h := w.Header()
	for k, v := range e.Header(body) {
		h[k] = v
	}
	w.WriteHeader(e.Status)
	_, _ = w.Write(body)
}

// response is e as an *http.Response to req, for the Transport.
func (e *HTTPError) response(req *http.Request) *http.Response {
	body := e.JSON()
	return bytesResponse(req, e.Status, e.Header(body), body)
}

// HTTPError returns the HTTP answer to err, an error of Do, New,
// NewStreaming or the Transport. The mapping, the one both Client.Transport
// and examples/gateway use:
//
//   - *RequestError: 400 invalid_request_error, Param set.
//   - *route.PinError (WithPin matches nothing): 400, Param "pin".
//   - *ModelError (an unknown model): 404 model_not_found, Param "model" or "models".
//   - *route.APIError (the model is not served on the call's API; nothing
//     is translated between APIs): 404 api_not_served, Param "model".
//   - the caller's cancellation (context.Canceled): StatusClientClosedRequest.
//   - *fallback.Error: the status of the last attempt that got one, with the
//     provider's error type, code and param, and its Retry-After for a 429 or
//     503; 400 invalid_request_error when no attempt got one and the
//     deciding attempt failed on the caller's request
//     (fallback.Class.CallerFault: a context-length or content-policy error
//     inside an HTTP 200 stream); else 503 service_unavailable
//     "no_deployment_available" (all skipped, unreachable or timed out).
//   - route.ErrNoDeployment otherwise (the routing options left nothing): 503
//     "no_deployment_available".
//   - anything else: 500 server_error.
//
// Every configured API key and credential header value is replaced by
// "REDACTED" in every field, in any form redact.Scrubber finds (raw,
// JSON-escaped, percent-encoded), so a provider that echoes the key does not
// leak it. A nil err returns nil. The answer is in OpenAI's shape; ForAPI
// gives it in the call's API's own (Anthropic's for Messages).
func (c *Client) HTTPError(err error) *HTTPError {
	if err == nil {
		return nil
	}
	e := &HTTPError{Message: c.redact.Scrub(err.Error())}
	var (
		re *RequestError
		pe *route.PinError
		me *ModelError
		ae *route.APIError
		fe *fallback.Error
	)
	switch {
	case errors.As(err, &re):
		e.Status, e.Type, e.Param = http.StatusBadRequest, "invalid_request_error", re.Param
	case errors.As(err, &pe):
		e.Status, e.Type, e.Param = http.StatusBadRequest, "invalid_request_error", "pin"
	case errors.As(err, &me):
		e.Status, e.Type, e.Code, e.Param = http.StatusNotFound, "invalid_request_error", "model_not_found", me.Param
	case errors.As(err, &ae):
		e.Status, e.Type, e.Code, e.Param = http.StatusNotFound, "invalid_request_error", "api_not_served", "model"
	case errors.Is(err, context.Canceled):
		e.Status, e.Type, e.Code = StatusClientClosedRequest, "canceled", "client_closed_request"
	case errors.As(err, &fe) && lastStatus(fe) != 0:
		e.Status, e.Type = lastStatus(fe), "upstream_error"
		var oe *openai.Error
		if errors.As(err, &oe) && oe.StatusCode == e.Status {
			// fallback scrubbed these already; an *openai.Error that came
			// another way (a Transport of the caller's) is scrubbed here.
			if oe.Type != "" {
				e.Type = c.redact.Scrub(oe.Type)
			}
			e.Code, e.Param = c.redact.Scrub(oe.Code), c.redact.Scrub(oe.Param)
			if oe.Response != nil && (e.Status == http.StatusTooManyRequests || e.Status == http.StatusServiceUnavailable) {
				e.RetryAfter = c.redact.Scrub(oe.Response.Header.Get("Retry-After"))
			}
		}
	case fe != nil && callerFault(fe):
		// Refused inside an HTTP 200 stream for the caller's request (the
		// context length, a content policy): the caller's 400, not an outage.
		e.Status, e.Type = http.StatusBadRequest, "invalid_request_error"
		var oe *openai.Error
		if errors.As(err, &oe) {
			e.Code, e.Param = c.redact.Scrub(oe.Code), c.redact.Scrub(oe.Param)
		}
	case fe != nil, errors.Is(err, route.ErrNoDeployment):
		e.Status, e.Type, e.Code = http.StatusServiceUnavailable, "service_unavailable", "no_deployment_available"
	default:
		e.Status, e.Type = http.StatusInternalServerError, "server_error"
	}
	return e
}

// callerFault reports whether fe's deciding attempt failed on the caller's
// request (fallback.Class.CallerFault).
func callerFault(fe *fallback.Error) bool {
	a, ok := fe.Last()
	return ok && a.Class.CallerFault()
}

// lastStatus is the HTTP status (400 and up) of the last attempt of fe that
// got one, or 0.
func lastStatus(fe *fallback.Error) int {
	for i := len(fe.Attempts) - 1; i >= 0; i-- {
		if s := fe.Attempts[i].Status; s >= 400 {
			return s
		}
	}
	return 0
}
