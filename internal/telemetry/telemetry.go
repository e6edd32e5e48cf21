package telemetry

import (
	"context"
	"errors"
	"maps"
	"net/url"
	"slices"
	"strconv"
	"sync"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/tpsroute/tpsroute/measure"
	"github.com/tpsroute/tpsroute/route"
)

// ScopeName is the instrumentation scope of every instrument and span.
const ScopeName = "github.com/tpsroute/tpsroute"

// SemconvVersion is the version of the OpenTelemetry semantic conventions the
// gen_ai.* instruments, attributes and spans follow.
const SemconvVersion = "1.41.0"

// Other is the value of a model attribute that no configured deployment
// names: what a wildcard deployment served for a model the configuration
// does not list. It keeps the number of series bounded whatever callers ask
// for (the conventions' own fallback value for error.type is the same).
const Other = "_OTHER"

// Bucket boundaries. The gen_ai.* ones are those the semantic conventions
// (v1.41.0) ask for.
// The gen_ai.operation.name values tpsroute records (OpenTelemetry GenAI
// semantic conventions): chat completions, OpenAI's Responses API and
// Anthropic's Messages API are all "chat"; embeddings are "embeddings".
const (
	OperationChat       = "chat"
	OperationEmbeddings = "embeddings"
)

var (
	// DurationBuckets are the boundaries of gen_ai.client.operation.duration,
	// gen_ai.client.operation.time_to_first_chunk and
	// tpsroute.attempt.time_to_first_chunk, in seconds.
	DurationBuckets = []float64{0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92}
	// ChunkBuckets are the boundaries of
	// gen_ai.client.operation.time_per_output_chunk, in seconds.
	ChunkBuckets = []float64{0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5}
	// TokenBuckets are the boundaries of gen_ai.client.token.usage.
	TokenBuckets = []float64{1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864}
	// TPSBuckets are the boundaries of tpsroute.generation.tps, in tokens
	// per second.
	TPSBuckets = []float64{1, 2, 5, 10, 20, 35, 50, 75, 100, 150, 200, 300, 500, 1000, 2000, 5000}
)

// Attribute keys of tpsroute's own instruments and spans.
const (
	AttrRegion     = attribute.Key("tpsroute.region")     // the deployment's configured region
	AttrDeployment = attribute.Key("tpsroute.deployment") // provider/region/model of the deployment, bounded like the model
	AttrOutcome    = attribute.Key("tpsroute.outcome")    // ok, failed, skipped or canceled
	AttrClass      = attribute.Key("tpsroute.class")      // the fallback class: ok, retry, next, rate-limited, ...
	AttrPhase      = attribute.Key("tpsroute.phase")      // how far a failed attempt got: connect, headers, first-token, mid-stream
	AttrReason     = attribute.Key("tpsroute.reason")     // why the first deployment of a plan was first; why a usage was not trusted
	AttrFrom       = attribute.Key("tpsroute.from")       // the deployment a failover or continuation left
)

// Semantic-convention attribute keys.
const (
	keyOperation     = attribute.Key("gen_ai.operation.name")
	keyProvider      = attribute.Key("gen_ai.provider.name")
	keyRequestModel  = attribute.Key("gen_ai.request.model")
	keyResponseModel = attribute.Key("gen_ai.response.model")
	keyTokenType     = attribute.Key("gen_ai.token.type")
	keyServerAddress = attribute.Key("server.address")
	keyServerPort    = attribute.Key("server.port")
	keyErrorType     = attribute.Key("error.type")
	keyInputTokens   = attribute.Key("gen_ai.usage.input_tokens")
	keyOutputTokens  = attribute.Key("gen_ai.usage.output_tokens")
	keyTTFC          = attribute.Key("gen_ai.response.time_to_first_chunk")
	keyFinishReasons = attribute.Key("gen_ai.response.finish_reasons")
)

// Health is what the breaker gauge reads of each deployment: the Client's
// executor implements it.
type Health interface {
	Status(k measure.Key, now time.Time) route.Status
}

// Options configures New. The zero value uses the global providers and knows
// no deployment.
type Options struct {
	// MeterProvider creates the instruments. Nil means otel.GetMeterProvider().
	MeterProvider metric.MeterProvider
	// TracerProvider creates the spans. Nil means otel.GetTracerProvider().
	TracerProvider trace.TracerProvider
	// Deployments are the configured deployments: the only source of
	// attribute values besides fixed names.
	Deployments []route.Deployment
	// Health, if not nil, is read by the tpsroute.breaker.state gauge at each
	// collection, for every configured deployment that is not a wildcard.
	Health Health
}

// Telemetry holds the instruments and the tracer of one Client. It is safe for
// concurrent use. With no OpenTelemetry SDK installed every method is cheap:
// the API's no-op instruments and non-recording spans.
type Telemetry struct {
	tracer trace.Tracer

	duration metric.Float64Histogram // gen_ai.client.operation.duration
	tokens   metric.Int64Histogram   // gen_ai.client.token.usage
	ttfc     metric.Float64Histogram // gen_ai.client.operation.time_to_first_chunk
	tpoc     metric.Float64Histogram // gen_ai.client.operation.time_per_output_chunk

	attemptTTFC   metric.Float64Histogram   // tpsroute.attempt.time_to_first_chunk
	tps           metric.Float64Histogram   // tpsroute.generation.tps
	attempts      metric.Int64Counter       // tpsroute.attempts
	failovers     metric.Int64Counter       // tpsroute.failovers
	continuations metric.Int64Counter       // tpsroute.continuations
	rescues       metric.Int64Counter       // tpsroute.rescues
	decisions     metric.Int64Counter       // tpsroute.route.decisions
	inflight      metric.Int64UpDownCounter // tpsroute.inflight
	cost          metric.Float64Counter     // tpsroute.cost
	implausible   metric.Int64Counter       // tpsroute.usage.implausible

	exact  map[measure.Key]*dep // configured deployments that are not wildcards
	wild   map[[2]string]*dep   // wildcard deployments by provider and region
	models map[string]bool      // every configured model name, and model@revision
	mu     sync.Mutex
	served map[servedKey]*dep // a wildcard deployment serving a configured model
}

type servedKey struct {
	base  *dep
	model string
}

// dep is the attributes of one deployment, computed once.
type dep struct {
	d      route.Deployment       // as configured
	name   string                 // provider/region/model, the model bounded
	model  string                 // bounded: configured, or Other
	attrs  []attribute.KeyValue   // gen_ai.operation.name first, then the deployment's
	record []metric.RecordOption  // time_per_output_chunk's attributes, precomputed: per-chunk records allocate nothing
	own    []metric.RecordOption  // attrs[1:]: tpsroute's histograms
	add    []metric.AddOption     // attrs[1:]: tpsroute's counters
	obs    []metric.ObserveOption // attrs[1:]: tpsroute's gauges
}

// New returns the Telemetry of the deployments in o. It fails only when the
// MeterProvider refuses an instrument.
func New(o Options) (*Telemetry, error) {
	mp, tp := o.MeterProvider, o.TracerProvider
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	m := mp.Meter(ScopeName, metric.WithSchemaURL(semconv.SchemaURL))
	t := &Telemetry{
		tracer: tp.Tracer(ScopeName, trace.WithSchemaURL(semconv.SchemaURL)),
		exact:  make(map[measure.Key]*dep),
		wild:   make(map[[2]string]*dep),
		models: make(map[string]bool),
		served: make(map[servedKey]*dep),
	}
	var errs []error // every instrument is created; the errors are returned together
	f64h := func(name, unit, desc string, bounds []float64) metric.Float64Histogram {
		h, err := m.Float64Histogram(name, metric.WithUnit(unit), metric.WithDescription(desc), metric.WithExplicitBucketBoundaries(bounds...))
		errs = append(errs, err)
		return h
	}
	counter := func(name, unit, desc string) metric.Int64Counter {
		c, err := m.Int64Counter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		errs = append(errs, err)
		return c
	}
	t.duration = f64h("gen_ai.client.operation.duration", "s", "GenAI operation duration.", DurationBuckets)
	t.ttfc = f64h("gen_ai.client.operation.time_to_first_chunk", "s",
		"Time to receive the first chunk, measured from when the client issues the generation request to when the first chunk is received in the response stream.", DurationBuckets)
	t.tpoc = f64h("gen_ai.client.operation.time_per_output_chunk", "s",
		"Time per output chunk, recorded for each chunk received after the first one, measured as the time elapsed from the end of the previous chunk to the end of the current chunk.", ChunkBuckets)
	t.attemptTTFC = f64h("tpsroute.attempt.time_to_first_chunk", "s",
		"Time from the start of one attempt to its first output chunk, per deployment.", DurationBuckets)
	t.tps = f64h("tpsroute.generation.tps", "{token}/s",
		"Generation speed of one attempt: output tokens after the first chunk per second between the first and last output chunks.", TPSBuckets)
	var err error
	t.tokens, err = m.Int64Histogram("gen_ai.client.token.usage", metric.WithUnit("{token}"),
		metric.WithDescription("Number of input and output tokens used."), metric.WithExplicitBucketBoundaries(TokenBuckets...))
	errs = append(errs, err)
	t.attempts = counter("tpsroute.attempts", "{attempt}", "Attempts by deployment, outcome, class and phase; deployments skipped for an open breaker or a cooldown count as skipped.")
	t.failovers = counter("tpsroute.failovers", "{failover}", "Moves of a call from a failed attempt to another deployment before the commit point.")
	t.continuations = counter("tpsroute.continuations", "{continuation}", "Mid-stream continuations onto another deployment after the commit point.")
	t.rescues = counter("tpsroute.rescues", "{rescue}", "Streams left for being too slow, continued on a faster deployment (fallback.RescueOptions).")
	t.decisions = counter("tpsroute.route.decisions", "{decision}", "Routing decisions by the reason their first deployment was first.")
	t.implausible = counter("tpsroute.usage.implausible", "{attempt}", "Attempts whose reported usage was not trusted, by the reason: the stream could not have carried it.")
	t.inflight, err = m.Int64UpDownCounter("tpsroute.inflight", metric.WithUnit("{request}"),
		metric.WithDescription("Attempts in flight per deployment, from the request until its body is closed."))
	errs = append(errs, err)
	t.cost, err = m.Float64Counter("tpsroute.cost", metric.WithUnit("USD"),
		metric.WithDescription("Cost of every attempt's tokens at the deployment's configured prices."))
	if err := errors.Join(append(errs, err)...); err != nil {
		return nil, err
	}
	for _, d := range o.Deployments {
		if d.IsWildcard() {
			t.wild[[2]string{d.Provider, d.Region}] = newDep(d, Other)
			continue
		}
		t.exact[d.Key()] = newDep(d, d.Model)
		t.models[d.Model] = true
		if d.Revision != "" {
			t.models[d.Model+"@"+d.Revision] = true
		}
	}
	if o.Health != nil {
		if err := t.breakerGauge(m, o.Health); err != nil {
			return nil, err
		}
	}
	return t, nil
}

func (t *Telemetry) breakerGauge(m metric.Meter, h Health) error {
	g, err := m.Int64ObservableGauge("tpsroute.breaker.state", metric.WithUnit("{state}"),
		metric.WithDescription("Circuit-breaker state per deployment: 0 closed, 1 half-open, 2 open."))
	if err != nil {
		return err
	}
	deps := slices.Collect(maps.Values(t.exact))
	_, err = m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		now := time.Now()
		for _, d := range deps {
			o.ObserveInt64(g, int64(h.Status(d.d.Key(), now).Breaker), d.obs...)
		}
		return nil
	}, g)
	return err
}

func newDep(d route.Deployment, model string) *dep {
	x := &dep{d: d, model: model, name: d.Provider + "/" + d.Region + "/" + model}
	resp := d.WireModel()
	if d.IsWildcard() || d.ProviderModel == "" {
		resp = model
	}
	op := OperationChat
	if len(d.APIs) == 1 && d.APIs[0] == route.APIEmbeddings { // narrowed with ForAPI
		op = OperationEmbeddings
	}
	x.attrs = []attribute.KeyValue{
		keyOperation.String(op),
		keyProvider.String(d.Provider),
		keyRequestModel.String(model),
		keyResponseModel.String(resp),
		AttrRegion.String(d.Region),
	}
	if u, err := url.Parse(d.BaseURL); err == nil && u.Hostname() != "" {
		x.attrs = append(x.attrs, keyServerAddress.String(u.Hostname()), keyServerPort.Int(port(u)))
	}
	// Per chunk, the SDK's cost grows with the number of attributes: the
	// chunk gaps carry the conventions' required and conditionally required
	// ones and server.address, not the response model or the region.
	chunk := slices.DeleteFunc(slices.Clone(x.attrs), func(kv attribute.KeyValue) bool {
		return kv.Key == keyResponseModel || kv.Key == AttrRegion
	})
	x.record = []metric.RecordOption{metric.WithAttributeSet(attribute.NewSet(chunk...))}
	own := metric.WithAttributeSet(attribute.NewSet(x.attrs[1:]...))
	x.own, x.add, x.obs = []metric.RecordOption{own}, []metric.AddOption{own}, []metric.ObserveOption{own}
	return x
}

func port(u *url.URL) int {
	if p := u.Port(); p != "" {
		n, _ := strconv.Atoi(p)
		return n
	}
	if u.Scheme == "http" {
		return 80
	}
	return 443
}

// resolve returns the attributes of the deployment with key k; for a
// wildcard deployment's key, those of the wildcard with the model bounded.
func (t *Telemetry) resolve(k measure.Key) *dep {
	if d := t.exact[k]; d != nil {
		return d
	}
	base := t.wild[[2]string{k.Provider, k.Region}]
	if base == nil {
		return nil
	}
	if !t.models[k.Model] {
		return base
	}
	sk := servedKey{base, k.Model}
	t.mu.Lock()
	defer t.mu.Unlock()
	d := t.served[sk]
	if d == nil { // bounded: wildcard deployments x configured models
		d = newDep(base.d.ForModel(k.Model), k.Model)
		t.served[sk] = d
	}
	return d
}

// Model returns the bounded form of a requested model: itself when a
// configured deployment names it, else Other.
func (t *Telemetry) Model(model string) string {
	if t.models[model] {
		return model
	}
	return Other
}

// InFlight adds delta to the in-flight count of the deployment with key k.
func (t *Telemetry) InFlight(k measure.Key, delta int64) {
	if t == nil {
		return
	}
	if d := t.resolve(k); d != nil {
		t.inflight.Add(context.Background(), delta, d.add...)
	}
}
