package tpsroute

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
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
	"github.com/tidwall/gjson"

	"github.com/tpsroute/tpsroute/fallback"
	"github.com/tpsroute/tpsroute/internal/registry"
	"github.com/tpsroute/tpsroute/measure"
	"github.com/tpsroute/tpsroute/replay"
	"github.com/tpsroute/tpsroute/route"
)

// transportFleet is a Client over a healthy "m" (a), a model "cut" whose
// only deployment cuts after 10 of 30 chunks, and a model "down" that always
// answers 503.
func transportFleet(t *testing.T) *Client {
	f := newTCPFleet(t)
	url := f.add("a", map[string]replay.Script{
		"m":    &replay.Profile{OutputTokens: 30},
		"cut":  replay.WithFaults(&replay.Profile{OutputTokens: 30}, replay.CutAfter(10)),
		"down": replay.WithFaults(&replay.Profile{}, replay.Status(503, "", nil)),
	})
	return mustNew(t, Config{HTTPClient: f.client, Deployments: []route.Deployment{
		dep("a", "", "m", url), dep("a", "", "cut", url), dep("a", "", "down", url),
	}})
}

func oaiOver(c *Client) openai.Client {
	return openai.NewClient(option.WithBaseURL("http://caller.invalid/v1"), option.WithAPIKey("caller-key"),
		option.WithHTTPClient(&http.Client{Transport: c.Transport()}))
}

func TestTransportWithOpenAI(t *testing.T) {
	c := transportFleet(t)
	oc := oaiOver(c)
	ctx := context.Background()

	t.Run("streaming", func(t *testing.T) {
		s := oc.Chat.Completions.NewStreaming(ctx, userParams("m", "hi"))
		var b strings.Builder
		for s.Next() {
			for _, ch := range s.Current().Choices {
				b.WriteString(ch.Delta.Content)
			}
		}
		require.NoError(t, s.Err())
		require.NoError(t, s.Close())
		assert.Equal(t, replay.Text(30), b.String())
	})
	t.Run("not streaming", func(t *testing.T) {
		got, err := oc.Chat.Completions.New(ctx, userParams("m", "hi"))
		require.NoError(t, err)
		assert.Equal(t, replay.Text(30), got.Choices[0].Message.Content)
		assert.Equal(t, "stop", got.Choices[0].FinishReason)
		assert.EqualValues(t, 30, got.Usage.CompletionTokens)
	})
	t.Run("mid-stream failure is an error", func(t *testing.T) {
		s := oc.Chat.Completions.NewStreaming(ctx, userParams("cut", "hi"))
		for s.Next() {
		}
		require.Error(t, s.Err())
		assert.ErrorIs(t, s.Err(), fallback.ErrMidStream)
		s.Close()
	})
	t.Run("failure is an OpenAI error, not retried", func(t *testing.T) {
		_, err := oc.Chat.Completions.New(ctx, userParams("down", "hi"))
		var oe *openai.Error
		require.ErrorAs(t, err, &oe)
		assert.Equal(t, http.StatusServiceUnavailable, oe.StatusCode)
		st, ok := c.Stats().Lookup(measure.Key{Provider: "a", Model: "down"})
		require.True(t, ok)
		assert.LessOrEqual(t, st.Requests, int64(2), "openai-go must not retry a routed failure (attempts per deployment: 2)")
	})
	t.Run("unknown model is 404", func(t *testing.T) {
		_, err := oc.Chat.Completions.New(ctx, userParams("nope", "hi"))
		var oe *openai.Error
		require.ErrorAs(t, err, &oe)
		assert.Equal(t, http.StatusNotFound, oe.StatusCode)
		assert.Equal(t, "model_not_found", oe.Code)
	})
	t.Run("models lists logical models", func(t *testing.T) {
		page, err := oc.Models.List(ctx)
		require.NoError(t, err)
		var ids []string
		for _, m := range page.Data {
			ids = append(ids, m.ID)
		}
		assert.ElementsMatch(t, []string{"m", "cut", "down"}, ids)
	})
}

func TestTransportPlainHTTP(t *testing.T) {
	c := transportFleet(t)
	hc := &http.Client{Transport: c.Transport()}
	post := func(t *testing.T, body string) *http.Response {
		resp, err := hc.Post("http://caller.invalid/v1/chat/completions", "application/json", strings.NewReader(body))
		require.NoError(t, err)
		return resp
	}

	t.Run("streaming", func(t *testing.T) {
		resp := post(t, `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`)
		defer resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode)
		assert.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
		var text strings.Builder
		sc := bufio.NewScanner(resp.Body)
		done := false
		for sc.Scan() {
			line, ok := strings.CutPrefix(sc.Text(), "data: ")
			if !ok {
				continue
			}
			if line == "[DONE]" {
				done = true
				continue
			}
			text.WriteString(gjson.Get(line, "choices.0.delta.content").Str)
		}
		require.NoError(t, sc.Err())
		assert.True(t, done)
		assert.Equal(t, replay.Text(30), text.String())
	})
	t.Run("not streaming", func(t *testing.T) {
		resp := post(t, `{"model":"m","messages":[{"role":"user","content":"hi"}]}`)
		defer resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode)
		assert.Equal(t, "application/json", resp.Header.Get("Content-Type"))
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		var cc struct {
			Object  string `json:"object"`
			Choices []struct {
				Message      struct{ Role, Content string }
				FinishReason string `json:"finish_reason"`
			}
			Usage struct {
				CompletionTokens int `json:"completion_tokens"`
			}
		}
		require.NoError(t, json.Unmarshal(b, &cc), string(b))
		assert.Equal(t, "chat.completion", cc.Object)
		require.Len(t, cc.Choices, 1)
		assert.Equal(t, "assistant", cc.Choices[0].Message.Role)
		assert.Equal(t, replay.Text(30), cc.Choices[0].Message.Content)
		assert.Equal(t, "stop", cc.Choices[0].FinishReason)
		assert.Equal(t, 30, cc.Usage.CompletionTokens)
	})
	t.Run("mid-stream failure never reads as a clean EOF", func(t *testing.T) {
		resp := post(t, `{"model":"cut","stream":true,"messages":[{"role":"user","content":"hi"}]}`)
		defer resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode)
		_, err := io.ReadAll(resp.Body)
		require.Error(t, err)
		var fe *fallback.Error
		assert.True(t, errors.As(err, &fe), "%T %v", err, err)
	})
	t.Run("other paths are refused", func(t *testing.T) {
		resp, err := hc.Post("http://caller.invalid/v1/completions", "application/json", strings.NewReader(`{"model":"m","prompt":"x"}`))
		require.NoError(t, err)
		defer resp.Body.Close()
		assert.Equal(t, http.StatusNotFound, resp.StatusCode)
		assert.Equal(t, "false", resp.Header.Get("X-Should-Retry"))
		b, _ := io.ReadAll(resp.Body)
		assert.Contains(t, gjson.GetBytes(b, "error.message").Str, "routes only")
	})
	t.Run("bad body", func(t *testing.T) {
		resp := post(t, `{"messages":[]}`)
		defer resp.Body.Close()
		assert.Equal(t, http.StatusBadRequest, resp.StatusCode)
	})
}

func TestTransportEarlyCloseIsCancellation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newMemFleet()
		url := f.add("a", map[string]replay.Script{"m": &replay.Profile{TPS: 10, OutputTokens: 100}})
		c := mustNew(t, Config{HTTPClient: &http.Client{Transport: f}, Deployments: []route.Deployment{dep("a", "", "m", url)}})
		req, err := http.NewRequest(http.MethodPost, "http://x/v1/chat/completions", strings.NewReader(`{"model":"m","stream":true,"messages":[]}`))
		require.NoError(t, err)
		resp, err := c.Transport().RoundTrip(req)
		require.NoError(t, err)
		buf := make([]byte, 64)
		_, err = resp.Body.Read(buf)
		require.NoError(t, err)
		require.NoError(t, resp.Body.Close())
		synctest.Wait()
		st, ok := c.Stats().Lookup(measure.Key{Provider: "a", Model: "m"})
		require.True(t, ok)
		assert.EqualValues(t, 1, st.Canceled)
		assert.Zero(t, st.Errors)
		att := f.providers["a"].h.Attempts()
		require.Len(t, att, 1)
		assert.False(t, att[0].End.IsZero(), "upstream ended")
	})
}

// TestFeedbackRecordsAttemptClass checks that each attempt reaches measure
// with the class the Executor gave it (fallback.Attempt.ErrorClass): a
// headers deadline and a stall are timeouts, a cut stream is other, and
// none of them is the caller's cancellation.
func TestFeedbackRecordsAttemptClass(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newMemFleet()
		script := replay.WithFaults(&replay.Profile{TPS: 100, OutputTokens: 20},
			replay.Hang().OnAttempts(1), replay.StallAfter(2, time.Hour).OnAttempts(2), replay.CutAfter(2).OnAttempts(3))
		url := f.add("a", map[string]replay.Script{"m": script})
		c := mustNew(t, Config{HTTPClient: &http.Client{Transport: f}, Deployments: []route.Deployment{dep("a", "", "m", url)}})
		for range 3 {
			_, _, err := streamOnce(t, c, "m")
			require.Error(t, err)
		}
		synctest.Wait()
		st, ok := c.Stats().Lookup(measure.Key{Provider: "a", Model: "m"})
		require.True(t, ok)
		assert.Equal(t, map[string]int64{measure.ClassTimeout: 2, measure.ClassOther: 1}, st.ErrorsByClass)
		assert.EqualValues(t, 2, st.Timeouts)
		assert.EqualValues(t, 3, st.Errors)
		assert.Zero(t, st.Canceled)
	})
}

// TestBeginTracksOutputCap checks that an attempt of a call that states
// max_tokens is begun in measure with that cap, so that a stream stalled in
// the middle reads as overdue before it ends, and that a call without one
// is not timed, even when it gives an expected output size.
func TestBeginTracksOutputCap(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newMemFleet()
		script := replay.WithFaults(&replay.Profile{TPS: 100, OutputTokens: 20}, replay.StallAfter(2, 10*time.Second))
		url := f.add("a", map[string]replay.Script{"m": script})
		c := mustNew(t, Config{HTTPClient: &http.Client{Transport: f}, Deployments: []route.Deployment{dep("a", "", "m", url)}})
		k := measure.Key{Provider: "a", Model: "m"}
		// At 0.1 s to the first token and 100 tok/s a call of 20 tokens
		// takes 0.3 s; the stream stalls for 10 s after its second chunk.
		overdue := func(p openai.ChatCompletionNewParams, opts ...CallOption) float64 {
			s := c.Chat.Completions.NewStreaming(context.Background(), p, opts...)
			require.True(t, s.Next(), "first chunk")
			time.Sleep(6 * time.Second)
			got := registry.Overdue(c.reg.Handle(k), time.Now(), 0.1, 100)
			_, err := drain(t, s)
			require.NoError(t, err)
			require.NoError(t, s.Close())
			synctest.Wait()
			assert.Zero(t, registry.Overdue(c.reg.Handle(k), time.Now(), 0.1, 100), "ended")
			return got
		}
		capped := userParams("m", "hello")
		capped.MaxTokens = openai.Int(20)
		assert.InDelta(t, 20, overdue(capped), 1, "6 s into a call of 0.3 s")
		assert.Zero(t, overdue(userParams("m", "hello")), "no max_tokens: not timed")
		// An expected size is not a cap: an answer may exceed it.
		assert.Zero(t, overdue(userParams("m", "hello"), WithRequest(route.Request{ExpectedOutputTokens: 20})),
			"ExpectedOutputTokens without max_tokens: not timed")
	})
}
