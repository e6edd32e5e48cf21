package config

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tpsroute/tpsroute"
	"github.com/tpsroute/tpsroute/fallback"
	"github.com/tpsroute/tpsroute/measure"
	"github.com/tpsroute/tpsroute/route"
)

// File is what a config file holds: the Client's Config and the fleet
// section, which a program passes to fleet.Open (docs/FLEET.md). It is a
// plain value.
type File struct {
	// Client is the Config to pass to tpsroute.New.
	Client tpsroute.Config
	// Fleet is the "fleet" section; the zero value means no fleet.
	Fleet tpsroute.FleetSettings
}

// Load reads the config file at path with Parse.
func Load(path string) (File, error) {
	f, err := os.Open(path)
	if err != nil {
		return File{}, fmt.Errorf("tpsroute: config: %w", err)
	}
	defer f.Close()
	return Parse(f)
}

// Parse reads a JSON config (the schema of docs/CONFIG.md) from r, reading
// each deployment's "api_key_env" with os.LookupEnv. Errors are
// *tpsroute.ConfigError values that name the field and its line.
func Parse(r io.Reader) (File, error) {
	return ParseLookup(r, os.LookupEnv)
}

// ParseLookup is Parse with the environment replaced by lookup, which
// returns the value of a variable and whether it is set. A nil lookup means
// no variable is set: every "api_key_env" is then an error.
func ParseLookup(r io.Reader, lookup func(name string) (string, bool)) (File, error) {
	data, err := io.ReadAll(io.LimitReader(r, maxConfigBytes+1))
	if err != nil {
		return File{}, fmt.Errorf("tpsroute: read config: %w", err)
	}
	if len(data) > maxConfigBytes {
		return File{}, &tpsroute.ConfigError{Msg: fmt.Sprintf("larger than %d bytes", maxConfigBytes)}
	}
	lines, err := checkKeys(data, reflect.TypeFor[fileConfig]())
	if err != nil {
		return File{}, err
	}
	var f fileConfig
	if err := decode(data, &f); err != nil {
		return File{}, err
	}
	p := converter{lines: lines, lookup: lookup}
	return p.config(&f)
}

// maxConfigBytes bounds a config file; real ones are a few kilobytes.
const maxConfigBytes = 8 << 20

// fileConfig is the JSON schema of a config file.
type fileConfig struct {
	Deployments []fileDeployment `json:"deployments"`
	Policy      string           `json:"policy"`
	SLO         fileSLO          `json:"slo"`
	Route       fileRoute        `json:"route"`
	Measure     fileMeasure      `json:"measure"`
	Fallback    fileFallback     `json:"fallback"`
	Fleet       fileFleet        `json:"fleet"`
	State       fileState        `json:"state"`
	// MaxWildcardModels is tpsroute.Config.MaxWildcardModels.
	MaxWildcardModels int `json:"max_wildcard_models"`
}

type fileDeployment struct {
	Provider      string            `json:"provider"`
	Region        string            `json:"region"`
	Model         string            `json:"model"`
	ProviderModel string            `json:"provider_model"`
	Revision      string            `json:"revision"`
	BaseURL       string            `json:"base_url"`
	APIKeyEnv     string            `json:"api_key_env"`
	Headers       map[string]string `json:"headers"`
	Price         measure.Price     `json:"price"`
	Limits        struct {
		RPM         int `json:"rpm"`
		TPM         int `json:"tpm"`
		MaxInFlight int `json:"max_in_flight"`
	} `json:"limits"`
	ContextWindow int64 `json:"context_window"`
	Capabilities  struct {
		NoStreamOptions bool `json:"no_stream_options"`
		NoStream        bool `json:"no_stream"`
		// IncludeUsage is the former opt-in, now the default: true is
		// accepted and changes nothing; false is refused with a pointer to
		// no_stream_options.
		IncludeUsage     *bool `json:"include_usage"`
		AssistantPrefill bool  `json:"assistant_prefill"`
		CacheControl     bool  `json:"cache_control"`
	} `json:"capabilities"`
	ModelCapabilities map[string]fileModelCapabilities `json:"model_capabilities"`
	Weight            float64                          `json:"weight"`
	Models            []string                         `json:"models"`
	// APIs is route.Deployment.APIs: ["chat", "responses", "messages",
	// "embeddings"]; left out, ["chat"].
	APIs []route.API `json:"apis"`
	// Expected is route.Deployment.Expected: a prior such as
	// {"tps": 120, "ttft": "400ms"}.
	Expected struct {
		TPS  float64 `json:"tps"`
		TTFT string  `json:"ttft"`
	} `json:"expected"`
}

// fileModelCapabilities overrides, for one model of a wildcard deployment,
// the capabilities given; nil fields keep the deployment's.
type fileModelCapabilities struct {
	NoStreamOptions  *bool `json:"no_stream_options"`
	NoStream         *bool `json:"no_stream"`
	AssistantPrefill *bool `json:"assistant_prefill"`
	CacheControl     *bool `json:"cache_control"`
}

type fileSLO struct {
	MaxTTFT      string  `json:"max_ttft"`
	MinTPS       float64 `json:"min_tps"`
	MaxPrice     float64 `json:"max_price"`
	MaxErrorRate float64 `json:"max_error_rate"`
	Strict       bool    `json:"strict"`
}

// fileRoute keeps the shares and counts whose zero value in route.Options
// means "default" as raw JSON: a number, or "off" (route.Off). An explicit 0
// is refused, so that 0 never means one thing in Go and another in a file.
type fileRoute struct {
	LatencyMetric     string          `json:"latency_metric"`
	TTFTPercentile    string          `json:"ttft_percentile"`
	TPSPercentile     string          `json:"tps_percentile"`
	Exploration       json.RawMessage `json:"exploration"`
	Band              json.RawMessage `json:"band"`
	ColdProbes        json.RawMessage `json:"cold_probes"`
	ColdShare         json.RawMessage `json:"cold_share"`
	ColdProbeInterval string          `json:"cold_probe_interval"`
	AffinityTTL       *string         `json:"affinity_ttl"`
	AffinityEntries   int             `json:"affinity_entries"`
	Seed              uint64          `json:"seed"`
}

type fileMeasure struct {
	Window     string `json:"window"`
	HalfLife   string `json:"half_life"`
	MinSamples int    `json:"min_samples"`
}

type fileFallback struct {
	Headers               string      `json:"headers"`
	TTFT                  string      `json:"ttft"`
	Stall                 string      `json:"stall"`
	MaxDuration           string      `json:"max_duration"`
	FinishGrace           string      `json:"finish_grace"`
	Silence               string      `json:"silence"`
	MaxEventBytes         int         `json:"max_event_bytes"`
	MaxHeldBytes          int         `json:"max_held_bytes"`
	MaxAnswerBytes        int         `json:"max_answer_bytes"`
	Attempts              int         `json:"attempts"`
	AttemptsPerDeployment int         `json:"attempts_per_deployment"`
	BackoffBase           string      `json:"backoff_base"`
	BackoffMax            string      `json:"backoff_max"`
	MaxWait               string      `json:"max_wait"`
	PenaltyCooldown       string      `json:"penalty_cooldown"`
	MidStream             string      `json:"mid_stream"`
	Malformed             string      `json:"malformed"`
	Hedge                 fileHedge   `json:"hedge"`
	Breaker               fileBreaker `json:"breaker"`
	Rescue                fileRescue  `json:"rescue"`
	Seed                  uint64      `json:"seed"`
}

type fileFleet struct {
	RedisURL string `json:"redis_url"`
	Name     string `json:"name"`
	Sync     string `json:"sync"`
}

// fileState is tpsroute.Config.StateFile and StateInterval.
type fileState struct {
	File     string `json:"file"`
	Interval string `json:"interval"`
}

type fileHedge struct {
	Delay  string  `json:"delay"`
	Budget float64 `json:"budget"`
}

// fileRescue is fallback.RescueOptions.
type fileRescue struct {
	// Ratio is a share or "off", as fileRoute's shares.
	Ratio   json.RawMessage `json:"ratio"`
	Window  string          `json:"window"`
	Speedup float64         `json:"speedup"`
}

type fileBreaker struct {
	ConsecutiveFailures uint32  `json:"consecutive_failures"`
	FailureRatio        float64 `json:"failure_ratio"`
	MinRequests         uint32  `json:"min_requests"`
	Window              string  `json:"window"`
	BucketPeriod        string  `json:"bucket_period"`
	MaxRequests         uint32  `json:"max_requests"`
	Timeout             string  `json:"timeout"`
	MaxTimeout          string  `json:"max_timeout"`
	Multiplier          float64 `json:"multiplier"`
	// ProbeShare is a share or "off", as fileRoute's shares.
	ProbeShare json.RawMessage `json:"probe_share"`
}

// converter turns a decoded fileConfig into a Config, reporting errors at the
// line of the offending field.
type converter struct {
	lines  map[string]int
	lookup func(string) (string, bool)
}

func (p *converter) errorf(path, format string, args ...any) error {
	return &tpsroute.ConfigError{Line: p.lines[path], Field: path, Msg: fmt.Sprintf(format, args...)}
}

// duration parses a duration string at path; "" is zero.
func (p *converter) duration(path, s string) (time.Duration, error) {
	if s == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, p.errorf(path, "want a duration such as \"20s\" or \"1m30s\", got %q", s)
	}
	if d < 0 {
		return 0, p.errorf(path, "negative duration %q", s)
	}
	return d, nil
}

func (p *converter) config(f *fileConfig) (File, error) {
	var c tpsroute.Config
	var err error
	if len(f.Deployments) == 0 {
		return File{}, p.errorf("deployments", "at least one deployment is required")
	}
	c.Deployments = make([]route.Deployment, len(f.Deployments))
	for i := range f.Deployments {
		if c.Deployments[i], err = p.deployment(i, &f.Deployments[i]); err != nil {
			return File{}, err
		}
	}
	if c.Route, err = p.route(&f.Route); err != nil {
		return File{}, err
	}
	if c.Route.Policy, err = choice(p, "policy", f.Policy, "policy", policies); err != nil {
		return File{}, err
	}
	if c.Route.SLO, err = p.slo(&f.SLO); err != nil {
		return File{}, err
	}
	if c.Measure, err = p.measure(&f.Measure); err != nil {
		return File{}, err
	}
	if c.Fallback, err = p.fallback(&f.Fallback); err != nil {
		return File{}, err
	}
	if f.MaxWildcardModels < 0 {
		return File{}, p.errorf("max_wildcard_models", "negative")
	}
	c.MaxWildcardModels = f.MaxWildcardModels
	c.StateFile = f.State.File
	if c.StateInterval, err = p.duration("state.interval", f.State.Interval); err != nil {
		return File{}, err
	}
	if f.State.Interval != "" && c.StateInterval == 0 {
		return File{}, p.errorf("state.interval", "must be positive; leave it out for the default (1m)")
	}
	if f.State.Interval != "" && c.StateFile == "" {
		return File{}, p.errorf("state.interval", "without state.file")
	}
	fs := tpsroute.FleetSettings{RedisURL: f.Fleet.RedisURL, Name: f.Fleet.Name}
	if fs.Sync, err = p.duration("fleet.sync", f.Fleet.Sync); err != nil {
		return File{}, err
	}
	return File{Client: c, Fleet: fs}, nil
}

func (p *converter) deployment(i int, fd *fileDeployment) (route.Deployment, error) {
	at := "deployments[" + strconv.Itoa(i) + "]"
	d := route.Deployment{
		Provider:      fd.Provider,
		Region:        fd.Region,
		Model:         fd.Model,
		ProviderModel: fd.ProviderModel,
		Revision:      fd.Revision,
		BaseURL:       fd.BaseURL,
		Price:         fd.Price,
		Limits:        route.Limits{RPM: fd.Limits.RPM, TPM: fd.Limits.TPM, MaxInFlight: fd.Limits.MaxInFlight},
		ContextWindow: fd.ContextWindow,
		Capabilities: route.Capabilities{
			NoStreamOptions:  fd.Capabilities.NoStreamOptions,
			NoStream:         fd.Capabilities.NoStream,
			AssistantPrefill: fd.Capabilities.AssistantPrefill,
			CacheControl:     fd.Capabilities.CacheControl,
		},
		Weight: fd.Weight,
		Models: fd.Models,
		APIs:   fd.APIs,
	}
	if fd.Expected.TPS < 0 {
		return route.Deployment{}, p.errorf(at+".expected.tps", "negative tokens/s %v", fd.Expected.TPS)
	}
	d.Expected.TPS = fd.Expected.TPS
	var err error
	if d.Expected.TTFT, err = p.duration(at+".expected.ttft", fd.Expected.TTFT); err != nil {
		return route.Deployment{}, err
	}
	if iu := fd.Capabilities.IncludeUsage; iu != nil && !*iu {
		return route.Deployment{}, p.errorf(at+".capabilities.include_usage",
			"usage is requested by default; for a provider that rejects stream_options write \"no_stream_options\": true")
	}
	if len(fd.ModelCapabilities) > 0 {
		if d.Model != route.Wildcard {
			return route.Deployment{}, p.errorf(at+".model_capabilities", "only for a wildcard deployment (model \"*\")")
		}
		d.ModelCapabilities = make(map[string]route.Capabilities, len(fd.ModelCapabilities))
		for m, fc := range fd.ModelCapabilities {
			c := d.Capabilities
			for _, f := range []struct {
				v   *bool
				dst *bool
			}{{fc.NoStreamOptions, &c.NoStreamOptions}, {fc.NoStream, &c.NoStream}, {fc.AssistantPrefill, &c.AssistantPrefill}, {fc.CacheControl, &c.CacheControl}} {
				if f.v != nil {
					*f.dst = *f.v
				}
			}
			d.ModelCapabilities[m] = c
		}
	}
	if len(fd.Headers) > 0 {
		d.Headers = make(map[string]string, len(fd.Headers))
		for k, v := range fd.Headers {
			if route.IsCredentialName(k) {
				return route.Deployment{}, p.errorf(at+".headers."+k, "credentials are refused in config files; use \"api_key_env\"")
			}
			d.Headers[k] = v
		}
	}
	if fd.APIKeyEnv != "" {
		path := at + ".api_key_env"
		if p.lookup == nil {
			return route.Deployment{}, p.errorf(path, "environment variable %s is not set", fd.APIKeyEnv)
		}
		v, ok := p.lookup(fd.APIKeyEnv)
		switch {
		case !ok:
			return route.Deployment{}, p.errorf(path, "environment variable %s is not set", fd.APIKeyEnv)
		case strings.TrimSpace(v) == "":
			return route.Deployment{}, p.errorf(path, "environment variable %s is empty", fd.APIKeyEnv)
		}
		d.APIKey = strings.TrimSpace(v)
	}
	if err := d.Validate(); err != nil {
		if de, ok := err.(*route.DeploymentError); ok {
			path := at + "." + jsonFieldName(de.Field)
			if _, known := p.lines[path]; !known {
				path = at
			}
			return route.Deployment{}, p.errorf(path, "%s", de.Reason)
		}
		return route.Deployment{}, p.errorf(at, "%v", err)
	}
	return d, nil
}

// jsonFieldName maps a route.DeploymentError field ("Price.Output") to the
// config file's name ("price.output").
func jsonFieldName(field string) string {
	parts := strings.Split(field, ".")
	for i, s := range parts {
		var b strings.Builder
		for j, r := range s {
			if r >= 'A' && r <= 'Z' {
				// "BaseURL" -> "base_url", "RPM" -> "rpm", "MaxInFlight" -> "max_in_flight"
				prevLower := j > 0 && s[j-1] >= 'a' && s[j-1] <= 'z'
				if prevLower {
					b.WriteByte('_')
				}
				b.WriteRune(r + ('a' - 'A'))
				continue
			}
			b.WriteRune(r)
		}
		parts[i] = b.String()
	}
	return strings.Join(parts, ".")
}

// The values of the config's string settings, by their lower-case spelling;
// "" is the zero value unless listed.
var (
	policies          = policyMap()
	latencyMetrics    = map[string]route.LatencyMetric{"ttft": route.LatencyTTFT, "completion": route.LatencyCompletion}
	percentiles       = map[string]route.Percentile{"p50": route.P50, "p95": route.P95}
	midStreamPolicies = map[string]fallback.MidStreamPolicy{"": fallback.MidStreamSameModel, "same_model": fallback.MidStreamSameModel,
		"error": fallback.MidStreamError, "continue": fallback.MidStreamContinue}
	malformedPolicies = map[string]fallback.MalformedPolicy{"skip": fallback.MalformedSkip, "fail": fallback.MalformedFail}
)

// policyMap is route's table of policy names (route.Policies) as choice
// reads it.
func policyMap() map[string]route.Policy {
	m := make(map[string]route.Policy)
	for _, p := range route.Policies() {
		m[p.String()] = p
	}
	return m
}

// choice reads the string setting s at path, any case: its value in names,
// or the zero T for "" without an entry. An unknown value is an error that
// names what the setting is and lists the spellings.
func choice[T any](p *converter, path, s, what string, names map[string]T) (T, error) {
	v, ok := names[strings.ToLower(s)]
	if !ok && s != "" {
		var want []string
		for _, k := range slices.Sorted(maps.Keys(names)) {
			if k != "" {
				want = append(want, strconv.Quote(k))
			}
		}
		return v, p.errorf(path, "unknown %s %q; want one of %s", what, s, strings.Join(want, ", "))
	}
	return v, nil
}

func (p *converter) slo(f *fileSLO) (route.SLO, error) {
	ttft, err := p.duration("slo.max_ttft", f.MaxTTFT)
	if err != nil {
		return route.SLO{}, err
	}
	s := route.SLO{MaxTTFT: ttft, MinTPS: f.MinTPS, MaxPrice: f.MaxPrice, MaxErrorRate: f.MaxErrorRate, Strict: f.Strict}
	var se *route.SLOError
	if errors.As(s.Validate(), &se) {
		return route.SLO{}, p.errorf("slo."+jsonFieldName(se.Field), "%s", se.Reason)
	}
	return s, nil
}

func (p *converter) route(f *fileRoute) (route.Options, error) {
	var o route.Options
	var err error
	if o.LatencyMetric, err = choice(p, "route.latency_metric", f.LatencyMetric, "metric", latencyMetrics); err != nil {
		return o, err
	}
	if o.TTFTPercentile, err = choice(p, "route.ttft_percentile", f.TTFTPercentile, "percentile", percentiles); err != nil {
		return o, err
	}
	if o.TPSPercentile, err = choice(p, "route.tps_percentile", f.TPSPercentile, "percentile", percentiles); err != nil {
		return o, err
	}
	// Omitted means route's default, "off" is route.Off, and a number is
	// the setting itself; 0 is refused (see offOr).
	for _, sh := range []struct {
		path string
		raw  json.RawMessage
		out  *float64
	}{
		{"route.exploration", f.Exploration, &o.Exploration},
		{"route.band", f.Band, &o.Band},
		{"route.cold_share", f.ColdShare, &o.ColdShare},
	} {
		v, err := p.offOr(sh.path, sh.raw, "a share in (0, 1]", func(v float64) bool { return v > 0 && v <= 1 })
		if err != nil {
			return o, err
		}
		*sh.out = v
	}
	probes, err := p.offOr("route.cold_probes", f.ColdProbes, "a positive integer", func(v float64) bool { return v >= 1 && v == math.Trunc(v) && v <= math.MaxInt32 })
	if err != nil {
		return o, err
	}
	o.ColdProbes = int(probes)
	if o.ColdProbeInterval, err = p.duration("route.cold_probe_interval", f.ColdProbeInterval); err != nil {
		return o, err
	}
	if f.AffinityTTL != nil {
		ttl, err := p.duration("route.affinity_ttl", *f.AffinityTTL)
		if err != nil {
			return o, err
		}
		o.AffinityTTL = cmp.Or(ttl, -1)
	}
	if f.AffinityEntries < 0 {
		return o, p.errorf("route.affinity_entries", "negative")
	}
	o.AffinityEntries = f.AffinityEntries
	o.Seed = f.Seed
	return o, nil
}

// offOr reads a route setting that is a number or "off": omitted gives 0
// (route's default), "off" gives route.Off, and a number that ok accepts
// gives itself. An explicit 0 is refused: route.Options reads 0 as the
// default, and older files read it as off, so the file must say which.
func (p *converter) offOr(path string, raw json.RawMessage, want string, ok func(float64) bool) (float64, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return 0, nil
	}
	var word string
	if json.Unmarshal(raw, &word) == nil {
		if strings.EqualFold(word, "off") {
			return route.Off, nil
		}
		return 0, p.errorf(path, "want %s or \"off\", got %q", want, word)
	}
	var v float64
	if err := json.Unmarshal(raw, &v); err != nil {
		return 0, p.errorf(path, "want %s or \"off\", got %s", want, raw)
	}
	if v == 0 {
		return 0, p.errorf(path, "0 is ambiguous: write \"off\" to turn it off, or omit the field for the default")
	}
	if math.IsNaN(v) || !ok(v) {
		return 0, p.errorf(path, "want %s or \"off\", got %v", want, v)
	}
	return v, nil
}

func (p *converter) measure(f *fileMeasure) (measure.Options, error) {
	var o measure.Options
	var err error
	if o.Window.Length, err = p.duration("measure.window", f.Window); err != nil {
		return o, err
	}
	if o.HalfLife, err = p.duration("measure.half_life", f.HalfLife); err != nil {
		return o, err
	}
	if f.MinSamples < 0 {
		return o, p.errorf("measure.min_samples", "negative")
	}
	o.MinSamples = f.MinSamples
	return o, nil
}

// fallback converts the file's fallback section. It is long (about 80 lines)
// because it is one flat list of fields, each converted and checked in the
// file's order with the file's name in its error; splitting it would only
// scatter that list.
func (p *converter) fallback(f *fileFallback) (fallback.Options, error) {
	var o fallback.Options
	for _, d := range []struct {
		path     string
		in       string
		out      *time.Duration
		deadline bool // an explicit zero ("0s") turns it off, which fallback.Deadlines spells negative
	}{
		{"fallback.headers", f.Headers, &o.Deadlines.Headers, true},
		{"fallback.ttft", f.TTFT, &o.Deadlines.TTFT, true},
		{"fallback.stall", f.Stall, &o.Deadlines.Stall, true},
		{"fallback.max_duration", f.MaxDuration, &o.Deadlines.MaxDuration, true},
		{"fallback.finish_grace", f.FinishGrace, &o.Deadlines.FinishGrace, true},
		{"fallback.silence", f.Silence, &o.Deadlines.Silence, true},
		{"fallback.backoff_base", f.BackoffBase, &o.BackoffBase, false},
		{"fallback.backoff_max", f.BackoffMax, &o.BackoffMax, false},
		{"fallback.max_wait", f.MaxWait, &o.MaxWait, false},
		{"fallback.penalty_cooldown", f.PenaltyCooldown, &o.PenaltyCooldown, false},
		{"fallback.hedge.delay", f.Hedge.Delay, &o.Hedge.Delay, false},
		{"fallback.breaker.window", f.Breaker.Window, &o.Breaker.Window, false},
		{"fallback.breaker.bucket_period", f.Breaker.BucketPeriod, &o.Breaker.BucketPeriod, false},
		{"fallback.breaker.timeout", f.Breaker.Timeout, &o.Breaker.Timeout, false},
		{"fallback.breaker.max_timeout", f.Breaker.MaxTimeout, &o.Breaker.MaxTimeout, false},
		{"fallback.rescue.window", f.Rescue.Window, &o.Rescue.Window, false},
	} {
		v, err := p.duration(d.path, d.in)
		if err != nil {
			return o, err
		}
		if v == 0 && d.in != "" && d.deadline {
			v = -1
		}
		*d.out = v
	}
	if f.Attempts < 0 {
		return o, p.errorf("fallback.attempts", "negative")
	}
	if f.AttemptsPerDeployment < 0 {
		return o, p.errorf("fallback.attempts_per_deployment", "negative")
	}
	o.MaxAttempts = f.Attempts
	o.AttemptsPerDeployment = f.AttemptsPerDeployment
	for _, l := range []struct {
		field string
		in    int
		out   *int
	}{
		{"fallback.max_event_bytes", f.MaxEventBytes, &o.Limits.Event},
		{"fallback.max_held_bytes", f.MaxHeldBytes, &o.Limits.Held},
		{"fallback.max_answer_bytes", f.MaxAnswerBytes, &o.Limits.Answer},
	} {
		if l.in < 0 {
			return o, p.errorf(l.field, "negative")
		}
		*l.out = l.in
	}
	var err error
	if o.MidStream, err = choice(p, "fallback.mid_stream", f.MidStream, "policy", midStreamPolicies); err != nil {
		return o, err
	}
	if o.Malformed, err = choice(p, "fallback.malformed", f.Malformed, "policy", malformedPolicies); err != nil {
		return o, err
	}
	if !finiteNonNeg(f.Hedge.Budget) || f.Hedge.Budget > 1 {
		return o, p.errorf("fallback.hedge.budget", "want a share in (0, 1], got %v", f.Hedge.Budget)
	}
	o.Hedge.Budget = f.Hedge.Budget
	if !finiteNonNeg(f.Breaker.FailureRatio) || f.Breaker.FailureRatio > 1 {
		return o, p.errorf("fallback.breaker.failure_ratio", "want a ratio in (0, 1], got %v", f.Breaker.FailureRatio)
	}
	if m := f.Breaker.Multiplier; m != 0 && !(m >= 1 && m <= 100) {
		return o, p.errorf("fallback.breaker.multiplier", "want a factor in [1, 100], got %v", m)
	}
	o.Breaker.Multiplier = f.Breaker.Multiplier
	share, err := p.offOr("fallback.breaker.probe_share", f.Breaker.ProbeShare, "a share in (0, 1]", func(v float64) bool { return v > 0 && v <= 1 })
	if err != nil {
		return o, err
	}
	o.Breaker.ProbeShare = share
	if o.Rescue.Ratio, err = p.offOr("fallback.rescue.ratio", f.Rescue.Ratio, "a share in (0, 1)", func(v float64) bool { return v > 0 && v < 1 }); err != nil {
		return o, err
	}
	if s := f.Rescue.Speedup; s != 0 && !(s >= 1 && s <= 100) {
		return o, p.errorf("fallback.rescue.speedup", "want a factor in [1, 100], got %v", s)
	}
	o.Rescue.Speedup = f.Rescue.Speedup
	o.Breaker.ConsecutiveFailures = f.Breaker.ConsecutiveFailures
	o.Breaker.FailureRatio = f.Breaker.FailureRatio
	o.Breaker.MinRequests = f.Breaker.MinRequests
	o.Breaker.MaxRequests = f.Breaker.MaxRequests
	o.Seed = f.Seed
	return o, nil
}

func finiteNonNeg(f float64) bool { return f >= 0 && !math.IsInf(f, 1) && !math.IsNaN(f) }
