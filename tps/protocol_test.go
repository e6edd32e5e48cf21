package tps_test

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tpsroute/tpsroute/tps"
)

// named is one SSE event with an event name at ms milliseconds, as the
// Responses and Messages APIs frame every event.
func named(at int, event, json string) step {
	return raw(at, "event: "+event+"\ndata: "+json+"\n\n")
}

// Responses stream events, as OpenAI sends them (docs/STREAM_QUIRKS.md Q29-Q31).
func respCreated(at int) step {
	return named(at, "response.created", `{"type":"response.created","sequence_number":0,"response":{"id":"resp_1","object":"response","created_at":1,"status":"in_progress","model":"gpt-4.1","output":[],"usage":null,"error":null,"incomplete_details":null}}`)
}

func respPreamble(at int) []step {
	return []step{
		respCreated(at),
		named(at, "response.in_progress", `{"type":"response.in_progress","sequence_number":1,"response":{"id":"resp_1","status":"in_progress","usage":null,"error":null}}`),
		named(at, "response.output_item.added", `{"type":"response.output_item.added","sequence_number":2,"output_index":0,"item":{"id":"msg_1","type":"message","status":"in_progress","content":[],"role":"assistant"}}`),
		named(at, "response.content_part.added", `{"type":"response.content_part.added","sequence_number":3,"item_id":"msg_1","output_index":0,"content_index":0,"part":{"type":"output_text","annotations":[],"text":""}}`),
	}
}

func respText(at, seq int, text string) step {
	return named(at, "response.output_text.delta", `{"type":"response.output_text.delta","sequence_number":`+itoa(seq)+`,"item_id":"msg_1","output_index":0,"content_index":0,"delta":"`+text+`","logprobs":[]}`)
}

func respCompleted(at int, usage string) step {
	return named(at, "response.completed", `{"type":"response.completed","sequence_number":20,"response":{"id":"resp_1","object":"response","status":"completed","model":"gpt-4.1-2025-04-14","output":[{"id":"msg_1","type":"message","status":"completed","role":"assistant","content":[{"type":"output_text","annotations":[],"text":"Hello world!"}]}],"error":null,"incomplete_details":null,"usage":`+usage+`}}`)
}

const respUsage = `{"input_tokens":100,"input_tokens_details":{"cached_tokens":64},"output_tokens":3,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":103}`

// Messages stream events, as Anthropic sends them (Q32-Q35).
func msgStart(at int) step {
	return named(at, "message_start", `{"type":"message_start","message":{"id":"msg_01","type":"message","role":"assistant","content":[],"model":"claude-sonnet-4-5","stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":25,"cache_creation_input_tokens":10,"cache_read_input_tokens":200,"output_tokens":1}}}`)
}

func msgPing(at int) step { return named(at, "ping", `{"type": "ping"}`) }

func msgBlockStart(at, index int, block string) step {
	return named(at, "content_block_start", `{"type":"content_block_start","index":`+itoa(index)+`,"content_block":`+block+`}`)
}

func msgDelta(at, index int, delta string) step {
	return named(at, "content_block_delta", `{"type":"content_block_delta","index":`+itoa(index)+`,"delta":`+delta+`}`)
}

func msgText(at int, text string) step {
	return msgDelta(at, 0, `{"type":"text_delta","text":"`+text+`"}`)
}

func msgEnd(at int, stop string, outTokens int) []step {
	return []step{
		named(at, "content_block_stop", `{"type":"content_block_stop","index":0}`),
		named(at, "message_delta", `{"type":"message_delta","delta":{"stop_reason":"`+stop+`","stop_sequence":null},"usage":{"output_tokens":`+itoa(outTokens)+`}}`),
		named(at, "message_stop", `{"type":"message_stop"}`),
	}
}

func itoa(n int) string {
	if n < 10 {
		return string(rune('0' + n))
	}
	return itoa(n/10) + string(rune('0'+n%10))
}

func cat(parts ...any) []step {
	var out []step
	for _, p := range parts {
		switch p := p.(type) {
		case step:
			out = append(out, p)
		case []step:
			out = append(out, p...)
		}
	}
	return out
}

// TestProtocolTap: a Tap with WithProtocol times Responses and Messages
// streams by chat's definitions: TTFT at the first output event (never at
// response.created, a ping, message_start or an empty input_json_delta),
// output tokens from the protocol's usage, input and cached tokens, the end,
// and every in-stream failure as an error, never a truncated success.
func TestProtocolTap(t *testing.T) {
	type want struct {
		ttft                   int // ms
		out, in, cached, write int64
		reasoning, hidden      int64
		finish                 string
		end                    tps.End
		truncated              bool
		errCode                string
		phase                  tps.Phase
		outputChunks           int64
		cache                  tps.CacheState
	}
	tests := []struct {
		name  string
		proto tps.Protocol
		steps []step
		want  want
	}{
		{
			name: "responses text (Q29 output-free events first, Q30 sequence_number)", proto: tps.ProtocolResponses,
			steps: cat(respPreamble(150), respText(400, 4, "Hel"), respText(450, 5, "lo wor"), respText(500, 6, "ld!"),
				named(510, "response.output_text.done", `{"type":"response.output_text.done","sequence_number":7,"item_id":"msg_1","output_index":0,"content_index":0,"text":"Hello world!"}`),
				respCompleted(520, respUsage)),
			want: want{ttft: 400, out: 3, in: 100, cached: 64, finish: "completed", end: tps.EndEOF, outputChunks: 3, cache: tps.CacheWarm},
		},
		{
			name: "responses reasoning summary and tool-call arguments (Q31)", proto: tps.ProtocolResponses,
			steps: cat(respCreated(150),
				named(160, "response.output_item.added", `{"type":"response.output_item.added","sequence_number":1,"output_index":0,"item":{"id":"rs_1","type":"reasoning","summary":[]}}`),
				named(170, "response.reasoning_summary_part.added", `{"type":"response.reasoning_summary_part.added","sequence_number":2,"item_id":"rs_1","output_index":0,"summary_index":0,"part":{"type":"summary_text","text":""}}`),
				named(900, "response.reasoning_summary_text.delta", `{"type":"response.reasoning_summary_text.delta","sequence_number":3,"item_id":"rs_1","output_index":0,"summary_index":0,"delta":"**Weighing**"}`),
				named(950, "response.output_item.added", `{"type":"response.output_item.added","sequence_number":4,"output_index":1,"item":{"id":"fc_1","type":"function_call","call_id":"call_1","name":"get_weather","arguments":""}}`),
				named(960, "response.function_call_arguments.delta", `{"type":"response.function_call_arguments.delta","sequence_number":5,"item_id":"fc_1","output_index":1,"delta":""}`),
				named(1000, "response.function_call_arguments.delta", `{"type":"response.function_call_arguments.delta","sequence_number":6,"item_id":"fc_1","output_index":1,"delta":"{\"city\":"}`),
				named(1100, "response.function_call_arguments.delta", `{"type":"response.function_call_arguments.delta","sequence_number":7,"item_id":"fc_1","output_index":1,"delta":"\"Paris\"}"}`),
				respCompleted(1200, `{"input_tokens":50,"input_tokens_details":{"cached_tokens":0},"output_tokens":70,"output_tokens_details":{"reasoning_tokens":64},"total_tokens":120}`)),
			want: want{ttft: 900, out: 70, in: 50, reasoning: 64, hidden: 52, finish: "completed", end: tps.EndEOF, outputChunks: 3, cache: tps.CacheCold},
		},
		{
			name: "responses incomplete at max_output_tokens is an end", proto: tps.ProtocolResponses,
			steps: cat(respPreamble(150), respText(400, 4, "Hel"), respText(450, 5, "lo"),
				named(500, "response.incomplete", `{"type":"response.incomplete","sequence_number":6,"response":{"id":"resp_1","status":"incomplete","incomplete_details":{"reason":"max_output_tokens"},"error":null,"usage":{"input_tokens":9,"output_tokens":2,"total_tokens":11}}}`)),
			want: want{ttft: 400, out: 2, in: 9, finish: "max_output_tokens", end: tps.EndEOF, outputChunks: 2},
		},
		{
			name: "responses failed mid-stream", proto: tps.ProtocolResponses,
			steps: cat(respPreamble(150), respText(400, 4, "Hel"),
				named(500, "response.failed", `{"type":"response.failed","sequence_number":5,"response":{"id":"resp_1","status":"failed","error":{"code":"server_error","message":"The model failed to generate a response."},"usage":null}}`)),
			want: want{ttft: 400, out: 1, end: tps.EndError, errCode: "server_error", phase: tps.PhaseMidStream, outputChunks: 1},
		},
		{
			name: "responses error event with HTTP 200 (Q34)", proto: tps.ProtocolResponses,
			steps: cat(respCreated(150),
				named(300, "error", `{"type":"error","sequence_number":1,"code":"rate_limit_exceeded","message":"Rate limit reached","param":null}`)),
			want: want{end: tps.EndError, errCode: "rate_limit_exceeded", phase: tps.PhaseFirstToken},
		},
		{
			name: "responses cut before response.completed is truncated", proto: tps.ProtocolResponses,
			steps: cat(respPreamble(150), respText(400, 4, "Hel"), respText(450, 5, "lo")),
			want:  want{ttft: 400, out: 2, end: tps.EndEOF, truncated: true, outputChunks: 2},
		},
		{
			name: "messages text, pings, usage split (Q32 Q33)", proto: tps.ProtocolMessages,
			steps: cat(msgStart(150), msgPing(160), msgBlockStart(170, 0, `{"type":"text","text":""}`), msgPing(300),
				msgText(400, "Hello"), msgPing(420), msgText(450, " world"), msgText(500, "!"), msgEnd(510, "end_turn", 15)),
			want: want{ttft: 400, out: 15, in: 235, cached: 200, write: 10, finish: "end_turn", end: tps.EndDone, outputChunks: 3, cache: tps.CacheWarm},
		},
		{
			name: "messages thinking, signature and tool input (Q31)", proto: tps.ProtocolMessages,
			steps: cat(msgStart(150), msgBlockStart(160, 0, `{"type":"thinking","thinking":"","signature":""}`),
				msgDelta(700, 0, `{"type":"thinking_delta","thinking":"Let me see."}`),
				msgDelta(710, 0, `{"type":"signature_delta","signature":"EqQBCgIYAhIM"}`),
				named(720, "content_block_stop", `{"type":"content_block_stop","index":0}`),
				msgBlockStart(730, 1, `{"type":"tool_use","id":"toolu_1","name":"get_weather","input":{}}`),
				msgDelta(740, 1, `{"type":"input_json_delta","partial_json":""}`),
				msgDelta(800, 1, `{"type":"input_json_delta","partial_json":"{\"city\": \"Par"}`),
				msgDelta(850, 1, `{"type":"input_json_delta","partial_json":"is\"}"}`),
				msgEnd(860, "tool_use", 40)),
			want: want{ttft: 700, out: 40, in: 235, cached: 200, write: 10, finish: "tool_use", end: tps.EndDone, outputChunks: 3, cache: tps.CacheWarm},
		},
		{
			name: "messages overloaded_error event after output (Q34)", proto: tps.ProtocolMessages,
			steps: cat(msgStart(150), msgText(400, "Hel"),
				raw(500, "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n")),
			want: want{ttft: 400, out: 1, in: 235, cached: 200, write: 10, end: tps.EndError, errCode: "", phase: tps.PhaseMidStream, outputChunks: 1, cache: tps.CacheWarm},
		},
		{
			name: "messages cut before message_delta is truncated", proto: tps.ProtocolMessages,
			steps: cat(msgStart(150), msgText(400, "Hel"), msgText(450, "lo")),
			want:  want{ttft: 400, out: 2, in: 235, cached: 200, write: 10, end: tps.EndEOF, truncated: true, outputChunks: 2, cache: tps.CacheWarm},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, out := runTap(t, tt.steps, nil, tps.WithProtocol(tt.proto))
			assert.Equal(t, body(tt.steps), out, "bytes pass through unchanged")
			w := tt.want
			got := want{
				ttft: int(s.TTFT / ms), out: s.OutputTokens, in: s.InputTokens, cached: s.CachedTokens, write: s.CacheCreationTokens,
				reasoning: s.ReasoningTokens, hidden: s.HiddenTokens, finish: s.FinishReason, end: s.End, truncated: s.Truncated,
				phase: s.ErrPhase, outputChunks: s.OutputChunks, cache: s.Cache,
			}
			switch {
			case tt.proto == tps.ProtocolResponses && s.Chunks > 0:
				assert.Equal(t, "resp_1", s.ID)
			case tt.proto == tps.ProtocolMessages:
				assert.Equal(t, "msg_01", s.ID)
			}
			var se *tps.StreamError
			if s.Err != nil {
				require.True(t, errors.As(s.Err, &se), "%v", s.Err)
				got.errCode = se.Code
				if tt.proto == tps.ProtocolMessages {
					assert.Equal(t, "overloaded_error", se.Type)
				}
			}
			assert.Equal(t, w, got)
		})
	}
}

// TestProtocolChatUnchanged: the same Responses events read as chat chunks
// carry no output, so the protocol, not the payload, decides the rules.
func TestProtocolChatUnchanged(t *testing.T) {
	steps := cat(respPreamble(150), respText(400, 4, "Hel"), respCompleted(520, respUsage))
	s, _ := runTap(t, steps, nil)
	assert.Zero(t, s.OutputChunks)
	assert.Empty(t, s.ID, "no id is kept for chat")
	assert.Equal(t, time.Duration(0), s.TTFT)
}

func TestProtocolString(t *testing.T) {
	assert.Equal(t, "chat", tps.ProtocolChat.String())
	assert.Equal(t, "responses", tps.ProtocolResponses.String())
	assert.Equal(t, "messages", tps.ProtocolMessages.String())
	assert.Equal(t, "Protocol(9)", tps.Protocol(9).String())
}
