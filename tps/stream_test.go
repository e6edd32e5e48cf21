package tps_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"testing/synctest"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tpsroute/tpsroute/tps"
)

func TestWrapHTTPServer(t *testing.T) {
	srv := sseServer(t, sseBody(5))
	client := benchClient(srv)
	var observed int
	start := time.Now()
	s := tps.Wrap(client.Chat.Completions.NewStreaming(context.Background(), benchParams), start,
		tps.WithObserver(func(time.Time, *tps.Chunk) { observed++ }))
	var text string
	for s.Next() {
		if c := s.Current(); len(c.Choices) > 0 {
			text += c.Choices[0].Delta.Content
		}
	}
	require.NoError(t, s.Err())
	require.NoError(t, s.Close())
	got := s.Sample()
	assert.Equal(t, " token token token token token", text)
	assert.Equal(t, 8, observed)
	assert.NoError(t, got.Err)
	assert.Equal(t, tps.EndStream, got.End)
	assert.Equal(t, int64(5), got.OutputTokens)
	assert.Equal(t, tps.TokenSourceUsage, got.TokenSource)
	assert.Equal(t, int64(5), got.OutputChunks)
	assert.Equal(t, int64(8), got.Chunks)
	assert.Equal(t, int64(12), got.InputTokens)
	assert.Equal(t, tps.CacheCold, got.Cache)
	assert.Equal(t, "stop", got.FinishReason)
	assert.Equal(t, "gpt-4o-mini-2024-07-18", got.Model)
	assert.Equal(t, "fp_0ba0d124f1", got.SystemFingerprint)
	assert.Equal(t, start, got.Start)
	assert.False(t, got.Truncated)
	assert.LessOrEqual(t, got.Headers, got.FirstByte)
	assert.LessOrEqual(t, got.FirstByte, got.TTFT)
	assert.LessOrEqual(t, got.TTFT, got.Last)
	assert.LessOrEqual(t, got.Last, got.Total)
}

// TestWrapDecodeError: openai-go's decode error surfaces from Err and is
// recorded in the Sample with its phase.
func TestWrapDecodeError(t *testing.T) {
	tests := []struct {
		name  string
		steps []step
		phase tps.Phase
	}{
		{"before the first token", []step{ev(200, role()), raw(300, "data: {\"choices\":[\n\n")}, tps.PhaseFirstToken},
		{"mid-stream", []step{ev(200, text("a")), raw(300, "data: not json\n\n"), ev(400, text("b"))}, tps.PhaseMidStream},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				start := time.Now()
				client := scriptClient(start, tt.steps, nil)
				s := tps.Wrap(client.Chat.Completions.NewStreaming(context.Background(), benchParams), start)
				for s.Next() {
				}
				require.Error(t, s.Err())
				got := s.Sample()
				assert.Equal(t, s.Err(), got.Err, "Sample.Err is openai-go's error")
				assert.Equal(t, tt.phase, got.ErrPhase)
				assert.Equal(t, int64(1), got.Malformed)
				assert.Equal(t, tps.EndError, got.End)
				assert.Equal(t, 300*ms, got.Total)
				require.NoError(t, s.Close())
			})
		})
	}
}

func TestWrapLifecycle(t *testing.T) {
	t.Run("Sample is provisional while running and Close ends it", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			start := time.Now()
			client := scriptClient(start, []step{ev(200, text("a")), ev(300, text("b")), ev(400, text("c")), done(500)}, nil)
			s := tps.Wrap(client.Chat.Completions.NewStreaming(context.Background(), benchParams), start)
			require.True(t, s.Next())
			require.True(t, s.Next())
			time.Sleep(50 * ms)
			snap := s.Sample()
			assert.Equal(t, tps.EndNone, snap.End)
			assert.Equal(t, 350*ms, snap.Total)
			assert.Equal(t, int64(2), snap.OutputChunks)
			require.NoError(t, s.Close())
			require.NoError(t, s.Close())
			assert.False(t, s.Next(), "no chunks after Close")
			got := s.Sample()
			assert.Equal(t, tps.EndClosed, got.End)
			assert.Equal(t, 350*ms, got.Total)
			assert.NoError(t, got.Err)
		})
	})
	t.Run("nil stream", func(t *testing.T) {
		s := tps.Wrap(nil, time.Now())
		assert.False(t, s.Next())
		assert.NoError(t, s.Err())
		assert.Equal(t, openai.ChatCompletionChunk{}, s.Current())
		assert.Equal(t, tps.EndStream, s.Sample().End)
		assert.NoError(t, s.Close())
	})
	t.Run("HTTP error status is openai-go's error in PhaseHeaders", func(t *testing.T) {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusTooManyRequests)
			_, _ = io.WriteString(w, `{"error":{"message":"slow down","type":"rate_limit","code":"429"}}`)
		}))
		defer srv.Close()
		client := benchClient(srv)
		s := tps.Wrap(client.Chat.Completions.NewStreaming(context.Background(), benchParams), time.Now())
		assert.False(t, s.Next())
		var apiErr *openai.Error
		require.ErrorAs(t, s.Err(), &apiErr)
		assert.Equal(t, http.StatusTooManyRequests, apiErr.StatusCode)
		got := s.Sample()
		assert.ErrorAs(t, got.Err, &apiErr)
		assert.Equal(t, tps.PhaseHeaders, got.ErrPhase)
		require.NoError(t, s.Close())
	})
}
