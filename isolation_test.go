package tpsroute

import (
	"context"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"

	"github.com/tpsroute/tpsroute/measure"
	"github.com/tpsroute/tpsroute/replay"
	"github.com/tpsroute/tpsroute/route"
)

// everything returns all header values and the body of a request as one string.
func everything(s seen) string {
	var b strings.Builder
	for k, vs := range s.Header {
		b.WriteString(k + ": " + strings.Join(vs, ",") + "\n")
	}
	b.WriteString(s.Body)
	return b.String()
}

func TestKeysHeadersAndHintsStayWithTheirDeployment(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newMemFleet()
		down := replay.WithFaults(&replay.Profile{}, replay.Status(503, "", nil))
		a := route.Deployment{Provider: "a", Region: "us", Model: "m", ProviderModel: "m-at-a", BaseURL: f.add("a", map[string]replay.Script{"m-at-a": down}),
			APIKey: "secret-key-of-a", Headers: map[string]string{"X-Route-Region": "us-a"},
			Capabilities: route.Capabilities{CacheControl: true}}
		b := route.Deployment{Provider: "b", Region: "us", Model: "m", BaseURL: f.add("b", map[string]replay.Script{"m": &replay.Profile{OutputTokens: 5}}),
			APIKey: "secret-key-of-b", Capabilities: route.Capabilities{NoStreamOptions: true}}
		c := mustNew(t, Config{HTTPClient: &http.Client{Transport: f}, Deployments: []route.Deployment{a, b}})

		body := `{"model":"m","stream":true,"prompt_cache_key":"sess-9","messages":[` +
			`{"role":"system","content":"be brief","cache_control":{"type":"ephemeral"}},{"role":"user","content":"hi"}]}`
		for range 3 {
			req, err := http.NewRequest(http.MethodPost, "http://caller.invalid/v1/chat/completions", strings.NewReader(body))
			require.NoError(t, err)
			req.Header.Set("Authorization", "Bearer caller-own-key")
			req.Header.Set("OpenAI-Organization", "org-caller")
			req.Header.Set("X-Trace", "t-1")
			req = req.WithContext(ContextWithOptions(context.Background(), WithPin("a", "us")))
			resp, err := c.Transport().RoundTrip(req)
			require.NoError(t, err)
			out, err := io.ReadAll(resp.Body)
			require.NoError(t, err)
			resp.Body.Close()
			assert.Contains(t, string(out), "data: [DONE]")
		}
		// And through the Client with a caller header that must not leak.
		_, err := c.Chat.Completions.New(context.Background(), userParams("m", "hi"), WithPin("a", "us"),
			WithHeader("Api-Key", "caller-api-key"), WithHeader("X-Trace", "t-2"))
		require.NoError(t, err)

		ra, rb := f.providers["a"].requests(), f.providers["b"].requests()
		require.NotEmpty(t, ra)
		require.Len(t, rb, 4)
		for _, r := range ra {
			all := everything(r)
			assert.Equal(t, "Bearer secret-key-of-a", r.Header.Get("Authorization"))
			assert.Equal(t, "us-a", r.Header.Get("X-Route-Region"))
			assert.NotContains(t, all, "secret-key-of-b")
			assert.NotContains(t, all, "caller-own-key")
			assert.NotContains(t, all, "caller-api-key")
			assert.NotContains(t, all, "org-caller")
			assert.Equal(t, "m-at-a", gjson.Get(r.Body, "model").Str)
			assert.True(t, gjson.Get(r.Body, "stream_options.include_usage").Bool())
		}
		for i, r := range rb {
			all := everything(r)
			assert.Equal(t, "Bearer secret-key-of-b", r.Header.Get("Authorization"))
			assert.NotContains(t, all, "secret-key-of-a")
			assert.NotContains(t, all, "us-a", "a's routing directive must not reach b")
			assert.NotContains(t, all, "caller-own-key")
			assert.NotContains(t, all, "caller-api-key")
			assert.NotContains(t, all, "org-caller")
			assert.NotContains(t, all, "cache_control", "b does not declare cache_control")
			assert.NotContains(t, all, "prompt_cache_key")
			assert.Equal(t, "m", gjson.Get(r.Body, "model").Str)
			assert.False(t, gjson.Get(r.Body, "stream_options").Exists(), "b declares NoStreamOptions")
			assert.NotEmpty(t, r.Header.Get("X-Trace"), "caller's other headers are forwarded (request %d)", i)
		}
		// a declares cache_control: it receives the hints.
		assert.Equal(t, "sess-9", gjson.Get(ra[0].Body, "prompt_cache_key").Str)
		assert.Equal(t, "ephemeral", gjson.Get(ra[0].Body, "messages.0.cache_control.type").Str)
	})
}

func TestRevisionPinAndWildcard(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newMemFleet()
		ok := &replay.Profile{OutputTokens: 4}
		v1 := route.Deployment{Provider: "p", Model: "m", Revision: "v1", ProviderModel: "m-v1", BaseURL: f.add("v1", map[string]replay.Script{"m-v1": ok})}
		v2 := route.Deployment{Provider: "p", Model: "m", Revision: "v2", ProviderModel: "m-v2", BaseURL: f.add("v2", map[string]replay.Script{"m-v2": ok})}
		wild := route.Deployment{Provider: "vllm", Region: "eu", Model: route.Wildcard, BaseURL: f.add("w", map[string]replay.Script{"qwen": ok, "llama": ok})}
		c := mustNew(t, Config{HTTPClient: &http.Client{Transport: f}, Deployments: []route.Deployment{v1, v2, wild}})

		for range 5 {
			s, _, err := streamOnce(t, c, "m@v2")
			require.NoError(t, err)
			assert.Equal(t, "v2", s.Outcome().Deployment.Revision)
		}
		assert.Zero(t, f.providers["v1"].count(), "m@v2 never goes to v1")

		for _, m := range []string{"qwen", "llama", "qwen"} {
			s, _, err := streamOnce(t, c, m)
			require.NoError(t, err)
			assert.Equal(t, "vllm", s.Outcome().Deployment.Provider)
			assert.Equal(t, m, s.Outcome().Deployment.Model, "a wildcard answers as the model requested")
		}
		var models []string
		for _, r := range f.providers["w"].requests() {
			models = append(models, gjson.Get(r.Body, "model").Str)
		}
		assert.Equal(t, []string{"qwen", "llama", "qwen"}, models, "the requested model passes through")
		st := c.Stats()
		q, ok1 := st.Lookup(measure.Key{Provider: "vllm", Region: "eu", Model: "qwen"})
		require.True(t, ok1, "statistics are kept per requested model")
		assert.EqualValues(t, 2, q.Requests)
		_, ok2 := st.Lookup(measure.Key{Provider: "vllm", Region: "eu", Model: route.Wildcard})
		assert.False(t, ok2, "never per wildcard")
		assert.Equal(t, route.BreakerClosed, c.Status(measure.Key{Provider: "vllm", Region: "eu", Model: "qwen"}).Breaker)
	})
}

// TestNoCredentialHandedBack: a deployment whose credential is a header
// (Azure's api-key) rather than APIKey never has it handed back: not by
// Stream.Outcome, Response.Outcome, WithOutcome, Client.Deployments nor an
// HTTPError message that echoes it, and the configured map is not modified.
func TestNoCredentialHandedBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const azureKey, bearer = "azure-secret-0123", "bearer-secret-4567"
		f := newMemFleet()
		echo := `{"error":{"message":"key ` + azureKey + ` is not valid for this model","type":"invalid_request_error"}}`
		a := route.Deployment{Provider: "az", Model: "m", APIKey: bearer,
			BaseURL: f.add("az", map[string]replay.Script{"m": &replay.Profile{OutputTokens: 3}, "bad": replay.WithFaults(&replay.Profile{}, replay.Status(400, echo, nil))}),
			Headers: map[string]string{"api-key": azureKey, "X-Route-Region": "eastus"}}
		wild := a
		wild.Model, wild.Provider = route.Wildcard, "az2"
		c := mustNew(t, Config{HTTPClient: &http.Client{Transport: f}, Deployments: []route.Deployment{a, wild}})

		var rep Outcome
		s := c.Chat.Completions.NewStreaming(context.Background(), userParams("m", "hi"), WithOutcome(&rep))
		_, err := drain(t, s)
		require.NoError(t, err)
		require.NoError(t, s.Close())
		r, err := c.Do(context.Background(), []byte(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`))
		require.NoError(t, err)
		require.NoError(t, r.Body.Close())
		_, err = c.Chat.Completions.New(context.Background(), userParams("bad", "hi"))
		require.Error(t, err)

		got := map[string]route.Deployment{"Stream": s.Outcome().Deployment, "Response": r.Outcome().Deployment, "WithOutcome": rep.Deployment}
		for i, d := range c.Deployments() {
			got["Deployments"+strconv.Itoa(i)] = d
		}
		for name, d := range got {
			assert.Empty(t, d.APIKey, name)
			assert.Equal(t, "REDACTED", d.Headers["api-key"], name)
			assert.Equal(t, "eastus", d.Headers["X-Route-Region"], "%s: routing headers are kept", name)
		}
		msg := c.HTTPError(err).Message
		assert.NotContains(t, msg, azureKey)
		assert.NotContains(t, msg, bearer)
		assert.Equal(t, azureKey, a.Headers["api-key"], "the caller's map is not modified")
		reqs := f.providers["az"].requests()
		require.NotEmpty(t, reqs)
		assert.Equal(t, azureKey, reqs[0].Header.Get("api-key"), "the provider still gets its key")
	})
}
