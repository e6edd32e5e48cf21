package tps_test

import (
	"bytes"
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tpsroute/tpsroute/internal/sse"
	"github.com/tpsroute/tpsroute/tps"
)

func TestParseEmbeddingsEvent(t *testing.T) {
	tests := []struct {
		name, data string
		want       protoParsed
		bad        bool
	}{
		{name: "floats", data: `{"object":"list","data":[{"object":"embedding","index":0,"embedding":[0.1,-0.2]}],"model":"text-embedding-3-small","usage":{"prompt_tokens":5,"total_tokens":5}}`,
			want: protoParsed{Output: true, Finish: "stop", Model: "text-embedding-3-small", HasUsage: true, OutputBytes: 57, Usage: tps.Usage{PromptTokens: 5, TotalTokens: 5}}},
		{name: "base64", data: `{"data":[{"embedding":"AACAPwAAAEA="},{"embedding":"AAAAAA=="}],"usage":{"prompt_tokens":7}}`,
			want: protoParsed{Output: true, Finish: "stop", HasUsage: true, OutputBytes: 55, Usage: tps.Usage{PromptTokens: 7}}},
		{name: "empty data", data: `{"data":[],"usage":null}`},
		{name: "data not an array", data: `{"data":{"x":1},"usage":{"total_tokens":3,"x":[1]}}`},
		{name: "error", data: `{"error":{"message":"too long","code":"context_length_exceeded"}}`,
			want: protoParsed{Error: true, ErrorBody: `{"message":"too long","code":"context_length_exceeded"}`}},
		{name: "not an object", data: `[]`, bad: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var c tps.Chunk
			err := tps.ProtocolEmbeddings.Parse([]byte(tt.data), &c)
			if tt.bad {
				assert.ErrorIs(t, err, tps.ErrMalformed)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, protoSummary(&c))
		})
	}
}

// TestAppendEventRoundTrip: a JSON answer framed by sse.AppendEvent reads back
// through a Tap as one event whose data is the answer, line ends made LF.
func TestAppendEventRoundTrip(t *testing.T) {
	for _, data := range []string{
		`{"data":[{"embedding":[1]}],"usage":{"prompt_tokens":2}}`,
		"{\n  \"data\": [\r\n {\"embedding\": [1]}\r ],\n  \"usage\": {\"prompt_tokens\": 2}\n}",
		"{}\n",
	} {
		var got [][]byte
		tap := tps.NewTap(io.NopCloser(bytes.NewReader(sse.AppendEvent(nil, []byte(data)))), time.Now(), nil,
			tps.WithProtocol(tps.ProtocolEmbeddings), tps.WithObserver(func(_ time.Time, c *tps.Chunk) { got = append(got, c.UsageRaw) }))
		var data2 []byte
		sse.ForEachData(sse.AppendEvent(nil, []byte(data)), func(d []byte) { data2 = append([]byte(nil), d...) })
		_, err := io.ReadAll(tap)
		require.NoError(t, err)
		require.Len(t, got, 1, "one event")
		want := bytes.ReplaceAll(bytes.ReplaceAll([]byte(data), []byte("\r\n"), []byte("\n")), []byte("\r"), []byte("\n"))
		assert.Equal(t, string(want), string(data2))
	}
}
