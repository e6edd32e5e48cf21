package tpsroute

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tpsroute/tpsroute/fallback"
	"github.com/tpsroute/tpsroute/internal/redact"
	"github.com/tpsroute/tpsroute/route"
)

// hostileKey is the deployment's own key, which the hostile upstream echoes.
const hostileKey = "sk-hostile-0123456789abcdef"

// echoForms are the ways the upstream writes the key back: raw, and in the
// escapes a JSON or URL reader turns back into it.
func echoForms() map[string]string {
	var all strings.Builder
	for i := 0; i < len(hostileKey); i++ {
		fmt.Fprintf(&all, `\u%04X`, hostileKey[i])
	}
	return map[string]string{
		"raw":        hostileKey,
		"escape-one": strings.Replace(hostileKey, "-", `\u002d`, 1),
		"escape-all": all.String(),
		"percent":    "%73%6B" + url.PathEscape(hostileKey[2:]),
	}
}

// hostileAnswer is what the upstream sends for one case; %s is the key's form.
type hostileAnswer struct {
	status int
	header map[string]string
	body   string // SSE when status is 200
}

const okChunk = `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"hi "},"finish_reason":null}]}` + "\n\n"
const finishChunk = `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5}}` + "\n\n"

func hostileCases() map[string]hostileAnswer {
	errBody := `{"error":{"message":"bad key %[1]s","type":"%[1]s","param":"%[1]s","code":"%[1]s","%[1]s":"x"}}`
	return map[string]hostileAnswer{
		"error-400":    {status: 400, body: errBody},
		"error-429":    {status: 429, header: map[string]string{"Retry-After": "%s"}, body: errBody},
		"error-500":    {status: 500, body: errBody},
		"error-array":  {status: 400, body: `[{"error":{"message":"%[1]s","type":"%[1]s"}}]`},
		"error-string": {status: 400, body: `{"error":"%[1]s","error_type":"%[1]s"}`},
		"headers": {status: 200, header: map[string]string{"X-Request-Id": "%s", "X-Echo": "%s", "X-Ratelimit-Remaining-Requests": "%s"},
			body: okChunk + finishChunk + "data: [DONE]\n\n"},
		"stream-extras": {status: 200, body: ": %[1]s\n\nid: %[1]s\nx-field: %[1]s\n" + okChunk +
			`data: {"type":"error","detail":"%[1]s"}` + "\n\n" +
			`data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","x_extra":"%[1]s","choices":[{"index":0,"delta":{"content":"there"},"finish_reason":null}]}` + "\n\n" +
			finishChunk + "data: [DONE]\n\n"},
		"content":             {status: 200, body: `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"your key is %[1]s"},"finish_reason":null}]}` + "\n\n" + finishChunk + "data: [DONE]\n\n"},
		"error-before-output": {status: 200, body: `data: {"error":{"message":"%[1]s","type":"%[1]s","param":"%[1]s","code":"%[1]s"}}` + "\n\ndata: [DONE]\n\n"},
		"error-after-output":  {status: 200, body: okChunk + `data: {"error":{"message":"%[1]s","type":"%[1]s","param":"%[1]s","code":"%[1]s"}}` + "\n\n"},
		"event-error":         {status: 200, body: okChunk + "event: error\ndata: {\"message\":\"%[1]s\",\"type\":\"%[1]s\"}\n\n"},
	}
}

// hostileUpstream answers every request with the current case.
type hostileUpstream struct {
	mu   sync.Mutex
	ans  hostileAnswer
	form string
	hits int
}

func (h *hostileUpstream) set(a hostileAnswer, form string) {
	h.mu.Lock()
	h.ans, h.form, h.hits = a, form, 0
	h.mu.Unlock()
}

func (h *hostileUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	h.mu.Lock()
	a, form := h.ans, h.form
	h.hits++
	h.mu.Unlock()
	for k, v := range a.header {
		w.Header().Set(k, strings.ReplaceAll(v, "%s", form))
	}
	body := strings.ReplaceAll(a.body, "%[1]s", form)
	body = strings.ReplaceAll(body, "%s", form)
	if a.status == http.StatusOK {
		w.Header().Set("Content-Type", "text/event-stream")
	} else {
		w.Header().Set("Content-Type", "application/json")
	}
	w.WriteHeader(a.status)
	_, _ = io.WriteString(w, body)
}

// exposed gathers everything a caller, a log or a hook could see of a call.
type exposed struct{ bytes.Buffer }

func (e *exposed) header(h http.Header) {
	for k, vs := range h {
		fmt.Fprintf(e, "%s: %s\n", k, strings.Join(vs, ","))
	}
}

func (e *exposed) err(c *Client, err error) {
	if err == nil {
		return
	}
	fmt.Fprintf(e, "%v\n%+v\n", err, err)
	e.Write(c.HTTPError(err).JSON())
	var oe *openai.Error
	if errors.As(err, &oe) {
		fmt.Fprintf(e, "%s|%s|%s|%s|%s|%s\n", oe.Message, oe.Type, oe.Param, oe.Code, oe.RawJSON(), oe.Error())
		if oe.Response != nil {
			e.header(oe.Response.Header)
		}
	}
	var fe *fallback.Error
	if errors.As(err, &fe) {
		for _, a := range fe.Attempts {
			if a.Err != nil {
				fmt.Fprintf(e, "%v\n", a.Err)
			}
		}
	}
}

// TestHostileUpstreamLeaksNoKey sends every case, with the key in every
// form, through every door, and checks that nothing a caller, a log or an
// attempt hook sees holds the key in any form (redact.Scrubber.Contains).
func TestHostileUpstreamLeaksNoKey(t *testing.T) {
	up := &hostileUpstream{}
	srv := httptest.NewServer(up)
	t.Cleanup(srv.Close)
	var logs, hooks exposed
	var hookMu sync.Mutex
	d := route.Deployment{Provider: "evil", Region: "r", Model: "m", BaseURL: srv.URL + "/v1", APIKey: hostileKey}
	// A Client per subtest: an open breaker would keep later calls from the
	// upstream, and the test from testing anything.
	newClient := func() *Client {
		return mustNew(t, Config{
			Deployments: []route.Deployment{d},
			HTTPClient:  srv.Client(),
			// Retries still happen, each after a millisecond.
			Fallback: fallback.Options{BackoffBase: time.Millisecond, BackoffMax: time.Millisecond, MaxWait: -1},
			Logger:   slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
			OnAttempt: func(a fallback.Attempt) {
				hookMu.Lock()
				defer hookMu.Unlock()
				fmt.Fprintf(&hooks, "%v %+v\n", a.Err, a)
			},
		})
	}
	sc := redact.NewScrubber(d)
	streamBody := `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`
	plainBody := `{"model":"m","messages":[{"role":"user","content":"hi"}]}`
	doors := map[string]func(t *testing.T, c *Client, out *exposed){
		"do-stream": func(t *testing.T, c *Client, out *exposed) {
			r, err := c.Do(context.Background(), []byte(streamBody))
			out.err(c, err)
			if err == nil {
				out.header(r.Header)
				b, err := io.ReadAll(r.Body)
				out.Write(b)
				out.err(c, err)
				r.Body.Close()
			}
		},
		"do-plain": func(t *testing.T, c *Client, out *exposed) {
			r, err := c.Do(context.Background(), []byte(plainBody))
			out.err(c, err)
			if err == nil {
				out.header(r.Header)
				b, _ := io.ReadAll(r.Body)
				out.Write(b)
				r.Body.Close()
			}
		},
		"transport": func(t *testing.T, c *Client, out *exposed) {
			for _, body := range []string{streamBody, plainBody} {
				req, err := http.NewRequest(http.MethodPost, "http://gw.invalid/v1/chat/completions", strings.NewReader(body))
				require.NoError(t, err)
				resp, err := c.Transport().RoundTrip(req)
				out.err(c, err)
				if err == nil {
					out.header(resp.Header)
					b, err := io.ReadAll(resp.Body)
					out.Write(b)
					out.err(c, err)
					resp.Body.Close()
				}
			}
		},
		"client-stream": func(t *testing.T, c *Client, out *exposed) {
			s := c.Chat.Completions.NewStreaming(context.Background(), userParams("m", "hi"))
			for s.Next() {
				out.WriteString(s.Current().RawJSON())
			}
			out.err(c, s.Err())
			require.NoError(t, s.Close())
		},
		"client-new": func(t *testing.T, c *Client, out *exposed) {
			cc, err := c.Chat.Completions.New(context.Background(), userParams("m", "hi"))
			out.err(c, err)
			if err == nil {
				out.WriteString(cc.RawJSON())
			}
		},
	}
	for cname, ans := range hostileCases() {
		for fname, form := range echoForms() {
			for dname, door := range doors {
				t.Run(cname+"/"+fname+"/"+dname, func(t *testing.T) {
					up.set(ans, form)
					var out exposed
					door(t, newClient(), &out)
					up.mu.Lock()
					hits := up.hits
					up.mu.Unlock()
					require.Positive(t, hits, "the upstream was never asked")
					assert.False(t, sc.Contains(out.Bytes()), "the key reached the caller:\n%s", out.String())
				})
			}
		}
	}
	assert.False(t, sc.Contains(logs.Bytes()), "the key reached the log:\n%s", logs.String())
	assert.False(t, sc.Contains(hooks.Bytes()), "the key reached OnAttempt:\n%s", hooks.String())
}

// TestRelayedHeadersAreAllowListed: a caller gets the request id and
// rate-limit headers, nothing else of the upstream's.
func TestRelayedHeadersAreAllowListed(t *testing.T) {
	up := &hostileUpstream{}
	up.set(hostileAnswer{status: 200, header: map[string]string{
		"X-Request-Id": "req-1", "X-Ratelimit-Remaining-Tokens": "99", "Set-Cookie": "s=1", "X-Internal-Host": "gpu-7", "Server": "vllm",
	}, body: okChunk + finishChunk + "data: [DONE]\n\n"}, "")
	srv := httptest.NewServer(up)
	t.Cleanup(srv.Close)
	c := mustNew(t, Config{Deployments: []route.Deployment{{Provider: "p", Region: "r", Model: "m", BaseURL: srv.URL + "/v1", APIKey: "sk-p-123456"}}, HTTPClient: srv.Client()})
	r, err := c.Do(context.Background(), []byte(`{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`))
	require.NoError(t, err)
	_, _ = io.ReadAll(r.Body)
	r.Body.Close()
	assert.Equal(t, "req-1", r.Header.Get("X-Request-Id"))
	assert.Equal(t, "99", r.Header.Get("X-Ratelimit-Remaining-Tokens"))
	for _, k := range []string{"Set-Cookie", "X-Internal-Host", "Server"} {
		assert.Empty(t, r.Header.Values(k), k)
	}
}
