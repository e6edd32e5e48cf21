package replay

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tpsroute/tpsroute/tps"
)

// TestProfileAPIStyles: the Responses and Messages styles stream the
// profile's answer in those APIs' event shapes, every event named, so that
// a Tap with the API's protocol measures the profile's TTFT, tokens and end;
// cut at the output cap they end as the API does; ErrorEventAt sends the
// API's error event.
func TestProfileAPIStyles(t *testing.T) {
	tests := []struct {
		name   string
		style  Style
		proto  tps.Protocol
		path   string
		body   string
		faults []Fault
		finish string
		out    int64
		end    tps.End
		err    bool
	}{
		{"responses", Responses, tps.ProtocolResponses, "/v1/responses", `{"model":"m","stream":true,"input":"hi"}`, nil, "completed", 8, tps.EndEOF, false},
		{"responses at the cap", Responses, tps.ProtocolResponses, "/v1/responses", `{"model":"m","stream":true,"input":"hi","max_output_tokens":3}`, nil, "max_output_tokens", 3, tps.EndEOF, false},
		{"responses error event", Responses, tps.ProtocolResponses, "/v1/responses", `{"model":"m","stream":true,"input":"hi"}`, []Fault{ErrorEventAt(7, Responses)}, "", 2, tps.EndError, true},
		{"messages", Messages, tps.ProtocolMessages, "/v1/messages", `{"model":"m","stream":true,"max_tokens":64,"messages":[{"role":"user","content":"hi"}]}`, nil, "end_turn", 8, tps.EndDone, false},
		{"messages at the cap", Messages, tps.ProtocolMessages, "/v1/messages", `{"model":"m","stream":true,"max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`, nil, "max_tokens", 5, tps.EndDone, false},
		{"messages overloaded", Messages, tps.ProtocolMessages, "/v1/messages", `{"model":"m","stream":true,"max_tokens":64,"messages":[{"role":"user","content":"hi"}]}`, []Fault{ErrorEventAt(6, Messages)}, "", 1, tps.EndError, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var s Script = &Profile{TTFT: 500 * time.Millisecond, TPS: 100, OutputTokens: 8, Style: tt.style, Model: "m"}
				if tt.faults != nil {
					s = WithFaults(s, tt.faults...)
				}
				h := NewHandler(map[string]Script{"m": s})
				req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, "http://x"+tt.path, strings.NewReader(tt.body))
				require.NoError(t, err)
				start := time.Now()
				resp, err := memClient(h).Do(req)
				require.NoError(t, err)
				var sample tps.Sample
				var names []string
				tap := tps.NewTap(resp.Body, start, func(s tps.Sample) { sample = s }, tps.WithProtocol(tt.proto),
					tps.WithObserver(func(_ time.Time, c *tps.Chunk) { names = append(names, string(c.Event)) }))
				raw, err := io.ReadAll(tap)
				require.NoError(t, err)
				require.NoError(t, tap.Close())
				assert.NotContains(t, string(raw), "[DONE]")
				for _, n := range names {
					assert.NotEmpty(t, n, "every event is named")
				}
				assert.Equal(t, tt.finish, sample.FinishReason)
				assert.Equal(t, tt.end, sample.End)
				assert.Equal(t, 500*time.Millisecond, sample.TTFT)
				if tt.err {
					var se *tps.StreamError
					require.True(t, errors.As(sample.Err, &se), "%v", sample.Err)
					assert.Equal(t, tps.PhaseMidStream, sample.ErrPhase)
					assert.Equal(t, tt.out, sample.OutputChunks)
					return
				}
				require.NoError(t, sample.Err)
				assert.Equal(t, tt.out, sample.OutputTokens)
				assert.Equal(t, tps.TokenSourceUsage, sample.TokenSource)
				assert.Positive(t, sample.InputTokens)
				assert.Equal(t, Text(int(tt.out)), deltaText(raw, tt.proto))
			})
		})
	}
}

// deltaText joins the text deltas of a Responses or Messages stream.
func deltaText(raw []byte, proto tps.Protocol) string {
	var b []byte
	var c tps.Chunk
	tps.ForEachData(raw, func(data []byte) {
		var err error
		if proto == tps.ProtocolResponses {
			err = tps.ParseResponsesEvent(data, &c)
		} else {
			err = tps.ParseMessagesEvent(data, &c)
		}
		if err == nil && c.Output {
			b = c.AppendText(b)
		}
	})
	return string(b)
}

func TestStyleNames(t *testing.T) {
	assert.Equal(t, "responses", Responses.String())
	assert.Equal(t, "messages", Messages.String())
}
