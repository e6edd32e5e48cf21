package main

import (
	"bytes"
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestRun(t *testing.T) {
	var out bytes.Buffer
	require.NoError(t, run(context.Background(), &out))
	s := out.String()
	tests := []struct{ name, want string }{
		{"stream answered", `streamed: +w0 w1 w2 w3 w4 w5 w6 w7 w8 w9 w10 w11\n`},
		{"primary's 503 failed over", `attempt: primary/us/gpt-4.1-mini: .*503`},
		{"backup answered the stream", `attempt: backup/eu/gpt-4.1-mini: .*200`},
		{"region option honoured", `answered by backup/eu \(model gpt-4\.1-mini-2025-04-14\)`},
		{"model list", `model: +gpt-4\.1-mini\n`},
		{"measured", `backup/eu/gpt-4\.1-mini +2 calls, 0 errors`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { assert.Regexp(t, tt.want, s) })
	}
}
