package replay

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/stretchr/testify/require"
	"github.com/tpsroute/tpsroute/internal/sse"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// rawEvent is one SSE event as a raw client saw it, with its arrival offset.
type rawEvent struct {
	at    time.Duration
	block string
	ev    sse.Event
}

// rawResult is everything a raw HTTP client saw of one call.
type rawResult struct {
	status  int
	header  http.Header
	body    string // non-SSE body
	events  []rawEvent
	err     error // transport or body read error; nil on clean EOF
	headers time.Duration
}

// data returns the data payloads, in order.
func (r rawResult) data() []string {
	var out []string
	for _, e := range r.events {
		if e.ev.HasData {
			out = append(out, e.ev.Data)
		}
	}
	return out
}

// content concatenates delta.content of every chunk.
func (r rawResult) content() string {
	var b strings.Builder
	for _, d := range r.data() {
		var c struct {
			Choices []struct {
				Delta *struct {
					Content *string `json:"content"`
				} `json:"delta"`
			} `json:"choices"`
		}
		if json.Unmarshal([]byte(d), &c) != nil {
			continue
		}
		for _, ch := range c.Choices {
			if ch.Delta != nil && ch.Delta.Content != nil {
				b.WriteString(*ch.Delta.Content)
			}
		}
	}
	return b.String()
}

func (r rawResult) comments() int {
	n := 0
	for _, e := range r.events {
		if e.ev.OnlyComment {
			n++
		}
	}
	return n
}

// rawCall posts body to url with client and reads the whole answer.
func rawCall(ctx context.Context, client *http.Client, url string, body any) rawResult {
	b, _ := json.Marshal(body)
	start := time.Now()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url+"/chat/completions", bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer sk-test-secret")
	resp, err := client.Do(req)
	if err != nil {
		return rawResult{err: err}
	}
	defer resp.Body.Close()
	res := rawResult{status: resp.StatusCode, header: resp.Header, headers: time.Since(start)}
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		all, err := io.ReadAll(resp.Body)
		res.body, res.err = string(all), err
		return res
	}
	var buf []byte
	chunk := make([]byte, 16<<10)
	for {
		n, err := resp.Body.Read(chunk)
		buf = append(buf, chunk[:n]...)
		for {
			i := sse.EventEnd(buf)
			if err != nil && i < 0 && len(buf) > 0 {
				i = len(buf) // the tail of an unterminated block
			}
			if i < 0 {
				break
			}
			res.events = append(res.events, rawEvent{at: time.Since(start), block: string(buf[:i]), ev: sse.ParseEvent(buf[:i])})
			buf = buf[i:]
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				res.err = err
			}
			return res
		}
	}
}

// memClient returns an http.Client over h's in-memory transport.
func memClient(h *Handler) *http.Client {
	return &http.Client{Transport: h.Transport()}
}

// oaClient returns an openai-go client for baseURL without retries.
func oaClient(baseURL string, hc *http.Client) openai.Client {
	opts := []option.RequestOption{option.WithBaseURL(baseURL), option.WithAPIKey("sk-test-secret"), option.WithMaxRetries(0)}
	if hc != nil {
		opts = append(opts, option.WithHTTPClient(hc))
	}
	return openai.NewClient(opts...)
}

// oaStream runs a streaming call with openai-go and returns the content, the
// last usage, the chunk count and the stream's error.
func oaStream(t *testing.T, c openai.Client, model string, params openai.ChatCompletionNewParams) (string, openai.CompletionUsage, int, error) {
	t.Helper()
	params.Model = model
	if len(params.Messages) == 0 {
		params.Messages = []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hello")}
	}
	s := c.Chat.Completions.NewStreaming(context.Background(), params)
	defer s.Close()
	var b strings.Builder
	var u openai.CompletionUsage
	n := 0
	for s.Next() {
		ch := s.Current()
		n++
		for _, c := range ch.Choices {
			b.WriteString(c.Delta.Content)
		}
		if ch.Usage.TotalTokens > 0 {
			u = ch.Usage
		}
	}
	return b.String(), u, n, s.Err()
}

func chatBody(model string, stream bool, extra map[string]any) map[string]any {
	b := map[string]any{
		"model":    model,
		"stream":   stream,
		"messages": []map[string]any{{"role": "user", "content": "hello"}},
	}
	for k, v := range extra {
		b[k] = v
	}
	return b
}

func requireJSON(t *testing.T, s string) map[string]any {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal([]byte(s), &m), s)
	return m
}

func jsonUnmarshal(s string, v any) error { return json.Unmarshal([]byte(s), v) }

var errUnexpectedEOF = io.ErrUnexpectedEOF

func jsonMarshal(v any) ([]byte, error) { return json.Marshal(v) }
