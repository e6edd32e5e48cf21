package config

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/openai/openai-go/v3"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tpsroute/tpsroute"
	"github.com/tpsroute/tpsroute/fallback"
	"github.com/tpsroute/tpsroute/measure"
	"github.com/tpsroute/tpsroute/route"
)

func envMap(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

// parseClient is ParseLookup's Client.
func parseClient(r io.Reader, lookup func(string) (string, bool)) (tpsroute.Config, error) {
	f, err := ParseLookup(r, lookup)
	return f.Client, err
}

func TestParseConfigExampleFile(t *testing.T) {
	f, err := os.Open("../docs/config.example.json")
	require.NoError(t, err)
	defer f.Close()
	cfg, err := parseClient(f, envMap(map[string]string{
		"GROQ_API_KEY": "gsk-1", "TOGETHER_API_KEY": "tg-2", "OPENAI_API_KEY": "sk-3",
	}))
	require.NoError(t, err)
	require.Len(t, cfg.Deployments, 4)

	g := cfg.Deployments[0]
	assert.Equal(t, "groq", g.Provider)
	assert.Equal(t, "llama-3.3-70b-versatile", g.WireModel())
	assert.Equal(t, "gsk-1", g.APIKey)
	assert.Equal(t, measure.Price{Input: 0.59, Output: 0.79}, g.Price)
	assert.Equal(t, route.Limits{RPM: 1000, TPM: 300000}, g.Limits)
	assert.False(t, g.Capabilities.NoStreamOptions)
	assert.True(t, cfg.Deployments[2].Capabilities.CacheControl)
	assert.Equal(t, route.Wildcard, cfg.Deployments[3].Model)
	assert.Empty(t, cfg.Deployments[3].APIKey)
	assert.Equal(t, map[string]string{"X-Route-Region": "eu-west"}, cfg.Deployments[3].Headers)

	assert.Equal(t, route.Throughput, cfg.Route.Policy)
	assert.Equal(t, route.SLO{MaxTTFT: 2 * time.Second, MinTPS: 40, MaxErrorRate: 0.2}, cfg.Route.SLO)
	assert.Equal(t, 0.05, cfg.Route.Exploration)
	assert.Equal(t, 5*time.Minute, cfg.Route.AffinityTTL)
	assert.Equal(t, 5*time.Minute, cfg.Measure.Window.Length)
	assert.Equal(t, 30*time.Second, cfg.Measure.HalfLife)
	assert.Equal(t, fallback.Deadlines{Headers: 15 * time.Second, TTFT: 15 * time.Second, Stall: 20 * time.Second,
		MaxDuration: 30 * time.Minute, FinishGrace: 2 * time.Second}, cfg.Fallback.Deadlines)
	assert.Equal(t, 4, cfg.Fallback.MaxAttempts)
	assert.Equal(t, fallback.MidStreamSameModel, cfg.Fallback.MidStream)
	w := cfg.Deployments[3]
	assert.Equal(t, map[string]route.Capabilities{"gpt-oss-120b": {}}, w.ModelCapabilities,
		"fields left out keep the deployment's")
	assert.False(t, w.ForModel("gpt-oss-120b").Capabilities.AssistantPrefill)
	assert.True(t, w.ForModel("qwen3-32b").Capabilities.AssistantPrefill)

	_, err = tpsroute.New(cfg)
	require.NoError(t, err, "a parsed config must be accepted by New")
}

func TestParseConfigErrors(t *testing.T) {
	const okDep = `{"provider":"a","model":"m","base_url":"http://127.0.0.1:1/v1"}`
	tests := []struct {
		name  string
		json  string
		env   map[string]string
		line  int
		field string
		msg   string
	}{
		{"unknown top-level field", "{\n\"deployments\":[" + okDep + "],\n\"polcy\":\"cost\"}", nil, 3, "polcy", `unknown field "polcy"`},
		{"unknown nested field with line", "{\"deployments\":[\n" + okDep + ",\n{\"provider\":\"b\",\"model\":\"m\",\n \"base_url\":\"http://x/v1\",\n \"price\":{\"inptu\":1}}]}", nil, 5, "deployments[1].price.inptu", `unknown field "inptu"`},
		{"literal api key refused", "{\"deployments\":[{\"provider\":\"a\",\"model\":\"m\",\n\"api_key\":\"sk-live\",\"base_url\":\"http://x/v1\"}]}", nil, 2, "deployments[0].api_key", "api_key_env"},
		{"credential header refused", `{"deployments":[{"provider":"a","model":"m","base_url":"http://x/v1","headers":{"Authorization":"Bearer x"}}]}`, nil, 1, "deployments[0].headers.Authorization", "api_key_env"},
		{"unset env var", "{\"deployments\":[{\"provider\":\"a\",\"model\":\"m\",\"base_url\":\"http://x/v1\",\n\"api_key_env\":\"NOPE\"}]}", nil, 2, "deployments[0].api_key_env", "NOPE is not set"},
		{"empty env var", `{"deployments":[{"provider":"a","model":"m","base_url":"http://x/v1","api_key_env":"K"}]}`, map[string]string{"K": " "}, 1, "deployments[0].api_key_env", "K is empty"},
		{"bad duration", "{\"deployments\":[" + okDep + "],\n\"fallback\":{\n\"ttft\":\"20\"}}", nil, 3, "fallback.ttft", "duration"},
		{"numeric duration", "{\"deployments\":[" + okDep + "],\"fallback\":{\"stall\":20}}", nil, 1, "", "want string"},
		{"bad policy", "{\"deployments\":[" + okDep + "],\n\"policy\":\"fastest\"}", nil, 2, "policy", `unknown policy "fastest"`},
		{"bad mid_stream", "{\"deployments\":[" + okDep + "],\"fallback\":{\"mid_stream\":\"retry\"}}", nil, 1, "fallback.mid_stream", "continue"},
		{"bad malformed", "{\"deployments\":[" + okDep + "],\"fallback\":{\"malformed\":\"drop\"}}", nil, 1, "fallback.malformed", "skip"},
		{"bad percentile", "{\"deployments\":[" + okDep + "],\"route\":{\"tps_percentile\":\"p99\"}}", nil, 1, "route.tps_percentile", `unknown percentile "p99"; want one of "p50", "p95"`},
		{"bad latency_metric", "{\"deployments\":[" + okDep + "],\"route\":{\"latency_metric\":\"e2e\"}}", nil, 1, "route.latency_metric", `unknown metric "e2e"; want one of "completion", "ttft"`},
		{"model_capabilities on a named model", `{"deployments":[{"provider":"a","model":"m","base_url":"http://x/v1","model_capabilities":{"m":{"assistant_prefill":true}}}]}`, nil, 1, "deployments[0].model_capabilities", "wildcard"},
		{"no deployments", `{"policy":"cost"}`, nil, 0, "deployments", "at least one"},
		{"invalid deployment names field", "{\"deployments\":[\n{\"provider\":\"a\",\"model\":\"m\",\n\"base_url\":\"ftp://x\"}]}", nil, 3, "deployments[0].base_url", ""},
		{"base_url with user info", "{\"deployments\":[{\"provider\":\"a\",\"model\":\"m\",\n\"base_url\":\"https://user:sk-live@x/v1\"}]}", nil, 2, "deployments[0].base_url", "user info"},
		{"base_url with a key in the query", "{\"deployments\":[{\"provider\":\"a\",\"model\":\"m\",\n\n\"base_url\":\"https://x/v1?key=sk-live\"}]}", nil, 3, "deployments[0].base_url", `query parameter "key" is a credential`},
		{"base_url with a fragment", `{"deployments":[{"provider":"a","model":"m","base_url":"https://x/v1#sk-live"}]}`, nil, 1, "deployments[0].base_url", "fragment"},
		{"negative price", "{\"deployments\":[{\"provider\":\"a\",\"model\":\"m\",\"base_url\":\"http://x/v1\",\n\"price\":{\"output\":-1}}]}", nil, 2, "deployments[0].price.output", ""},
		{"syntax error line", "{\"deployments\":[\n" + okDep + ",\n]}", nil, 3, "", "invalid character"},
		{"truncated", `{"deployments":[`, nil, 1, "", "unexpected end"},
		{"trailing data", "{\"deployments\":[" + okDep + "]}\n{}", nil, 2, "", "after the top-level"},
		{"wrong type", "{\"deployments\":[" + okDep + "],\n\"slo\":{\"min_tps\":\"fast\"}}", nil, 2, "", "float64"},
		{"slo out of range", "{\"deployments\":[" + okDep + "],\"slo\":{\n\"min_tps\":100,\n\"max_error_rate\":2}}", nil, 3, "slo.max_error_rate", "must be in [0, 1]"},
		{"bad max_duration", "{\"deployments\":[" + okDep + "],\n\"fallback\":{\"ttft\":\"10s\",\n\"max_duration\":\"30\"}}", nil, 3, "fallback.max_duration", "duration"},
		{"negative max_duration", "{\"deployments\":[" + okDep + "],\"fallback\":{\n\"max_duration\":\"-1m\"}}", nil, 2, "fallback.max_duration", "negative"},
		{"bad finish_grace", "{\"deployments\":[" + okDep + "],\n\"fallback\":{\n\n\"finish_grace\":\"2 s\"}}", nil, 4, "fallback.finish_grace", "duration"},
		{"negative finish_grace", "{\"deployments\":[" + okDep + "],\"fallback\":{\"finish_grace\":\"-2s\"}}", nil, 1, "fallback.finish_grace", "negative"},
		{"numeric finish_grace", "{\"deployments\":[" + okDep + "],\"fallback\":{\"finish_grace\":2}}", nil, 1, "", "want string"},
		{"exploration out of range", "{\"deployments\":[" + okDep + "],\"route\":{\"exploration\":1.5}}", nil, 1, "route.exploration", "(0, 1]"},
		{"negative expected tps", "{\"deployments\":[{\"provider\":\"a\",\"model\":\"m\",\"base_url\":\"http://x/v1\",\n\"expected\":{\"tps\":-120}}]}", nil, 2, "deployments[0].expected.tps", "negative"},
		{"unparsable expected ttft", "{\"deployments\":[{\"provider\":\"a\",\"model\":\"m\",\"base_url\":\"http://x/v1\",\n\"expected\":{\"ttft\":\"400\"}}]}", nil, 2, "deployments[0].expected.ttft", "duration"},
		{"cold share out of range", "{\"deployments\":[" + okDep + "],\"route\":{\"cold_share\":-0.1}}", nil, 1, "route.cold_share", "(0, 1]"},
		{"probe share out of range", "{\"deployments\":[" + okDep + "],\"fallback\":{\"breaker\":{\n\"probe_share\":1.5}}}", nil, 2, "fallback.breaker.probe_share", "(0, 1]"},
		{"unknown api", "{\"deployments\":[{\"provider\":\"a\",\"model\":\"m\",\"base_url\":\"http://x/v1\",\n\"apis\":[\"chat\",\"completions\"]}]}", nil, 2, "deployments[0].apis", `unknown API "completions"`},
		{"api twice", "{\"deployments\":[{\"provider\":\"a\",\"model\":\"m\",\"base_url\":\"http://x/v1\",\"apis\":[\"messages\",\"messages\"]}]}", nil, 1, "deployments[0].apis", `"messages" twice`},
		{"probe share of 0", "{\"deployments\":[" + okDep + "],\"fallback\":{\"breaker\":{\"probe_share\":0}}}", nil, 1, "fallback.breaker.probe_share", `"off"`},
		{"rescue ratio out of range", "{\"deployments\":[" + okDep + "],\"fallback\":{\"rescue\":{\n\"ratio\":1.5}}}", nil, 2, "fallback.rescue.ratio", "(0, 1)"},
		{"rescue ratio of 0", "{\"deployments\":[" + okDep + "],\"fallback\":{\"rescue\":{\"ratio\":0}}}", nil, 1, "fallback.rescue.ratio", `"off"`},
		{"rescue speedup under 1", "{\"deployments\":[" + okDep + "],\"fallback\":{\"rescue\":{\"speedup\":0.5}}}", nil, 1, "fallback.rescue.speedup", "[1, 100]"},
		{"rescue window without unit", "{\"deployments\":[" + okDep + "],\"fallback\":{\"rescue\":{\"window\":\"3\"}}}", nil, 1, "fallback.rescue.window", "duration"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parseClient(strings.NewReader(tt.json), envMap(tt.env))
			require.Error(t, err)
			var ce *tpsroute.ConfigError
			require.True(t, errors.As(err, &ce), "want *tpsroute.ConfigError, got %T: %v", err, err)
			assert.Equal(t, tt.line, ce.Line, "line in %q", err)
			if tt.field != "" {
				assert.Equal(t, tt.field, ce.Field, "field in %q", err)
			}
			assert.Contains(t, err.Error(), tt.msg)
			assert.True(t, strings.HasPrefix(err.Error(), "tpsroute: config"), err.Error())
			assert.NotContains(t, err.Error(), "sk-live", "a secret must never appear in an error")
		})
	}
}

func TestParseConfigAPIs(t *testing.T) {
	cfg, err := parseClient(strings.NewReader(`{"deployments":[{"provider":"a","model":"m","base_url":"http://x/v1"},
	{"provider":"b","model":"m","base_url":"http://x/v1","apis":["responses","messages","embeddings"]}]}`), nil)
	require.NoError(t, err)
	assert.Nil(t, cfg.Deployments[0].APIs, "left out: chat")
	assert.Equal(t, []route.API{route.APIResponses, route.APIMessages, route.APIEmbeddings}, cfg.Deployments[1].APIs)
}

func TestParseConfigExpected(t *testing.T) {
	cfg, err := parseClient(strings.NewReader(`{"deployments":[{"provider":"a","model":"m","base_url":"http://x/v1",
	"expected":{"tps":120,"ttft":"400ms"}}]}`), nil)
	require.NoError(t, err)
	assert.Equal(t, route.Prior{TPS: 120, TTFT: 400 * time.Millisecond}, cfg.Deployments[0].Expected)
}

func TestParseConfigOffIsSpelledOff(t *testing.T) {
	const dep = `{"deployments":[{"provider":"a","model":"m","base_url":"http://x/v1"}]`
	cfg, err := parseClient(strings.NewReader(dep+`,
	"route":{"exploration":"off","band":"off","cold_probes":"off","cold_share":"off","affinity_ttl":"0s"}}`), nil)
	require.NoError(t, err)
	assert.Equal(t, float64(route.Off), cfg.Route.Exploration)
	assert.Equal(t, float64(route.Off), cfg.Route.Band)
	assert.Equal(t, route.Off, cfg.Route.ColdProbes)
	assert.Equal(t, float64(route.Off), cfg.Route.ColdShare, "off lifts the share cap")
	assert.Negative(t, cfg.Route.AffinityTTL)
	cfg, err = parseClient(strings.NewReader(dep+`,"fallback":{"breaker":{"probe_share":"off"}}}`), nil)
	require.NoError(t, err)
	assert.Negative(t, cfg.Fallback.Breaker.ProbeShare, "off: a time-based open interval only")
	cfg, err = parseClient(strings.NewReader(dep+`,"fallback":{"breaker":{"probe_share":0.05}}}`), nil)
	require.NoError(t, err)
	assert.Equal(t, 0.05, cfg.Fallback.Breaker.ProbeShare)
	cfg, err = parseClient(strings.NewReader(dep+`,"fallback":{"rescue":{"ratio":"off"}}}`), nil)
	require.NoError(t, err)
	assert.Negative(t, cfg.Fallback.Rescue.Ratio, "off: no slow-stream rescue")
	cfg, err = parseClient(strings.NewReader(dep+`,"fallback":{"rescue":{"ratio":0.5,"window":"5s","speedup":3}}}`), nil)
	require.NoError(t, err)
	assert.Equal(t, fallback.RescueOptions{Ratio: 0.5, Window: 5 * time.Second, Speedup: 3}, cfg.Fallback.Rescue)

	cfg, err = parseClient(strings.NewReader(dep+`}`), nil)
	require.NoError(t, err)
	assert.Zero(t, cfg.Route.Exploration, "omitted means route's default, as 0 does in Go")
	assert.Zero(t, cfg.Route.ColdProbes)

	cfg, err = parseClient(strings.NewReader(dep+`,"route":{"exploration":0.2,"cold_probes":4}}`), nil)
	require.NoError(t, err)
	assert.Equal(t, 0.2, cfg.Route.Exploration)
	assert.Equal(t, 4, cfg.Route.ColdProbes)

	// 0 would mean the default in Go and used to mean off in files: refused.
	for _, field := range []string{"exploration", "band", "cold_probes", "cold_share"} {
		_, err := parseClient(strings.NewReader(dep+`,"route":{"`+field+`":0}}`), nil)
		var ce *tpsroute.ConfigError
		require.ErrorAs(t, err, &ce, field)
		assert.Equal(t, "route."+field, ce.Field)
		assert.Contains(t, err.Error(), `"off"`)
	}
	for _, bad := range []string{`"none"`, `1.5`, `-1`, `true`} {
		_, err := parseClient(strings.NewReader(dep+`,"route":{"exploration":`+bad+`}}`), nil)
		assert.ErrorContains(t, err, "route.exploration", bad)
	}
	_, err = parseClient(strings.NewReader(dep+`,"route":{"cold_probes":2.5}}`), nil)
	assert.ErrorContains(t, err, "positive integer")
}

func TestParseConfigUsageIsRequestedByDefault(t *testing.T) {
	parse := func(caps string) (route.Deployment, error) {
		cfg, err := parseClient(strings.NewReader(`{"deployments":[{"provider":"a","model":"m","base_url":"http://x/v1","capabilities":`+caps+`}]}`), nil)
		if err != nil {
			return route.Deployment{}, err
		}
		return cfg.Deployments[0], nil
	}
	d, err := parse(`{}`)
	require.NoError(t, err)
	assert.False(t, d.Capabilities.NoStreamOptions)
	d, err = parse(`{"no_stream_options":true}`)
	require.NoError(t, err)
	assert.True(t, d.Capabilities.NoStreamOptions)
	assert.False(t, d.Capabilities.NoStream)
	d, err = parse(`{"no_stream":true}`)
	require.NoError(t, err)
	assert.True(t, d.Capabilities.NoStream)
	d, err = parse(`{"include_usage":true}`)
	require.NoError(t, err, "the former opt-in is still accepted")
	assert.False(t, d.Capabilities.NoStreamOptions)
	_, err = parse(`{"include_usage":false}`)
	var ce *tpsroute.ConfigError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, "deployments[0].capabilities.include_usage", ce.Field)
	assert.Contains(t, err.Error(), "no_stream_options")
}

func TestParseConfigFallbackDeadlines(t *testing.T) {
	const dep = `{"deployments":[{"provider":"a","model":"m","base_url":"http://x/v1"}]`
	tests := []struct {
		name     string
		fallback string
		want     fallback.Deadlines
	}{
		{"omitted means fallback's defaults", ``, fallback.Deadlines{}},
		{"set", `"headers":"5s","ttft":"8s","stall":"12s","max_duration":"10m","finish_grace":"500ms","silence":"5m"`,
			fallback.Deadlines{Headers: 5 * time.Second, TTFT: 8 * time.Second, Stall: 12 * time.Second,
				MaxDuration: 10 * time.Minute, FinishGrace: 500 * time.Millisecond, Silence: 5 * time.Minute}},
		{"explicit zero turns each off", `"headers":"0s","ttft":"0","stall":"0s","max_duration":"0s","finish_grace":"0ms","silence":"0s"`,
			fallback.Deadlines{Headers: -1, TTFT: -1, Stall: -1, MaxDuration: -1, FinishGrace: -1, Silence: -1}},
		{"empty string means the default", `"max_duration":"","finish_grace":""`, fallback.Deadlines{}},
		{"only max_duration off", `"max_duration":"0s","finish_grace":"3s"`, fallback.Deadlines{MaxDuration: -1, FinishGrace: 3 * time.Second}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := parseClient(strings.NewReader(dep+`,"fallback":{`+tt.fallback+`}}`), nil)
			require.NoError(t, err)
			assert.Equal(t, tt.want, cfg.Fallback.Deadlines)
			_, err = tpsroute.New(cfg)
			require.NoError(t, err, "a parsed config must be accepted by New")
		})
	}
}

func TestParseConfigFallbackLimits(t *testing.T) {
	const dep = `{"deployments":[{"provider":"a","model":"m","base_url":"http://x/v1"}]`
	cfg, err := parseClient(strings.NewReader(dep+`,"fallback":{"max_event_bytes":65536,"max_held_bytes":131072,"max_answer_bytes":1048576}}`), nil)
	require.NoError(t, err)
	assert.Equal(t, fallback.Limits{Event: 64 << 10, Held: 128 << 10, Answer: 1 << 20}, cfg.Fallback.Limits)
	cfg, err = parseClient(strings.NewReader(dep+`}`), nil)
	require.NoError(t, err)
	assert.Equal(t, fallback.Limits{}, cfg.Fallback.Limits, "omitted: fallback's defaults")
	for _, f := range []string{"max_event_bytes", "max_held_bytes", "max_answer_bytes"} {
		_, err := parseClient(strings.NewReader(dep+`,"fallback":{"`+f+`":-1}}`), nil)
		require.Error(t, err, f)
		assert.Contains(t, err.Error(), "fallback."+f)
	}
}

func TestParseConfigReadsTheNamedVariable(t *testing.T) {
	t.Setenv("TPSROUTE_TEST_KEY", "k-from-env")
	f, err := Parse(strings.NewReader(`{"deployments":[{"provider":"a","model":"m","base_url":"http://x/v1","api_key_env":"TPSROUTE_TEST_KEY"}]}`))
	require.NoError(t, err)
	assert.Equal(t, "k-from-env", f.Client.Deployments[0].APIKey)
}

func TestParseFleetSection(t *testing.T) {
	f, err := ParseLookup(strings.NewReader(`{"deployments":[{"provider":"a","model":"m","base_url":"http://a.test/v1"}],
		"fleet": {"redis_url": "rediss://u:p@redis.internal:6380/0", "name": "prod", "sync": "500ms"}}`), envMap(nil))
	require.NoError(t, err)
	assert.Equal(t, tpsroute.FleetSettings{RedisURL: "rediss://u:p@redis.internal:6380/0", Name: "prod", Sync: 500 * time.Millisecond}, f.Fleet)
	_, err = ParseLookup(strings.NewReader(`{"deployments":[{"provider":"a","model":"m","base_url":"http://a.test/v1"}],
		"fleet": {"sync": "often"}}`), envMap(nil))
	var ce *tpsroute.ConfigError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, "fleet.sync", ce.Field)
}

func TestParseStateSection(t *testing.T) {
	const dep = `{"deployments":[{"provider":"a","model":"m","base_url":"http://a.test/v1"}]`
	c, err := parseClient(strings.NewReader(dep+`,
		"state": {"file": "/var/lib/tpsroute/state", "interval": "30s"}}`), envMap(nil))
	require.NoError(t, err)
	assert.Equal(t, "/var/lib/tpsroute/state", c.StateFile)
	assert.Equal(t, 30*time.Second, c.StateInterval)
	c, err = parseClient(strings.NewReader(dep+`, "state": {"file": "s"}}`), envMap(nil))
	require.NoError(t, err)
	assert.Equal(t, "s", c.StateFile)
	assert.Zero(t, c.StateInterval, "the default")
	for _, bad := range []string{
		`"state": {"file": "s", "interval": "soon"}`,
		`"state": {"file": "s", "interval": "0s"}`,
		`"state": {"interval": "1m"}`,
		`"state": {"path": "s"}`,
	} {
		_, err = parseClient(strings.NewReader(dep+","+bad+"}"), envMap(nil))
		var ce *tpsroute.ConfigError
		require.ErrorAs(t, err, &ce, bad)
		assert.True(t, strings.HasPrefix(ce.Field, "state."), "%s: %v", bad, err)
	}
}

type refused struct {
	mu    sync.Mutex
	hosts map[string]int
}

func (r *refused) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		req.Body.Close()
	}
	r.mu.Lock()
	r.hosts[req.URL.Host]++
	r.mu.Unlock()
	return nil, syscall.ECONNREFUSED
}

// TestExampleConfigOfflineTriesEveryDeployment is issue 13 point 1 on
// docs/config.example.json with every provider offline: each deployment of
// the plan gets an attempt before the call fails, "attempts": 4 included.
func TestExampleConfigOfflineTriesEveryDeployment(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, err := os.Open("../docs/config.example.json")
		require.NoError(t, err)
		defer f.Close()
		cfg, err := parseClient(f, envMap(map[string]string{
			"GROQ_API_KEY": "gsk-1", "TOGETHER_API_KEY": "tg-2", "OPENAI_API_KEY": "sk-3",
		}))
		require.NoError(t, err)
		rt := &refused{hosts: map[string]int{}}
		cfg.HTTPClient = &http.Client{Transport: rt}
		var plan route.Plan
		cfg.OnDecision = func(_ route.Request, p route.Plan) { plan = p }
		c, err := tpsroute.New(cfg)
		require.NoError(t, err)
		_, err = c.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{Model: "llama-3.3-70b", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}})
		require.Error(t, err)
		require.Len(t, plan.Deployments, 3, "groq, together and the vllm wildcard serve it")
		for _, cd := range plan.Deployments {
			u, err := url.Parse(cd.Deployment.BaseURL)
			require.NoError(t, err)
			assert.NotZero(t, rt.hosts[u.Host], "%s tried", cd.Deployment.Provider)
		}
	})
}
