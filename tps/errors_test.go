package tps_test

import (
	"io"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tpsroute/tpsroute/tps"
)

func TestStreamErrorShapes(t *testing.T) {
	tests := []struct {
		name, in                    string
		code, msg, typ, text, event string
	}{
		{"TGI string error", `data: {"error":"Input validation error","error_type":"validation"}`,
			"", "Input validation error", "", "tps: stream error: Input validation error", ""},
		{"code as float", `data: {"error":{"code":500.0,"message":"m"}}`, "500", "m", "", "tps: stream error (code 500): m", ""},
		{"code as string, escaped message", `data: {"error":{"code":"1300","message":"line\nbreak \u00e9"}}`,
			"1300", "line\nbreak é", "", "tps: stream error (code 1300): line\nbreak é", ""},
		{"status_code fallback", `data: {"error":{"status_code":503}}`, "503", "", "", `tps: stream error (code 503): {"status_code":503}`, ""},
		{"event error with an error key", "event: error\ndata: {\"error\":{\"message\":\"x\",\"type\":\"t\"}}",
			"", "x", "t", "tps: stream error: x", "error"},
		{"event error, not JSON", "event: error\ndata: boom", "", "boom", "", "tps: stream error: boom", "error"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got tps.Sample
			tap := tps.NewTap(io.NopCloser(strings.NewReader(tt.in+"\n\n")), time.Now(), func(s tps.Sample) { got = s })
			_, err := io.ReadAll(tap)
			require.NoError(t, err)
			var se *tps.StreamError
			require.ErrorAs(t, got.Err, &se)
			assert.Equal(t, tt.code, se.Code)
			assert.Equal(t, tt.msg, se.Message)
			assert.Equal(t, tt.typ, se.Type)
			assert.Equal(t, tt.event, se.Event)
			assert.Equal(t, tt.text, se.Error())
			assert.NoError(t, se.Unwrap())
			assert.Equal(t, tps.PhaseFirstToken, got.ErrPhase)
		})
	}
}
