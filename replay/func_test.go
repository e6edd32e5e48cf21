package replay

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestFuncSeesCallAndDecides(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var seen []Call
		h := NewHandler(map[string]Script{"m": Func(func(c Call) Script {
			mu.Lock()
			seen = append(seen, c)
			mu.Unlock()
			if c.Attempt == 2 {
				return nil
			}
			return WithFaults(&Profile{OutputTokens: 3, TTFT: time.Duration(c.PromptTokens) * time.Millisecond}, RateLimited("1").OnAttempts(3))
		})})
		body := `{"model":"m","stream":true,"stream_options":{"include_usage":true},"max_tokens":7,"messages":[{"role":"user","content":"12345678"}]}`
		want, err := PromptTokens([]byte(body))
		require.NoError(t, err)
		assert.Equal(t, 3+4+2, want)
		codes := []int{}
		for range 3 {
			time.Sleep(time.Second)
			rec := httptest.NewRecorder()
			start := time.Now()
			req := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", strings.NewReader(body))
			req.Header.Set("X-Request-Id", "call-"+strconv.Itoa(len(codes)))
			req.Header.Set("Authorization", "Bearer sk-secret")
			h.ServeHTTP(rec, req)
			codes = append(codes, rec.Code)
			if rec.Code == 200 {
				assert.Equal(t, time.Duration(want)*time.Millisecond, time.Since(start), "TTFT from the prompt size")
				assert.Contains(t, rec.Body.String(), `"prompt_tokens":9`)
			}
		}
		assert.Equal(t, []int{200, 500, 429}, codes)
		require.Len(t, seen, 3)
		assert.Equal(t, Call{Model: "m", Attempt: 1, Elapsed: time.Second, Time: seen[0].Time, PromptTokens: want, MaxTokens: 7, Stream: true,
			Header: http.Header{"X-Request-Id": {"call-0"}, "Authorization": {"REDACTED"}}}, seen[0])
		assert.Equal(t, "call-2", seen[2].Header.Get("X-Request-Id"), "each call's own header")
		seen[0].Header.Set("X-Request-Id", "changed by decide")
		assert.Equal(t, "call-0", h.Attempts()[0].Header.Get("X-Request-Id"), "decide's copy, not the attempt log's")
		assert.Equal(t, 2*time.Second+9*time.Millisecond, seen[1].Elapsed)
	})
}

func TestPromptTokensRejectsBadBody(t *testing.T) {
	_, err := PromptTokens([]byte("{"))
	assert.ErrorContains(t, err, "replay: the request body is not valid JSON")
}

func TestFuncNilPanics(t *testing.T) {
	assert.Panics(t, func() { Func(nil) })
}
