package executor

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/tpsroute/tpsroute/fallback"
)

func TestParseErrorBody(t *testing.T) {
	tests := []struct {
		name, body     string
		code, typ, msg string
		status         int
	}{
		{"openai_object", `{"error":{"message":"Rate limit","type":"requests","code":"rate_limit_exceeded","param":null}}`, "rate_limit_exceeded", "requests", "Rate limit", 0},
		{"gemini_array", `[{"error":{"code":429,"message":"Resource exhausted","status":"RESOURCE_EXHAUSTED"}}]`, "429", "", "Resource exhausted", 429},
		{"mistral_message", `{"message":"Unauthorized","request_id":"x"}`, "", "", "Unauthorized", 0},
		{"tgi_string_error", `{"error":"Input validation error","error_type":"validation"}`, "", "validation", "Input validation error", 0},
		{"vllm_int_code", `{"error":{"message":"bad","type":"BadRequestError","code":400}}`, "400", "BadRequestError", "bad", 400},
		{"tgi_http_status", `{"error":{"message":"too long","http_status_code":422}}`, "", "", "too long", 422},
		{"openrouter_nested", `{"error":{"message":"{\"error\":{\"code\":400,\"message\":\"inner reason\",\"status\":\"INVALID_ARGUMENT\"}}","code":502}}`, "502", "", "inner reason", 502},
		{"not_json", `upstream connect error`, "", "", "upstream connect error", 0},
		{"empty", ``, "", "", "", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pe := parseErrorBody([]byte(tt.body))
			assert.Equal(t, tt.code, pe.Code)
			assert.Equal(t, tt.typ, pe.Type)
			assert.Equal(t, tt.msg, pe.Message)
			assert.Equal(t, tt.status, pe.Status)
		})
	}
}

func TestClassify(t *testing.T) {
	h := func(kv ...string) http.Header {
		out := http.Header{}
		for i := 0; i < len(kv); i += 2 {
			out.Set(kv[i], kv[i+1])
		}
		return out
	}
	tests := []struct {
		name   string
		status int
		header http.Header
		body   string
		want   fallback.Class
	}{
		{"500", 500, nil, ``, fallback.ClassRetry},
		{"502", 502, nil, ``, fallback.ClassRetry},
		{"504", 504, nil, ``, fallback.ClassRetry},
		{"503", 503, nil, ``, fallback.ClassNext},
		{"529_overloaded", 529, nil, ``, fallback.ClassNext},
		{"429_rate_limit", 429, nil, `{"error":{"code":"rate_limit_exceeded"}}`, fallback.ClassRateLimited},
		{"429_insufficient_quota", 429, nil, `{"error":{"type":"insufficient_quota","code":"insufficient_quota"}}`, fallback.ClassUnavailable},
		{"401", 401, nil, ``, fallback.ClassAuth},
		{"403", 403, nil, ``, fallback.ClassAuth},
		{"403_policy", 403, nil, `{"error":{"message":"flagged by moderation"}}`, fallback.ClassPolicy},
		{"404_model", 404, nil, `{"error":{"code":"model_not_found"}}`, fallback.ClassUnavailable},
		{"400_invalid", 400, nil, `{"error":{"message":"temperature must be <= 2"}}`, fallback.ClassInvalid},
		{"400_context", 400, nil, `{"error":{"code":"context_length_exceeded"}}`, fallback.ClassContextLength},
		{"400_context_message", 400, nil, `{"message":"This model's maximum context length is 8192 tokens"}`, fallback.ClassContextLength},
		{"422_tgi_context", 422, nil, `{"error":"Input validation error: inputs tokens + max_new_tokens must be <= 4096. Given: too many tokens","error_type":"validation"}`, fallback.ClassContextLength},
		{"400_policy", 400, nil, `{"error":{"code":"content_policy_violation"}}`, fallback.ClassPolicy},
		{"400_azure_filter", 400, nil, `{"error":{"code":"content_filter","message":"filtered"}}`, fallback.ClassPolicy},
		{"413", 413, nil, ``, fallback.ClassContextLength},
		{"409", 409, nil, ``, fallback.ClassRetry},
		{"408", 408, nil, ``, fallback.ClassNext},
		{"422_invalid", 422, nil, `{"detail":[{"loc":["body","messages"],"msg":"field required"}]}`, fallback.ClassInvalid},
		{"431_caller_headers", 431, nil, ``, fallback.ClassInvalid},
		{"402_payment", 402, nil, `{"error":{"message":"add credits"}}`, fallback.ClassUnavailable},
		{"410_gone", 410, nil, ``, fallback.ClassUnavailable},
		{"400_model_not_found", 400, nil, `{"error":{"code":"model_not_found","message":"The model x does not exist"}}`, fallback.ClassUnavailable},
		{"400_gemini_bad_key", 400, nil, `[{"error":{"code":400,"message":"API key not valid. Please pass a valid API key.","status":"INVALID_ARGUMENT"}}]`, fallback.ClassAuth},
		{"400_invalid_api_key_code", 400, nil, `{"error":{"code":"invalid_api_key"}}`, fallback.ClassAuth},
		{"405_misconfigured", 405, nil, ``, fallback.ClassNext},
		{"415_deployment", 415, nil, ``, fallback.ClassNext},
		{"451_policy_wording", 451, nil, `{"error":{"message":"blocked by content policy"}}`, fallback.ClassPolicy},
		{"x_should_retry_true_on_400", 400, h("x-should-retry", "true"), ``, fallback.ClassRetry},
		{"x_should_retry_false_on_500", 500, h("x-should-retry", "false"), ``, fallback.ClassNext},
		{"x_should_retry_true_keeps_policy", 400, h("x-should-retry", "true"), `{"error":{"code":"content_policy_violation"}}`, fallback.ClassPolicy},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pe := parseErrorBody([]byte(tt.body))
			hdr := tt.header
			if hdr == nil {
				hdr = http.Header{}
			}
			assert.Equal(t, tt.want, classify(tt.status, hdr, &pe))
		})
	}
}

func TestRetryAfter(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	tests := []struct {
		name   string
		header http.Header
		want   time.Duration
		ok     bool
	}{
		{"none", http.Header{}, 0, false},
		{"seconds", http.Header{"Retry-After": {"2"}}, 2 * time.Second, true},
		{"fractional_seconds", http.Header{"Retry-After": {"1.5"}}, 1500 * time.Millisecond, true},
		{"ms_preferred", http.Header{"Retry-After": {"2"}, "Retry-After-Ms": {"1200"}}, 1200 * time.Millisecond, true},
		{"azure_ms", http.Header{"X-Ms-Retry-After-Ms": {"300"}}, 300 * time.Millisecond, true},
		{"http_date", http.Header{"Retry-After": {now.Add(7 * time.Second).Format(http.TimeFormat)}}, 7 * time.Second, true},
		{"past_date", http.Header{"Retry-After": {now.Add(-time.Hour).Format(http.TimeFormat)}}, 0, true},
		{"garbage", http.Header{"Retry-After": {"soon"}}, 0, false},
		{"negative", http.Header{"Retry-After": {"-3"}}, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, ok := retryAfter(tt.header, now)
			assert.Equal(t, tt.ok, ok)
			assert.Equal(t, tt.want, d)
		})
	}
}

func TestJitterBounded(t *testing.T) {
	e := New(fallback.Options{Seed: 1}, Hooks{})
	for n := range 12 {
		ceil := min(defaultBackoffBase<<n, defaultBackoffMax)
		for range 50 {
			d := e.jitter(n)
			assert.GreaterOrEqual(t, d, time.Duration(0))
			assert.Less(t, d, ceil)
		}
	}
	a, b := New(fallback.Options{Seed: 9}, Hooks{}), New(fallback.Options{Seed: 9}, Hooks{})
	assert.Equal(t, a.jitter(3), b.jitter(3), "seeded")
}
