package tps_test

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tpsroute/tpsroute/tps"
)

// TestHiddenReasoning is issue 33's case: a reasoning model that thinks for
// 600 ms without streaming, then streams 30 visible tokens at 50 tok/s, and
// reports completion_tokens 222 with reasoning_tokens 192. The 192 were made
// before the first output; the generation phase streamed 30, so TPS is 50
// (it was 221 / 0.58 s = 381), and the counts are kept.
func TestHiddenReasoning(t *testing.T) {
	start := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	usage := func(total, reasoning int) string {
		return fmt.Sprintf(`{"choices":[],"usage":{"prompt_tokens":40,"completion_tokens":222,"total_tokens":%d,"completion_tokens_details":{"reasoning_tokens":%d}}}`, total, reasoning)
	}
	for _, tc := range []struct {
		name      string
		field     string // the delta field the 30 tokens arrive in
		usage     string
		tps       float64
		hidden    int64
		reasoning int64
	}{
		{"reasoning hidden (OpenAI o-series)", "content", usage(262, 192), 50, 192, 192},
		// DeepSeek-style: the reasoning is streamed, so it was not
		// hidden; the 30 chunks then carried all 222 tokens.
		{"reasoning streamed", "reasoning_content", usage(262, 192), 221 / 0.58, 0, 192},
		// xAI-style: completion_tokens leaves the reasoning out
		// (total = prompt + completion + reasoning), so all 222 were
		// streamed and none of them is hidden.
		{"reasoning counted outside completion_tokens", "content", usage(40+222+192, 192), 221 / 0.58, 0, 192},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tm := tps.NewTimer(start)
			tm.Headers(start.Add(50 * ms))
			for i := range 30 {
				word := strings.Repeat("w", 32) // 30 chunks of 32 bytes: room for 222 tokens
				feed(t, tm, start, 600*ms+time.Duration(i)*20*ms, fmt.Sprintf(`{"choices":[{"index":0,"delta":{%q:%q}}]}`, tc.field, word))
			}
			feed(t, tm, start, 1200*ms, tc.usage)
			s := tm.Finish(start.Add(1200 * ms))

			assert.Equal(t, tps.ImplausibleNone, s.Implausible)
			assert.Equal(t, tps.TokenSourceUsage, s.TokenSource)
			assert.Equal(t, int64(222), s.OutputTokens, "the billed count is kept")
			assert.Equal(t, tc.reasoning, s.ReasoningTokens, "the reasoning count is kept")
			assert.Equal(t, tc.hidden, s.HiddenTokens)
			assert.Equal(t, 600*ms, s.TTFT)
			require.True(t, s.TPSOK)
			assert.InDelta(t, tc.tps, s.TPS, 1e-6)
			assert.Equal(t, 580*ms/time.Duration(222-tc.hidden-1), s.TPOT)
			assert.InDelta(t, 222/1.18, s.E2ETPS, 1e-9, "E2ETPS counts every token over the whole call")
		})
	}
}

// TestPlausibleUsage: the reported completion_tokens is used only when the
// stream could have carried it (docs/METRICS.md, "Plausible usage");
// otherwise the Sample counts what was streamed and says why.
func TestPlausibleUsage(t *testing.T) {
	start := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	text := func(s string) string { return fmt.Sprintf(`{"choices":[{"index":0,"delta":{"content":%q}}]}`, s) }
	usage := func(completion, reasoning int64) string {
		return fmt.Sprintf(`{"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":%d,"completion_tokens_details":{"reasoning_tokens":%d}}}`, completion, reasoning)
	}
	five := []string{text("Hello"), text(" there"), text(","), text(" my"), text(" friend")} // 22 bytes
	for _, tc := range []struct {
		name   string
		opts   []tps.Option
		chunks []string // output, 100 ms apart from 100 ms
		usage  string
		why    tps.Implausible
		tokens int64
		src    tps.TokenSource
	}{
		{"honest", nil, five, usage(5, 0), tps.ImplausibleNone, 5, tps.TokenSourceUsage},
		{"1e18 for a 5-chunk answer", nil, five, usage(1e18, 0), tps.ImplausibleOverStreamed, 5, tps.TokenSourceChunks},
		{"2^63-1", nil, five, usage(math.MaxInt64, 0), tps.ImplausibleOverStreamed, 5, tps.TokenSourceChunks},
		{"beyond the JSON int64 range", nil, five, `{"usage":{"prompt_tokens":3,"completion_tokens":1e300}}`, tps.ImplausibleOverStreamed, 5, tps.TokenSourceChunks},
		{"implausible, with a tokenizer", []tps.Option{tps.WithTokenizer(words{})}, five, usage(1e18, 0), tps.ImplausibleOverStreamed, 4, tps.TokenSourceTokenizer},
		{"the bytes streamed plus the slack", nil, five, usage(22+tps.UsageSlack, 0), tps.ImplausibleNone, 22 + tps.UsageSlack, tps.TokenSourceUsage},
		{"one more", nil, five, usage(22+tps.UsageSlack+1, 0), tps.ImplausibleOverStreamed, 5, tps.TokenSourceChunks},
		{"hidden reasoning does not need bytes", nil, five, usage(1005, 1000), tps.ImplausibleNone, 1005, tps.TokenSourceUsage},
		{"but the visible rest does", nil, five, usage(2000, 1000), tps.ImplausibleOverStreamed, 5, tps.TokenSourceChunks},
		{"negative completion", nil, five, usage(-5, 0), tps.ImplausibleNegative, 5, tps.TokenSourceChunks},
		{"negative reasoning", nil, five, usage(5, -1), tps.ImplausibleNegative, 5, tps.TokenSourceChunks},
		{"zero with visible output", nil, five, usage(0, 0), tps.ImplausibleNoVisible, 5, tps.TokenSourceChunks},
		{"all of it hidden reasoning, yet output streamed", nil, five, usage(7, 7), tps.ImplausibleNoVisible, 5, tps.TokenSourceChunks},
		{"no output: hidden reasoning only", nil, nil, usage(12, 12), tps.ImplausibleNone, 12, tps.TokenSourceUsage},
		{"no output, and usage claims visible tokens", nil, nil, usage(1e18, 0), tps.ImplausibleOverStreamed, 0, tps.TokenSourceNone},
		{"tool-call arguments count as streamed", nil, []string{
			`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"get_weather","arguments":""}}]}}]}`,
			`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"city\": \"Paris\"}"}}]}}]}`,
		}, usage(40, 0), tps.ImplausibleNone, 40, tps.TokenSourceUsage},
		{"typed content arrays count as streamed (magistral)", nil, []string{
			`{"choices":[{"index":0,"delta":{"content":[{"type":"thinking","thinking":[{"type":"text","text":"Let me think about it"}]}]}}]}`,
			`{"choices":[{"index":0,"delta":{"content":[{"type":"text","text":"Yes."}]}}]}`,
		}, usage(60, 0), tps.ImplausibleNone, 60, tps.TokenSourceUsage},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tm := tps.NewTimer(start, tc.opts...)
			for i, c := range tc.chunks {
				feed(t, tm, start, time.Duration(i+1)*100*ms, c)
			}
			feed(t, tm, start, 900*ms, tc.usage)
			s := tm.Finish(start.Add(time.Second))
			assert.Equal(t, tc.why, s.Implausible, "%v", s.Implausible)
			assert.Equal(t, tc.src, s.TokenSource)
			assert.Equal(t, tc.tokens, s.OutputTokens)
			if tc.why != tps.ImplausibleNone {
				assert.Zero(t, s.ReasoningTokens, "an implausible usage's reasoning count is not kept")
				assert.Zero(t, s.HiddenTokens)
			}
			if s.TPSOK {
				assert.LessOrEqual(t, s.TPS, float64(tc.tokens)/0.1, "no rate beyond what was streamed")
			}
			assert.Equal(t, int64(3), s.InputTokens, "the prompt count is kept")
		})
	}
}

func TestImplausibleString(t *testing.T) {
	for i, want := range map[tps.Implausible]string{tps.ImplausibleNone: "none", tps.ImplausibleOverStreamed: "over-streamed",
		tps.ImplausibleNegative: "negative", tps.ImplausibleNoVisible: "no-visible", tps.Implausible(9): "Implausible(9)"} {
		assert.Equal(t, want, i.String())
	}
}
