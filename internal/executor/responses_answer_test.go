package executor_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tpsroute/tpsroute/fallback"
	"github.com/tpsroute/tpsroute/internal/executor"
	"github.com/tpsroute/tpsroute/tps"
)

// respCall is a non-streaming Responses call with Call.Assemble.
var respCall = executor.Call{Body: []byte(`{"model":"m","input":"hi"}`), Assemble: true, Protocol: tps.ProtocolResponses, Build: apiBuild("responses")}

// TestAssembleResponses: a non-streaming Responses call's Body is the
// response object its final event carries, byte for byte as sent
// (response.completed, or response.incomplete for a cut answer), kept as the
// tap scans the stream.
func TestAssembleResponses(t *testing.T) {
	const incomplete = `{"id":"resp_1","status":"incomplete","incomplete_details":{"reason":"max_output_tokens"},"output":[]}`
	for name, tt := range map[string]struct{ stream, want string }{
		"completed": {respCreated + respDelta + respDone,
			`{"id":"resp_1","status":"completed","usage":{"input_tokens":5,"output_tokens":1,"total_tokens":6}}`},
		"incomplete": {respCreated + respDelta + "event: response.incomplete\ndata: {\"type\":\"response.incomplete\",\"response\":" + incomplete + "}\n\n",
			incomplete},
		"spaced and trailing events": {respCreated + respDelta + "data: {\"type\":\"response.completed\", \"response\" : { \"id\" : \"r\" } }\n\n: done\n\n",
			`{ "id" : "r" }`},
	} {
		t.Run(name, func(t *testing.T) {
			e := executor.New(fallback.Options{}, executor.Hooks{})
			res, err := e.Do(context.Background(), planOf(serveSSE(t, tt.stream)), respCall)
			require.NoError(t, err)
			assert.Equal(t, tt.want, readRaw(t, res))
			s := res.Sample()
			assert.EqualValues(t, 1, s.OutputChunks, "timed as a stream")
			assert.False(t, s.Unstreamed)
		})
	}
}

// TestAssembleResponsesNoAnswer: a stream that ends without a response
// object to answer with (a final event whose response is not an object, or
// [DONE] with no final event) fails its attempt with ErrMalformed, and the
// call fails over to the next deployment; none of it reaches the caller.
// After output the attempt fails as any read does then: mid-stream, with
// ErrMidStream; before it, at the first token.
func TestAssembleResponsesNoAnswer(t *testing.T) {
	const noObject = "data: {\"type\":\"response.completed\",\"response\":null}\n\n"
	for name, tt := range map[string]struct {
		stream string
		phase  tps.Phase
		class  fallback.Class
	}{
		"response not an object":           {respCreated + respDelta + noObject, tps.PhaseMidStream, fallback.ClassMidStream},
		"done without a final":             {respCreated + respDelta + "data: [DONE]\n\n", tps.PhaseMidStream, fallback.ClassMidStream},
		"response not an object, no delta": {respCreated + noObject, tps.PhaseFirstToken, fallback.ClassNext},
	} {
		t.Run(name, func(t *testing.T) {
			att := failsOverResponses(t, fallback.Options{}, tt.stream, fallback.ErrMalformed)
			assert.Equal(t, tt.phase, att.Phase)
			assert.Equal(t, tt.class, att.Class)
			assert.Equal(t, tt.phase == tps.PhaseMidStream, errors.Is(att.Err, fallback.ErrMidStream))
		})
	}
}

// TestAssembleResponsesLimits: a response object past Limits.Answer fails
// its attempt with ErrTooLarge, and the call fails over; a long stream whose
// answer is small holds none of the deltas: the bytes it allocates do not
// follow the stream's length.
func TestAssembleResponsesLimits(t *testing.T) {
	limits := fallback.Limits{Answer: 64 << 10}
	big := respCreated + respDelta + `data: {"type":"response.completed","response":{"id":"r","pad":"` + strings.Repeat("x", limits.Answer) + `"}}` + "\n\n"
	failsOverResponses(t, fallback.Options{Limits: limits}, big, fallback.ErrTooLarge)

	allocs := assembleAllocs(t, respCall, func(n int) []byte { return []byte(respCreated + strings.Repeat(respDelta, n) + respDone) })
	assert.LessOrEqual(t, allocs[1000]-allocs[16], 4.0, "16 deltas: %v allocs, 1000 deltas: %v", allocs[16], allocs[1000])
}

// failsOverResponses runs respCall over a deployment that sends stream and
// one that answers in full, checks that the first attempt failed with want
// and the caller read the second's answer, and returns the failed attempt.
func failsOverResponses(t *testing.T, opts fallback.Options, stream string, want error) fallback.Attempt {
	t.Helper()
	e := executor.New(opts, executor.Hooks{})
	res, err := e.Do(context.Background(), planOf(serveSSE(t, stream), serveSSE(t, respCreated+respDelta+respDone)), respCall)
	require.NoError(t, err)
	assert.Contains(t, readRaw(t, res), `"status":"completed"`)
	atts := res.Attempts()
	require.Len(t, atts, 2)
	assert.ErrorIs(t, atts[0].Err, want)
	return atts[0]
}

// TestAssembleResponsesScrubsKey: the deployment's key, echoed in the
// response object in any form a JSON reader decodes back into it, reaches
// the caller as REDACTED.
func TestAssembleResponsesScrubsKey(t *testing.T) {
	key := "sk-a-secret"
	for name, echo := range map[string]string{"plain": key, "json-escape": `sk\u002da-secret`} {
		t.Run(name, func(t *testing.T) {
			d := serveSSE(t, respCreated+respDelta+`data: {"type":"response.completed","response":{"id":"r","instructions":"use `+echo+`"}}`+"\n\n")
			d.APIKey = key
			e := executor.New(fallback.Options{}, executor.Hooks{})
			res, err := e.Do(context.Background(), planOf(d), respCall)
			require.NoError(t, err)
			got := readRaw(t, res)
			assert.NotContains(t, got, "secret")
			assert.True(t, bytes.Contains([]byte(got), []byte("REDACTED")), got)
		})
	}
}
