package answer_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tpsroute/tpsroute/internal/answer"
)

// messagesStream is a Messages stream with a text block, a thinking block
// with its signature and a tool_use whose input starts with an empty
// partial_json, usage split between message_start and message_delta.
const messagesStream = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[],\"model\":\"c\",\"stop_reason\":null,\"stop_sequence\":null,\"usage\":{\"input_tokens\":3,\"cache_read_input_tokens\":5,\"output_tokens\":1}}}\n\n" +
	"event: ping\ndata: {\"type\": \"ping\"}\n\n" +
	"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"thinking\",\"thinking\":\"\",\"signature\":\"\"}}\n\n" +
	"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"thinking_delta\",\"thinking\":\"hmm\"}}\n\n" +
	"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"signature_delta\",\"signature\":\"sig\"}}\n\n" +
	"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n" +
	"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hi \"}}\n\n" +
	"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"text_delta\",\"text\":\"there\"}}\n\n" +
	"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":2,\"content_block\":{\"type\":\"tool_use\",\"id\":\"t\",\"name\":\"f\",\"input\":{}}}\n\n" +
	"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":2,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"\"}}\n\n" +
	"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":2,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"a\\\":1}\"}}\n\n" +
	"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"tool_use\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":9}}\n\n" +
	"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"

// TestAPIAnswers: a buffered Responses stream answers with the object its
// response.completed (or response.incomplete) carries, a Messages stream
// with the message folded from its events; a stream without its final
// answer, blocks out of order or a tool input that is not JSON are errors.
func TestAPIAnswers(t *testing.T) {
	msg, err := answer.MessagesAnswer([]byte(messagesStream))
	require.NoError(t, err)
	assert.JSONEq(t, `{"id":"msg_1","type":"message","role":"assistant","model":"c","stop_reason":"tool_use","stop_sequence":null,
		"usage":{"input_tokens":3,"cache_read_input_tokens":5,"output_tokens":9},
		"content":[{"type":"thinking","thinking":"hmm","signature":"sig"},{"type":"text","text":"Hi there"},
		{"type":"tool_use","id":"t","name":"f","input":{"a":1}}]}`, string(msg))

	resp, err := answer.ResponsesAnswer([]byte("event: response.created\ndata: {\"type\":\"response.created\",\"response\":{\"id\":\"r\",\"status\":\"in_progress\"}}\n\n" +
		"event: response.incomplete\ndata: {\"type\":\"response.incomplete\",\"response\":{\"id\":\"r\",\"status\":\"incomplete\"}}\n\n"))
	require.NoError(t, err)
	assert.JSONEq(t, `{"id":"r","status":"incomplete"}`, string(resp))

	resp, err = answer.ResponsesAnswer([]byte("data: {\"type\":\"response.completed\",\"response\":{\"id\":\"r\"}}\n\n" +
		"data: {\"type\":\"response.output_text.done\",\"text\":\"x\"}\n\n: bye\n\n"))
	require.NoError(t, err)
	assert.Equal(t, `{"id":"r"}`, string(resp), "events after the final one leave its answer")

	for name, bad := range map[string]func() error{
		"responses without completed": func() error {
			_, err := answer.ResponsesAnswer([]byte("data: {\"type\":\"response.created\",\"response\":{}}\n\n"))
			return err
		},
		"messages without start": func() error {
			_, err := answer.MessagesAnswer([]byte("data: {\"type\":\"message_delta\",\"delta\":{}}\n\n"))
			return err
		},
		"block out of order": func() error {
			_, err := answer.MessagesAnswer([]byte("data: {\"type\":\"message_start\",\"message\":{}}\n\ndata: {\"type\":\"content_block_start\",\"index\":2,\"content_block\":{}}\n\n"))
			return err
		},
		"tool input not JSON": func() error {
			_, err := answer.MessagesAnswer([]byte("data: {\"type\":\"message_start\",\"message\":{}}\n\n" +
				"data: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"tool_use\"}}\n\n" +
				"data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\"}}\n\n"))
			return err
		},
	} {
		t.Run(name, func(t *testing.T) { assert.Error(t, bad()) })
	}
}

// FuzzAPIAnswers: folding any bytes never panics, and an answer without
// error is one JSON object.
func FuzzAPIAnswers(f *testing.F) {
	f.Add([]byte(messagesStream))
	f.Add([]byte("data: {\"type\":\"response.completed\",\"response\":{\"id\":\"r\"}}\n\n"))
	f.Add([]byte("data: {\"type\":\"message_start\",\"message\":{}}\n\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":1}}\n\n"))
	f.Add([]byte("data: {\"type\":\"content_block_delta\",\"index\":-1}\n\n"))
	f.Fuzz(func(t *testing.T, stream []byte) {
		for _, answer := range []func([]byte) ([]byte, error){answer.ResponsesAnswer, answer.MessagesAnswer} {
			out, err := answer(stream)
			if err != nil {
				continue
			}
			var v map[string]any
			require.NoError(t, json.Unmarshal(out, &v), "%s", out)
		}
	})
}
