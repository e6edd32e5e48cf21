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
		{"streamed answer", "answer: w0 w1 w2 w3 w4 w5 w6 w7 w8 w9 w10 w11 w12 w13 w14 w15\n"},
		{"reset retried", "attempt: fast/us-east/llama-3.3-70b: .*reset"},
		{"retry answered", "attempt: fast/us-east/llama-3.3-70b: .*200"},
		{"measured", "measured fast/us-east/llama-3.3-70b"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { assert.Regexp(t, tt.want, s) })
	}
}
