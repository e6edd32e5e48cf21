package telemetry

import (
	"context"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"

	"github.com/tpsroute/tpsroute/fallback"
	"github.com/tpsroute/tpsroute/measure"
	"github.com/tpsroute/tpsroute/route"
	"github.com/tpsroute/tpsroute/tps"
)

func TestResolveBounded(t *testing.T) {
	tel, err := New(Options{Deployments: []route.Deployment{
		{Provider: "a", Region: "us", Model: "m", BaseURL: "https://a.example:8443/v1"},
		{Provider: "w", Region: "eu", Model: route.Wildcard, BaseURL: "http://w.example/v1"},
	}})
	require.NoError(t, err)

	d := tel.resolve(measure.Key{Provider: "a", Region: "us", Model: "m"})
	require.NotNil(t, d)
	assert.Equal(t, "a/us/m", d.name)
	set := attribute.NewSet(d.attrs...)
	addr, _ := set.Value("server.address")
	port443, _ := set.Value("server.port")
	assert.Equal(t, "a.example", addr.AsString())
	assert.EqualValues(t, 8443, port443.AsInt64())

	// Invented models through the wildcard all share one entry; a configured
	// model gets its own, created once.
	other := tel.resolve(measure.Key{Provider: "w", Region: "eu", Model: "x1"})
	require.NotNil(t, other)
	assert.Same(t, other, tel.resolve(measure.Key{Provider: "w", Region: "eu", Model: "x2"}))
	assert.Equal(t, "w/eu/_OTHER", other.name)
	m := tel.resolve(measure.Key{Provider: "w", Region: "eu", Model: "m"})
	assert.Equal(t, "w/eu/m", m.name)
	assert.Same(t, m, tel.resolve(measure.Key{Provider: "w", Region: "eu", Model: "m"}))
	assert.Len(t, tel.served, 1)

	assert.Nil(t, tel.resolve(measure.Key{Provider: "nobody", Region: "eu", Model: "m"}))
	assert.Equal(t, 443, port(mustURL(t, "https://x/v1")))
	assert.Equal(t, 80, port(mustURL(t, "http://x/v1")))
}

// TestNoSDK runs a whole call's telemetry on the global providers with no SDK
// installed: nothing is recorded and nothing panics, nil Calls included.
func TestNoSDK(t *testing.T) {
	d := route.Deployment{Provider: "a", Region: "us", Model: "m", BaseURL: "http://a/v1"}
	tel, err := New(Options{Deployments: []route.Deployment{d}})
	require.NoError(t, err)
	ctx, c := tel.Start(context.Background(), "m", true)
	require.NotNil(t, ctx)
	c.Plan(route.Plan{Deployments: []route.Candidate{{Deployment: &d, Reason: route.ReasonBest}}})
	assert.False(t, c.gaps, "no SDK: chunk gaps are not even computed")
	c.OutputGap(0, time.Millisecond)
	s := tps.Sample{Start: time.Now(), TTFT: time.Millisecond, Total: 2 * time.Millisecond, OutputTokens: 3, Implausible: tps.ImplausibleOverStreamed}
	c.AttemptEnd(0, fallback.Attempt{Key: d.Key()}, &s)
	c.End(nil)
	c.End(nil) // once only

	var nilCall *Call
	nilCall.Plan(route.Plan{})
	nilCall.AttemptEnd(0, fallback.Attempt{}, nil)
	nilCall.End(nil)
	var nilTel *Telemetry
	nilTel.InFlight(d.Key(), 1)
}

func TestErrorType(t *testing.T) {
	fe := &fallback.Error{Attempts: []fallback.Attempt{{Class: fallback.ClassNext}, {Class: fallback.ClassRateLimited}}}
	assert.Equal(t, "rate-limited", ErrorType(fe), "the deciding attempt's class")
	assert.Equal(t, "canceled", ErrorType(context.Canceled))
	assert.Equal(t, "timeout", ErrorType(context.DeadlineExceeded))
	assert.Equal(t, "no_deployment", ErrorType(route.ErrNoDeployment))
}

func mustURL(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	require.NoError(t, err)
	return u
}

// TestOperationPerAPI: a deployment narrowed to embeddings records
// gen_ai.operation.name "embeddings"; chat, Responses and Messages
// deployments record "chat"; a call started for an operation carries it.
func TestOperationPerAPI(t *testing.T) {
	base := route.Deployment{Provider: "a", Region: "us", Model: "m", BaseURL: "http://a/v1",
		APIs: []route.API{route.APIChat, route.APIResponses, route.APIMessages, route.APIEmbeddings}}
	var ds []route.Deployment
	for _, a := range base.APIs {
		ds = append(ds, base.ForAPI(a))
	}
	tel, err := New(Options{Deployments: ds})
	require.NoError(t, err)
	for _, d := range ds {
		dep := tel.resolve(d.Key())
		require.NotNil(t, dep, "%v", d.Key())
		set := attribute.NewSet(dep.attrs...)
		v, _ := set.Value("gen_ai.operation.name")
		want := OperationChat
		if d.APIs[0] == route.APIEmbeddings {
			want = OperationEmbeddings
		}
		assert.Equal(t, want, v.AsString(), "%v", d.Key())
	}
	_, c := tel.StartOperation(context.Background(), OperationEmbeddings, "m", false)
	assert.Equal(t, OperationEmbeddings, c.op)
	_, c = tel.Start(context.Background(), "m", true)
	assert.Equal(t, OperationChat, c.op)
}
