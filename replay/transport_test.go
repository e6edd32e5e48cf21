package replay

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestTransportOpenAIInFakeTime is how deadline tests elsewhere use replay:
// the real client, the in-memory transport, virtual time.
func TestTransportOpenAIInFakeTime(t *testing.T) {
	tests := []struct {
		name    string
		script  Script
		timeout time.Duration
		wantErr error
		elapsed time.Duration
		text    string
	}{
		{"slow first token hits deadline", WithFaults(&Profile{OutputTokens: 3}, SlowFirstToken(10*time.Second)), 5 * time.Second, context.DeadlineExceeded, 5 * time.Second, ""},
		{"stall hits deadline", WithFaults(&Profile{OutputTokens: 5, TPS: 10}, StallAfter(3, time.Minute)), 30 * time.Second, context.DeadlineExceeded, 30 * time.Second, Text(2)},
		{"hang hits deadline", WithFaults(&Profile{}, Hang()), 2 * time.Second, context.DeadlineExceeded, 2 * time.Second, ""},
		{"stream within deadline", &Profile{TTFT: 2 * time.Second, TPS: 4, OutputTokens: 5}, time.Minute, nil, 3 * time.Second, Text(5)},
		{"cut", WithFaults(&Profile{TTFT: time.Second, OutputTokens: 5}, CutAfter(2)), time.Minute, io.ErrUnexpectedEOF, time.Second, Text(1)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := NewHandler(map[string]Script{"m": tt.script})
				c := openai.NewClient(option.WithBaseURL("http://replay.invalid/v1"), option.WithAPIKey("k"), option.WithMaxRetries(0),
					option.WithHTTPClient(&http.Client{Transport: h.Transport()}))
				ctx, cancel := context.WithTimeout(t.Context(), tt.timeout)
				defer cancel()
				start := time.Now()
				s := c.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{
					Model: "m", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
				})
				var b strings.Builder
				for s.Next() {
					for _, ch := range s.Current().Choices {
						b.WriteString(ch.Delta.Content)
					}
				}
				elapsed := time.Since(start)
				if tt.wantErr != nil {
					require.ErrorIs(t, s.Err(), tt.wantErr)
				} else {
					require.NoError(t, s.Err())
				}
				require.NoError(t, s.Close())
				assert.Equal(t, tt.elapsed, elapsed)
				assert.Equal(t, tt.text, b.String())
			})
		})
	}
}

func TestTransportNonStreamingTiming(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := NewHandler(map[string]Script{"m": &Profile{TTFT: time.Second, TPS: 10, OutputTokens: 11}})
		r := rawCall(t.Context(), memClient(h), "http://x/v1", chatBody("m", false, nil))
		require.NoError(t, r.err)
		assert.Equal(t, 2*time.Second, r.headers, "a non-streaming answer arrives when the stream would have ended")
		m := requireJSON(t, r.body)
		assert.Equal(t, "chat.completion", m["object"])
		assert.Equal(t, Text(11), m["choices"].([]any)[0].(map[string]any)["message"].(map[string]any)["content"])
		assert.Equal(t, 11.0, m["usage"].(map[string]any)["completion_tokens"])
	})
}

func TestTransportNonStreamingFaults(t *testing.T) {
	tests := []struct {
		name   string
		fault  Fault
		status int
		err    error
	}{
		{"cut resets", CutAfter(2), 0, ErrConnReset},
		{"error event is a status", ErrorEventAt(2, VLLM), 400, nil},
		{"status", RateLimited("1"), 429, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := NewHandler(map[string]Script{"m": WithFaults(&Profile{}, tt.fault)})
			r := rawCall(context.Background(), memClient(h), "http://x/v1", chatBody("m", false, nil))
			if tt.err != nil {
				require.ErrorIs(t, r.err, tt.err)
				return
			}
			assert.Equal(t, tt.status, r.status)
			assert.Contains(t, r.body, `"error"`)
		})
	}
}

func TestAttemptLogRedaction(t *testing.T) {
	h := NewHandler(map[string]Script{"m": &Profile{}}, RedactHeaders("X-Tenant-Secret"))
	req, _ := http.NewRequest(http.MethodPost, "http://x/v1/chat/completions", strings.NewReader(`{"model":"m","stream":true,"max_tokens":7,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"a"},{"role":"assistant","content":"b"}]}`))
	req.Header.Set("X-Tenant-Secret", "s3cr3t")
	req.Header.Set("Api-Key", "s3cr3t")
	req.Header.Set("X-Trace", "visible")
	resp, err := memClient(h).Do(req)
	require.NoError(t, err)
	_, _ = io.Copy(io.Discard, resp.Body)
	require.NoError(t, resp.Body.Close())
	a := h.Attempts()[0]
	assert.Equal(t, "REDACTED", a.Header.Get("X-Tenant-Secret"))
	assert.Equal(t, "REDACTED", a.Header.Get("Api-Key"))
	assert.Equal(t, "visible", a.Header.Get("X-Trace"))
	assert.Equal(t, 2, a.Messages)
	assert.Equal(t, "assistant", a.LastRole)
	assert.Equal(t, 7, a.MaxTokens)
	assert.True(t, a.Stream)
	assert.True(t, a.IncludeUsage)
	assert.Equal(t, 200, a.Status)
	assert.False(t, a.End.IsZero())
}

// closeCounter is a request body that counts its Close calls.
type closeCounter struct {
	io.Reader
	closed int
}

func (c *closeCounter) Close() error { c.closed++; return nil }

// TestTransportClosesRequestBody checks the http.RoundTripper contract: the
// request body is closed, whatever the answer.
func TestTransportClosesRequestBody(t *testing.T) {
	tests := []struct {
		name   string
		script Script
	}{
		{"stream", &Profile{OutputTokens: 2}},
		{"status", WithFaults(&Profile{}, RateLimited("1"))},
		{"reset before headers", WithFaults(&Profile{}, ResetBeforeHeaders())},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := NewHandler(map[string]Script{"m": tt.script})
				body := &closeCounter{Reader: strings.NewReader(`{"model":"m","stream":true}`)}
				req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, "http://replay.test/v1/chat/completions", body)
				require.NoError(t, err)
				resp, err := h.Transport().RoundTrip(req)
				if err == nil {
					_, _ = io.Copy(io.Discard, resp.Body)
					require.NoError(t, resp.Body.Close())
				}
				synctest.Wait()
				assert.Equal(t, 1, body.closed)
			})
		})
	}
}
