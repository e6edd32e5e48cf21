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

// TestUsageChunkAfterFinish: OpenRouter sends its usage chunk after the
// finish chunk, with a choice carrying a role, content "" and a null
// finish_reason (docs/STREAM_QUIRKS.md Q10). The usage is counted, the chunk
// is not output, and the null finish_reason does not erase "stop".
func TestUsageChunkAfterFinish(t *testing.T) {
	body := strings.Join([]string{
		": OPENROUTER PROCESSING",
		`data: {"id":"gen-1","choices":[{"index":0,"delta":{"role":"assistant","content":"Hel"},"finish_reason":null}]}`,
		`data: {"id":"gen-1","choices":[{"index":0,"delta":{"role":"assistant","content":"lo"},"finish_reason":null}]}`,
		`data: {"id":"gen-1","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":"stop","native_finish_reason":"STOP"}]}`,
		`data: {"id":"gen-1","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null,"native_finish_reason":null}],"usage":{"prompt_tokens":4,"completion_tokens":2,"total_tokens":6,"cost":0.0001,"is_byok":false}}`,
		"data: [DONE]",
	}, "\n\n") + "\n\n"
	var got tps.Sample
	calls := 0
	tap := tps.NewTap(io.NopCloser(strings.NewReader(body)), time.Now(), func(s tps.Sample) { got = s; calls++ })
	_, err := io.ReadAll(tap)
	require.NoError(t, err)
	require.NoError(t, tap.Close())
	require.Equal(t, 1, calls)
	require.NoError(t, got.Err)
	assert.Equal(t, tps.TokenSourceUsage, got.TokenSource)
	assert.EqualValues(t, 2, got.OutputTokens)
	assert.EqualValues(t, 4, got.InputTokens)
	assert.EqualValues(t, 2, got.OutputChunks, "the usage chunk is not output")
	assert.EqualValues(t, 1, got.Comments)
	assert.Equal(t, "stop", got.FinishReason)
	assert.False(t, got.Truncated)
	assert.Equal(t, tps.EndDone, got.End)
}
