package tps_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tpsroute/tpsroute/tps"
)

// parsed is what a Chunk's exported fields say after ParseChunk, with its
// error; Chunk holds unexported scratch state, so Chunks are compared
// through this copy.
type parsed struct {
	Err   error
	Chunk tps.Chunk
}

func parseWith(c *tps.Chunk, data []byte) parsed {
	err := tps.ParseChunk(data, c)
	// Copy the exported view: byte slices by value, so that the next parse
	// of the same Chunk cannot change what was read.
	v := *c
	v.Content = append([]byte(nil), c.Content...)
	v.Choices = append([]tps.ChoiceDelta(nil), c.Choices...)
	v.ToolCalls = append([]tps.ToolCallDelta(nil), c.ToolCalls...)
	return parsed{Err: err, Chunk: exported(v)}
}

// exported returns c with its unexported fields zeroed.
func exported(c tps.Chunk) tps.Chunk {
	return tps.Chunk{
		Output: c.Output, OutputDeltas: c.OutputDeltas, Content: c.Content, ToolCall: c.ToolCall,
		Reasoning: c.Reasoning, OutputBytes: c.OutputBytes, ReasoningBytes: c.ReasoningBytes,
		FinishReason: c.FinishReason, HasUsage: c.HasUsage, Usage: c.Usage, HasServer: c.HasServer,
		Server: c.Server, Error: c.Error, ErrorBody: c.ErrorBody, UsageRaw: c.UsageRaw, ID: c.ID,
		Created: c.Created, Model: c.Model, SystemFingerprint: c.SystemFingerprint,
		ServiceTier: c.ServiceTier, Done: c.Done, Malformed: c.Malformed, Event: c.Event,
		Start: c.Start, End: c.End, Unframed: c.Unframed, Choices: c.Choices, ToolCalls: c.ToolCalls,
	}
}

// envelopeSeeds are payload pairs whose second payload repeats, or almost
// repeats, the leading members of the first: the case where a reused Chunk
// skips them.
var envelopeSeeds = [][2]string{
	{ // the common case: the same identity, other text
		`{"id":"c1","object":"chat.completion.chunk","created":17,"model":"m","system_fingerprint":"fp","choices":[{"index":0,"delta":{"content":"a"}}]}`,
		`{"id":"c1","object":"chat.completion.chunk","created":17,"model":"m","system_fingerprint":"fp","choices":[{"index":0,"delta":{"content":"b"}}],"usage":{"completion_tokens":2}}`,
	},
	{ // a number that goes on past the remembered bytes
		`{"created":17,"choices":[]}`,
		`{"created":170,"choices":[]}`,
	},
	{ // a string that goes on past them
		`{"id":"c","choices":[]}`,
		`{"id":"c","x":"y","choices":[]}`,
	},
	{ // the same envelope, then malformed
		`{"id":"c","model":"m","choices":[]}`,
		`{"id":"c","model":"m",}`,
	},
	{ // null and non-string identity values, service tier, unknown keys
		`{"id":null,"service_tier":"default","obfuscation":"x","created":"no","model":1,"choices":[]}`,
		`{"id":null,"service_tier":"default","obfuscation":"x","created":"no","model":1,"usage":null}`,
	},
	{ // space around the comma, an empty id
		`{"id":"" , "model":"m" ,"choices":[]}`,
		`{"id":"" , "model":"m" ,"error":{"message":"m"}}`,
	},
	{ // duplicate keys: the last one wins either way
		`{"id":"a","id":"b","choices":[],"id":"c"}`,
		`{"id":"a","id":"b","choices":[{"delta":{"content":"z"}}],"id":"d"}`,
	},
	{ // the envelope ends the payload: nothing to remember
		`{"id":"a","model":"m"}`,
		`{"id":"a","model":"m"}`,
	},
	{ // the same bytes but as a prefix of something shorter
		`{"id":"a","model":"m","choices":[]}`,
		`{"id":"a","model":"m",`,
	},
	// Lone text deltas, whose shape (the bytes around the text) a reused
	// Chunk remembers.
	{ // the common case: other text, escapes, members after "choices"
		`{"id":"c1","object":"chat.completion.chunk","created":17,"model":"m","system_fingerprint":"fp","choices":[{"index":0,"delta":{"content":"a"},"logprobs":null,"finish_reason":null}],"usage":null,"obfuscation":"x"}`,
		`{"id":"c1","object":"chat.completion.chunk","created":17,"model":"m","system_fingerprint":"fp","choices":[{"index":0,"delta":{"content":"b \"q\" \u00e9\n"},"logprobs":null,"finish_reason":null}],"usage":{"completion_tokens":2},"obfuscation":"yz","id":"c2"}`,
	},
	{ // reasoning, and the same shape with a finish reason after the text
		`{"id":"c","choices":[{"index":1,"delta":{"content":null,"reasoning_content":"think"}}]}`,
		`{"id":"c","choices":[{"index":1,"delta":{"content":null,"reasoning_content":"more"},"finish_reason":"stop"}]}`,
	},
	{ // "reasoning", then the same head with an empty text
		`{"choices":[{"delta":{"reasoning":"r"}}]}`,
		`{"choices":[{"delta":{"reasoning":""}}]}`,
	},
	{ // refusal, then a quote inside the text that ends the string early
		`{"model":"","choices":[{"delta":{"refusal":"no"}}],"x":1}`,
		`{"model":"","choices":[{"delta":{"refusal":"n"o"}}],"x":1}`,
	},
	{ // a control character, then the same tail cut short
		`{"choices":[{"delta":{"content":"a"}}]}`,
		"{\"choices\":[{\"delta\":{\"content\":\"a\x01\"}}]}",
	},
	{ // the tail cut short; the head alone
		`{"choices":[{"delta":{"content":"a"}}]}`,
		`{"choices":[{"delta":{"content":"abc"}}`,
	},
	{ // a second text field after the text, in the tail
		`{"choices":[{"delta":{"content":"a","refusal":""}}]}`,
		`{"choices":[{"delta":{"content":"b","refusal":""}}]}`,
	},
	{ // an empty id, space around the text, more after it
		`{"id":"", "choices" : [ { "delta" : { "content" : "a" } } ] }`,
		`{"id":"", "choices" : [ { "delta" : { "content" : "bb" } } ] , "usage" : { "total_tokens" : 3 } }`,
	},
	{ // the same members after "choices", which set nothing: read whole
		`{"id":"c","choices":[{"delta":{"content":"a"}}],"usage":null,"x":[1,{"y":2}]}`,
		`{"id":"c","choices":[{"delta":{"content":"\u00e9"}}],"usage":null,"x":[1,{"y":2}]}`,
	},
	{ // the same members after "choices", then trailing bytes
		`{"choices":[{"delta":{"content":"a"}}],"usage":null}`,
		`{"choices":[{"delta":{"content":"b"}}],"usage":null} x`,
	},
	{ // members after "choices" that set something are never read whole
		`{"choices":[{"delta":{"content":"a"}}],"usage":{"total_tokens":1},"model":"m","error":null}`,
		`{"choices":[{"delta":{"content":"b"}}],"usage":{"total_tokens":1},"model":"m","error":null}`,
	},
	{ // trailing space after the object is part of the members after
		`{"choices":[{"delta":{"content":"a"}}]} `,
		`{"choices":[{"delta":{"content":"b"}}]}  `,
	},
	{ // the text is a prefix of the next payload's bytes: a longer value
		`{"choices":[{"delta":{"content":"a"},"index":0}]}`,
		`{"choices":[{"delta":{"content":"a"},"index":0,"finish_reason":"length"}]}`,
	},
}

// TestParseChunkReusedEqualsFresh holds ParseChunk to its contract that a
// reused Chunk reads a payload exactly as a fresh one does, whatever the
// payload before it.
func TestParseChunkReusedEqualsFresh(t *testing.T) {
	for _, seed := range envelopeSeeds {
		var reused tps.Chunk
		for i := range 3 { // the second and third reads of b hit the memory
			for _, data := range seed {
				var fresh tps.Chunk
				want := parseWith(&fresh, []byte(data))
				got := parseWith(&reused, []byte(data))
				require.Equal(t, want, got, "read %d of %s", i, data)
			}
		}
	}
}

// FuzzParseChunkReused checks the same over any pair of payloads.
func FuzzParseChunkReused(f *testing.F) {
	for _, seed := range envelopeSeeds {
		f.Add([]byte(seed[0]), []byte(seed[1]))
	}
	f.Fuzz(func(t *testing.T, a, b []byte) {
		var reused, fresh tps.Chunk
		_ = tps.ParseChunk(a, &reused)
		want := parseWith(&fresh, b)
		got := parseWith(&reused, b)
		if !equalParsed(want, got) {
			t.Fatalf("after %q, %q reads as\n%+v\nnot\n%+v", a, b, got, want)
		}
	})
}

func equalParsed(a, b parsed) bool {
	return a.Err == b.Err && assert.ObjectsAreEqual(a.Chunk, b.Chunk)
}
