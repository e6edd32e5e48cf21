package replay

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tpsroute/tpsroute/internal/payload"
	"github.com/tpsroute/tpsroute/internal/sse"
	"github.com/tpsroute/tpsroute/internal/tpsseam"
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
					tpsseam.WithObserver.(func(func(time.Time, *payload.Chunk)) tps.Option)(func(_ time.Time, c *payload.Chunk) { names = append(names, string(c.Event)) }))
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
	var c payload.Chunk
	sse.ForEachData(raw, func(data []byte) {
		var err error
		if proto == tps.ProtocolResponses {
			err = payload.ParseResponsesEvent(data, &c)
		} else {
			err = payload.ParseMessagesEvent(data, &c)
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

// recordAPI records one call of a Profile in style through a Recorder in
// a synctest bubble (exact virtual timing) and returns the cassette.
func recordAPI(t *testing.T, style Style, path, body string) *Cassette {
	t.Helper()
	dir := t.TempDir()
	synctest.Test(t, func(t *testing.T) {
		h := NewHandler(map[string]Script{"m": &Profile{TTFT: 500 * time.Millisecond, TPS: 10, OutputTokens: 6, Style: style}})
		rec := NewRecorder(h.Transport(), dir)
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, "http://x"+path, strings.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("X-Api-Key", "sk-ant-secret")
		req.Header.Set("Authorization", "Bearer sk-secret")
		resp, err := (&http.Client{Transport: rec}).Do(req)
		require.NoError(t, err)
		_, err = io.ReadAll(resp.Body)
		require.NoError(t, err)
		require.NoError(t, resp.Body.Close())
		require.NoError(t, rec.Err())
	})
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	require.NoError(t, err)
	require.Len(t, files, 1)
	raw, err := os.ReadFile(files[0])
	require.NoError(t, err)
	assert.NotContains(t, string(raw), "sk-ant-secret")
	assert.NotContains(t, string(raw), "sk-secret")
	c, err := LoadCassette(files[0])
	require.NoError(t, err)
	return c
}

// TestCassetteAPIFaults: a Responses or Messages cassette, recorded with
// its event names and timing, replays with the faults acting on the API's
// output events as the tap defines them (tps.WithProtocol): the first
// output delta is TTFT, so SlowFirstToken and keep-alives delay it and
// nothing before it; CutAfter and StallAfter count the API's events;
// SlowAfter spaces the output deltas; ErrorEventAt sends the API's error
// event. Played to a request without "stream", the cassette answers the
// API's own object: the response, or the message folded from the events,
// and an error event becomes an error status in the API's shape.
func TestCassetteAPIFaults(t *testing.T) {
	type want struct {
		ttft time.Duration
		last time.Duration // the last output event; 0: not checked
		end  tps.End
		err  bool
	}
	apis := []struct {
		name  string
		style Style
		proto tps.Protocol
		path  string
		body  string
		first int // the first output event (1-based, counting every event)
		cut   int // an event after the first output, before the end
		done  tps.End
	}{
		{"responses", Responses, tps.ProtocolResponses, "/v1/responses", `{"model":"m","stream":true,"input":"hi"}`, 5, 6, tps.EndEOF},
		{"messages", Messages, tps.ProtocolMessages, "/v1/messages", `{"model":"m","stream":true,"max_tokens":64,"messages":[{"role":"user","content":"hi"}]}`, 4, 5, tps.EndDone},
	}
	for _, api := range apis {
		c := recordAPI(t, api.style, api.path, api.body)
		for _, e := range c.Response.Events {
			require.NotEmpty(t, e.Event, "recorded with its name")
		}
		const last = 500*time.Millisecond + 5*100*time.Millisecond // TTFT, then 5 gaps of 1/TPS
		tests := []struct {
			name   string
			faults []Fault
			want   want
		}{
			{"as recorded", nil, want{ttft: 500 * time.Millisecond, last: last, end: api.done}},
			{"slow first token", []Fault{SlowFirstToken(time.Second)}, want{ttft: 1500 * time.Millisecond, last: last + time.Second, end: api.done}},
			{"keep-alives", []Fault{KeepAlivesBeforeFirstToken(3, 100*time.Millisecond)}, want{ttft: 800 * time.Millisecond, end: api.done}},
			{"stall", []Fault{StallAfter(api.cut, 2*time.Second)}, want{ttft: 500 * time.Millisecond, last: last + 2*time.Second, end: api.done}},
			{"slow after", []Fault{SlowAfter(api.first, 1)}, want{ttft: 500 * time.Millisecond, last: 500*time.Millisecond + 5*time.Second, end: api.done}},
			{"cut", []Fault{CutAfter(api.cut)}, want{ttft: 500 * time.Millisecond, end: tps.EndError, err: true}},
			{"error event", []Fault{ErrorEventAt(api.cut, api.style)}, want{ttft: 500 * time.Millisecond, end: tps.EndError, err: true}},
		}
		for _, tt := range tests {
			t.Run(api.name+"/"+tt.name, func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					var s Script = c
					if tt.faults != nil {
						s = WithFaults(c, tt.faults...)
					}
					h := NewHandler(map[string]Script{"m": s})
					req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, "http://x"+api.path, strings.NewReader(api.body))
					require.NoError(t, err)
					start := time.Now()
					resp, err := memClient(h).Do(req)
					require.NoError(t, err)
					var sample tps.Sample
					tap := tps.NewTap(resp.Body, start, func(s tps.Sample) { sample = s }, tps.WithProtocol(api.proto))
					_, _ = io.ReadAll(tap)
					_ = tap.Close()
					assert.Equal(t, tt.want.ttft, sample.TTFT)
					assert.Equal(t, tt.want.end, sample.End)
					if tt.want.last > 0 {
						assert.Equal(t, tt.want.last, sample.Last)
					}
					if tt.want.err {
						assert.Error(t, sample.Err)
						return
					}
					require.NoError(t, sample.Err)
					assert.Equal(t, int64(6), sample.OutputTokens)
				})
			})
		}
		t.Run(api.name+"/not streamed", func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				for _, faults := range [][]Fault{nil, {ErrorEventAt(api.cut, api.style)}} {
					var s Script = c
					if faults != nil {
						s = WithFaults(c, faults...)
					}
					h := NewHandler(map[string]Script{"m": s})
					body := strings.Replace(api.body, `"stream":true,`, "", 1)
					resp, err := memClient(h).Post("http://x"+api.path, "application/json", strings.NewReader(body))
					require.NoError(t, err)
					got, err := io.ReadAll(resp.Body)
					require.NoError(t, err)
					require.NoError(t, resp.Body.Close())
					assert.Equal(t, "application/json", resp.Header.Get("Content-Type"))
					switch {
					case faults != nil && api.style == Messages:
						assert.Equal(t, 529, resp.StatusCode)
						assert.JSONEq(t, `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`, string(got))
					case faults != nil:
						assert.Equal(t, http.StatusInternalServerError, resp.StatusCode)
						assert.Contains(t, string(got), `"error":{`)
					case api.style == Messages:
						require.Equal(t, http.StatusOK, resp.StatusCode, string(got))
						assert.Contains(t, string(got), `"type":"message"`)
						assert.Contains(t, string(got), `"text":"`+jsonText(Text(6))+`"`)
						assert.Contains(t, string(got), `"stop_reason":"end_turn"`)
					default:
						require.Equal(t, http.StatusOK, resp.StatusCode, string(got))
						assert.Contains(t, string(got), `"object":"response"`)
						assert.Contains(t, string(got), `"status":"completed"`)
						assert.Contains(t, string(got), `"text":"`+jsonText(Text(6))+`"`)
					}
				}
			})
		})
	}
}

// jsonText returns s as it reads inside a JSON string.
func jsonText(s string) string {
	b, _ := json.Marshal(s)
	return string(b[1 : len(b)-1])
}

// TestStatusBodyPerAPI: a Status fault without a body, and RejectPrefill,
// answer in the shape of the request's API: Anthropic's on .../messages,
// OpenAI's elsewhere.
func TestStatusBodyPerAPI(t *testing.T) {
	const prefill = `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"w0"}]}`
	for _, tt := range []struct{ path, want string }{
		{"/v1/messages", `{"type":"error","error":{"type":"invalid_request_error","message":"replay: the last message must be from the user or a tool; assistant prefill is not supported"}}`},
		{"/v1/chat/completions", `{"error":{"message":"replay: the last message must be from the user or a tool; assistant prefill is not supported","type":"invalid_request_error","param":null,"code":null}}`},
	} {
		t.Run("reject-prefill"+tt.path, func(t *testing.T) {
			h := NewHandler(map[string]Script{"m": WithFaults(&Profile{Style: Messages}, RejectPrefill())})
			resp, err := memClient(h).Post("http://x"+tt.path, "application/json", strings.NewReader(prefill))
			require.NoError(t, err)
			got, err := io.ReadAll(resp.Body)
			require.NoError(t, err)
			require.NoError(t, resp.Body.Close())
			assert.Equal(t, http.StatusBadRequest, resp.StatusCode)
			assert.JSONEq(t, tt.want, string(got))
		})
	}
	tests := []struct {
		path, want string
		code       int
	}{
		{"/v1/messages", `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`, 529},
		{"/v1/messages", `{"type":"error","error":{"type":"rate_limit_error","message":"replay: rate limit reached"}}`, 429},
		{"/v1/messages", `{"type":"error","error":{"type":"api_error","message":"replay: internal server error"}}`, 500},
		{"/v1/responses", `{"error":{"message":"replay: rate limit reached; please try again later","type":"requests","param":null,"code":"rate_limit_exceeded"}}`, 429},
	}
	for _, tt := range tests {
		t.Run(tt.path+"/"+http.StatusText(tt.code), func(t *testing.T) {
			h := NewHandler(map[string]Script{"m": WithFaults(&Profile{Style: Messages}, Status(tt.code, "", nil))})
			resp, err := memClient(h).Post("http://x"+tt.path, "application/json", strings.NewReader(`{"model":"m","stream":true}`))
			require.NoError(t, err)
			got, err := io.ReadAll(resp.Body)
			require.NoError(t, err)
			require.NoError(t, resp.Body.Close())
			assert.Equal(t, tt.code, resp.StatusCode)
			assert.JSONEq(t, tt.want, string(got))
		})
	}
}
