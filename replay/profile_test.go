package replay

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestText(t *testing.T) {
	assert.Equal(t, "", Text(0))
	assert.Equal(t, "w0 w1 w2 ", Text(3))
	tests := []struct {
		name    string
		prefill string
		done    int
		partial int
		ok      bool
	}{
		{"empty", "", 0, 0, false},
		{"whole tokens", "w0 w1 ", 2, 0, true},
		{"partial token", "w0 w1", 1, 2, true},
		{"mismatch", "w0 w2 ", 0, 0, false},
		{"foreign", "hello", 0, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, p, ok := continuation(tt.prefill)
			assert.Equal(t, tt.ok, ok)
			assert.Equal(t, tt.done, d)
			assert.Equal(t, tt.partial, p)
		})
	}
}

func TestProfileTiming(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := NewHandler(map[string]Script{"m": &Profile{TTFT: 400 * time.Millisecond, TPS: 20, OutputTokens: 6, TokensPerChunk: 2}})
		r := rawCall(t.Context(), memClient(h), "http://x/v1", chatBody("m", true, nil))
		require.NoError(t, r.err)
		var at []time.Duration
		for _, e := range r.events {
			if strings.Contains(e.ev.Data, `"content":"w`) {
				at = append(at, e.at)
			}
		}
		// 3 chunks of 2 tokens at 20 tokens/s: 100 ms apart.
		assert.Equal(t, []time.Duration{400 * time.Millisecond, 500 * time.Millisecond, 600 * time.Millisecond}, at)
		assert.Equal(t, Text(6), r.content())
	})
}

func TestProfileJitterAndDistsAreSeeded(t *testing.T) {
	run := func(p *Profile) []time.Duration {
		var at []time.Duration
		synctest.Test(t, func(t *testing.T) {
			h := NewHandler(map[string]Script{"m": p})
			for range 3 {
				r := rawCall(t.Context(), memClient(h), "http://x/v1", chatBody("m", true, nil))
				for _, e := range r.events {
					at = append(at, e.at)
				}
			}
		})
		return at
	}
	p := func(seed uint64) *Profile {
		return &Profile{TTFTDist: LogNormal{Median: 0.5, Sigma: 0.5}, TPSDist: Uniform{Min: 20, Max: 80}, Jitter: 0.3, OutputTokens: 5, Seed: seed}
	}
	a, b, c := run(p(1)), run(p(1)), run(p(2))
	assert.Equal(t, a, b)
	assert.NotEqual(t, a, c)
	assert.Positive(t, a[1])
}

func TestProfileStyles(t *testing.T) {
	tests := []struct {
		style Style
		check func(t *testing.T, r rawResult)
	}{
		{OpenAI, func(t *testing.T, r rawResult) {
			d := r.data()
			assert.Contains(t, d[0], `"usage":null`)
			assert.Contains(t, d[len(d)-2], `"choices":[]`)
		}},
		{VLLM, func(t *testing.T, r rawResult) {
			d := r.data()
			assert.NotContains(t, d[1], `"usage"`)
			assert.Contains(t, d[len(d)-3], `"finish_reason":"stop","stop_reason":null`)
			assert.Contains(t, d[len(d)-3], `"content":"w3 "`)
		}},
		{UsageTwice, func(t *testing.T, r rawResult) {
			assert.Equal(t, 3, strings.Count(strings.Join(r.data(), ""), `"completion_tokens":4`)) // x_groq, finish usage, usage chunk
			assert.Contains(t, strings.Join(r.data(), ""), `"x_groq"`)
		}},
		{Annotations, func(t *testing.T, r rawResult) {
			d := r.data()
			assert.Contains(t, d[0], `"prompt_filter_results"`)
			assert.Contains(t, d[0], `"id":""`)
			assert.Contains(t, d[len(d)-3], `"content_filter_offsets"`)
			assert.NotContains(t, d[len(d)-3], `"delta"`)
		}},
		{ProcessingComments, func(t *testing.T, r rawResult) {
			assert.Equal(t, 4, r.comments()) // 0, 250, 500, 750 ms before a 1 s TTFT
			assert.Equal(t, ": OPENROUTER PROCESSING\n\n", r.events[0].block)
			d := r.data()
			assert.Contains(t, d[len(d)-2], `"usage":{`)
			assert.Contains(t, d[len(d)-2], `"delta":{"role":"assistant","content":""}`)
			assert.Contains(t, d[len(d)-3], `"finish_reason":"stop"`)
		}},
		{KeepAlives, func(t *testing.T, r rawResult) {
			assert.Equal(t, 4, r.comments())
			assert.Equal(t, ": keep-alive\n\n", r.events[0].block)
			d := r.data()
			assert.Contains(t, d[len(d)-2], `"prompt_cache_hit_tokens":0`)
			assert.Contains(t, d[len(d)-2], `"finish_reason":"stop"`)
		}},
		{ReasoningFirst, func(t *testing.T, r rawResult) {
			all := strings.Join(r.data(), "")
			assert.Less(t, strings.Index(all, `"reasoning_content":"r7 "`), strings.Index(all, `"content":"w0 "`))
			assert.Contains(t, all, `"reasoning_tokens":8`)
			assert.Contains(t, all, `"completion_tokens":12`)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.style.String(), func(t *testing.T) {
			p := &Profile{TTFT: time.Second, TPS: 100, OutputTokens: 4, Style: tt.style}
			synctest.Test(t, func(t *testing.T) {
				h := NewHandler(map[string]Script{"m": p})
				r := rawCall(t.Context(), memClient(h), "http://x/v1", chatBody("m", true, map[string]any{"stream_options": map[string]any{"include_usage": true}}))
				require.NoError(t, r.err)
				assert.Equal(t, Text(4), r.content())
				d := r.data()
				for _, s := range d[:len(d)-1] {
					assert.True(t, json.Valid([]byte(s)), s)
				}
				assert.Equal(t, "[DONE]", d[len(d)-1])
				tt.check(t, r)
			})
			// The real client parses every style, streaming and not (in real
			// time, so without delays).
			fast := *p
			fast.TTFT, fast.TPS = 0, 0
			srv := NewServer(map[string]Script{"m": &fast})
			defer srv.Close()
			c := oaClient(srv.URL(), nil)
			text, u, _, err := oaStream(t, c, "m", openai.ChatCompletionNewParams{
				StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
			})
			require.NoError(t, err)
			assert.Equal(t, Text(4), text)
			assert.Positive(t, u.CompletionTokens)
			res, err := c.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
				Model: "m", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
			})
			require.NoError(t, err)
			assert.Equal(t, Text(4), res.Choices[0].Message.Content)
			assert.Positive(t, res.Usage.TotalTokens)
		})
	}
}

func TestProfilePhases(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := NewHandler(map[string]Script{"m": &Profile{TPS: 120, OutputTokens: 13, Phases: []Phase{
			{After: 10 * time.Second, TPS: 30},
			{After: 20 * time.Second, TPS: 120},
			{FromAttempt: 5, Status: 503},
		}}})
		c := memClient(h)
		dur := func() time.Duration {
			r := rawCall(t.Context(), c, "http://x/v1", chatBody("m", true, nil))
			require.NoError(t, r.err)
			return r.events[len(r.events)-1].at - r.events[0].at
		}
		assert.Equal(t, 100*time.Millisecond, dur()) // 12 gaps at 120 tokens/s
		time.Sleep(10 * time.Second)
		assert.Equal(t, 400*time.Millisecond, dur())
		time.Sleep(10 * time.Second)
		assert.Equal(t, 100*time.Millisecond, dur())
		assert.Equal(t, 200, rawCall(t.Context(), c, "http://x/v1", chatBody("m", true, nil)).status)
		assert.Equal(t, 503, rawCall(t.Context(), c, "http://x/v1", chatBody("m", true, nil)).status)
	})
}

func TestProfilePromptCache(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := NewHandler(map[string]Script{"m": &Profile{TTFT: time.Second, OutputTokens: 2, PromptCache: PromptCache{Enabled: true, TTFTFactor: 0.1}}})
		c := memClient(h)
		long := strings.Repeat("system prompt ", 100)
		body := func(q string) map[string]any {
			return chatBody("m", true, map[string]any{
				"stream_options": map[string]any{"include_usage": true},
				"messages":       []map[string]any{{"role": "system", "content": long}, {"role": "user", "content": q}},
			})
		}
		usageOf := func(r rawResult) map[string]any {
			d := r.data()
			return requireJSON(t, d[len(d)-2])["usage"].(map[string]any)
		}
		cold := rawCall(t.Context(), c, "http://x/v1", body("first question"))
		warm := rawCall(t.Context(), c, "http://x/v1", body("second question"))
		assert.Equal(t, 0.0, usageOf(cold)["prompt_tokens_details"].(map[string]any)["cached_tokens"])
		cached := usageOf(warm)["prompt_tokens_details"].(map[string]any)["cached_tokens"].(float64)
		assert.Equal(t, float64(4+350), cached) // the system message
		assert.Equal(t, time.Second, firstOutput(t, cold))
		assert.Less(t, firstOutput(t, warm), 300*time.Millisecond)
	})
}

func TestProfileHeaders(t *testing.T) {
	h := NewHandler(map[string]Script{"m": &Profile{Region: "eu-west", Headers: map[string]string{"x-ratelimit-remaining-requests": "99"}}})
	r := rawCall(context.Background(), memClient(h), "http://x/v1", chatBody("m", true, nil))
	assert.Equal(t, "eu-west", r.header.Get("x-region"))
	assert.Equal(t, "99", r.header.Get("x-ratelimit-remaining-requests"))
	assert.Equal(t, "req-m-1", r.header.Get("x-request-id"))
	assert.Equal(t, "text/event-stream; charset=utf-8", r.header.Get("Content-Type"))
}

func TestHandlerErrors(t *testing.T) {
	h := NewHandler(map[string]Script{"m": &Profile{}})
	c := memClient(h)
	tests := []struct {
		name, method, path, body string
		status                   int
		code                     any
	}{
		{"unknown model", "POST", "/v1/chat/completions", `{"model":"x","stream":true}`, 404, "model_not_found"},
		{"bad json", "POST", "/v1/chat/completions", `{`, 400, nil},
		{"wrong method", "GET", "/v1/chat/completions", ``, 405, nil},
		{"unknown path", "POST", "/v1/audio/speech", `{}`, 404, "not_found"},
		{"body over the cap", "POST", "/v1/chat/completions", `{"model":"m","x":"` + strings.Repeat("a", maxRequestBody) + `"}`, 413, "request_too_large"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequest(tt.method, "http://x"+tt.path, strings.NewReader(tt.body))
			resp, err := c.Do(req)
			require.NoError(t, err)
			defer resp.Body.Close()
			assert.Equal(t, tt.status, resp.StatusCode)
			var e struct {
				Error struct {
					Message string `json:"message"`
					Type    string `json:"type"`
					Code    any    `json:"code"`
				} `json:"error"`
			}
			require.NoError(t, json.NewDecoder(resp.Body).Decode(&e))
			assert.Equal(t, "invalid_request_error", e.Error.Type)
			assert.Equal(t, tt.code, e.Error.Code)
			assert.True(t, strings.HasPrefix(e.Error.Message, "replay: "))
		})
	}
	a := h.Attempts()
	require.Len(t, a, 1, "only chat requests for a model are attempts")
	assert.Equal(t, "x", a[0].Model)
	assert.Equal(t, "404", a[0].Outcome)
	assert.Equal(t, 404, a[0].Status)
}

func TestServerCloseEndsStreams(t *testing.T) {
	srv := NewServer(map[string]Script{
		"slow": &Profile{TPS: 1, OutputTokens: 1000},
		"hang": WithFaults(&Profile{}, Hang()),
	})
	var wg sync.WaitGroup
	errs := make([]error, 2)
	started := make(chan struct{}, 2)
	for i, m := range []string{"slow", "hang"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			started <- struct{}{}
			errs[i] = rawCall(context.Background(), http.DefaultClient, srv.URL(), chatBody(m, true, nil)).err
		}()
	}
	<-started
	<-started
	require.Eventually(t, func() bool { return len(srv.Attempts()) == 2 }, 5*time.Second, time.Millisecond)
	start := time.Now()
	srv.Close()
	wg.Wait()
	assert.Less(t, time.Since(start), 2*time.Second)
	for i, err := range errs {
		assert.Error(t, err, i)
	}
	srv.Close() // idempotent
}

func TestServerConcurrentStreams(t *testing.T) {
	srv := NewServer(map[string]Script{"m": &Profile{OutputTokens: 3, TTFT: 20 * time.Millisecond}})
	defer srv.Close()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1000}}
	defer client.CloseIdleConnections()
	const n = 1000
	var wg sync.WaitGroup
	var mu sync.Mutex
	bad := 0
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rawCall(context.Background(), client, srv.URL(), chatBody("m", true, nil))
			if r.err != nil || r.content() != Text(3) {
				mu.Lock()
				bad++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	assert.Zero(t, bad)
	assert.Len(t, srv.Attempts(), n)
}
