package tpsroute

import (
	"context"
	"io"
	"net/http"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"

	"github.com/tpsroute/tpsroute/replay"
	"github.com/tpsroute/tpsroute/route"
)

// TestNonStreamedAnswerAccumulatesQuirks: a non-streamed answer is built from
// the provider's stream, whatever shape its chunks take
// (docs/STREAM_QUIRKS.md Q20, Q21, Q9): two choices interleaved one per chunk,
// a tool call sent in fragments with id, type and name only in the first,
// two tool calls sent whole in one chunk without index or type (Mistral), and
// usage sent twice (the last one is kept, never summed).
func TestNonStreamedAnswerAccumulatesQuirks(t *testing.T) {
	data := []string{
		`{"id":"c1","object":"chat.completion.chunk","created":7,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}`,
		`{"id":"c1","object":"chat.completion.chunk","created":7,"model":"m","choices":[{"index":1,"delta":{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"get_weather","arguments":""}}]}}]}`,
		`{"id":"c1","object":"chat.completion.chunk","created":7,"model":"m","choices":[{"index":0,"delta":{"content":"Hel"}}]}`,
		`{"id":"c1","object":"chat.completion.chunk","created":7,"model":"m","choices":[{"index":1,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"city\""}}]}}]}`,
		`{"id":"c1","object":"chat.completion.chunk","created":7,"model":"m","choices":[{"index":0,"delta":{"content":"lo"}}]}`,
		`{"id":"c1","object":"chat.completion.chunk","created":7,"model":"m","choices":[{"index":1,"delta":{"tool_calls":[{"index":0,"function":{"arguments":":\"Paris\"}"}}]}}]}`,
		`{"id":"c1","object":"chat.completion.chunk","created":7,"model":"m","choices":[{"index":0,"delta":{"tool_calls":[{"id":"call_2","function":{"name":"get_time","arguments":"{\"tz\":\"CET\"}"}},{"id":"call_3","function":{"name":"get_date","arguments":"{}"}}]}}]}`,
		`{"id":"c1","object":"chat.completion.chunk","created":7,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":{"prompt_tokens":9,"completion_tokens":3,"total_tokens":12}}`,
		`{"id":"c1","object":"chat.completion.chunk","created":7,"model":"m","choices":[{"index":1,"delta":{},"finish_reason":"tool_calls"}]}`,
		`{"id":"c1","object":"chat.completion.chunk","created":7,"model":"m","choices":[],"usage":{"prompt_tokens":9,"completion_tokens":6,"total_tokens":15}}`,
	}
	events := make([]replay.Event, 0, len(data)+1)
	for i := range data {
		events = append(events, replay.Event{AtMS: float64(10 * i), Data: &data[i]})
	}
	done := "[DONE]"
	events = append(events, replay.Event{AtMS: float64(10 * len(data)), Data: &done})
	cas := &replay.Cassette{Version: replay.CassetteVersion, Response: replay.CassetteResponse{
		Status: http.StatusOK, Headers: http.Header{"Content-Type": {"text/event-stream"}}, Events: events, End: "eof",
	}}

	synctest.Test(t, func(t *testing.T) {
		f := newMemFleet()
		u := f.add("a", map[string]replay.Script{"m": cas})
		cfg := Config{HTTPClient: &http.Client{Transport: f}, Deployments: []route.Deployment{dep("a", "us", "m", u)}}
		c := mustNew(t, cfg)
		r, err := c.Do(context.Background(), []byte(`{"model":"m","n":2,"messages":[{"role":"user","content":"hi"}]}`))
		require.NoError(t, err)
		raw, err := io.ReadAll(r.Body)
		require.NoError(t, err)
		require.NoError(t, r.Body.Close())
		body := gjson.ParseBytes(raw)

		assert.Equal(t, "chat.completion", body.Get("object").Str)
		require.Len(t, body.Get("choices").Array(), 2, "two choices, not merged")
		c0, c1 := body.Get("choices.0"), body.Get("choices.1")
		assert.EqualValues(t, 0, c0.Get("index").Int())
		assert.Equal(t, "Hello", c0.Get("message.content").Str)
		assert.Equal(t, "stop", c0.Get("finish_reason").Str)
		assert.EqualValues(t, 1, c1.Get("index").Int())
		assert.Equal(t, "tool_calls", c1.Get("finish_reason").Str)
		calls := c1.Get("message.tool_calls").Array()
		require.Len(t, calls, 1, "fragments joined")
		assert.Equal(t, "call_1", calls[0].Get("id").Str)
		assert.Equal(t, "function", calls[0].Get("type").Str)
		assert.Equal(t, "get_weather", calls[0].Get("function.name").Str)
		assert.Equal(t, `{"city":"Paris"}`, calls[0].Get("function.arguments").Str)
		whole := c0.Get("message.tool_calls").Array()
		require.Len(t, whole, 2, "whole calls without index are told apart by position")
		assert.Equal(t, "call_2", whole[0].Get("id").Str)
		assert.Equal(t, "function", whole[0].Get("type").Str, "type defaults to function")
		assert.Equal(t, "get_time", whole[0].Get("function.name").Str)
		assert.Equal(t, `{"tz":"CET"}`, whole[0].Get("function.arguments").Str)
		assert.Equal(t, "call_3", whole[1].Get("id").Str)
		assert.Equal(t, "get_date", whole[1].Get("function.name").Str)
		assert.EqualValues(t, 6, body.Get("usage.completion_tokens").Int(), "the last usage, never summed")
		assert.EqualValues(t, 15, body.Get("usage.total_tokens").Int())
	})
}
