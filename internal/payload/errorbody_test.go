package payload_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/tpsroute/tpsroute/internal/payload"
)

// TestParseErrorBody reads every error shape seen in the wild, as an HTTP
// error answer or an in-stream error carries it.
func TestParseErrorBody(t *testing.T) {
	tests := []struct {
		name, body          string
		code, typ, msg, raw string
		param               string
		status              int
	}{
		{"openai_object", `{"error":{"message":"Rate limit","type":"requests","code":"rate_limit_exceeded","param":"model"}}`, "rate_limit_exceeded", "requests", "Rate limit",
			`{"message":"Rate limit","type":"requests","code":"rate_limit_exceeded","param":"model"}`, "model", 0},
		{"gemini_array", `[{"error":{"code":429,"message":"Resource exhausted","status":"RESOURCE_EXHAUSTED"}}]`, "429", "", "Resource exhausted",
			`{"code":429,"message":"Resource exhausted","status":"RESOURCE_EXHAUSTED"}`, "", 429},
		{"empty_array", `[]`, "", "", "", "", "", 0},
		{"mistral_message", `{"message":"Unauthorized","request_id":"x"}`, "", "", "Unauthorized", `{"message":"Unauthorized","request_id":"x"}`, "", 0},
		{"tgi_string_error", `{"error":"Input validation error","error_type":"validation","code":422}`, "422", "validation", "Input validation error",
			`{"error":"Input validation error","error_type":"validation","code":422}`, "", 422},
		{"vllm_int_code", `{"error":{"message":"bad","type":"BadRequestError","code":400.0}}`, "400", "BadRequestError", "bad", `{"message":"bad","type":"BadRequestError","code":400.0}`, "", 400},
		{"tgi_http_status", `{"error":{"message":"too long","http_status_code":"422"}}`, "", "", "too long", `{"message":"too long","http_status_code":"422"}`, "", 422},
		{"status_out_of_range", `{"error":{"message":"m","status":200,"code":700}}`, "700", "", "m", `{"message":"m","status":200,"code":700}`, "", 0},
		{"openrouter_nested", `{"error":{"message":"{\"error\":{\"code\":400,\"message\":\"inner reason\",\"type\":\"t\"}}","code":502}}`, "502", "t", "inner reason",
			`{"message":"{\"error\":{\"code\":400,\"message\":\"inner reason\",\"type\":\"t\"}}","code":502}`, "", 502},
		{"anthropic_event", `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`, "", "overloaded_error", "Overloaded", `{"type":"overloaded_error","message":"Overloaded"}`, "", 0},
		{"bare_string", `"just text"`, "", "", "just text", "", "", 0},
		{"escaped", ` {"error":{"message":"line\nbreak \u00e9"}} `, "", "", "line\nbreak é", `{"message":"line\nbreak \u00e9"}`, "", 0},
		{"not_json", `upstream connect error`, "", "", "upstream connect error", "", "", 0},
		{"not_json_long", strings.Repeat("x", 400), "", "", strings.Repeat("x", 300) + "…", "", "", 0},
		{"code_at_the_integer_bounds", `{"error":{"code":1e15,"type":-1e15}}`, "1000000000000000", "-1000000000000000", "", `{"code":1e15,"type":-1e15}`, "", 0},
		{"code_past_them", `{"error":{"code":1.5e15}}`, "1.5e15", "", "", `{"code":1.5e15}`, "", 0},
		{"status_bounds_low", `{"error":{"status":400}}`, "", "", "", `{"status":400}`, "", 400},
		{"status_bounds_high", `{"error":{"status":599,"http_status_code":600}}`, "", "", "", `{"status":599,"http_status_code":600}`, "", 599},
		{"not_json_300", strings.Repeat("x", 300), "", "", strings.Repeat("x", 300), "", "", 0},
		{"openrouter_nested_array", `{"error":{"message":"[{\"error\":{\"message\":\"inner\",\"code\":503}}]"}}`, "503", "", "inner",
			`{"message":"[{\"error\":{\"message\":\"inner\",\"code\":503}}]"}`, "", 503},
		{"empty", ``, "", "", "", "", "", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			eb := payload.ParseErrorBody([]byte(tt.body))
			assert.Equal(t, tt.code, eb.Code)
			assert.Equal(t, tt.typ, eb.Type)
			assert.Equal(t, tt.msg, eb.Message)
			assert.Equal(t, tt.param, eb.Param)
			assert.Equal(t, tt.status, eb.Status)
			assert.Equal(t, tt.raw, string(eb.Raw))
		})
	}
}

// TestParseErrorBodyBounded: nesting past the scanner's bound and
// messages that nest JSON in JSON text end, with a bounded message.
func TestParseErrorBodyBounded(t *testing.T) {
	deep := strings.Repeat("[", 1<<20)
	eb := payload.ParseErrorBody([]byte(deep))
	assert.Len(t, eb.Message, 300+len("…"))
	// level[i] is the JSON text of an error whose message is level[i-1],
	// as a JSON string: eight wrappers deep, of which four are opened.
	level := []string{`"x"`}
	for i := 1; i <= 8; i++ {
		b, _ := json.Marshal(map[string]any{"error": map[string]any{"message": json.RawMessage(level[i-1])}})
		s, _ := json.Marshal(string(b))
		level = append(level, string(s))
	}
	eb = payload.ParseErrorBody([]byte(`{"error":{"message":` + level[8] + `}}`))
	assert.Equal(t, `{"error":{"message":`+level[3]+`}}`, eb.Message, "four wrappers opened, no more")
}

// FuzzParseErrorBody: any body reads without a panic; what it keeps as Raw
// is JSON, and a status is an HTTP error status.
func FuzzParseErrorBody(f *testing.F) {
	for _, s := range []string{`{"error":{"message":"m","code":400}}`, `[{"error":{"code":"429"}}]`, `{"error":"t","error_type":"v"}`,
		`{"error":{"message":"{\"error\":{\"message\":\"in\"}}"}}`, `nope`, `[[[`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		eb := payload.ParseErrorBody(body)
		if eb.Raw != nil && !json.Valid(eb.Raw) {
			t.Fatalf("Raw %q of %q is not JSON", eb.Raw, body)
		}
		if eb.Status != 0 && (eb.Status < 400 || eb.Status > 599) {
			t.Fatalf("status %d of %q", eb.Status, body)
		}
	})
}
