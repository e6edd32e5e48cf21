package executor_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tpsroute/tpsroute/fallback"
	"github.com/tpsroute/tpsroute/internal/executor"
	"github.com/tpsroute/tpsroute/route"
	"github.com/tpsroute/tpsroute/tps"
)

// Responses and Messages streams, as their APIs frame them.
const (
	respCreated = "event: response.created\ndata: {\"type\":\"response.created\",\"sequence_number\":0,\"response\":{\"id\":\"resp_1\",\"status\":\"in_progress\",\"usage\":null,\"error\":null}}\n\n"
	respDelta   = "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"sequence_number\":1,\"item_id\":\"msg_1\",\"output_index\":0,\"content_index\":0,\"delta\":\"Hello\"}\n\n"
	respDone    = "event: response.completed\ndata: {\"type\":\"response.completed\",\"sequence_number\":2,\"response\":{\"id\":\"resp_1\",\"status\":\"completed\",\"usage\":{\"input_tokens\":5,\"output_tokens\":1,\"total_tokens\":6}}}\n\n"
	respFailed  = "event: response.failed\ndata: {\"type\":\"response.failed\",\"sequence_number\":1,\"response\":{\"id\":\"resp_1\",\"status\":\"failed\",\"error\":{\"code\":\"server_error\",\"message\":\"boom\"}}}\n\n"

	msgStart      = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"model\":\"claude\",\"usage\":{\"input_tokens\":5,\"output_tokens\":1}}}\n\n"
	msgPing       = "event: ping\ndata: {\"type\": \"ping\"}\n\n"
	msgDelta      = "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hello\"}}\n\n"
	msgEnd        = "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":1}}\n\nevent: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"
	msgOverloaded = "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n"
)

// protocolServer answers POST /<provider>/v1/<api> with the status and body
// given for that provider. A body holding "|" is sent in two parts: the rest
// only once gate is closed (after the caller has read the first part).
func protocolServer(t *testing.T, gate chan struct{}, answers map[string]struct {
	status int
	body   string
}) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		a, ok := answers[strings.Split(strings.TrimPrefix(r.URL.Path, "/"), "/")[0]]
		if !ok {
			http.NotFound(w, r)
			return
		}
		if a.status != http.StatusOK {
			w.WriteHeader(a.status)
			_, _ = io.WriteString(w, a.body)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		first, rest, split := strings.Cut(a.body, "|")
		_, _ = io.WriteString(w, first)
		if split {
			w.(http.Flusher).Flush()
			select {
			case <-gate:
			case <-r.Context().Done():
				return
			}
		}
		_, _ = io.WriteString(w, rest)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// apiBuild posts to the deployment's BaseURL joined with path.
func apiBuild(path string) executor.BuildFunc {
	return func(ctx context.Context, d route.Deployment, body []byte) (*http.Request, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, d.BaseURL+"/"+path, bytes.NewReader(body))
		if err == nil {
			req.Header.Set("Content-Type", "application/json")
		}
		return req, err
	}
}

// TestProtocolFailover: the Executor walks a plan of Responses or Messages
// deployments by each API's events: a failure event before the first output
// delta (response.failed, event: error) or an HTTP 529 fails over invisibly,
// the caller reading one deployment's stream only; after the first output
// delta the failure is a mid-stream error, never a clean end: a Responses
// stream is not continued (that API has no assistant prefill), even under
// MidStreamContinue, and a Messages stream is continued by prefill.
func TestProtocolFailover(t *testing.T) {
	type answer = struct {
		status int
		body   string
	}
	tests := []struct {
		name     string
		proto    tps.Protocol
		path     string
		answers  map[string]answer
		want     string // the stream the caller reads
		attempts int
		mid      bool // the read ends with ErrMidStream
	}{
		{name: "responses failed before output", proto: tps.ProtocolResponses, path: "responses",
			answers:  map[string]answer{"a": {200, respCreated + respFailed}, "b": {200, respCreated + respDelta + respDone}},
			want:     respCreated + respDelta + respDone,
			attempts: 2},
		{name: "responses failed after output", proto: tps.ProtocolResponses, path: "responses",
			answers:  map[string]answer{"a": {200, respCreated + respDelta + "|" + respFailed}, "b": {200, respCreated + respDelta + respDone}},
			want:     respCreated + respDelta,
			attempts: 1, mid: true},
		{name: "responses cut after output", proto: tps.ProtocolResponses, path: "responses",
			answers:  map[string]answer{"a": {200, respCreated + respDelta + "|"}, "b": {200, respCreated + respDelta + respDone}},
			want:     respCreated + respDelta,
			attempts: 1, mid: true},
		{name: "responses failed after undelivered output fails over", proto: tps.ProtocolResponses, path: "responses",
			answers:  map[string]answer{"a": {200, respCreated + respDelta + respFailed}, "b": {200, respCreated + respDelta + respDone}},
			want:     respCreated + respDelta + respDone,
			attempts: 2},
		{name: "messages 529 then overloaded event before output", proto: tps.ProtocolMessages, path: "messages",
			answers: map[string]answer{
				"a": {529, `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`},
				"b": {200, msgStart + msgPing + msgOverloaded},
				"c": {200, msgStart + msgPing + msgDelta + msgEnd}},
			want:     msgStart + msgPing + msgDelta + msgEnd,
			attempts: 3},
		{name: "messages overloaded after output continues", proto: tps.ProtocolMessages, path: "messages",
			answers:  map[string]answer{"a": {200, msgStart + msgDelta + "|" + msgOverloaded}, "b": {200, msgStart + msgDelta + msgEnd}},
			want:     msgStart + msgDelta + msgDelta + msgEnd, // b's message_start dropped
			attempts: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			gate := make(chan struct{})
			srv := protocolServer(t, gate, tt.answers)
			var ds []route.Deployment
			for _, p := range []string{"a", "b", "c"} {
				if _, ok := tt.answers[p]; ok {
					d := dep(p, "m")
					d.BaseURL = srv.URL + "/" + p + "/v1"
					d.Capabilities.AssistantPrefill = true
					ds = append(ds, d)
				}
			}
			ex := executor.New(fallback.Options{MidStream: fallback.MidStreamContinue}, executor.Hooks{Transport: srv.Client().Transport})
			res, err := ex.Do(context.Background(), planOf(ds...), executor.Call{
				Body: []byte(`{"model":"m","input":"hi","messages":[{"role":"user","content":"hi"}]}`), Stream: true, Protocol: tt.proto, Build: apiBuild(tt.path),
			})
			require.NoError(t, err)
			var got []byte
			if first, _, cut := strings.Cut(tt.answers["a"].body, "|"); cut { // read the first output before the failure is sent
				got = make([]byte, len(first))
				_, err = io.ReadFull(res.Body, got)
				require.NoError(t, err)
			}
			close(gate)
			rest, err := io.ReadAll(res.Body)
			got = append(got, rest...)
			require.NoError(t, res.Body.Close())
			assert.Equal(t, tt.want, string(got))
			if tt.mid {
				require.Error(t, err)
				assert.True(t, errors.Is(err, fallback.ErrMidStream), "%v", err)
				var fe *fallback.Error
				require.ErrorAs(t, err, &fe)
				assert.Equal(t, fallback.ContinuationUnsupported, fe.Continuation(), "the reason: the API has no prefill")
				assert.Contains(t, err.Error(), "a Responses stream is not continued (the Responses API has no assistant prefill)")
			} else {
				require.NoError(t, err)
			}
			assert.Equal(t, tt.attempts, res.AttemptCount())
		})
	}
}
