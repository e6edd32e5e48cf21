package tps_test

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tpsroute/tpsroute/tps"
)

// feed parses data and gives it to the Timer at start+at.
func feed(t *testing.T, tm *tps.Timer, start time.Time, at time.Duration, data string) {
	t.Helper()
	var c tps.Chunk
	require.NoError(t, tps.ParseChunk([]byte(data), &c))
	tm.Event(start.Add(at), &c)
}

// TestMetricsWorkedExample checks the numbers of the worked example in
// docs/METRICS.md.
func TestMetricsWorkedExample(t *testing.T) {
	start := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	tm := tps.NewTimer(start)
	tm.Headers(start.Add(120 * ms))
	tm.Comment(start.Add(300 * ms))
	feed(t, tm, start, 350*ms, `{"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}`)
	for _, at := range []time.Duration{400, 450, 500, 600, 700, 1400} {
		feed(t, tm, start, at*ms, `{"model":"m","choices":[{"index":0,"delta":{"content":"several words"}}]}`)
	}
	feed(t, tm, start, 1450*ms, `{"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`)
	feed(t, tm, start, 1500*ms, `{"model":"m","choices":[],"usage":{"prompt_tokens":50,"completion_tokens":36,"total_tokens":86,"prompt_tokens_details":{"cached_tokens":32}}}`)
	tm.Event(start.Add(1500*ms), &tps.Chunk{Done: true})
	s := tm.Finish(start.Add(1500 * ms))

	assert.Equal(t, tps.Sample{
		Start: start, Headers: 120 * ms, FirstByte: 300 * ms, TTFT: 400 * ms, Last: 1400 * ms, E2E: 1400 * ms, Total: 1500 * ms,
		TPS: 35, TPSOK: true, TPOT: 28571428, E2ETPS: 36 / 1.4,
		OutputTokens: 36, TokenSource: tps.TokenSourceUsage, FirstChunkTokens: 1, InputTokens: 50, CachedTokens: 32, Cache: tps.CacheWarm,
		Chunks: 9, OutputChunks: 6, Comments: 1, Gaps: tps.GapStats{Count: 5, Sum: 1000 * ms, Min: 50 * ms, Max: 700 * ms},
		FinishReason: "stop", Model: "m", End: tps.EndDone,
	}, s)
	mean, ok := s.Gaps.Mean()
	assert.True(t, ok)
	assert.Equal(t, 200*ms, mean)
	assert.Equal(t, s, tm.Finish(start.Add(time.Hour)), "Finish is idempotent")
}

func TestTimer(t *testing.T) {
	start := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	out := `{"choices":[{"delta":{"content":"x"}}]}`
	tests := []struct {
		name string
		opts []tps.Option
		run  func(t *testing.T, tm *tps.Timer) tps.Sample
		want func(t *testing.T, s tps.Sample)
	}{
		{"nothing at all", nil, func(t *testing.T, tm *tps.Timer) tps.Sample {
			return tm.Finish(start.Add(time.Second))
		}, func(t *testing.T, s tps.Sample) {
			assert.Equal(t, tps.Sample{Start: start, Total: time.Second, End: tps.EndEOF, Truncated: true}, s)
		}},
		{"Fail before output derives PhaseFirstToken, first error wins", nil, func(t *testing.T, tm *tps.Timer) tps.Sample {
			tm.Fail(errors.New("first"), tps.PhaseNone)
			tm.Fail(errors.New("second"), tps.PhaseConnect)
			return tm.Finish(start.Add(time.Second))
		}, func(t *testing.T, s tps.Sample) {
			assert.EqualError(t, s.Err, "first")
			assert.Equal(t, tps.PhaseFirstToken, s.ErrPhase)
			assert.Equal(t, tps.EndError, s.End)
		}},
		{"Fail with an explicit phase", nil, func(t *testing.T, tm *tps.Timer) tps.Sample {
			tm.Fail(errors.New("dial"), tps.PhaseConnect)
			return tm.Finish(start)
		}, func(t *testing.T, s tps.Sample) {
			assert.Equal(t, tps.PhaseConnect, s.ErrPhase)
		}},
		{"Fail after output derives PhaseMidStream", nil, func(t *testing.T, tm *tps.Timer) tps.Sample {
			feed(t, tm, start, 100*ms, out)
			tm.Fail(errors.New("x"), tps.PhaseNone)
			return tm.Finish(start.Add(time.Second))
		}, func(t *testing.T, s tps.Sample) {
			assert.Equal(t, tps.PhaseMidStream, s.ErrPhase)
			assert.Equal(t, int64(1), s.OutputTokens)
		}},
		{"zero span: two output chunks at the same instant are not a rate", nil, func(t *testing.T, tm *tps.Timer) tps.Sample {
			feed(t, tm, start, 100*ms, out)
			feed(t, tm, start, 100*ms, out)
			return tm.Finish(start.Add(time.Second))
		}, func(t *testing.T, s tps.Sample) {
			assert.False(t, s.TPSOK)
			assert.Zero(t, s.TPS)
			assert.Zero(t, s.TPOT)
			assert.Equal(t, int64(2), s.OutputTokens)
		}},
		{"usage with zero completion tokens but visible output falls back to chunks", nil, func(t *testing.T, tm *tps.Timer) tps.Sample {
			feed(t, tm, start, 100*ms, out)
			feed(t, tm, start, 300*ms, out)
			feed(t, tm, start, 400*ms, `{"usage":{"prompt_tokens":3,"completion_tokens":0}}`)
			return tm.Finish(start.Add(time.Second))
		}, func(t *testing.T, s tps.Sample) {
			assert.Equal(t, tps.TokenSourceChunks, s.TokenSource)
			assert.Equal(t, int64(2), s.OutputTokens)
			assert.Equal(t, int64(3), s.InputTokens)
			assert.InDelta(t, 5.0, s.TPS, 1e-9)
		}},
		{"usage-only stream (hidden reasoning) has tokens but no TTFT", nil, func(t *testing.T, tm *tps.Timer) tps.Sample {
			feed(t, tm, start, 400*ms, `{"choices":[],"usage":{"completion_tokens":12}}`)
			return tm.Finish(start.Add(time.Second))
		}, func(t *testing.T, s tps.Sample) {
			assert.Equal(t, int64(12), s.OutputTokens)
			assert.Equal(t, tps.TokenSourceUsage, s.TokenSource)
			assert.Zero(t, s.TTFT)
			assert.False(t, s.TPSOK)
			assert.Zero(t, s.E2ETPS)
		}},
		{"events after Finish are ignored", nil, func(t *testing.T, tm *tps.Timer) tps.Sample {
			s := tm.Finish(start.Add(time.Second))
			feed(t, tm, start, 2*time.Second, out)
			tm.Comment(start.Add(3 * time.Second))
			assert.Equal(t, s, tm.Abandon(start.Add(4*time.Second)))
			return s
		}, func(t *testing.T, s tps.Sample) {
			assert.Zero(t, s.OutputChunks)
			assert.Zero(t, s.Comments)
		}},
		{"Snapshot does not end the Timer", nil, func(t *testing.T, tm *tps.Timer) tps.Sample {
			feed(t, tm, start, 100*ms, out)
			feed(t, tm, start, 300*ms, out)
			snap := tm.Snapshot(start.Add(400 * ms))
			assert.Equal(t, tps.EndNone, snap.End)
			assert.Equal(t, 400*ms, snap.Total)
			assert.True(t, snap.TPSOK)
			feed(t, tm, start, 500*ms, out)
			return tm.Abandon(start.Add(600 * ms))
		}, func(t *testing.T, s tps.Sample) {
			assert.Equal(t, int64(3), s.OutputChunks)
			assert.Equal(t, tps.EndClosed, s.End)
			assert.False(t, s.Truncated)
		}},
		{"Reset starts over and keeps options", []tps.Option{tps.WithTokenizer(words{})}, func(t *testing.T, tm *tps.Timer) tps.Sample {
			feed(t, tm, start, 100*ms, out)
			tm.Finish(start.Add(time.Second))
			tm.Reset(start.Add(time.Hour))
			feed(t, tm, start, time.Hour+100*ms, `{"choices":[{"delta":{"content":"two words"}}]}`)
			return tm.Finish(start.Add(time.Hour + time.Second))
		}, func(t *testing.T, s tps.Sample) {
			assert.Equal(t, 100*ms, s.TTFT)
			assert.Equal(t, tps.TokenSourceTokenizer, s.TokenSource)
			assert.Equal(t, int64(2), s.OutputTokens)
			assert.Equal(t, int64(2), s.FirstChunkTokens)
		}},
	}
	tests = append(tests, struct {
		name string
		opts []tps.Option
		run  func(t *testing.T, tm *tps.Timer) tps.Sample
		want func(t *testing.T, s tps.Sample)
	}{"tokenizer with tool-call-only output falls back to deltas", []tps.Option{tps.WithTokenizer(words{})}, func(t *testing.T, tm *tps.Timer) tps.Sample {
		tool := `{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{}"}}]}}]}`
		feed(t, tm, start, 100*ms, tool)
		feed(t, tm, start, 300*ms, tool)
		feed(t, tm, start, 500*ms, tool)
		return tm.Finish(start.Add(time.Second))
	}, func(t *testing.T, s tps.Sample) {
		assert.Equal(t, tps.TokenSourceChunks, s.TokenSource)
		assert.Equal(t, int64(3), s.OutputTokens)
		assert.Equal(t, int64(1), s.FirstChunkTokens)
		assert.InDelta(t, 5.0, s.TPS, 1e-9)
	}})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.want(t, tt.run(t, tps.NewTimer(start, tt.opts...)))
		})
	}
}

func TestEndString(t *testing.T) {
	for e, want := range map[tps.End]string{tps.EndNone: "none", tps.EndDone: "done", tps.EndEOF: "eof",
		tps.EndStream: "stream", tps.EndError: "error", tps.EndClosed: "closed", tps.End(99): "End(99)"} {
		assert.Equal(t, want, e.String())
	}
}

// TestTimerExactMetrics: a timer fed exact times gives exact metrics (it was
// the package's ExampleTimer while the timer was exported).
func TestTimerExactMetrics(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return start.Add(time.Duration(ms) * time.Millisecond) }
	tm := tps.NewTimer(start)
	tm.Headers(at(100))
	var c tps.Chunk
	for i, data := range []string{
		`{"choices":[{"delta":{"content":"one"}}]}`,
		`{"choices":[{"delta":{"content":" two"}}]}`,
		`{"choices":[{"delta":{"content":" three"}}]}`,
		`{"choices":[],"usage":{"completion_tokens":9}}`,
	} {
		require.NoError(t, tps.ParseChunk([]byte(data), &c))
		tm.Event(at(300+100*i), &c)
	}
	s := tm.Finish(at(700))
	assert.Equal(t, 300*time.Millisecond, s.TTFT)
	assert.InDelta(t, 40, s.TPS, 1e-9)
	assert.Equal(t, 25*time.Millisecond, s.TPOT)
	assert.Equal(t, 500*time.Millisecond, s.E2E)
	assert.InDelta(t, 18.0, s.E2ETPS, 1e-9)
}
