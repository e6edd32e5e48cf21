package replay

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// wantBytes renders a cassette's events as the bytes a client must receive.
func wantBytes(c *Cassette) string {
	var b strings.Builder
	for _, e := range c.plan(nil).events {
		b.Write(e.bytes())
	}
	return b.String()
}

func TestBundledCassettes(t *testing.T) {
	names := BundledNames()
	require.GreaterOrEqual(t, len(names), 8)
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			c, err := Bundled(name)
			require.NoError(t, err)
			assert.Equal(t, name, c.Name)

			// Byte-exact with original timing, in fake time.
			synctest.Test(t, func(t *testing.T) {
				h := NewHandler(map[string]Script{"m": c})
				r := rawCall(t.Context(), memClient(h), "http://x/v1", chatBody("m", true, nil))
				require.NoError(t, r.err)
				var got strings.Builder
				for _, e := range r.events {
					got.WriteString(e.block)
				}
				assert.Equal(t, wantBytes(c), got.String())
				plan := c.plan(nil)
				require.Len(t, r.events, len(plan.events)-strayBlanks(plan))
				assert.Equal(t, plan.events[len(plan.events)-1].at, r.events[len(r.events)-1].at)
			})

			// The real client over TCP, as fast as possible.
			srv := NewServer(map[string]Script{"m": c.Fast()})
			defer srv.Close()
			cl := oaClient(srv.URL(), nil)
			text, _, n, err := oaStream(t, cl, "m", openai.ChatCompletionNewParams{})
			if name == "midstream-error" {
				require.Error(t, err)
				assert.Equal(t, "The capital of France is", text)
				return
			}
			require.NoError(t, err)
			assert.Positive(t, n)
			assert.Equal(t, "The capital of France is Paris, a city known for the Eiffel Tower.", text)
			res, err := cl.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
				Model: "m", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
			})
			require.NoError(t, err)
			assert.Equal(t, text, res.Choices[0].Message.Content)
		})
	}
	_, err := Bundled("nope")
	assert.ErrorContains(t, err, "replay: no bundled cassette")
}

// strayBlanks counts raw events that are only a blank line: a raw SSE reader
// folds them into the next event.
func strayBlanks(p *plan) int {
	n := 0
	for _, e := range p.events {
		if e.kind == eventRaw && strings.TrimSpace(e.data) == "" {
			n++
		}
	}
	return n
}

func TestCassettePlaybackModes(t *testing.T) {
	c, err := Bundled("openai-usage")
	require.NoError(t, err)
	last := c.Response.Events[len(c.Response.Events)-1].AtMS
	tests := []struct {
		name string
		c    *Cassette
		want time.Duration
	}{
		{"original", c, time.Duration(last * float64(time.Millisecond))},
		{"scaled x2", c.Scaled(2), time.Duration(2 * last * float64(time.Millisecond))},
		{"scaled x0.5", c.Scaled(0.5), time.Duration(last / 2 * float64(time.Millisecond))},
		{"fast", c.Fast(), 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := NewHandler(map[string]Script{"m": tt.c})
				r := rawCall(t.Context(), memClient(h), "http://x/v1", chatBody("m", true, nil))
				require.NoError(t, r.err)
				assert.InDelta(t, float64(tt.want), float64(r.events[len(r.events)-1].at), float64(time.Microsecond))
			})
		})
	}
}

func TestCassetteEnds(t *testing.T) {
	base := `{"version":1,"request":{"method":"POST","path":"/v1/chat/completions"},"response":{"status":200,"headers":{"Content-Type":["text/event-stream"]},"headers_ms":5,"events":[{"at_ms":10,"data":"{\"choices\":[{\"delta\":{\"content\":\"hi\"}}]}"}],"end":%q,"end_ms":50}}`
	tests := []struct {
		end   string
		check func(t *testing.T, r rawResult, a Attempt)
	}{
		{"eof", func(t *testing.T, r rawResult, a Attempt) {
			require.NoError(t, r.err)
			assert.Equal(t, "ok", a.Outcome)
		}},
		{"reset", func(t *testing.T, r rawResult, a Attempt) {
			require.ErrorIs(t, r.err, errUnexpectedEOF)
			assert.Equal(t, "cut", a.Outcome)
		}},
		{"hang", func(t *testing.T, r rawResult, a Attempt) {
			require.ErrorIs(t, r.err, context.DeadlineExceeded)
			assert.Equal(t, "hang", a.Outcome)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.end, func(t *testing.T) {
			c, err := ParseCassette(strings.NewReader(strings.Replace(base, "%q", `"`+tt.end+`"`, 1)), "t.json")
			require.NoError(t, err)
			synctest.Test(t, func(t *testing.T) {
				h := NewHandler(map[string]Script{"m": c})
				ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
				defer cancel()
				r := rawCall(ctx, memClient(h), "http://x/v1", chatBody("m", true, nil))
				synctest.Wait()
				tt.check(t, r, h.Attempts()[0])
			})
		})
	}
	t.Run("reset before headers", func(t *testing.T) {
		c, err := ParseCassette(strings.NewReader(`{"version":1,"request":{"method":"POST","path":"/"},"response":{"status":0,"headers_ms":0,"events":[],"end":"reset","end_ms":3}}`), "r.json")
		require.NoError(t, err)
		h := NewHandler(map[string]Script{"m": c})
		r := rawCall(context.Background(), memClient(h), "http://x/v1", chatBody("m", true, nil))
		require.ErrorIs(t, r.err, ErrConnReset)
	})
}

func TestCassetteWithFaults(t *testing.T) {
	c, err := Bundled("vllm")
	require.NoError(t, err)
	synctest.Test(t, func(t *testing.T) {
		h := NewHandler(map[string]Script{"m": WithFaults(c, CutAfter(4), SlowFirstToken(time.Second))})
		r := rawCall(t.Context(), memClient(h), "http://x/v1", chatBody("m", true, nil))
		require.ErrorIs(t, r.err, errUnexpectedEOF)
		assert.Equal(t, "The capital of", r.content())
		assert.InDelta(t, float64(time.Second+time.Duration(c.Response.Events[1].AtMS*1e6)), float64(r.events[1].at), 1e3)
	})
}

func TestCorruptCassette(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name, text string
		want       []string
	}{
		{"syntax", "{\n  \"version\": 1,\n  \"request\": {,\n}", []string{"bad.json", "line 3", "invalid JSON"}},
		{"unknown field", `{"version":1,"requets":{}}`, []string{"bad.json", `unknown field "requets"`}},
		{"version", `{"version":7,"response":{"status":200,"events":[]}}`, []string{"bad.json", "version", "unsupported version 7"}},
		{"two kinds", `{"version":1,"response":{"status":200,"events":[{"at_ms":1,"data":"x","comment":"y"}]}}`, []string{"bad.json", "response.events[0]", "exactly one"}},
		{"time goes back", `{"version":1,"response":{"status":200,"events":[{"at_ms":5,"data":"x"},{"at_ms":2,"data":"y"}]}}`, []string{"response.events[1]", "before the previous"}},
		{"bad end", `{"version":1,"response":{"status":200,"events":[],"end":"boom"}}`, []string{"response.end", `unknown end "boom"`}},
		{"bad status", `{"version":1,"response":{"status":999,"events":[]}}`, []string{"response.status", "invalid HTTP status 999"}},
		{"wrong type", `{"version":"1"}`, []string{"bad.json", "line 1", "version"}},
		{"bad base64", `{"version":1,"response":{"status":200,"events":[{"at_ms":1,"raw_base64":"%%%"}]}}`, []string{"raw_base64"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(dir, "bad.json")
			require.NoError(t, os.WriteFile(path, []byte(tt.text), 0o644))
			_, err := LoadCassette(path)
			require.Error(t, err)
			var ce *CassetteError
			require.ErrorAs(t, err, &ce)
			assert.Equal(t, path, ce.Name)
			for _, w := range tt.want {
				assert.Contains(t, err.Error(), w)
			}
			assert.True(t, strings.HasPrefix(err.Error(), "replay: cassette "))
		})
	}
	_, err := LoadCassette(filepath.Join(dir, "missing.json"))
	assert.ErrorContains(t, err, "missing.json")
}

func TestCassetteRoundTripMarshal(t *testing.T) {
	for _, name := range BundledNames() {
		t.Run(name, func(t *testing.T) {
			c, err := Bundled(name)
			require.NoError(t, err)
			b, err := c.Marshal()
			require.NoError(t, err)
			d, err := ParseCassette(bytes.NewReader(b), name)
			require.NoError(t, err)
			assert.Equal(t, c, d)
		})
	}
}

func TestCassetteStatusPlayback(t *testing.T) {
	c, err := ParseCassette(strings.NewReader(`{"version":1,"request":{"method":"POST","path":"/v1/chat/completions"},"response":{"status":429,"headers":{"Retry-After":["3"],"Content-Type":["application/json"],"Content-Length":["999"]},"headers_ms":12,"events":[{"at_ms":12,"raw":"{\"error\":{\"message\":\"slow down\",\"type\":\"requests\",\"code\":\"rate_limit_exceeded\"}}"}],"end":"eof"}}`), "429.json")
	require.NoError(t, err)
	srv := NewServer(map[string]Script{"m": c})
	defer srv.Close()
	for _, stream := range []bool{true, false} {
		r := rawCall(context.Background(), http.DefaultClient, srv.URL(), chatBody("m", stream, nil))
		require.NoError(t, r.err)
		assert.Equal(t, 429, r.status)
		assert.Equal(t, "3", r.header.Get("Retry-After"))
		assert.Contains(t, r.body, "slow down")
	}
}

func TestCassetteOutputDetection(t *testing.T) {
	// SlowFirstToken needs to know which events carry output, raw ones too.
	tests := []struct {
		name  string
		first int // index of the first output event
	}{
		{"tgi-framing", 0},
		{"openai-usage", 1},
		{"deepseek-reasoner", 4},
		{"azure-content-filter", 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Bundled(tt.name)
			require.NoError(t, err)
			p := c.plan(nil)
			for i, e := range p.events {
				if e.output {
					assert.Equal(t, tt.first, i)
					return
				}
			}
			t.Fatal("no output event")
		})
	}
}

// TestNonStreamedAnswerKeepsToolCallsAndChoices: a client that does not ask
// for a stream gets every choice of an n>1 answer, each with its tool calls
// assembled from their fragments, as the provider's own non-streamed answer
// would carry them.
func TestNonStreamedAnswerKeepsToolCallsAndChoices(t *testing.T) {
	ev := func(at int, data string) string {
		b, _ := json.Marshal(map[string]any{"at_ms": at, "data": data})
		return string(b)
	}
	events := []string{
		ev(5, `{"id":"c1","object":"chat.completion.chunk","created":7,"model":"m-1","choices":[{"index":0,"delta":{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"get_weather","arguments":""}}]},"finish_reason":null},{"index":1,"delta":{"role":"assistant","content":"Hel"},"finish_reason":null}]}`),
		ev(6, `{"id":"c1","object":"chat.completion.chunk","created":7,"model":"m-1","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"city\":"}}]},"finish_reason":null},{"index":1,"delta":{"content":"lo"},"finish_reason":null}]}`),
		ev(7, `{"id":"c1","object":"chat.completion.chunk","created":7,"model":"m-1","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"\"Paris\"}"}},{"index":1,"id":"call_b","type":"function","function":{"name":"get_time","arguments":"{}"}}]},"finish_reason":null}]}`),
		ev(8, `{"id":"c1","object":"chat.completion.chunk","created":7,"model":"m-1","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"},{"index":1,"delta":{},"finish_reason":"stop"}]}`),
		ev(9, `{"id":"c1","object":"chat.completion.chunk","created":7,"model":"m-1","choices":[],"usage":{"prompt_tokens":12,"completion_tokens":9,"total_tokens":21}}`),
		ev(10, `[DONE]`),
	}
	c, err := ParseCassette(strings.NewReader(`{"version":1,"request":{"method":"POST","path":"/v1/chat/completions"},"response":{"status":200,"headers":{"Content-Type":["text/event-stream"]},"headers_ms":1,"events":[`+strings.Join(events, ",")+`],"end":"eof","end_ms":11}}`), "tools.json")
	require.NoError(t, err)
	synctest.Test(t, func(t *testing.T) {
		h := NewHandler(map[string]Script{"m": c})
		oc := oaClient("http://x/v1", memClient(h))
		got, err := oc.Chat.Completions.New(t.Context(), openai.ChatCompletionNewParams{
			Model: "m", N: openai.Int(2), Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("weather?")}})
		require.NoError(t, err)
		require.Len(t, got.Choices, 2, "every choice, not merged")
		first, second := got.Choices[0], got.Choices[1]
		assert.Equal(t, "tool_calls", first.FinishReason)
		require.Len(t, first.Message.ToolCalls, 2)
		assert.Equal(t, "call_a", first.Message.ToolCalls[0].ID)
		assert.Equal(t, "get_weather", first.Message.ToolCalls[0].Function.Name)
		assert.JSONEq(t, `{"city":"Paris"}`, first.Message.ToolCalls[0].Function.Arguments)
		assert.Equal(t, "call_b", first.Message.ToolCalls[1].ID)
		assert.Equal(t, "get_time", first.Message.ToolCalls[1].Function.Name)
		assert.Empty(t, first.Message.Content)
		assert.EqualValues(t, 1, second.Index)
		assert.Equal(t, "Hello", second.Message.Content)
		assert.Equal(t, "stop", second.FinishReason)
		assert.Empty(t, second.Message.ToolCalls)
		assert.Equal(t, "c1", got.ID)
		assert.EqualValues(t, 12, got.Usage.PromptTokens)
		assert.EqualValues(t, 9, got.Usage.CompletionTokens)
	})
}
