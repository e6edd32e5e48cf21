package tpsroute

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tpsroute/tpsroute/replay"
	"github.com/tpsroute/tpsroute/route"
)

// TestDeltaMatchesCurrent reads every bundled cassette through a routed
// Stream and checks, chunk by chunk, that the text path (Delta) yields
// exactly the text, tool-call fragments, finish reason and usage that
// openai-go's decoded chunk (Current) yields.
func TestDeltaMatchesCurrent(t *testing.T) {
	for _, name := range replay.BundledNames() {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				cas, err := replay.Bundled(name)
				require.NoError(t, err)
				f := newMemFleet()
				url := f.add("p", map[string]replay.Script{"m": cas.Fast()})
				c := mustNew(t, Config{HTTPClient: &http.Client{Transport: f}, Deployments: []route.Deployment{dep("p", "", "m", url)}})
				s := c.Chat.Completions.NewStreaming(context.Background(), userParams("m", "hi"))
				defer s.Close()
				chunks, texts, tools := 0, 0, 0
				for s.Next() {
					chunks++
					d := s.Delta()
					cur := s.Current()
					var content, refusal, finish strings.Builder
					var want []string
					for _, ch := range cur.Choices {
						content.WriteString(ch.Delta.Content)
						refusal.WriteString(ch.Delta.Refusal)
						if ch.FinishReason != "" {
							finish.Reset()
							finish.WriteString(ch.FinishReason)
						}
						for _, tc := range ch.Delta.ToolCalls {
							want = append(want, fmt.Sprintf("%d/%d id=%q type=%q name=%q args=%q",
								ch.Index, tc.Index, tc.ID, tc.Type, tc.Function.Name, tc.Function.Arguments))
						}
					}
					var got []string
					for _, tc := range d.ToolCalls {
						got = append(got, fmt.Sprintf("%d/%d id=%q type=%q name=%q args=%q",
							tc.Choice, tc.Index, tc.ID, tc.Type, tc.Name, tc.Arguments))
					}
					assert.Equal(t, content.String(), string(d.Content), "chunk %d content", chunks)
					assert.Equal(t, refusal.String(), string(d.Refusal), "chunk %d refusal", chunks)
					assert.Equal(t, want, got, "chunk %d tool calls", chunks)
					assert.Equal(t, finish.String(), string(d.FinishReason), "chunk %d finish reason", chunks)
					if d.Usage != nil {
						assert.Equal(t, cur.Usage.CompletionTokens, d.Usage.CompletionTokens, "chunk %d usage", chunks)
						assert.Equal(t, cur.Usage.PromptTokens, d.Usage.PromptTokens, "chunk %d usage", chunks)
					} else {
						assert.False(t, cur.JSON.Usage.Valid() && cur.Usage.TotalTokens > 0, "chunk %d: usage missed", chunks)
					}
					if len(d.Content) > 0 {
						texts++
					}
					tools += len(got)
				}
				t.Logf("%d chunks, %d with text, %d tool-call fragments, err %v", chunks, texts, tools, s.Err())
			})
		})
	}
}

// TestDeltaDecodesEscapes checks the text path against openai-go's decoder
// on escapes, surrogate pairs, several choices and tool-call fragments.
func TestDeltaDecodesEscapes(t *testing.T) {
	body := `data: {"id":"a","choices":[{"index":0,"delta":{"content":"tab\there \"q\" \u00e9 \ud83d\ude00 \ud800x"}}]}` + "\n\n" +
		`data: {"id":"a","choices":[{"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"get\u005fweather","arguments":"{\"city\":"}}]},"index":1},{"index":0,"delta":{"refusal":"no\n"},"finish_reason":"stop"}]}` + "\n\n" +
		`data: {"id":"a","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"\"Paris\"}"}}]},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":3,"completion_tokens":5,"total_tokens":8}}` + "\n\n" +
		"data: [DONE]\n\n"
	s := &Stream{}
	s.sse.Reset(strings.NewReader(body), 0)
	var got []string
	for range 3 {
		require.True(t, s.Next())
		d := s.Delta()
		cur := s.Current()
		want := ""
		for _, ch := range cur.Choices {
			want += ch.Delta.Content
		}
		assert.Equal(t, want, string(d.Content))
		for _, tc := range d.ToolCalls {
			got = append(got, fmt.Sprintf("%d/%d %s %s %s %s", tc.Choice, tc.Index, tc.ID, tc.Type, tc.Name, tc.Arguments))
			assert.Equal(t, cur.Choices[0].Delta.ToolCalls[0].Function.Arguments, string(tc.Arguments))
		}
		if len(d.Refusal) > 0 {
			assert.Equal(t, cur.Choices[1].Delta.Refusal, string(d.Refusal))
			assert.Equal(t, "stop", string(d.FinishReason))
		}
		if d.Usage != nil {
			assert.Equal(t, int64(5), d.Usage.CompletionTokens)
		}
	}
	assert.Equal(t, []string{"1/0 call_1 function get_weather {\"city\":", "0/0    \"Paris\"}"}, got)
}

// TestDeltaAllocatesNothing checks that the text path (Next and Delta)
// allocates nothing per chunk once its buffers have grown.
func TestDeltaAllocatesNothing(t *testing.T) {
	var body bytes.Buffer
	for i := range 2000 {
		fmt.Fprintf(&body, `data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"tok%d \"x\"\n"},"finish_reason":null}]}`+"\n\n", i)
	}
	s := &Stream{}
	s.sse.Reset(bytes.NewReader(body.Bytes()), 0)
	n := 0
	allocs := testing.AllocsPerRun(10, func() {
		for range 100 {
			if !s.Next() {
				t.Fatal("stream ended early")
			}
			n += len(s.Delta().Content)
		}
	})
	assert.Zero(t, allocs, "allocations per 100 chunks")
	assert.Positive(t, n)
}

// TestStreamLinesLongerThanBuffer checks that chunks longer than the
// Stream's read buffer (a large tool-call or logprobs chunk) read whole,
// through Current and Delta alike, and that once the longest line has been
// seen the text path still allocates nothing.
func TestStreamLinesLongerThanBuffer(t *testing.T) {
	var body bytes.Buffer
	var want []string
	for i := range 400 {
		text := fmt.Sprintf("short%d ", i)
		if i%3 == 0 {
			text = strings.Repeat(fmt.Sprintf("long%d ", i), 3*1024/5) // about 3 buffers
		}
		want = append(want, text)
		fmt.Fprintf(&body, `data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":%q},"finish_reason":null}]}`+"\n\n", text)
	}
	s := &Stream{}
	s.sse.Reset(bytes.NewReader(body.Bytes()), 0)
	for i := range 10 { // the longest line is among the first
		require.True(t, s.Next())
		assert.Equal(t, want[i], string(s.Delta().Content))
		assert.Equal(t, want[i], s.Current().Choices[0].Delta.Content)
	}
	i := 10
	allocs := testing.AllocsPerRun(1, func() {
		for range 30 {
			if !s.Next() {
				t.Fatal("stream ended early")
			}
			if string(s.Delta().Content) != want[i] {
				t.Fatalf("chunk %d: got %.40q, want %.40q", i, s.Delta().Content, want[i])
			}
			i++
		}
	})
	assert.Zero(t, allocs, "allocations per 30 chunks")
}
