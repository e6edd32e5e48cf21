package tpsroute

import (
	"context"
	"io"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"

	"github.com/tpsroute/tpsroute/measure"
	"github.com/tpsroute/tpsroute/replay"
	"github.com/tpsroute/tpsroute/route"
)

func TestReadRequest(t *testing.T) {
	const msgs = `"messages":[]`
	tests := []struct {
		name      string
		body      string
		want      requestInfo
		wantParam string // the field a *RequestError names; "" for the body itself
		wantErr   string
	}{
		{name: "stream", body: `{"model":"m@r1","stream":true,"prompt_cache_key":"k",` + msgs + `}`, want: requestInfo{RawModel: "m@r1", Model: "m", Revision: "r1", Stream: true, CacheKey: "k"}},
		{name: "no stream", body: `{"model":"m",` + msgs + `}`, want: requestInfo{RawModel: "m", Model: "m"}},
		{name: "max tokens", body: `{"model":"m","max_tokens":50,` + msgs + `}`, want: requestInfo{RawModel: "m", Model: "m", MaxTokens: 50}},
		{name: "max completion tokens wins", body: `{"model":"m","max_tokens":50,"max_completion_tokens":70,` + msgs + `}`, want: requestInfo{RawModel: "m", Model: "m", MaxTokens: 70}},
		{name: "nulls are absent", body: `{"model":"m","stream":null,"prompt_cache_key":null,"max_tokens":null,` + msgs + `}`, want: requestInfo{RawModel: "m", Model: "m"}},
		{name: "no model", body: `{` + msgs + `}`, wantParam: "model", wantErr: "model: required"},
		{name: "model not string", body: `{"model":3,` + msgs + `}`, wantParam: "model", wantErr: "model: required"},
		{name: "no messages", body: `{"model":"m"}`, wantParam: "messages", wantErr: "messages: required"},
		{name: "stream not bool", body: `{"model":"m","stream":"yes",` + msgs + `}`, wantParam: "stream", wantErr: "boolean"},
		{name: "cache key not string", body: `{"model":"m","prompt_cache_key":1,` + msgs + `}`, wantParam: "prompt_cache_key", wantErr: "string"},
		{name: "max tokens negative", body: `{"model":"m","max_tokens":-1,` + msgs + `}`, wantParam: "max_tokens", wantErr: "positive integer"},
		{name: "max tokens fraction", body: `{"model":"m","max_completion_tokens":1.5,` + msgs + `}`, wantParam: "max_completion_tokens", wantErr: "positive integer"},
		{name: "stream options null", body: `{"model":"m","stream_options":null,` + msgs + `}`, want: requestInfo{RawModel: "m", Model: "m"}},
		{name: "stream options an array", body: `{"model":"m","stream_options":["x"],` + msgs + `}`, wantParam: "stream_options", wantErr: "must be an object"},
		{name: "stream options a string", body: `{"model":"m","stream_options":"x",` + msgs + `}`, wantParam: "stream_options", wantErr: "must be an object"},
		{name: "include_usage not bool", body: `{"model":"m","stream_options":{"include_usage":"yes"},` + msgs + `}`, wantParam: "stream_options.include_usage", wantErr: "boolean"},
		{name: "not an object", body: `[1]`, wantErr: "JSON object"},
		{name: "invalid", body: `{"model":`, wantErr: "not valid JSON"},
		{name: "too deep", body: `{"model":"m","messages":[],"x":` + strings.Repeat("[", 129) + strings.Repeat("]", 129) + `}`, wantErr: "deeper than 128 levels"},
		{name: "model too long", body: `{"model":"` + strings.Repeat("m", 4097) + `",` + msgs + `}`, wantParam: "model", wantErr: "at most 4096 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := readRequest([]byte(tt.body))
			if tt.wantErr != "" {
				var re *RequestError
				require.ErrorAs(t, err, &re)
				assert.Equal(t, tt.wantParam, re.Param)
				assert.Contains(t, err.Error(), tt.wantErr)
				assert.True(t, strings.HasPrefix(err.Error(), "tpsroute: "))
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestAttemptBuild(t *testing.T) {
	const hinted = `{"model":"llama","stream":true,"prompt_cache_key":"sess-1","messages":[` +
		`{"role":"system","content":"long prefix","cache_control":{"type":"ephemeral"}},` +
		`{"role":"user","content":[{"type":"text","text":"hi","cache_control":{"type":"ephemeral"}},{"type":"text","text":"there"}]}],` +
		`"tools":[{"type":"function","function":{"name":"f"},"cache_control":{"type":"ephemeral"}}]}`
	plain := route.Deployment{Provider: "a", Model: "llama", ProviderModel: "llama-3.3-70b-versatile", BaseURL: "http://a.invalid/v1", APIKey: "key-a",
		Headers: map[string]string{"X-Route-Region": "us-east-1"}}
	caching := plain
	caching.Capabilities = route.Capabilities{CacheControl: true}
	noOpts := plain
	noOpts.Capabilities = route.Capabilities{NoStreamOptions: true}
	wild := route.Deployment{Provider: "gw", Model: "*", BaseURL: "http://gw.invalid/v1"}
	build := func(t *testing.T, cl *call, d route.Deployment, body string) (*http.Request, []byte) {
		t.Helper()
		req, err := cl.build(context.Background(), d, []byte(body))
		require.NoError(t, err)
		out, err := io.ReadAll(req.Body)
		require.NoError(t, err)
		return req, out
	}
	llama := &call{info: requestInfo{Model: "llama"}}

	t.Run("strips cache hints for a deployment without support", func(t *testing.T) {
		in := []byte(hinted)
		req, err := llama.build(context.Background(), plain, in)
		require.NoError(t, err)
		out, err := io.ReadAll(req.Body)
		require.NoError(t, err)
		assert.Equal(t, hinted, string(in), "input must not change")
		assert.NotContains(t, string(out), "cache_control")
		assert.NotContains(t, string(out), "prompt_cache_key")
		assert.Equal(t, "llama-3.3-70b-versatile", gjson.GetBytes(out, "model").Str)
		assert.Equal(t, "there", gjson.GetBytes(out, "messages.1.content.1.text").Str)
		assert.Equal(t, "f", gjson.GetBytes(out, "tools.0.function.name").Str)
		assert.True(t, gjson.GetBytes(out, "stream_options.include_usage").Bool(), "usage is asked for by default")
		assert.Equal(t, "http://a.invalid/v1/chat/completions", req.URL.String())
		assert.Equal(t, "Bearer key-a", req.Header.Get("Authorization"))
	})
	t.Run("forwards cache hints and include_usage where supported", func(t *testing.T) {
		_, out := build(t, llama, caching, hinted)
		assert.Equal(t, "sess-1", gjson.GetBytes(out, "prompt_cache_key").Str)
		assert.Equal(t, "ephemeral", gjson.GetBytes(out, "messages.0.cache_control.type").Str)
		assert.Equal(t, "ephemeral", gjson.GetBytes(out, "messages.1.content.0.cache_control.type").Str)
		assert.True(t, gjson.GetBytes(out, "stream").Bool())
		assert.True(t, gjson.GetBytes(out, "stream_options.include_usage").Bool())
	})
	t.Run("a call's cache key goes only where supported", func(t *testing.T) {
		keyed := &call{info: requestInfo{Model: "llama"}}
		keyed.cfg.req.CacheKey = "conv-9"
		_, out := build(t, keyed, caching, `{"model":"llama","stream":true}`)
		assert.Equal(t, "conv-9", gjson.GetBytes(out, "prompt_cache_key").Str)
		_, out = build(t, keyed, plain, `{"model":"llama","stream":true}`)
		assert.False(t, gjson.GetBytes(out, "prompt_cache_key").Exists())
	})
	t.Run("wildcard passes the requested model through", func(t *testing.T) {
		_, out := build(t, &call{info: requestInfo{Model: "qwen"}}, wild, `{"model":"qwen@7","stream":true}`)
		assert.Equal(t, "qwen", gjson.GetBytes(out, "model").Str)
	})
	t.Run("NoStreamOptions adds no stream_options", func(t *testing.T) {
		_, out := build(t, llama, noOpts, `{"model":"llama","stream":true}`)
		assert.False(t, gjson.GetBytes(out, "stream_options").Exists())
	})
	t.Run("keeps the caller's include_usage where NoStreamOptions", func(t *testing.T) {
		_, out := build(t, llama, noOpts, `{"model":"llama","stream":true,"stream_options":{"include_usage":true}}`)
		assert.True(t, gjson.GetBytes(out, "stream_options.include_usage").Bool())
	})
	t.Run("caller headers are forwarded without credentials, and never over the deployment's", func(t *testing.T) {
		cl := &call{info: requestInfo{Model: "llama"}, hdr: http.Header{
			"Authorization":  {"Bearer caller"},
			"X-Trace-Id":     {"t-1"},
			"X-Route-Region": {"eu-west-1"},
		}}
		req, _ := build(t, cl, plain, `{"model":"llama","stream":true}`)
		assert.Equal(t, "Bearer key-a", req.Header.Get("Authorization"))
		assert.Equal(t, "t-1", req.Header.Get("X-Trace-Id"))
		assert.Equal(t, "us-east-1", req.Header.Get("X-Route-Region"))
	})
}

// TestReadRequestNested: megabytes of nested brackets are a *RequestError
// saying so, found without recursion (gjson.ValidBytes recursed once per
// bracket: about 900 MiB of stack for 4 MiB, a fatal stack overflow for 8).
func TestReadRequestNested(t *testing.T) {
	for _, size := range []int{4 << 20, 8 << 20} {
		body := []byte(`{"model":"m","messages":` + strings.Repeat("[", size) + `}`)
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		_, err := readRequest(body)
		runtime.ReadMemStats(&after)
		var re *RequestError
		require.ErrorAs(t, err, &re)
		assert.Contains(t, re.Reason, "deeper than 128 levels")
		assert.Less(t, after.StackInuse, before.StackInuse+1<<20, "stack growth")
	}
	t.Run("through the Transport", func(t *testing.T) {
		c := mustNew(t, Config{Deployments: []route.Deployment{dep("a", "", "m", "http://a.invalid/v1")}})
		body := `{"model":"m","messages":` + strings.Repeat("[", 8<<20) + `}`
		req, err := http.NewRequest(http.MethodPost, "http://caller.invalid/v1/chat/completions", strings.NewReader(body))
		require.NoError(t, err)
		resp, err := c.Transport().RoundTrip(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		assert.Equal(t, http.StatusBadRequest, resp.StatusCode)
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		assert.Contains(t, string(b), "deeper than 128 levels")
	})
}

// TestReadRequestCopies: the strings readRequest returns share no memory
// with the body, or with any copy of it, so a model name or cache key kept
// after the call (a statistics key, an affinity entry) never keeps the body
// alive. (gjson.ParseBytes copied the body into one string, of which every
// field read was a substring.)
func TestReadRequestCopies(t *testing.T) {
	pad := strings.Repeat("x", 4<<20)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	info := func() requestInfo {
		body := []byte(`{"model":"qwen@7","prompt_cache_key":"session-1","messages":[],"pad":"` + pad + `"}`)
		info, err := readRequest(body)
		require.NoError(t, err)
		lo := uintptr(unsafe.Pointer(unsafe.SliceData(body)))
		hi := lo + uintptr(len(body))
		for name, s := range map[string]string{"RawModel": info.RawModel, "Model": info.Model, "Revision": info.Revision, "CacheKey": info.CacheKey} {
			require.NotEmpty(t, s, name)
			p := uintptr(unsafe.Pointer(unsafe.StringData(s)))
			assert.False(t, p >= lo && p < hi, "%s points into the body", name)
		}
		return info
	}()
	runtime.GC()
	runtime.ReadMemStats(&after)
	assert.Less(t, int64(after.HeapAlloc)-int64(before.HeapAlloc), int64(1<<20), "heap kept alive by the fields read")
	assert.Equal(t, "session-1", info.CacheKey)
	runtime.KeepAlive(pad) // counted in before: it must stay in after
}

// TestModelNameLimit: a model name longer than a state file's key string
// (measure.MaxKeyBytes) is refused with a 400 naming the field, in the body
// and in WithModels; one of exactly that length is served.
func TestModelNameLimit(t *testing.T) {
	long, longest := strings.Repeat("m", measure.MaxKeyBytes+1), strings.Repeat("m", measure.MaxKeyBytes)
	f := newMemFleet()
	url := f.add("w", map[string]replay.Script{longest: &replay.Profile{OutputTokens: 3}})
	c := mustNew(t, Config{HTTPClient: &http.Client{Transport: f}, Deployments: []route.Deployment{dep("w", "", "*", url)}})
	body := func(model string) []byte {
		return []byte(`{"model":"` + model + `","messages":[{"role":"user","content":"hi"}]}`)
	}
	for _, tc := range []struct {
		name, model string
		opts        []CallOption
		param       string
	}{
		{"body", long, nil, "model"},
		{"fallback models", "m", []CallOption{WithModels("n", long)}, "models"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := c.Do(context.Background(), body(tc.model), tc.opts...)
			var re *RequestError
			require.ErrorAs(t, err, &re)
			assert.Equal(t, tc.param, re.Param)
			assert.Contains(t, re.Reason, "at most 4096 bytes, not 4097")
			assert.Equal(t, http.StatusBadRequest, c.HTTPError(err).Status)
		})
	}
	resp, err := c.Do(context.Background(), body(longest))
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	assert.Equal(t, longest, resp.Outcome().Deployment.Model)
}
