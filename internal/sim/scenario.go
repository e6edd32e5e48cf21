package sim

import (
	"bytes"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/tpsroute/tpsroute/measure"

	"github.com/tpsroute/tpsroute/route"
)

// Duration is a time.Duration that reads and writes JSON as a Go duration
// string such as "90s" or "10m". It is a plain value.
type Duration time.Duration

// MarshalJSON writes d as a duration string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// UnmarshalJSON reads a duration string ("1m30s") or a number of seconds.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		v, err := time.ParseDuration(s)
		if err != nil {
			return err
		}
		*d = Duration(v)
		return nil
	}
	var f float64
	if err := json.Unmarshal(b, &f); err != nil {
		return errors.New("want a duration string such as \"90s\" or a number of seconds")
	}
	*d = Duration(f * float64(time.Second))
	return nil
}

// Scenario is a simulated fleet and the load sent to it, as data: JSON files
// are parsed with ParseScenario, and Bundled returns the scenarios that ship
// with the package. A Scenario must not be modified while a run reads it; it
// is then safe for concurrent reads.
type Scenario struct {
	// Name identifies the scenario in reports.
	Name string `json:"name"`
	// Description says what the scenario tests, in a sentence.
	Description string `json:"description,omitempty"`
	// Duration is the simulated time the workload runs for. Required.
	Duration Duration `json:"duration"`
	// Objective is what the router is asked to optimise, the same for the
	// defaults and the oracle: "throughput" (the default), "latency" or
	// "cost".
	Objective string `json:"objective,omitempty"`
	// SLO is the service level the router is given (Config.Route.SLO); the oracle
	// and the OpenRouter baseline's percentile cutoffs use it too.
	SLO SLO `json:"slo,omitzero"`
	// Workload is the load.
	Workload Workload `json:"workload"`
	// Deployments are the simulated providers. At least one is required.
	Deployments []Deployment `json:"deployments"`
	// Seed seeds every random draw of the run (arrivals, noise, errors,
	// random baselines). Zero is a valid seed.
	Seed uint64 `json:"seed,omitempty"`
	// Live evaluates each stream's speed chunk by chunk instead of once at
	// its start: every content chunk after the first is paced at the
	// deployment's speed at that moment (its phase, drift, slow period and
	// the streams running then, which join and leave while it runs), so a
	// stream already running slows when others join a batching deployment.
	// Live answers come in chunks of 20 tokens (a tenth of the answer
	// otherwise).
	// Generate sets it; the bundled scenarios leave it off (their floors were
	// measured with the speed fixed at the start).
	Live bool `json:"live,omitempty"`
	// Class names the sub-space of the generator the scenario was drawn
	// from (Generate; Classes); empty for a hand-written scenario.
	Class string `json:"class,omitempty"`
}

// SLO is the service level given to the router: the fields of route.SLO that
// a scenario can set. The zero SLO has no constraint.
type SLO struct {
	MinTPS  float64  `json:"min_tps,omitempty"`  // tokens/s each call should get at least
	MaxTTFT Duration `json:"max_ttft,omitempty"` // time to first token each call should stay under
}

// Workload is the load of a scenario. Exactly one of Concurrency (closed
// loop) and Rate (open loop) is set. Requests are bench workloads: the
// prompts are bench.Words of InputTokens words each, cycling (or drawn,
// with Shuffle), and each asks for OutputTokens tokens, likewise.
type Workload struct {
	// Concurrency runs that many callers in a closed loop, each sending its
	// next call when the previous one ended, or a second later when it
	// failed.
	Concurrency int `json:"concurrency,omitempty"`
	// Rate sends calls in an open loop at this many per second.
	Rate float64 `json:"rate,omitempty"`
	// Poisson spaces open-loop arrivals exponentially instead of evenly.
	Poisson bool `json:"poisson,omitempty"`
	// InputTokens are the prompt lengths in words (about one token each),
	// cycled call by call. Empty means 256.
	InputTokens []int `json:"input_tokens,omitempty"`
	// OutputTokens are the answer lengths in tokens, cycled call by call.
	// Empty means 200.
	OutputTokens []int `json:"output_tokens,omitempty"`
	// Warm gives every call the same long system prompt (bench's warm cache
	// mode) instead of a unique prefix per call.
	Warm bool `json:"warm,omitempty"`
	// Shuffle gives each call a pairing of InputTokens and OutputTokens
	// drawn from all of them, by the scenario's seed and the call's number,
	// instead of cycling through both lists: a real workload has no period
	// a policy can fall into step with, as round-robin over two deployments
	// does with two sizes that alternate (every long call on one, every
	// short call on the other). Generate sets it; every policy still gets
	// the same call sizes in the same order.
	Shuffle bool `json:"shuffle,omitempty"`
	// Keyed draws each request's noise, heavy tail and error, and reads the
	// streams it joins at a deployment, by the call's number and the
	// request's number within the call, rather than by the order in which
	// concurrent requests arrived: two runs of the scenario then give the
	// same calls, except where retries and waits after 429s, or live
	// pacing, meet at one virtual instant. Generate sets it; the bundled
	// scenarios keep the arrival-order draws their floors were measured on.
	Keyed bool `json:"keyed,omitempty"`
}

// Deployment is one simulated provider deployment and its behaviour over
// time. Its speed for one call is, before noise:
//
//	TPS  = TPS × phase.TPSFactor × slow / (1 + (n-1)/LoadK) / (1 + prompt/ContextK)
//	TTFT = TTFT × phase.TTFTFactor × (1 + (n-1)/LoadK) + prompt/PrefillTPS
//
// where n is the deployment's concurrent streams including this one, prompt
// the prompt tokens and slow a noisy-neighbour factor; zero LoadK, ContextK
// and PrefillTPS leave out their term. Noise is log-normal with Sigma.
type Deployment struct {
	Provider string `json:"provider"`
	Region   string `json:"region,omitempty"`
	// Price is in USD per million tokens, written as in a config file:
	// {"input": 1, "cached_input": 0.25, "output": 2}.
	Price measure.Price `json:"price,omitzero"`
	// Join adds the deployment to the fleet this long after the start:
	// before, no policy sees it.
	Join Duration `json:"join,omitempty"`
	// TTFT is the base time to first token. Required.
	TTFT Duration `json:"ttft"`
	// TPS is the base generation speed of one stream, tokens/s. Required.
	TPS float64 `json:"tps"`
	// Sigma is the log-normal spread of TTFT and TPS per call; 0 is none.
	Sigma float64 `json:"sigma,omitempty"`
	// LoadK is the concurrency at which each stream runs at half speed.
	LoadK float64 `json:"load_k,omitempty"`
	// PrefillTPS is the prompt processing rate, tokens/s, added to TTFT.
	PrefillTPS float64 `json:"prefill_tps,omitempty"`
	// ContextK is the prompt length at which generation runs at half speed.
	ContextK float64 `json:"context_k,omitempty"`
	// Errors are the failure rates outside of any phase that sets its own.
	Errors Errors `json:"errors,omitzero"`
	// Noisy adds random slow periods.
	Noisy Noisy `json:"noisy,omitzero"`
	// Drift changes TPS gradually from a point in time on.
	Drift Drift `json:"drift,omitzero"`
	// TTFTPareto, when positive, multiplies each call's TTFT by a Pareto
	// draw of this shape (at least 1; a shape of 1.5 has a finite mean and
	// no variance): a heavy tail of slow first tokens. The draw is capped at
	// 100.
	TTFTPareto float64 `json:"ttft_pareto,omitempty"`
	// Limit, when positive, is the deployment's concurrency limit: a call
	// that would be its Limit+1-th concurrent stream is answered 429 with
	// Errors.RetryAfter (1s when zero) as its Retry-After.
	Limit int `json:"limit,omitempty"`
	// Phases change the behaviour from a point in time on, in order.
	Phases []Phase `json:"phases,omitempty"`
	// Expected is the prior the router is configured with
	// (route.Deployment.Expected), as in the config file; the zero value
	// is none. Only the defaults read it.
	Expected Prior `json:"expected,omitzero"`
}

// Prior is a deployment's expected figures given to the router.
type Prior struct {
	TPS  float64  `json:"tps,omitempty"`
	TTFT Duration `json:"ttft,omitempty"`
}

// Errors are per-call failure probabilities, each in [0, 1].
type Errors struct {
	RateLimit float64 `json:"rate_limit,omitempty"` // 429 with Retry-After
	// RetryAfter is the Retry-After of the 429s; zero means 1s.
	RetryAfter  Duration `json:"retry_after,omitempty"`
	ServerError float64  `json:"server_error,omitempty"` // 500
	Reset       float64  `json:"reset,omitempty"`        // connection reset before headers
	Cut         float64  `json:"cut,omitempty"`          // stream cut after the first output chunk
	Stall       float64  `json:"stall,omitempty"`        // stream stalls after the first output chunk
	// StallFor is how long a stall lasts; zero means 60s.
	StallFor Duration `json:"stall_for,omitempty"`
}

func (e Errors) total() float64 { return e.RateLimit + e.ServerError + e.Reset + e.Cut + e.Stall }

// Noisy are noisy neighbours: slow periods that start on average Every apart
// (exponentially, seeded), last Length, and multiply TPS by Depth (and divide
// TTFT by it). The zero Noisy has none.
type Noisy struct {
	Every  Duration `json:"every,omitempty"`
	Length Duration `json:"length,omitempty"`
	Depth  float64  `json:"depth,omitempty"`
}

// Drift is a gradual change of a deployment's TPS: from From on, TPS is
// multiplied by exp(Rate × seconds since From), held between Floor and
// 1/Floor. A negative Rate slows the deployment (-0.01 is 1% a second). The
// zero Drift has none; a zero Floor means 0.05.
type Drift struct {
	From  Duration `json:"from,omitempty"`
	Rate  float64  `json:"rate,omitempty"`
	Floor float64  `json:"floor,omitempty"`
}

// factor returns the drift's TPS factor at t.
func (d Drift) factor(t time.Duration) float64 {
	if d.Rate == 0 || t <= time.Duration(d.From) {
		return 1
	}
	fl := d.Floor
	if fl <= 0 {
		fl = 0.05
	}
	return min(max(math.Exp(d.Rate*(t-time.Duration(d.From)).Seconds()), fl), 1/fl)
}

// Phase changes a deployment's behaviour from From on, until the next phase.
// Zero factors mean 1.
type Phase struct {
	From       Duration `json:"from"`
	TPSFactor  float64  `json:"tps_factor,omitempty"`
	TTFTFactor float64  `json:"ttft_factor,omitempty"`
	// Status, when non-zero, answers every call of the phase with this HTTP
	// status (503 for an outage).
	Status int `json:"status,omitempty"`
	// Errors, when set, replace the deployment's Errors during the phase.
	Errors *Errors `json:"errors,omitempty"`
}

// ScenarioError is a scenario that cannot run: the field and what is wrong.
type ScenarioError struct {
	Scenario string // the scenario's name, or the file
	Field    string // e.g. "deployments[1].tps"
	Msg      string
}

// Error returns "sim: scenario NAME: FIELD: MSG".
func (e *ScenarioError) Error() string {
	return "sim: scenario " + e.Scenario + ": " + e.Field + ": " + e.Msg
}

// ParseScenario reads one scenario from JSON and validates it. Unknown fields
// are errors; so is a scenario that cannot run, reported as a
// *ScenarioError.
func ParseScenario(r io.Reader) (*Scenario, error) {
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	var s Scenario
	if err := dec.Decode(&s); err != nil {
		return nil, fmt.Errorf("sim: scenario: %w", err)
	}
	if err := s.Validate(); err != nil {
		return nil, err
	}
	return &s, nil
}

// LoadScenario reads a scenario file, or a bundled scenario when name is one
// of BundledNames and no such file exists.
func LoadScenario(name string) (*Scenario, error) {
	f, err := os.Open(name)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) && slices.Contains(BundledNames(), name) {
			return Bundled(name)
		}
		return nil, fmt.Errorf("sim: %w", err)
	}
	defer f.Close()
	return ParseScenario(f)
}

//go:embed scenarios/*.json
var bundled embed.FS

// BundledNames returns the names of the bundled scenarios, sorted.
func BundledNames() []string {
	ents, _ := bundled.ReadDir("scenarios")
	var out []string
	for _, e := range ents {
		out = append(out, strings.TrimSuffix(e.Name(), ".json"))
	}
	slices.Sort(out)
	return out
}

// Bundled returns a fresh copy of the bundled scenario name.
func Bundled(name string) (*Scenario, error) {
	b, err := bundled.ReadFile("scenarios/" + name + ".json")
	if err != nil {
		return nil, fmt.Errorf("sim: no bundled scenario %q (have %s)", name, strings.Join(BundledNames(), ", "))
	}
	return ParseScenario(bytes.NewReader(b))
}

// Validate reports the first problem that keeps s from running, as a
// *ScenarioError.
func (s *Scenario) Validate() error {
	// Validate is long (complexity about 43) because it is one check per field
	// of a scenario, each naming the field in its error.
	bad := func(field, format string, args ...any) error {
		return &ScenarioError{Scenario: s.Name, Field: field, Msg: fmt.Sprintf(format, args...)}
	}
	pos := func(v float64) bool { return v > 0 && !math.IsInf(v, 0) }
	nonneg := func(v float64) bool { return v >= 0 && !math.IsInf(v, 0) && !math.IsNaN(v) }
	prob := func(v float64) bool { return v >= 0 && v <= 1 }
	if s.Name == "" {
		return bad("name", "empty")
	}
	if s.Duration <= 0 {
		return bad("duration", "must be positive")
	}
	if _, err := s.policy(); err != nil {
		return bad("objective", "%v", err)
	}
	w := s.Workload
	switch {
	case (w.Concurrency > 0) == (w.Rate > 0):
		return bad("workload", "set exactly one of concurrency and rate")
	case w.Concurrency < 0 || !nonneg(w.Rate):
		return bad("workload", "negative concurrency or rate")
	}
	for i, n := range w.InputTokens {
		if n <= 0 {
			return bad(fmt.Sprintf("workload.input_tokens[%d]", i), "must be positive")
		}
	}
	for i, n := range w.OutputTokens {
		if n < 2 {
			return bad(fmt.Sprintf("workload.output_tokens[%d]", i), "must be at least 2 (TPS needs two chunks)")
		}
	}
	if len(s.Deployments) == 0 {
		return bad("deployments", "none")
	}
	seen := map[string]int{}
	providers := map[string]int{}
	for i, d := range s.Deployments {
		f := func(name string) string { return fmt.Sprintf("deployments[%d].%s", i, name) }
		if d.Provider == "" {
			return bad(f("provider"), "empty")
		}
		id := d.Provider + "/" + d.Region
		if j, ok := seen[id]; ok {
			return bad(f("provider"), "duplicate of deployments[%d]", j)
		}
		seen[id] = i
		providers[d.Provider]++
		if d.TTFT <= 0 || !pos(d.TPS) {
			return bad(f("tps"), "ttft and tps must be positive")
		}
		for _, v := range []float64{d.Sigma, d.LoadK, d.PrefillTPS, d.ContextK, d.Price.Input, d.Price.Output, d.Price.CachedInput, d.Noisy.Depth} {
			if !nonneg(v) {
				return bad(f("*"), "negative or not finite number")
			}
		}
		if !nonneg(d.TTFTPareto) || d.Limit < 0 || math.IsNaN(d.Drift.Rate) || math.IsInf(d.Drift.Rate, 0) || !(d.Drift.Floor >= 0 && d.Drift.Floor <= 1) {
			return bad(f("*"), "negative ttft_pareto or limit, or a drift rate not finite or floor outside [0, 1]")
		}
		if d.Noisy.Every > 0 && (d.Noisy.Length <= 0 || !pos(d.Noisy.Depth)) {
			return bad(f("noisy"), "every needs a positive length and depth")
		}
		errs := []Errors{d.Errors}
		for j, p := range d.Phases {
			if j > 0 && p.From < d.Phases[j-1].From {
				return bad(f(fmt.Sprintf("phases[%d].from", j)), "phases must be in time order")
			}
			if !nonneg(p.TPSFactor) || !nonneg(p.TTFTFactor) {
				return bad(f(fmt.Sprintf("phases[%d]", j)), "negative factor")
			}
			if p.Errors != nil {
				errs = append(errs, *p.Errors)
			}
		}
		for _, e := range errs {
			if !prob(e.RateLimit) || !prob(e.ServerError) || !prob(e.Reset) || !prob(e.Cut) || !prob(e.Stall) || e.total() > 1 {
				return bad(f("errors"), "probabilities must be in [0, 1] and sum to at most 1")
			}
		}
	}
	for i, d := range s.Deployments {
		if d.Join > 0 && providers[d.Provider] > 1 {
			return bad(fmt.Sprintf("deployments[%d].join", i), "a joining deployment needs a provider of its own")
		}
	}
	if !slices.ContainsFunc(s.Deployments, func(d Deployment) bool { return d.Join <= 0 }) {
		return bad("deployments", "none present from the start")
	}
	return nil
}

// policy returns the route.Policy of the objective.
func (s *Scenario) policy() (route.Policy, error) {
	if s.Objective == "" {
		return route.Throughput, nil
	}
	if p, ok := route.ParsePolicy(s.Objective); ok {
		return p, nil
	}
	return 0, fmt.Errorf("%q: want throughput, latency or cost", s.Objective)
}

// inputs and outputs return the workload's cycles with their defaults.
func (w *Workload) inputs() []int {
	if len(w.InputTokens) == 0 {
		return []int{256}
	}
	return w.InputTokens
}

func (w *Workload) outputs() []int {
	if len(w.OutputTokens) == 0 {
		return []int{200}
	}
	return w.OutputTokens
}

// name returns the deployment's "provider/region" label.
func (d *Deployment) name() string {
	if d.Region == "" {
		return d.Provider
	}
	return d.Provider + "/" + d.Region
}

// phaseAt returns the phase in force at t, or nil before the first.
func (d *Deployment) phaseAt(t time.Duration) *Phase {
	var p *Phase
	for i := range d.Phases {
		if time.Duration(d.Phases[i].From) <= t {
			p = &d.Phases[i]
		}
	}
	return p
}

// degraded reports whether the deployment is degraded at t: an error status,
// half its speed or less, twice its TTFT or more, or failing half its calls.
func (d *Deployment) degraded(t time.Duration) bool {
	p := d.phaseAt(t)
	if p == nil {
		return d.Errors.total() >= 0.5
	}
	e := d.Errors
	if p.Errors != nil {
		e = *p.Errors
	}
	return p.Status != 0 || (p.TPSFactor > 0 && p.TPSFactor <= 0.5) || p.TTFTFactor >= 2 || e.total() >= 0.5
}
