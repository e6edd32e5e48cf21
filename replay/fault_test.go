package replay

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// firstOutput returns the arrival offset of the first content chunk.
func firstOutput(t *testing.T, r rawResult) time.Duration {
	t.Helper()
	for _, e := range r.events {
		if e.ev.HasData && strings.Contains(e.ev.Data, `"content":"w`) {
			return e.at
		}
	}
	t.Fatal("no output chunk")
	return 0
}

func TestFaultsRaw(t *testing.T) {
	base := func() *Profile { return &Profile{TTFT: time.Second, TPS: 10, OutputTokens: 5} }
	tests := []struct {
		name  string
		fault Fault
		check func(t *testing.T, r rawResult, a Attempt)
	}{
		{"rate limited seconds", RateLimited("2"), func(t *testing.T, r rawResult, a Attempt) {
			assert.Equal(t, 429, r.status)
			assert.Equal(t, "2", r.header.Get("Retry-After"))
			assert.Equal(t, "rate_limit_exceeded", requireJSON(t, r.body)["error"].(map[string]any)["code"])
			assert.Equal(t, "429", a.Outcome)
		}},
		{"retry-after-ms", RetryAfterMS(1500), func(t *testing.T, r rawResult, a Attempt) {
			assert.Equal(t, 429, r.status)
			assert.Equal(t, "1500", r.header.Get("retry-after-ms"))
			assert.Equal(t, "2", r.header.Get("Retry-After"))
		}},
		{"retry-after date", RetryAfterDate(3 * time.Second), func(t *testing.T, r rawResult, a Attempt) {
			assert.Equal(t, 429, r.status)
			at, err := http.ParseTime(r.header.Get("Retry-After"))
			require.NoError(t, err)
			assert.WithinDuration(t, a.Time.Add(3*time.Second), at, time.Second)
		}},
		{"insufficient quota", InsufficientQuota(), func(t *testing.T, r rawResult, a Attempt) {
			assert.Equal(t, 429, r.status)
			assert.Equal(t, "insufficient_quota", requireJSON(t, r.body)["error"].(map[string]any)["code"])
		}},
		{"500", Status(500, "", nil), func(t *testing.T, r rawResult, a Attempt) {
			assert.Equal(t, 500, r.status)
			assert.Equal(t, "server_error", requireJSON(t, r.body)["error"].(map[string]any)["type"])
		}},
		{"502 custom body", Status(502, "bad gateway", http.Header{"X-Should-Retry": {"true"}}), func(t *testing.T, r rawResult, a Attempt) {
			assert.Equal(t, 502, r.status)
			assert.Equal(t, "bad gateway", r.body)
			assert.Equal(t, "true", r.header.Get("X-Should-Retry"))
		}},
		{"503", Status(503, "", nil), func(t *testing.T, r rawResult, a Attempt) {
			assert.Equal(t, 503, r.status)
			assert.Equal(t, "503", a.Outcome)
		}},
		{"context length", ContextLengthExceeded(), func(t *testing.T, r rawResult, a Attempt) {
			assert.Equal(t, 400, r.status)
			assert.Equal(t, "context_length_exceeded", requireJSON(t, r.body)["error"].(map[string]any)["code"])
		}},
		{"content policy", ContentPolicy(), func(t *testing.T, r rawResult, a Attempt) {
			assert.Equal(t, 400, r.status)
			assert.Equal(t, "content_policy_violation", requireJSON(t, r.body)["error"].(map[string]any)["code"])
		}},
		{"unauthorized", Unauthorized(), func(t *testing.T, r rawResult, a Attempt) {
			assert.Equal(t, 401, r.status)
		}},
		{"reset before headers", ResetBeforeHeaders(), func(t *testing.T, r rawResult, a Attempt) {
			require.ErrorIs(t, r.err, ErrConnReset)
			assert.Equal(t, "reset", a.Outcome)
			assert.Zero(t, a.Status)
		}},
		{"slow first token", SlowFirstToken(2 * time.Second), func(t *testing.T, r rawResult, a Attempt) {
			require.NoError(t, r.err)
			assert.Zero(t, r.headers)
			assert.Equal(t, 3*time.Second, firstOutput(t, r))
			assert.Equal(t, Text(5), r.content())
		}},
		{"cut after 3", CutAfter(3), func(t *testing.T, r rawResult, a Attempt) {
			require.ErrorIs(t, r.err, io.ErrUnexpectedEOF)
			assert.Len(t, r.data(), 3)
			assert.Equal(t, Text(2), r.content())
			assert.Equal(t, "cut", a.Outcome)
			assert.Equal(t, 3, a.Chunks)
		}},
		{"stall after 2", StallAfter(2, 5*time.Second), func(t *testing.T, r rawResult, a Attempt) {
			require.NoError(t, r.err)
			assert.Equal(t, Text(5), r.content())
			d := r.data()
			require.Greater(t, len(d), 3)
			assert.Equal(t, time.Second, r.events[1].at)
			assert.Equal(t, time.Second+100*time.Millisecond+5*time.Second, r.events[2].at)
		}},
		{"slow after 2", SlowAfter(2, 2), func(t *testing.T, r rawResult, a Attempt) {
			require.NoError(t, r.err)
			assert.Equal(t, Text(5), r.content(), "the text is unchanged")
			var out []time.Duration
			for _, e := range r.events {
				if e.ev.HasData && strings.Contains(e.ev.Data, `"content":"w`) {
					out = append(out, e.at)
				}
			}
			// The first output chunk (chunk 2) on time, then 2 tokens/s
			// instead of 10.
			assert.Equal(t, []time.Duration{time.Second, 1500 * time.Millisecond, 2 * time.Second, 2500 * time.Millisecond, 3 * time.Second}, out)
			assert.GreaterOrEqual(t, r.events[len(r.events)-1].at, 3*time.Second, "the finish and [DONE] follow the last word")
		}},
		{"slow after past the end", SlowAfter(50, 2), func(t *testing.T, r rawResult, a Attempt) {
			require.NoError(t, r.err)
			assert.Equal(t, Text(5), r.content())
			last := time.Duration(0)
			for _, e := range r.events {
				if e.ev.HasData && strings.Contains(e.ev.Data, `"content":"w`) {
					last = e.at
				}
			}
			assert.Equal(t, 1400*time.Millisecond, last, "fewer than k chunks: unchanged")
		}},
		{"malformed at 2", MalformedAt(2), func(t *testing.T, r rawResult, a Attempt) {
			d := r.data()
			var v map[string]any
			assert.Error(t, jsonUnmarshal(d[1], &v))
			assert.NoError(t, jsonUnmarshal(d[0], &v))
		}},
		{"error event openai", ErrorEventAt(3, OpenAI), func(t *testing.T, r rawResult, a Attempt) {
			require.NoError(t, r.err)
			d := r.data()
			require.Len(t, d, 3)
			assert.Contains(t, d[2], `"error"`)
			assert.Equal(t, "error_event", a.Outcome)
		}},
		{"error event vllm", ErrorEventAt(3, VLLM), func(t *testing.T, r rawResult, a Attempt) {
			d := r.data()
			require.Len(t, d, 4)
			assert.Contains(t, d[2], `"code":400`)
			assert.Equal(t, "[DONE]", d[3])
		}},
		{"error event openrouter", ErrorEventAt(2, ProcessingComments), func(t *testing.T, r rawResult, a Attempt) {
			d := r.data()
			require.Len(t, d, 2)
			assert.Contains(t, d[1], `"finish_reason":"error"`)
		}},
		{"error event groq", ErrorEventAt(2, UsageTwice), func(t *testing.T, r rawResult, a Attempt) {
			last := r.events[len(r.events)-1]
			assert.Equal(t, "error", last.ev.Name)
			assert.True(t, strings.HasPrefix(last.block, "event: error\ndata: {\"error\""), last.block)
		}},
		{"no done", NoDone(), func(t *testing.T, r rawResult, a Attempt) {
			require.NoError(t, r.err)
			d := r.data()
			assert.NotEqual(t, "[DONE]", d[len(d)-1])
			assert.Equal(t, Text(5), r.content())
		}},
		{"keep-alives before first token", KeepAlivesBeforeFirstToken(3, time.Second), func(t *testing.T, r rawResult, a Attempt) {
			assert.Equal(t, 3, r.comments())
			assert.Equal(t, 4*time.Second, firstOutput(t, r))
		}},
		{"down for", DownFor(10 * time.Second), func(t *testing.T, r rawResult, a Attempt) {
			assert.Equal(t, 503, r.status)
		}},
		{"reject prefill ignores user", RejectPrefill(), func(t *testing.T, r rawResult, a Attempt) {
			assert.Equal(t, 200, r.status)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := NewHandler(map[string]Script{"m": WithFaults(base(), tt.fault)})
				r := rawCall(t.Context(), memClient(h), "http://replay.test/v1", chatBody("m", true, nil))
				synctest.Wait()
				a := h.Attempts()
				require.Len(t, a, 1)
				assert.Equal(t, []string{tt.fault.String()}, a[0].Faults)
				tt.check(t, r, a[0])
			})
		})
	}
}

func TestFaultSelectors(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := NewHandler(map[string]Script{
			"m": WithFaults(&Profile{OutputTokens: 2}, RateLimited("2").OnAttempts(1, 3), Status(500, "", nil).FromAttempt(5), Unauthorized().During(time.Minute, 2*time.Minute)),
		})
		c := memClient(h)
		var got []int
		for range 5 {
			got = append(got, rawCall(t.Context(), c, "http://x/v1", chatBody("m", true, nil)).status)
			time.Sleep(2 * time.Second)
		}
		time.Sleep(time.Minute)
		got = append(got, rawCall(t.Context(), c, "http://x/v1", chatBody("m", true, nil)).status)
		assert.Equal(t, []int{429, 200, 429, 200, 500, 401}, got)
		a := h.Attempts()
		assert.GreaterOrEqual(t, a[1].Time.Sub(a[0].Time), 2*time.Second)
	})
}

func TestRetryAfterFlow(t *testing.T) {
	// The assertion the attempt log is for: a client honouring Retry-After.
	synctest.Test(t, func(t *testing.T) {
		h := NewHandler(map[string]Script{"m": WithFaults(&Profile{TTFT: 300 * time.Millisecond}, RateLimited("2").OnAttempts(1))})
		c := memClient(h)
		r := rawCall(t.Context(), c, "http://x/v1", chatBody("m", true, nil))
		require.Equal(t, 429, r.status)
		wait, err := time.ParseDuration(r.header.Get("Retry-After") + "s")
		require.NoError(t, err)
		time.Sleep(wait)
		r = rawCall(t.Context(), c, "http://x/v1", chatBody("m", true, nil))
		require.NoError(t, r.err)
		a := h.Attempts()
		require.Len(t, a, 2)
		assert.Equal(t, "429", a[0].Outcome)
		assert.Equal(t, "ok", a[1].Outcome)
		assert.GreaterOrEqual(t, a[1].Time.Sub(a[0].Time), 2*time.Second)
	})
}

func TestHangAndCancel(t *testing.T) {
	t.Run("hang until deadline", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			h := NewHandler(map[string]Script{"m": WithFaults(&Profile{}, Hang())})
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			start := time.Now()
			r := rawCall(ctx, memClient(h), "http://x/v1", chatBody("m", true, nil))
			require.ErrorIs(t, r.err, context.DeadlineExceeded)
			assert.Equal(t, 30*time.Second, time.Since(start))
			synctest.Wait()
			assert.Equal(t, "hang", h.Attempts()[0].Outcome)
		})
	})
	t.Run("cancel mid-stream", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			h := NewHandler(map[string]Script{"m": &Profile{TPS: 1, OutputTokens: 100}})
			ctx, cancel := context.WithTimeout(t.Context(), 5500*time.Millisecond)
			defer cancel()
			r := rawCall(ctx, memClient(h), "http://x/v1", chatBody("m", true, nil))
			require.ErrorIs(t, r.err, context.DeadlineExceeded)
			assert.Equal(t, Text(6), r.content())
			synctest.Wait()
			assert.Equal(t, "canceled", h.Attempts()[0].Outcome)
		})
	})
	t.Run("body close ends handler", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			h := NewHandler(map[string]Script{"m": WithFaults(&Profile{OutputTokens: 1}, StallAfter(1, time.Hour))})
			req, _ := http.NewRequest(http.MethodPost, "http://x/v1/chat/completions", strings.NewReader(`{"model":"m","stream":true}`))
			resp, err := memClient(h).Do(req)
			require.NoError(t, err)
			buf := make([]byte, 10)
			_, err = resp.Body.Read(buf)
			require.NoError(t, err)
			require.NoError(t, resp.Body.Close())
			synctest.Wait()
			assert.Equal(t, "canceled", h.Attempts()[0].Outcome)
		})
	})
}

func TestDownForRecovers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := NewHandler(map[string]Script{"m": WithFaults(&Profile{}, DownFor(10*time.Second))})
		c := memClient(h)
		assert.Equal(t, 503, rawCall(t.Context(), c, "http://x/v1", chatBody("m", true, nil)).status)
		time.Sleep(9 * time.Second)
		assert.Equal(t, 503, rawCall(t.Context(), c, "http://x/v1", chatBody("m", true, nil)).status)
		time.Sleep(time.Second)
		assert.Equal(t, 200, rawCall(t.Context(), c, "http://x/v1", chatBody("m", true, nil)).status)
	})
}

func TestPrefill(t *testing.T) {
	prefill := map[string]any{"messages": []map[string]any{
		{"role": "user", "content": "hi"}, {"role": "assistant", "content": "w0 w1 w"},
	}}
	t.Run("continues deterministic text", func(t *testing.T) {
		h := NewHandler(map[string]Script{"m": &Profile{OutputTokens: 5}})
		r := rawCall(context.Background(), memClient(h), "http://x/v1", chatBody("m", true, prefill))
		require.NoError(t, r.err)
		assert.Equal(t, Text(5), "w0 w1 w"+r.content())
	})
	t.Run("rejected", func(t *testing.T) {
		h := NewHandler(map[string]Script{"m": WithFaults(&Profile{}, RejectPrefill())})
		r := rawCall(context.Background(), memClient(h), "http://x/v1", chatBody("m", true, prefill))
		assert.Equal(t, 400, r.status)
	})
	t.Run("unrelated prefill starts over", func(t *testing.T) {
		h := NewHandler(map[string]Script{"m": &Profile{OutputTokens: 3}})
		body := chatBody("m", true, map[string]any{"messages": []map[string]any{{"role": "assistant", "content": "hello"}}})
		r := rawCall(context.Background(), memClient(h), "http://x/v1", body)
		assert.Equal(t, Text(3), r.content())
	})
}

// TestFaultsOpenAIClient drives every fault through the real openai-go client
// over TCP and checks the error it surfaces.
func TestFaultsOpenAIClient(t *testing.T) {
	tests := []struct {
		name   string
		fault  Fault
		status int  // expected *openai.Error status; 0 for none
		stream bool // expect a stream error (not an API status)
		text   string
	}{
		{"rate limited", RateLimited("1"), 429, false, ""},
		{"500", Status(500, "", nil), 500, false, ""},
		{"context length", ContextLengthExceeded(), 400, false, ""},
		{"content policy", ContentPolicy(), 400, false, ""},
		{"unauthorized", Unauthorized(), 401, false, ""},
		{"down", DownFor(time.Hour), 503, false, ""},
		{"reset", ResetBeforeHeaders(), 0, true, ""},
		{"cut", CutAfter(2), 0, true, Text(1)},
		{"error event", ErrorEventAt(3, OpenAI), 0, true, Text(1)},
		{"error event vllm", ErrorEventAt(3, VLLM), 0, true, Text(1)},
		{"error event groq", ErrorEventAt(3, UsageTwice), 0, true, Text(1)},
		{"error event openrouter", ErrorEventAt(3, ProcessingComments), 0, true, Text(1)},
		{"malformed", MalformedAt(2), 0, true, ""},
		{"no done", NoDone(), 0, false, Text(4)},
		{"slow first token", SlowFirstToken(10 * time.Millisecond), 0, false, Text(4)},
		{"stall", StallAfter(1, 10*time.Millisecond), 0, false, Text(4)},
		{"keep-alives", KeepAlivesBeforeFirstToken(2, time.Millisecond), 0, false, Text(4)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := NewServer(map[string]Script{"m": WithFaults(&Profile{OutputTokens: 4}, tt.fault)})
			defer srv.Close()
			text, _, _, err := oaStream(t, oaClient(srv.URL(), nil), "m", openai.ChatCompletionNewParams{})
			var apiErr *openai.Error
			switch {
			case tt.status != 0:
				require.ErrorAs(t, err, &apiErr)
				assert.Equal(t, tt.status, apiErr.StatusCode)
			case tt.stream:
				require.Error(t, err)
				assert.False(t, errors.As(err, &apiErr) && apiErr.StatusCode == 200 && tt.text == "")
			default:
				require.NoError(t, err)
			}
			if tt.text != "" {
				assert.Equal(t, tt.text, text)
			}
		})
	}
	t.Run("hang", func(t *testing.T) {
		srv := NewServer(map[string]Script{"m": WithFaults(&Profile{}, Hang())})
		defer srv.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		c := oaClient(srv.URL(), nil)
		_, err := c.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
			Model: "m", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
		})
		require.ErrorIs(t, err, context.DeadlineExceeded)
	})
}

func TestFaultEdgeCases(t *testing.T) {
	base := func() *Profile { return &Profile{TTFT: time.Second, TPS: 10, OutputTokens: 5} }
	tests := []struct {
		name   string
		faults []Fault
		check  func(t *testing.T, r rawResult, a Attempt)
	}{
		{"cut after more chunks than the stream has drops [DONE]", []Fault{CutAfter(100)}, func(t *testing.T, r rawResult, a Attempt) {
			require.ErrorIs(t, r.err, io.ErrUnexpectedEOF, "a cut must never read as a clean end")
			assert.NotContains(t, r.data(), "[DONE]")
			assert.Equal(t, Text(5), r.content())
			assert.Equal(t, "cut", a.Outcome)
		}},
		{"zero keep-alives change nothing", []Fault{KeepAlivesBeforeFirstToken(0, time.Second)}, func(t *testing.T, r rawResult, a Attempt) {
			require.NoError(t, r.err)
			assert.Equal(t, 0, r.comments())
			assert.Equal(t, time.Second, firstOutput(t, r))
		}},
		{"negative keep-alives do not panic", []Fault{KeepAlivesBeforeFirstToken(-3, time.Second)}, func(t *testing.T, r rawResult, a Attempt) {
			require.NoError(t, r.err)
			assert.Equal(t, 0, r.comments())
			assert.Equal(t, "ok", a.Outcome)
		}},
		{"a status after a cut logs the status, not the cut", []Fault{CutAfter(2), RetryAfterDate(time.Second)}, func(t *testing.T, r rawResult, a Attempt) {
			assert.Equal(t, http.StatusTooManyRequests, r.status)
			assert.Equal(t, "429", a.Outcome)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := NewHandler(map[string]Script{"m": WithFaults(base(), tt.faults...)})
				r := rawCall(t.Context(), memClient(h), "http://replay.test/v1", chatBody("m", true, nil))
				synctest.Wait()
				a := h.Attempts()
				require.Len(t, a, 1)
				tt.check(t, r, a[0])
			})
		})
	}
}
