package executor_test

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tpsroute/tpsroute/fallback"
	"github.com/tpsroute/tpsroute/internal/executor"
	"github.com/tpsroute/tpsroute/replay"
)

// TestInStreamContextLength: an oversized prompt reported inside an HTTP 200
// stream (older SGLang and llama.cpp, Groq; docs/STREAM_QUIRKS.md Q26) is
// classified as ClassContextLength, as the pre-stream 400 is: a deployment
// with a larger context window is tried, one with the same window is not.
func TestInStreamContextLength(t *testing.T) {
	tooLong := func() *replay.Cassette {
		return (&tape{}).role().after(50 * time.Millisecond).
			data(`{"error":{"message":"This model's maximum context length is 8192 tokens. However, you requested 9000 tokens.","type":"BadRequestError","code":400}}`).
			cassette("eof")
	}
	small, same, large := dep("a", "a-m"), dep("b", "b-m"), dep("c", "c-m")
	small.ContextWindow, same.ContextWindow, large.ContextWindow = 8192, 8192, 128000

	t.Run("larger_window_used", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := newEnv(map[string]replay.Script{"a-m": tooLong(), "b-m": prof(8), "c-m": prof(8)}, fallback.Options{})
			res, err := e.do(t, planOf(small, same, large), executor.Call{Stream: true})
			require.NoError(t, err)
			assert.Equal(t, "c", res.Deployment().Provider)
			assert.Equal(t, replay.Text(8), drain(t, res.Body).text)
			atts := res.Attempts()
			require.NotEmpty(t, atts)
			assert.Equal(t, fallback.ClassContextLength, atts[0].Class)
			assert.ErrorIs(t, atts[0].Err, fallback.ErrStreamError)
			assert.Empty(t, attemptsFor(e.h, "b-m"), "same window, not tried")
		})
	})
	t.Run("clean_error", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := newEnv(map[string]replay.Script{"a-m": tooLong(), "b-m": prof(8)}, fallback.Options{})
			_, err := e.do(t, planOf(small, same), executor.Call{Stream: true})
			require.ErrorIs(t, err, fallback.ErrStreamError)
			assert.Contains(t, err.Error(), "maximum context length")
			var fe *fallback.Error
			require.ErrorAs(t, err, &fe)
			last, _ := fe.Last()
			assert.Equal(t, fallback.ClassContextLength, last.Class)
			assert.Empty(t, attemptsFor(e.h, "b-m"))
		})
	})
}
