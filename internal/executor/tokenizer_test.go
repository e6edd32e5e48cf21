package executor_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tpsroute/tpsroute/fallback"
	"github.com/tpsroute/tpsroute/internal/executor"
	"github.com/tpsroute/tpsroute/tps"
)

// tenPerWord counts ten tokens per word: far from any count the stream
// itself gives.
type tenPerWord struct{}

func (tenPerWord) Count(text string) int { return 10 * len(strings.Fields(text)) }

// TestHooksTokenizer: Hooks.Tokenizer reaches every attempt's Tap, which
// counts with it the output of a stream that reports no usage.
func TestHooksTokenizer(t *testing.T) {
	for _, tt := range []struct {
		name   string
		hooks  executor.Hooks
		tokens int64
		source tps.TokenSource
	}{
		{"none", executor.Hooks{}, 1, tps.TokenSourceChunks},
		{"set", executor.Hooks{Tokenizer: tenPerWord{}}, 10, tps.TokenSourceTokenizer},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := executor.New(fallback.Options{}, tt.hooks)
			res, err := e.Do(context.Background(), planOf(serve(t, goodStream)), executor.Call{Body: []byte(reqBody), Stream: true})
			require.NoError(t, err)
			d := drain(t, res.Body)
			require.NoError(t, d.err)
			s := res.Sample()
			assert.Equal(t, tt.tokens, s.OutputTokens)
			assert.Equal(t, tt.source, s.TokenSource)
		})
	}
}
