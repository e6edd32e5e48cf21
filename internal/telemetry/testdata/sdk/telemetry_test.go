package sdk_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/tpsroute/tpsroute"
	"github.com/tpsroute/tpsroute/fallback"
	"github.com/tpsroute/tpsroute/internal/telemetry"
	"github.com/tpsroute/tpsroute/measure"
	"github.com/tpsroute/tpsroute/replay"
	"github.com/tpsroute/tpsroute/route"
)

// fleet dispatches requests to in-memory replay handlers by host name, so
// that a synctest bubble sees exact timings.
type fleet map[string]http.RoundTripper

func (f fleet) add(name string, scripts map[string]replay.Script) string {
	f[name] = replay.NewHandler(scripts).Transport()
	return "http://" + name + ".test:8443/v1"
}

func (f fleet) RoundTrip(r *http.Request) (*http.Response, error) {
	name, _, _ := strings.Cut(r.URL.Hostname(), ".")
	return f[name].RoundTrip(r)
}

func deployment(provider, model, url string) route.Deployment {
	return route.Deployment{
		Provider: provider, Region: "eu", Model: model, BaseURL: url, APIKey: "sk-" + provider + "-secret",
		Price:        measure.Price{Input: 1, Output: 2},
		Capabilities: route.Capabilities{AssistantPrefill: true},
	}
}

type sdk struct {
	reader *sdkmetric.ManualReader
	mp     *sdkmetric.MeterProvider
	spans  *tracetest.SpanRecorder
	tp     *sdktrace.TracerProvider
}

func newSDK(t *testing.T) *sdk {
	s := &sdk{reader: sdkmetric.NewManualReader(), spans: tracetest.NewSpanRecorder()}
	s.mp = sdkmetric.NewMeterProvider(sdkmetric.WithReader(s.reader))
	s.tp = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(s.spans))
	t.Cleanup(func() { _ = s.mp.Shutdown(context.Background()); _ = s.tp.Shutdown(context.Background()) })
	return s
}

func (s *sdk) client(t *testing.T, f fleet, cfg tpsroute.Config) *tpsroute.Client {
	cfg.HTTPClient = &http.Client{Transport: f}
	cfg.MeterProvider, cfg.TracerProvider = s.mp, s.tp
	c, err := tpsroute.New(cfg)
	require.NoError(t, err)
	return c
}

func (s *sdk) metrics(t *testing.T) map[string]metricdata.Metrics {
	var rm metricdata.ResourceMetrics
	require.NoError(t, s.reader.Collect(context.Background(), &rm))
	out := map[string]metricdata.Metrics{}
	for _, sm := range rm.ScopeMetrics {
		assert.Equal(t, telemetry.ScopeName, sm.Scope.Name)
		assert.Equal(t, "https://opentelemetry.io/schemas/"+telemetry.SemconvVersion, sm.Scope.SchemaURL)
		for _, m := range sm.Metrics {
			out[m.Name] = m
		}
	}
	return out
}

func params(model string) openai.ChatCompletionNewParams {
	return openai.ChatCompletionNewParams{
		Model:    model,
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
	}
}

func drain(t *testing.T, s *tpsroute.Stream) (string, error) {
	t.Helper()
	var b strings.Builder
	for s.Next() {
		if c := s.Current(); len(c.Choices) > 0 {
			b.WriteString(c.Choices[0].Delta.Content)
		}
	}
	_ = s.Close()
	return b.String(), s.Err()
}

func histogram(t *testing.T, m metricdata.Metrics) metricdata.Histogram[float64] {
	t.Helper()
	h, ok := m.Data.(metricdata.Histogram[float64])
	require.True(t, ok, "%s is a float64 histogram, got %T", m.Name, m.Data)
	return h
}

func attr(set attribute.Set, k string) string {
	v, _ := set.Value(attribute.Key(k))
	return v.String()
}

// TestMetricsKnownStream replays one stream with a known shape (TTFT 200 ms,
// then 10 one-token chunks 50 ms apart) and reads every GenAI instrument back
// through the SDK: names, units, bucket boundaries, values and attributes.
func TestMetricsKnownStream(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newSDK(t)
		f := fleet{}
		url := f.add("a", map[string]replay.Script{"m": &replay.Profile{TTFT: 200 * time.Millisecond, TPS: 20, OutputTokens: 10}})
		c := s.client(t, f, tpsroute.Config{Deployments: []route.Deployment{deployment("a", "m", url)}})

		st := c.Chat.Completions.NewStreaming(context.Background(), params("m"))
		text, err := drain(t, st)
		require.NoError(t, err)
		require.Equal(t, replay.Text(10), text)
		sample := st.Outcome().Sample
		require.Positive(t, sample.InputTokens)
		require.EqualValues(t, 10, sample.OutputTokens)

		ms := s.metrics(t)
		want := []string{
			"gen_ai.client.operation.duration", "gen_ai.client.token.usage",
			"gen_ai.client.operation.time_to_first_chunk", "gen_ai.client.operation.time_per_output_chunk",
			"tpsroute.attempts", "tpsroute.attempt.time_to_first_chunk", "tpsroute.generation.tps",
			"tpsroute.route.decisions", "tpsroute.inflight", "tpsroute.cost", "tpsroute.breaker.state",
		}
		for _, name := range want {
			assert.Contains(t, ms, name)
		}

		ttfc := histogram(t, ms["gen_ai.client.operation.time_to_first_chunk"])
		assert.Equal(t, "s", ms["gen_ai.client.operation.time_to_first_chunk"].Unit)
		require.Len(t, ttfc.DataPoints, 1)
		dp := ttfc.DataPoints[0]
		assert.Equal(t, telemetry.DurationBuckets, dp.Bounds)
		assert.EqualValues(t, 1, dp.Count)
		assert.InDelta(t, 0.2, dp.Sum, 1e-9, "TTFT: the profile's 200 ms, in seconds")
		for k, v := range map[string]string{
			"gen_ai.operation.name": "chat", "gen_ai.provider.name": "a", "gen_ai.request.model": "m",
			"gen_ai.response.model": "m", "server.address": "a.test", "server.port": "8443", "tpsroute.region": "eu",
		} {
			assert.Equal(t, v, attr(dp.Attributes, k), k)
		}

		gaps := histogram(t, ms["gen_ai.client.operation.time_per_output_chunk"])
		assert.Equal(t, "s", ms["gen_ai.client.operation.time_per_output_chunk"].Unit)
		require.Len(t, gaps.DataPoints, 1)
		dp = gaps.DataPoints[0]
		assert.Equal(t, telemetry.ChunkBuckets, dp.Bounds)
		assert.EqualValues(t, 9, dp.Count, "one gap per output chunk after the first")
		assert.InDelta(t, 0.45, dp.Sum, 1e-9)
		assert.EqualValues(t, 9, dp.BucketCounts[2], "every gap is 50 ms: the (0.025, 0.05] bucket")

		dur := histogram(t, ms["gen_ai.client.operation.duration"])
		require.Len(t, dur.DataPoints, 1)
		assert.Equal(t, telemetry.DurationBuckets, dur.DataPoints[0].Bounds)
		assert.InDelta(t, 0.65, dur.DataPoints[0].Sum, 1e-9, "TTFT plus nine gaps")
		assert.False(t, dur.DataPoints[0].Attributes.HasValue("error.type"))

		usage, ok := ms["gen_ai.client.token.usage"].Data.(metricdata.Histogram[int64])
		require.True(t, ok)
		assert.Equal(t, "{token}", ms["gen_ai.client.token.usage"].Unit)
		require.Len(t, usage.DataPoints, 2)
		byType := map[string]int64{}
		for _, dp := range usage.DataPoints {
			assert.Equal(t, telemetry.TokenBuckets, dp.Bounds)
			byType[attr(dp.Attributes, "gen_ai.token.type")] = dp.Sum
		}
		assert.Equal(t, map[string]int64{"input": sample.InputTokens, "output": 10}, byType)

		speed := histogram(t, ms["tpsroute.generation.tps"])
		require.Len(t, speed.DataPoints, 1)
		assert.InDelta(t, 20, speed.DataPoints[0].Sum, 1e-9, "9 tokens after the first in 450 ms")

		att, ok := ms["tpsroute.attempts"].Data.(metricdata.Sum[int64])
		require.True(t, ok)
		require.Len(t, att.DataPoints, 1)
		assert.Equal(t, "ok", attr(att.DataPoints[0].Attributes, "tpsroute.outcome"))
		assert.EqualValues(t, 1, att.DataPoints[0].Value)

		cost, ok := ms["tpsroute.cost"].Data.(metricdata.Sum[float64])
		require.True(t, ok)
		require.Len(t, cost.DataPoints, 1)
		assert.InDelta(t, (float64(sample.InputTokens)*1+10*2)/1e6, cost.DataPoints[0].Value, 1e-15)

		inflight, ok := ms["tpsroute.inflight"].Data.(metricdata.Sum[int64])
		require.True(t, ok)
		require.Len(t, inflight.DataPoints, 1)
		assert.EqualValues(t, 0, inflight.DataPoints[0].Value, "the attempt has ended")
	})
}

// TestNonStreamingNoChunkMetrics: a call through New records its duration
// and tokens but, as the conventions ask, no chunk timings.
func TestNonStreamingNoChunkMetrics(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newSDK(t)
		f := fleet{}
		url := f.add("a", map[string]replay.Script{"m": &replay.Profile{TTFT: 100 * time.Millisecond, TPS: 20, OutputTokens: 5}})
		c := s.client(t, f, tpsroute.Config{Deployments: []route.Deployment{deployment("a", "m", url)}})
		_, err := c.Chat.Completions.New(context.Background(), params("m"))
		require.NoError(t, err)
		ms := s.metrics(t)
		assert.Contains(t, ms, "gen_ai.client.operation.duration")
		assert.NotContains(t, ms, "gen_ai.client.operation.time_to_first_chunk")
		assert.NotContains(t, ms, "gen_ai.client.operation.time_per_output_chunk")
	})
}

// TestWildcardModelsBounded: models invented by callers through a wildcard
// deployment all map to one bounded value; a configured model keeps its name.
func TestWildcardModelsBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newSDK(t)
		f := fleet{}
		profile := &replay.Profile{OutputTokens: 3}
		scripts := map[string]replay.Script{"known": profile}
		for i := range 20 {
			scripts["invented-"+string(rune('a'+i))] = profile
		}
		url := f.add("w", scripts)
		wild := deployment("w", route.Wildcard, url)
		named := deployment("n", "known", f.add("n", map[string]replay.Script{"known": profile}))
		c := s.client(t, f, tpsroute.Config{Deployments: []route.Deployment{named, wild}})
		for i := range 20 {
			_, err := drain(t, c.Chat.Completions.NewStreaming(context.Background(), params("invented-"+string(rune('a'+i)))))
			require.NoError(t, err)
		}
		_, err := drain(t, c.Chat.Completions.NewStreaming(context.Background(), params("known"), tpsroute.WithPin("w", "")))
		require.NoError(t, err)

		models := map[string]bool{}
		for _, dp := range histogram(t, s.metrics(t)["gen_ai.client.operation.duration"]).DataPoints {
			models[attr(dp.Attributes, "gen_ai.request.model")+" via "+attr(dp.Attributes, "gen_ai.provider.name")] = true
		}
		assert.Equal(t, map[string]bool{"_OTHER via w": true, "known via w": true}, models)
		for _, sp := range s.spans.Ended() {
			assert.NotContains(t, sp.Name(), "invented")
		}
	})
}

// spanTree returns the ended spans by name, and checks that every
// tpsroute.attempt span is a child of the call's span.
func spanTree(t *testing.T, spans []sdktrace.ReadOnlySpan, call string) (sdktrace.ReadOnlySpan, []sdktrace.ReadOnlySpan) {
	t.Helper()
	var root sdktrace.ReadOnlySpan
	var attempts []sdktrace.ReadOnlySpan
	for _, sp := range spans {
		switch sp.Name() {
		case call:
			root = sp
		case "tpsroute.attempt":
			attempts = append(attempts, sp)
		}
	}
	require.NotNil(t, root, "a %q span", call)
	assert.Equal(t, trace.SpanKindClient, root.SpanKind())
	for _, a := range attempts {
		assert.Equal(t, root.SpanContext().SpanID(), a.Parent().SpanID(), "attempt spans are children of the call's")
		assert.False(t, a.StartTime().Before(root.StartTime()))
		assert.False(t, a.EndTime().After(root.EndTime()))
	}
	return root, attempts
}

func spanAttr(sp sdktrace.ReadOnlySpan, k string) string {
	for _, kv := range sp.Attributes() {
		if string(kv.Key) == k {
			return kv.Value.String()
		}
	}
	return ""
}

func events(sp sdktrace.ReadOnlySpan) []string {
	var out []string
	for _, e := range sp.Events() {
		out = append(out, e.Name)
	}
	return out
}

// TestSpansFailover: a pre-commit 503 on the first deployment moves the call
// to the second. The tree is caller -> "chat m" -> two attempt spans, with a
// failover event on the call's span and the first output chunk on the
// answering attempt's.
func TestSpansFailover(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newSDK(t)
		f := fleet{}
		good := &replay.Profile{TTFT: 100 * time.Millisecond, TPS: 50, OutputTokens: 5}
		a := deployment("a", "m", f.add("a", map[string]replay.Script{"m": replay.WithFaults(good, replay.Status(503, `{"error":{"message":"busy"}}`, nil))}))
		b := deployment("b", "m", f.add("b", map[string]replay.Script{"m": good}))
		c := s.client(t, f, tpsroute.Config{Deployments: []route.Deployment{a, b}})

		ctx, caller := s.tp.Tracer("caller").Start(context.Background(), "handle request")
		_, err := drain(t, c.Chat.Completions.NewStreaming(ctx, params("m"), tpsroute.WithPin("a", "")))
		caller.End()
		require.NoError(t, err)

		root, attempts := spanTree(t, s.spans.Ended(), "chat m")
		t.Logf("trace:\n%s", render(s.spans.Ended(), root))
		assert.Equal(t, caller.SpanContext().SpanID(), root.Parent().SpanID(), "the call's span is under the caller's")
		assert.Equal(t, caller.SpanContext().TraceID(), root.SpanContext().TraceID())
		require.Len(t, attempts, 2)
		assert.Equal(t, "a", spanAttr(attempts[0], "gen_ai.provider.name"))
		assert.Equal(t, "failed", spanAttr(attempts[0], "tpsroute.outcome"))
		assert.Equal(t, "next", spanAttr(attempts[0], "tpsroute.class"))
		assert.Equal(t, "headers", spanAttr(attempts[0], "tpsroute.phase"))
		assert.Equal(t, "503", spanAttr(attempts[0], "http.response.status_code"))
		assert.Equal(t, "b", spanAttr(attempts[1], "gen_ai.provider.name"))
		assert.Equal(t, "ok", spanAttr(attempts[1], "tpsroute.outcome"))
		assert.Equal(t, []string{"tpsroute.first_output_chunk"}, events(attempts[1]))
		assert.Equal(t, []string{"tpsroute.failover"}, events(root))
		assert.Equal(t, "b", spanAttr(root, "gen_ai.provider.name"))
		assert.Equal(t, "chat", spanAttr(root, "gen_ai.operation.name"))
		assert.Equal(t, "5", spanAttr(root, "gen_ai.usage.output_tokens"))
		assert.InDelta(t, 0.1, attempts[1].Events()[0].Time.Sub(attempts[1].StartTime()).Seconds(), 1e-9)

		fo, ok := s.metrics(t)["tpsroute.failovers"].Data.(metricdata.Sum[int64])
		require.True(t, ok)
		require.Len(t, fo.DataPoints, 1)
		assert.Equal(t, "a/eu/m", attr(fo.DataPoints[0].Attributes, "tpsroute.from"))
		assert.Equal(t, "b", attr(fo.DataPoints[0].Attributes, "gen_ai.provider.name"))
	})
}

// TestSpansContinuation: the first deployment is cut after 4 chunks and the
// call continues on the second; the call's span carries a continuation event
// and its attempts are the cut one (class mid-stream) and the continuation.
func TestSpansContinuation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newSDK(t)
		f := fleet{}
		good := &replay.Profile{TTFT: 100 * time.Millisecond, TPS: 50, OutputTokens: 10}
		a := deployment("a", "m", f.add("a", map[string]replay.Script{"m": replay.WithFaults(good, replay.CutAfter(4))}))
		b := deployment("b", "m", f.add("b", map[string]replay.Script{"m": good}))
		c := s.client(t, f, tpsroute.Config{
			Deployments: []route.Deployment{a, b},
			Fallback:    fallback.Options{MidStream: fallback.MidStreamContinue},
		})
		_, err := drain(t, c.Chat.Completions.NewStreaming(context.Background(), params("m"), tpsroute.WithPin("a", "")))
		require.NoError(t, err)

		root, attempts := spanTree(t, s.spans.Ended(), "chat m")
		t.Logf("trace:\n%s", render(s.spans.Ended(), root))
		require.Len(t, attempts, 2)
		assert.Equal(t, "mid-stream", spanAttr(attempts[0], "tpsroute.class"))
		assert.Equal(t, "mid-stream", spanAttr(attempts[0], "tpsroute.phase"))
		assert.Equal(t, "ok", spanAttr(attempts[1], "tpsroute.outcome"))
		assert.Equal(t, []string{"tpsroute.continuation"}, events(root))
		assert.Equal(t, []string{"tpsroute.first_output_chunk"}, events(attempts[0]))

		ms := s.metrics(t)
		cont, ok := ms["tpsroute.continuations"].Data.(metricdata.Sum[int64])
		require.True(t, ok)
		require.Len(t, cont.DataPoints, 1)
		assert.Equal(t, "b", attr(cont.DataPoints[0].Attributes, "gen_ai.provider.name"))
		assert.NotContains(t, ms, "tpsroute.failovers", "a continuation is not a failover")
	})
}

// TestRescueCounted: a stream of a that slows to 2 tokens/s, a quarter of
// less of its expected 100, is continued on b, as fast: tpsroute.rescues
// counts it once, on a (issue 29 item 4).
func TestRescueCounted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newSDK(t)
		f := fleet{}
		good := &replay.Profile{TTFT: 100 * time.Millisecond, TPS: 100, OutputTokens: 100}
		a := deployment("a", "m", f.add("a", map[string]replay.Script{"m": replay.WithFaults(good, replay.SlowAfter(5, 2))}))
		b := deployment("b", "m", f.add("b", map[string]replay.Script{"m": good}))
		a.Expected = route.Prior{TPS: 100, TTFT: 100 * time.Millisecond}
		b.Expected = a.Expected
		c := s.client(t, f, tpsroute.Config{Deployments: []route.Deployment{a, b}})
		text, err := drain(t, c.Chat.Completions.NewStreaming(context.Background(), params("m"), tpsroute.WithPin("a", "")))
		require.NoError(t, err)
		assert.Equal(t, replay.Text(100), text)

		ms := s.metrics(t)
		res, ok := ms["tpsroute.rescues"].Data.(metricdata.Sum[int64])
		require.True(t, ok, "tpsroute.rescues recorded")
		require.Len(t, res.DataPoints, 1)
		assert.Equal(t, int64(1), res.DataPoints[0].Value)
		assert.Equal(t, "a", attr(res.DataPoints[0].Attributes, "gen_ai.provider.name"))
	})
}

// TestBufferedRestartIsFailover: a call through New whose first deployment
// is cut after some output restarts on the second from scratch, with
// continuation enabled or not: that is a failover, not a continuation.
func TestBufferedRestartIsFailover(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newSDK(t)
		f := fleet{}
		good := &replay.Profile{TTFT: 100 * time.Millisecond, TPS: 50, OutputTokens: 10}
		a := deployment("a", "m", f.add("a", map[string]replay.Script{"m": replay.WithFaults(good, replay.CutAfter(4))}))
		b := deployment("b", "m", f.add("b", map[string]replay.Script{"m": good}))
		c := s.client(t, f, tpsroute.Config{
			Deployments: []route.Deployment{a, b},
			Fallback:    fallback.Options{MidStream: fallback.MidStreamContinue},
		})
		_, err := c.Chat.Completions.New(context.Background(), params("m"), tpsroute.WithPin("a", ""))
		require.NoError(t, err)
		ms := s.metrics(t)
		assert.NotContains(t, ms, "tpsroute.continuations")
		fo, ok := ms["tpsroute.failovers"].Data.(metricdata.Sum[int64])
		require.True(t, ok)
		require.Len(t, fo.DataPoints, 1)
		assert.Equal(t, "mid-stream", attr(fo.DataPoints[0].Attributes, "tpsroute.class"))
		root, _ := spanTree(t, s.spans.Ended(), "chat m")
		assert.Equal(t, []string{"tpsroute.failover"}, events(root))
	})
}

// TestErrorType: a call that fails everywhere records error.type on its
// duration and an error status on its span.
func TestErrorType(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newSDK(t)
		f := fleet{}
		a := deployment("a", "m", f.add("a", map[string]replay.Script{"m": replay.WithFaults(&replay.Profile{}, replay.RateLimited("30"))}))
		c := s.client(t, f, tpsroute.Config{Deployments: []route.Deployment{a}, Fallback: fallback.Options{MaxWait: -1}})
		_, err := drain(t, c.Chat.Completions.NewStreaming(context.Background(), params("m")))
		require.Error(t, err)
		dur := histogram(t, s.metrics(t)["gen_ai.client.operation.duration"])
		require.Len(t, dur.DataPoints, 1)
		assert.Equal(t, "rate-limited", attr(dur.DataPoints[0].Attributes, "error.type"))
		root, _ := spanTree(t, s.spans.Ended(), "chat m")
		assert.Equal(t, "rate-limited", spanAttr(root, "error.type"))
		assert.Equal(t, "Error", root.Status().Code.String())
	})
}

// render draws the span tree under root as text, with times relative to the
// root's start: the trace rendering of docs/OBSERVABILITY.md.
func render(spans []sdktrace.ReadOnlySpan, root sdktrace.ReadOnlySpan) string {
	var b strings.Builder
	t0 := root.StartTime()
	keep := map[string]bool{
		"gen_ai.provider.name": true, "gen_ai.request.model": true, "gen_ai.usage.output_tokens": true,
		"tpsroute.outcome": true, "tpsroute.class": true, "tpsroute.phase": true, "http.response.status_code": true,
		"tpsroute.region": true, "gen_ai.response.time_to_first_chunk": true, "tpsroute.attempts": true,
	}
	var walk func(sp sdktrace.ReadOnlySpan, depth int)
	walk = func(sp sdktrace.ReadOnlySpan, depth int) {
		pad := strings.Repeat("    ", depth)
		fmt.Fprintf(&b, "%s%s  [%v +%v]", pad, sp.Name(), sp.StartTime().Sub(t0), sp.EndTime().Sub(sp.StartTime()))
		for _, kv := range sp.Attributes() {
			if keep[string(kv.Key)] {
				fmt.Fprintf(&b, " %s=%s", kv.Key, kv.Value.String())
			}
		}
		b.WriteString("\n")
		for _, e := range sp.Events() {
			fmt.Fprintf(&b, "%s    event %s at %v", pad, e.Name, e.Time.Sub(t0))
			for _, kv := range e.Attributes {
				fmt.Fprintf(&b, " %s=%s", kv.Key, kv.Value.String())
			}
			b.WriteString("\n")
		}
		for _, c := range spans {
			if c.Parent().SpanID() == sp.SpanContext().SpanID() {
				walk(c, depth+1)
			}
		}
	}
	walk(root, 0)
	return b.String()
}
