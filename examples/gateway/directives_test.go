package main

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"

	"github.com/tpsroute/tpsroute/measure"

	"github.com/tpsroute/tpsroute/replay"
)

// threeProviders serves model "m" on a (us, cheap), b (eu, mid) and c (us,
// dear), and e (ap), and model "n" on b and d (us); the "m" of every provider
// in down answers 503. All deployments are cold: where the test needs a
// primary it names it with provider.order.
func threeProviders(t *testing.T, down string) *env {
	a, b, c, bn, dn, e := dep("a", "us", "m"), dep("b", "eu", "m"), dep("c", "us", "m"), dep("b", "eu", "n"), dep("d", "us", "n"), dep("e", "ap", "m")
	a.Price = measure.Price{Input: 0.1, Output: 0.2}
	b.Price = measure.Price{Input: 0.5, Output: 1}
	c.Price = measure.Price{Input: 2, Output: 4}
	e.Price = measure.Price{Input: 3, Output: 9}
	scripts := map[string]replay.Script{"b-n": prof(8), "d-n": prof(8)}
	for _, p := range "abce" {
		var s replay.Script = prof(8)
		if strings.ContainsRune(down, p) {
			s = replay.WithFaults(prof(8), replay.Status(http.StatusServiceUnavailable, "", nil))
		}
		scripts[string(p)+"-m"] = s
	}
	return newEnv(t, scripts, testConfig(a, b, c, bn, dn, e), options{})
}

func TestDirectivesEndToEnd(t *testing.T) {
	tests := []struct {
		name   string
		down   string   // providers whose "m" answers 503
		body   string   // request body
		hdr    []string // request headers
		status int
		dep    string   // X-Tpsroute-Deployment
		hosts  []string // upstream hosts tried, in order
		tries  int      // when hosts is nil: how many upstream requests
	}{
		{name: "models_fallback", down: "a", body: `{"models":["m","n"],` + hi + `,"stream":true,"provider":{"ignore":["b","c","e"]}}`,
			status: 200, dep: "d/us/n", hosts: []string{"a", "d"}},
		{name: "models_first_is_primary", body: `{"models":["n","m"],` + hi + `,"stream":true,"provider":{"order":["b"]}}`, status: 200, dep: "b/eu/n", hosts: []string{"b"}},
		{name: "order", body: req("m", true, `"provider":{"order":["c","b"]}`), status: 200, dep: "c/us/m", hosts: []string{"c"}},
		{name: "order_fails_over_past_the_list", down: "a", body: req("m", true, `"provider":{"order":["a"]}`), status: 200, dep: "b/eu/m", hosts: []string{"a", "b"}},
		{name: "allow_fallbacks_false_with_order", down: "a", body: req("m", true, `"provider":{"order":["a"],"allow_fallbacks":false}`),
			status: 503, hosts: []string{"a"}},
		{name: "allow_fallbacks_false_alone", down: "abce", body: req("m", true, `"provider":{"allow_fallbacks":false}`), status: 503, tries: 1},
		{name: "only", body: req("m", true, `"provider":{"only":["c"]}`), status: 200, dep: "c/us/m", hosts: []string{"c"}},
		{name: "ignore", body: req("m", true, `"provider":{"ignore":["a","b","e"]}`), status: 200, dep: "c/us/m", hosts: []string{"c"}},
		{name: "sort_price", body: req("m", true, `"provider":{"sort":"price","order":["c"]}`), status: 200, dep: "c/us/m", hosts: []string{"c"}},
		{name: "max_price_number", body: req("m", true, `"provider":{"max_price":2,"order":["c","b"]}`), status: 200, dep: "b/eu/m", hosts: []string{"b"}},
		{name: "max_price_object", body: req("m", true, `"provider":{"max_price":{"prompt":0.2},"order":["c","b"]}`), status: 200, dep: "a/us/m", hosts: []string{"a"}},
		{name: "max_price_nothing_left", body: req("m", true, `"provider":{"max_price":0.1}`), status: 503},
		{name: "region_header", body: req("m", true, ""), hdr: []string{"X-Route-Region", "eu"}, status: 200, dep: "b/eu/m", hosts: []string{"b"}},
		{name: "region_header_list", down: "a", body: req("m", true, `"provider":{"order":["e","a","b"]}`), hdr: []string{"X-Route-Region", "us, eu"},
			status: 200, dep: "b/eu/m", hosts: []string{"a", "b"}},
		{name: "provider_header_pin", body: req("m", true, ""), hdr: []string{"X-Route-Provider", "c"}, status: 200, dep: "c/us/m", hosts: []string{"c"}},
		{name: "provider_header_pin_region", body: req("m", true, ""), hdr: []string{"X-Route-Provider", "b/eu"}, status: 200, dep: "b/eu/m", hosts: []string{"b"}},
		{name: "provider_header_pin_fails_over", down: "a", body: req("m", true, `"provider":{"order":["b"]}`), hdr: []string{"X-Route-Provider", "a"}, status: 200, dep: "b/eu/m", hosts: []string{"a", "b"}},
		{name: "provider_header_pin_only", down: "a", body: req("m", true, `"provider":{"allow_fallbacks":false}`), hdr: []string{"X-Route-Provider", "a"}, status: 503, hosts: []string{"a"}},
		{name: "provider_header_unknown", body: req("m", true, ""), hdr: []string{"X-Route-Provider", "zz"}, status: 400},
		{name: "non_streaming", body: req("m", false, `"provider":{"order":["b"]}`), status: 200, dep: "b/eu/m", hosts: []string{"b"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := threeProviders(t, tt.down)
			base := e.serve(t)
			resp := post(t, base, tt.body, tt.hdr...)
			defer resp.Body.Close()
			require.Equal(t, tt.status, resp.StatusCode)
			if tt.status != http.StatusOK {
				s := readSSE(t, resp.StatusCode, resp.Header, resp.Body)
				errorOf(t, []byte(s.rawBody))
			} else {
				assert.Equal(t, tt.dep, resp.Header.Get("X-Tpsroute-Deployment"))
				assert.Equal(t, fmt.Sprint(len(tt.hosts)), resp.Header.Get("X-Tpsroute-Attempts"))
				if gjson.Get(tt.body, "stream").Bool() {
					s := readSSE(t, resp.StatusCode, resp.Header, resp.Body)
					assert.Equal(t, replay.Text(8), s.text)
					assert.True(t, s.done)
					assert.Empty(t, s.errEv)
				}
			}
			if tt.hosts != nil {
				assert.Equal(t, tt.hosts, e.cap.hosts())
			} else if tt.tries > 0 {
				assert.Len(t, e.cap.hosts(), tt.tries)
			}
		})
	}
}

// TestForwardedBody checks what reaches the provider: the gateway-only fields
// are gone, unknown fields are untouched, the model id is the deployment's,
// cache hints go only where declared, and no caller credential is forwarded.
func TestForwardedBody(t *testing.T) {
	body := `{"model":"m","models":["m"],"provider":{"order":["%s"]},"stream":true,"prompt_cache_key":"session-7",` +
		`"messages":[{"role":"system","content":[{"type":"text","text":"long","cache_control":{"type":"ephemeral"}}]},{"role":"user","content":"hi"}],` +
		`"x_vendor":{"keep":[1,2,{"deep":true}]},"temperature":0,"seed":12345678901234567890}`
	tests := []struct {
		name     string
		provider string
		cache    bool
	}{
		{name: "cache_capable", provider: "a", cache: true},
		{name: "no_cache_capability", provider: "b", cache: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, b := dep("a", "us", "m"), dep("b", "eu", "m")
			a.Capabilities.CacheControl = true
			e := newEnv(t, map[string]replay.Script{"a-m": prof(4), "b-m": prof(4)}, testConfig(a, b), options{})
			s := stream(t, e.serve(t), fmt.Sprintf(body, tt.provider), "Authorization", "Bearer caller-token", "Cookie", "c=1")
			require.Equal(t, 200, s.status)
			reqs := e.cap.all()
			require.Len(t, reqs, 1)
			got := reqs[0]
			assert.False(t, gjson.GetBytes(got.body, "models").Exists())
			assert.False(t, gjson.GetBytes(got.body, "provider").Exists())
			assert.Equal(t, tt.provider+"-m", gjson.GetBytes(got.body, "model").Str)
			assert.JSONEq(t, `{"keep":[1,2,{"deep":true}]}`, gjson.GetBytes(got.body, "x_vendor").Raw)
			assert.Equal(t, "0", gjson.GetBytes(got.body, "temperature").Raw)
			assert.Equal(t, "12345678901234567890", gjson.GetBytes(got.body, "seed").Raw, "big integers pass byte-exact")
			assert.Equal(t, tt.cache, gjson.GetBytes(got.body, "prompt_cache_key").Exists())
			assert.Equal(t, tt.cache, gjson.GetBytes(got.body, "messages.0.content.0.cache_control").Exists())
			assert.Equal(t, "Bearer sk-"+tt.provider+"-secret-key", got.header.Get("Authorization"))
			assert.Empty(t, got.header.Get("Cookie"))
		})
	}
}

// TestPolicyDirectives warms two deployments in virtual time, then checks
// that sort and the preferred_* constraints order them.
func TestPolicyDirectives(t *testing.T) {
	tests := []struct {
		name     string
		provider string
		want     string
	}{
		{name: "sort_latency", provider: `{"sort":"latency"}`, want: "quick/us/m"},
		{name: "sort_price", provider: `{"sort":"price"}`, want: "quick/us/m"},
		{name: "max_price_excludes_dear", provider: `{"sort":"throughput","max_price":1}`, want: "quick/us/m"},
		{name: "sort_throughput", provider: `{"sort":"throughput"}`, want: "fast/us/m"},
		{name: "preferred_min_throughput_demotes_slow", provider: `{"sort":"latency","preferred_min_throughput":100}`, want: "fast/us/m"},
		{name: "preferred_max_latency_demotes_late", provider: `{"sort":"throughput","preferred_max_latency":0.5}`, want: "quick/us/m"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				quick, fast := dep("quick", "us", "m"), dep("fast", "us", "m")
				quick.Price, fast.Price = measure.Price{Input: 0.1, Output: 0.5}, measure.Price{Input: 1, Output: 3}
				cfg := testConfig(quick, fast)
				cfg.Measure.MinSamples = 3
				e := newEnv(t, map[string]replay.Script{
					// quick: 100 ms to the first token, then 20 tokens/s.
					"quick-m": &replay.Profile{TTFT: 100 * time.Millisecond, TPS: 20, OutputTokens: 10},
					// fast: 1 s to the first token, then 400 tokens/s.
					"fast-m": &replay.Profile{TTFT: time.Second, TPS: 400, OutputTokens: 10},
				}, cfg, options{})
				for range 3 {
					for _, p := range []string{"quick", "fast"} {
						w := serveRecorded(e.g, req("m", true, ""), "X-Route-Provider", p)
						require.Equal(t, 200, w.Code)
						require.Equal(t, p+"/us/m", w.Header().Get("X-Tpsroute-Deployment"))
					}
				}
				w := serveRecorded(e.g, req("m", true, `"provider":`+tt.provider))
				require.Equal(t, 200, w.Code, w.Body.String())
				assert.Equal(t, tt.want, w.Header().Get("X-Tpsroute-Deployment"))
			})
		})
	}
}

func TestBadRequests(t *testing.T) {
	tests := []struct {
		name   string
		body   string
		hdr    []string
		status int
		param  string
	}{
		{name: "not_json", body: `{"model":`, status: 400},
		{name: "not_an_object", body: `[1]`, status: 400},
		{name: "no_model", body: `{` + hi + `}`, status: 400, param: "model"},
		{name: "model_not_string", body: `{"model":3,` + hi + `}`, status: 400, param: "model"},
		{name: "models_not_strings", body: `{"models":["m",2],` + hi + `}`, status: 400, param: "models[1]"},
		{name: "no_messages", body: `{"model":"m"}`, status: 400, param: "messages"},
		{name: "stream_not_bool", body: req("m", false, `"stream":"yes"`), status: 400, param: "stream"},
		{name: "max_tokens_negative", body: req("m", false, `"max_tokens":-1`), status: 400, param: "max_tokens"},
		{name: "provider_not_object", body: req("m", false, `"provider":"a"`), status: 400, param: "provider"},
		{name: "provider_unknown_field", body: req("m", false, `"provider":{"quantizations":["fp8"]}`), status: 400, param: "provider.quantizations"},
		{name: "provider_order_not_list", body: req("m", false, `"provider":{"order":"a"}`), status: 400, param: "provider.order"},
		{name: "provider_sort", body: req("m", false, `"provider":{"sort":"fastest"}`), status: 400, param: "provider.sort"},
		{name: "provider_allow_fallbacks", body: req("m", false, `"provider":{"allow_fallbacks":"no"}`), status: 400, param: "provider.allow_fallbacks"},
		{name: "provider_max_price_negative", body: req("m", false, `"provider":{"max_price":-1}`), status: 400, param: "provider.max_price"},
		{name: "provider_max_price_unknown", body: req("m", false, `"provider":{"max_price":{"image":1}}`), status: 400, param: "provider.max_price.image"},
		{name: "provider_min_throughput", body: req("m", false, `"provider":{"preferred_min_throughput":0}`), status: 400, param: "provider.preferred_min_throughput"},
		{name: "provider_max_latency", body: req("m", false, `"provider":{"preferred_max_latency":"1s"}`), status: 400, param: "provider.preferred_max_latency"},
		{name: "only_and_order_disjoint", body: req("m", false, `"provider":{"order":["a"],"only":["b"],"allow_fallbacks":false}`), status: 400, param: "provider.only"},
		{name: "region_header_empty_item", body: req("m", false, ""), hdr: []string{"X-Route-Region", "us,,eu"}, status: 400, param: "X-Route-Region"},
		{name: "provider_header_malformed", body: req("m", false, ""), hdr: []string{"X-Route-Provider", "a/us/x"}, status: 400, param: "X-Route-Provider"},
		{name: "unknown_region", body: req("m", false, ""), hdr: []string{"X-Route-Region", "mars"}, status: 400, param: "X-Route-Region"},
		{name: "unknown_provider_in_only", body: req("m", false, `"provider":{"only":["zz"]}`), status: 400, param: "provider.only"},
		{name: "model_longer_than_a_statistics_key", body: req(strings.Repeat("m", 4097), false, ""), status: 400, param: "model"},
		{name: "too_many_distinct_models", body: `{"models":` + list("m", maxListEntries+1, false) + `,` + hi + `}`, status: 400, param: "models"},
		{name: "unknown_model", body: req("gpt-9", false, ""), status: 404, param: "model"},
		{name: "unknown_fallback_model", body: `{"models":["m","gpt-9"],` + hi + `}`, status: 404, param: "models"},
	}
	e := threeProviders(t, "")
	base := e.serve(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := post(t, base, tt.body, tt.hdr...)
			defer resp.Body.Close()
			s := readSSE(t, resp.StatusCode, resp.Header, resp.Body)
			require.Equal(t, tt.status, resp.StatusCode, s.rawBody)
			assert.Equal(t, "application/json", resp.Header.Get("Content-Type"))
			er := errorOf(t, []byte(s.rawBody))
			if tt.param != "" {
				assert.Equal(t, tt.param, er.Get("param").Str)
				assert.Contains(t, er.Get("message").Str, tt.param, "the message names the field")
			}
		})
	}
	assert.Empty(t, e.cap.all(), "no bad request reaches a provider")
}
