package tps_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tpsroute/tpsroute/tps"
)

// templateSeeds are Responses and Messages streams whose events a reused
// Chunk reads partly from its template: text deltas that repeat each other
// around new text, sequence numbers and obfuscation, with the events a
// template must not serve in between (another kind, another index, a
// value of another type in a hole, escapes, a quote in the text, usage,
// malformed data).
var templateSeeds = map[tps.Protocol][]string{
	tps.ProtocolResponses: {
		`{"type":"response.created","sequence_number":0,"response":{"id":"resp_1","model":"m"}}`,
		`{"type":"response.output_text.delta","sequence_number":1,"item_id":"msg_1","output_index":0,"content_index":0,"delta":"He","logprobs":[],"obfuscation":"ab"}`,
		`{"type":"response.output_text.delta","sequence_number":2,"item_id":"msg_1","output_index":0,"content_index":0,"delta":"llo","logprobs":[],"obfuscation":"c"}`,
		`{"type":"response.output_text.delta","sequence_number":3,"item_id":"msg_1","output_index":0,"content_index":0,"delta":" \"w\u00e9\"","logprobs":[],"obfuscation":"\n"}`,
		`{"type":"response.output_text.delta","sequence_number":4,"item_id":"msg_1","output_index":0,"content_index":0,"delta":"","logprobs":[],"obfuscation":"d"}`,
		`{"type":"response.output_text.delta","sequence_number":5,"item_id":"msg_1","output_index":0,"content_index":0,"delta":"x","logprobs":[],"obfuscation":"d"}`,
		`{"type":"response.output_text.delta","sequence_number":6,"item_id":"msg_1","output_index":0,"content_index":0,"delta":"y","logprobs":[],"obfuscation":"d"}`,
		`{"type":"response.output_text.delta","sequence_number":7,"item_id":"msg_1","output_index":0,"content_index":0,"delta":"z","logprobs":[],"obfuscation":"d"}`,
		`{"type":"response.output_text.delta","sequence_number":8,"item_id":"msg_1","output_index":0,"content_index":0,"delta":"w","logprobs":[],"obfuscation":"d"}`,
		`{"type":"response.output_text.delta","sequence_number":9,"item_id":"msg_2","output_index":1,"content_index":0,"delta":"v","logprobs":[],"obfuscation":"d"}`,
		`{"type":"response.output_text.delta","sequence_number":"ten","item_id":"msg_2","output_index":1,"content_index":0,"delta":"u","logprobs":[],"obfuscation":"d"}`,
		`{"type":"response.output_text.delta","sequence_number":11,"item_id":"msg_2","output_index":1,"content_index":0,"delta":"t","logprobs":[],"obfuscation":null}`,
		`{"type":"response.output_text.delta","sequence_number":12,"item_id":"msg_2","output_index":1,"content_index":0,"delta":"s\x","logprobs":[],"obfuscation":"d"}`,
		`{"type":"response.output_text.delta","sequence_number":13,"item_id":"msg_2","output_index":1,"content_index":0,"delta":"r","logprobs":[],"obfuscation":"d"`,
		`{"type":"response.output_text.delta","sequence_number":14,"item_id":"msg_2","output_index":1,"content_index":0,"delta":"q","logprobs":[],"obfuscation":"d"}x`,
		`{"type":"response.reasoning_summary_text.delta","sequence_number":15,"item_id":"rs_1","output_index":0,"summary_index":0,"delta":"think"}`,
		`{"type":"response.reasoning_summary_text.delta","sequence_number":16,"item_id":"rs_1","output_index":0,"summary_index":0,"delta":"ing"}`,
		`{"type":"response.function_call_arguments.delta","sequence_number":17,"item_id":"fc_1","output_index":2,"delta":"{\"a\""}`,
		`{"type":"response.output_text.delta","sequence_number":18,"item_id":"msg_2","output_index":1,"content_index":0,"delta":"p","logprobs":[],"obfuscation":"d","response":{"usage":{"output_tokens":3}}}`,
		`{"type":"response.output_text.delta","sequence_number":-1.5e3,"item_id":"msg_2","output_index":1,"content_index":0,"delta":"o","logprobs":[],"obfuscation":"d"}`,
		`{"type":"response.completed","sequence_number":19,"response":{"id":"resp_1","usage":{"input_tokens":5,"output_tokens":9}}}`,
	},
	tps.ProtocolMessages: {
		`{"type":"message_start","message":{"id":"msg_1","model":"claude","usage":{"input_tokens":5,"output_tokens":1}}}`,
		`{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`,
		`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hel"}}`,
		`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"lo"}}`,
		`{"type": "content_block_delta","index":0,"delta":{"type":"text_delta","text":"lo"}}`,
		`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"a"}}`,
		`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"b"}}`,
		`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"c"}}`,
		`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"d"}}`,
		`{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"e"}}`,
		`{"type":"content_block_delta","index":"1","delta":{"type":"text_delta","text":"f"}}`,
		`{"type":"content_block_delta","index":1,"delta":{"type":"thinking_delta","thinking":"g"}}`,
		`{"type":"content_block_delta","index":1,"delta":{"type":"thinking_delta","thinking":"h"}}`,
		`{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{"}}`,
		`{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"i\u00"}}`,
		`{"type":"ping"}`,
		`{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":9}}`,
		`{"type":"message_stop"}`,
		`{"type":"error","error":{"type":"overloaded_error","message":"x"}}`,
	},
}

func parseProto(p tps.Protocol, c *tps.Chunk, data []byte) parsed {
	err := p.Parse(data, c)
	v := *c
	v.Content = append([]byte(nil), c.Content...)
	return parsed{Err: err, Chunk: exported(v)}
}

// TestProtocolParseReusedEqualsFresh: a Chunk reused over a stream's
// events, which reads most text deltas from its template, reads every
// event as a fresh Chunk does, three times over.
func TestProtocolParseReusedEqualsFresh(t *testing.T) {
	for p, events := range templateSeeds {
		var reused tps.Chunk
		for i := range 3 {
			for _, data := range events {
				var fresh tps.Chunk
				want := parseProto(p, &fresh, []byte(data))
				got := parseProto(p, &reused, []byte(data))
				require.Equal(t, want, got, "%s read %d of %s", p, i, data)
			}
		}
	}
}

// FuzzProtocolParseReused checks the same for any event b after a Chunk
// read event a five times (learning a template, then settling its holes).
func FuzzProtocolParseReused(f *testing.F) {
	for p, events := range templateSeeds {
		for i := 1; i < len(events); i++ {
			f.Add(uint8(p), []byte(events[i-1]), []byte(events[i]))
		}
	}
	f.Fuzz(func(t *testing.T, proto uint8, a, b []byte) {
		p := tps.ProtocolResponses
		if proto%2 == 1 {
			p = tps.ProtocolMessages
		}
		var reused, fresh tps.Chunk
		for range 5 {
			_ = p.Parse(a, &reused)
		}
		want := parseProto(p, &fresh, b)
		got := parseProto(p, &reused, b)
		if !equalParsed(want, got) {
			t.Fatalf("%s: after %q, %q reads as\n%+v\nnot\n%+v", p, a, b, got, want)
		}
	})
}

// A stream of 1,000 Responses text deltas is read as a fresh Chunk reads
// each, with sequence numbers and obfuscation that change every event and
// an item id that changes every 100.
func TestProtocolParseReusedLongStream(t *testing.T) {
	var reused tps.Chunk
	for i := range 1000 {
		data := fmt.Sprintf(`{"type":"response.output_text.delta","sequence_number":%d,"item_id":"msg_%d","output_index":%d,"content_index":0,"delta":"t%d","logprobs":[],"obfuscation":"o%d"}`, i, i/100, i/100, i, i*7)
		var fresh tps.Chunk
		require.Equal(t, parseProto(tps.ProtocolResponses, &fresh, []byte(data)), parseProto(tps.ProtocolResponses, &reused, []byte(data)), data)
	}
}
