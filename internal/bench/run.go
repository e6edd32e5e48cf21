package bench

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tpsroute/tpsroute"
	"github.com/tpsroute/tpsroute/fallback"
	"github.com/tpsroute/tpsroute/route"
)

// Mode says what a run measures. It is a constant, safe for concurrent use.
type Mode uint8

const (
	// Compare pins each deployment of the model in turn, without failover or
	// retries, and sends it the identical load: providers and regions side by
	// side. It is the default.
	Compare Mode = iota
	// Routed sends the load through a tpsroute.Client with the configured
	// policy and failover, to see what the router achieves.
	Routed
)

// String returns "compare" or "routed".
func (m Mode) String() string {
	if m == Routed {
		return "routed"
	}
	return "compare"
}

// DefaultRequests is the number of measured requests per configuration and
// target when Config.Requests is zero, and the least Run accepts without
// Config.Force: fewer samples make p95 and p99 meaningless.
const DefaultRequests = 20

// DefaultTimeout bounds one request when Config.Timeout is zero.
const DefaultTimeout = 5 * time.Minute

// ErrTooFewRequests is returned by Run when Config.Requests is below
// DefaultRequests and Config.Force is not set.
var ErrTooFewRequests = errors.New("bench: fewer than 20 requests per configuration; set Force to run anyway")

// ErrInvalidConfig is wrapped by the errors Run returns for a Config it
// cannot run: negative counts, no deployment for the model or the targets,
// a non-positive rate or concurrency, or a router config tpsroute.New
// rejects (whose error is wrapped too).
var ErrInvalidConfig = errors.New("bench: invalid config")

// Config describes a benchmark: what to send, how hard, to whom, and what
// counts as good. The zero value of every field except Router is a documented
// default. Run does not modify a Config; a Config is safe for concurrent
// reads, and its Progress function is called from one goroutine at a time.
type Config struct {
	// Router holds the deployments and the router's settings, as parsed by
	// package config. Run builds a fresh Client from it for every
	// configuration and target, so breakers and statistics never carry over.
	// In Compare mode each call is limited to one attempt (no retry, no
	// failover, no hedge). A nil Router.HTTPClient means a transport tuned for many
	// concurrent streams to the same hosts.
	Router tpsroute.Config
	// Mode is Compare (the default) or Routed.
	Mode Mode
	// Targets, in Compare mode, restricts the deployments measured to those
	// whose "provider/region" or "provider" is listed. Empty means every
	// deployment serving the workload's model.
	Targets []string
	// Workload is what is sent.
	Workload Workload

	// Concurrency holds the closed-loop levels: each level runs that many
	// workers, each sending its next request when the previous one ends.
	// Used when Rates is empty; empty means one level of 1.
	Concurrency []int
	// Rates holds the open-loop levels, in requests per second: requests are
	// sent on schedule whether or not earlier ones have ended, and latency is
	// also measured from the scheduled time. Non-empty Rates select open loop.
	Rates []float64
	// Poisson spaces open-loop arrivals exponentially (a Poisson process,
	// seeded by Seed) instead of evenly.
	Poisson bool

	// Requests is the number of measured requests per configuration and
	// target. Zero means DefaultRequests; fewer than DefaultRequests needs
	// Force.
	Requests int
	// Warmup requests are sent before the measured ones, under the same
	// load, and excluded from every result. Zero means none.
	Warmup int
	// Force allows Requests below DefaultRequests.
	Force bool
	// Cache holds the cache modes to run, each reported separately. Empty
	// means Cold only.
	Cache []CacheMode
	// SLO defines goodput. The zero SLO counts every success as good.
	SLO SLO
	// Seed seeds Poisson arrivals (and nothing else; the workload has its
	// own Seed). Zero is a valid seed.
	Seed uint64
	// Timeout bounds each request. Zero means DefaultTimeout.
	Timeout time.Duration

	// Progress, if not nil, is called about every ProgressInterval while the
	// run is going, and once at its end, from a goroutine of Run's. It must
	// not block for long.
	Progress func(Progress)
	// ProgressInterval is the spacing of Progress calls. Zero means 500 ms.
	ProgressInterval time.Duration
}

// Progress is a live view of a run, for a progress line. It is a plain value,
// safe for concurrent reads.
type Progress struct {
	Label    string        // the configuration and target running, e.g. "cold c=4 groq/us-east-1/llama"
	Done     int           // measured requests finished, over the whole run
	Total    int           // measured requests planned, over the whole run
	Errors   int           // failed measured requests so far
	Elapsed  time.Duration // since Run started
	ETA      time.Duration // estimated time left; 0 until a request has finished
	TTFTP50  float64       // running p50 TTFT of the current target, ms; 0 before data
	TPSP50   float64       // running p50 TPS of the current target, tokens/s; 0 before data
	Finished bool          // the last call
}

// ConfigInfo describes one configuration of a run: a cache mode and a load
// level. It is a plain value, safe for concurrent reads.
type ConfigInfo struct {
	Index       int     `json:"index"`
	Cache       string  `json:"cache"`                 // "cold" or "warm"
	Loop        string  `json:"loop"`                  // "closed" or "open"
	Concurrency int     `json:"concurrency,omitempty"` // closed loop
	Rate        float64 `json:"rate,omitempty"`        // open loop, requests/s
	Arrival     string  `json:"arrival,omitempty"`     // open loop: "constant" or "poisson"
}

// Label returns a short name such as "cold c=4" or "warm r=10/s poisson".
func (c ConfigInfo) Label() string {
	if c.Loop == "open" {
		l := c.Cache + " r=" + strconv.FormatFloat(c.Rate, 'g', -1, 64) + "/s"
		if c.Arrival == "poisson" {
			l += " poisson"
		}
		return l
	}
	return c.Cache + " c=" + strconv.Itoa(c.Concurrency)
}

// Level returns the load level: the concurrency, or the rate in open loop.
func (c ConfigInfo) Level() float64 {
	if c.Loop == "open" {
		return c.Rate
	}
	return float64(c.Concurrency)
}

// Run executes the benchmark described by cfg and returns its Report: for
// every cache mode, every load level and every target (each deployment in
// Compare mode, the router in Routed mode), a priming request when warm,
// the warmup, then the measured requests.
//
// When ctx is cancelled (Ctrl-C), Run stops sending, abandons the requests in
// flight and returns the partial Report (Report.Partial set) together with
// ctx's error; requests cut short by the cancellation are not counted.
// Other errors (an invalid Config: ErrTooFewRequests, or an error wrapping
// ErrInvalidConfig) return a nil Report.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	// Run is long (about 110 lines) because it is the harness's one sequence:
	// validate, build the cells, warm up, run, summarise; each step uses the
	// previous one's values.
	cfg.Requests = cmp.Or(cfg.Requests, DefaultRequests)
	if cfg.Requests < 0 || cfg.Warmup < 0 {
		return nil, fmt.Errorf("%w: Requests and Warmup must not be negative", ErrInvalidConfig)
	}
	if cfg.Requests < DefaultRequests && !cfg.Force {
		return nil, ErrTooFewRequests
	}
	if len(cfg.Router.Deployments) == 0 {
		return nil, fmt.Errorf("%w: the router config has no deployment", ErrInvalidConfig)
	}
	w := cfg.Workload
	w.Model = cmp.Or(w.Model, cfg.Router.Deployments[0].Model)
	if w.Model == route.Wildcard {
		return nil, fmt.Errorf("%w: the workload needs a model name (the first deployment is a wildcard)", ErrInvalidConfig)
	}
	deps, err := targets(cfg, w.Model)
	if err != nil {
		return nil, err
	}
	configs, err := plan(cfg)
	if err != nil {
		return nil, err
	}
	cfg.Timeout = cmp.Or(cfg.Timeout, DefaultTimeout)
	rc := cfg.Router
	if rc.HTTPClient == nil || rc.HTTPClient.Transport == nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.MaxIdleConns = 0
		tr.MaxIdleConnsPerHost = 1024
		rc.HTTPClient = &http.Client{Transport: tr}
		defer tr.CloseIdleConnections() // no keep-alive goroutine outlives Run
	}
	if cfg.Mode == Compare {
		// One attempt on the pinned deployment: no retry and no hedge may
		// blur what the deployment itself did.
		rc.Fallback.AttemptsPerDeployment = 1
		rc.Fallback.MaxAttempts = 1
		rc.Fallback.Hedge = fallback.HedgeOptions{}
	}

	start := time.Now()
	nTargets := len(deps)
	if cfg.Mode == Routed {
		nTargets = 1
	}
	rep := &Report{
		Version:  ReportVersion,
		Started:  start,
		Mode:     cfg.Mode.String(),
		Model:    w.Model,
		SLO:      cfg.SLO,
		Requests: cfg.Requests,
		Warmup:   cfg.Warmup,
		Seed:     cfg.Seed,
		Configs:  configs,
	}
	r := &runner{cfg: cfg, w: w, start: start, total: len(configs) * nTargets * cfg.Requests}
	stop := r.progressLoop()
	defer stop()

	nonce := strconv.FormatInt(start.UnixNano(), 36)
	for ci, info := range configs {
		for ti := range nTargets {
			c, err := tpsroute.New(rc)
			if err != nil {
				return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
			}
			var t *target
			if cfg.Mode == Routed {
				t = newRouted(c, w.Model)
			} else {
				t = newPinned(c, deps[ti], w.Model)
			}
			if ci == 0 {
				rep.Targets = append(rep.Targets, t.name)
			}
			cell := cellSpec{
				config: info,
				target: t,
				nonce:  nonce + "-" + strconv.Itoa(ci) + "-" + strconv.Itoa(ti),
				seed:   cfg.Seed + uint64(ci)*1000 + uint64(ti),
			}
			res := r.runCell(ctx, cell)
			rep.Results = append(rep.Results, res...)
			if ctx.Err() != nil {
				break
			}
		}
		if ctx.Err() != nil {
			break
		}
	}
	stop()
	rep.Finished = time.Now()
	rep.Partial = ctx.Err() != nil
	rep.Summarize()
	if rep.Partial {
		return rep, ctx.Err()
	}
	return rep, nil
}

// targets returns the deployments measured in Compare mode.
func targets(cfg Config, model string) ([]route.Deployment, error) {
	var out []route.Deployment
	for _, d := range cfg.Router.Deployments {
		if d.Model != model && d.Model != route.Wildcard {
			continue
		}
		if d.IsWildcard() {
			d = d.ForModel(model)
		}
		if len(cfg.Targets) > 0 && !slices.Contains(cfg.Targets, d.Provider+"/"+d.Region) && !slices.Contains(cfg.Targets, d.Provider) {
			continue
		}
		out = append(out, d)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: no deployment serves model %q (targets %v)", ErrInvalidConfig, model, cfg.Targets)
	}
	return out, nil
}

// plan lists the configurations: cache modes × load levels.
func plan(cfg Config) ([]ConfigInfo, error) {
	modes := cfg.Cache
	if len(modes) == 0 {
		modes = []CacheMode{Cold}
	}
	var out []ConfigInfo
	for _, m := range modes {
		if len(cfg.Rates) > 0 {
			for _, rate := range cfg.Rates {
				if !(rate > 0) {
					return nil, fmt.Errorf("%w: rate %v: must be positive", ErrInvalidConfig, rate)
				}
				arr := "constant"
				if cfg.Poisson {
					arr = "poisson"
				}
				out = append(out, ConfigInfo{Index: len(out), Cache: m.String(), Loop: "open", Rate: rate, Arrival: arr})
			}
			continue
		}
		levels := cfg.Concurrency
		if len(levels) == 0 {
			levels = []int{1}
		}
		for _, c := range levels {
			if c <= 0 {
				return nil, fmt.Errorf("%w: concurrency %d: must be positive", ErrInvalidConfig, c)
			}
			out = append(out, ConfigInfo{Index: len(out), Cache: m.String(), Loop: "closed", Concurrency: c})
		}
	}
	return out, nil
}

type cellSpec struct {
	config ConfigInfo
	target *target
	nonce  string
	seed   uint64
}

// runner holds the state shared by a run's cells: progress counters and the
// current cell's running values.
type runner struct {
	cfg   Config
	w     Workload
	start time.Time
	total int

	mu    sync.Mutex
	label string
	done  int
	errs  int
	ttft  []float64 // current cell's successful TTFTs, ms
	tpsV  []float64 // current cell's TPS values
}

// runCell runs one configuration against one target and returns its measured
// results, ordered by index.
//
// It is long (about 95 lines) because one cell's schedule, workers and
// result collection share the cell's clock and cancellation.
func (r *runner) runCell(ctx context.Context, c cellSpec) []Result {
	r.mu.Lock()
	r.label = c.config.Label() + " " + c.target.name
	r.ttft, r.tpsV = r.ttft[:0], r.tpsV[:0]
	r.mu.Unlock()

	cm := Cold
	if c.config.Cache == "warm" {
		cm = Warm
	}
	if cm == Warm {
		// Priming: the shared prefix reaches the provider's cache before
		// the warmup and the measurement.
		p := r.w.build(-1, cm, c.nonce)
		var discard Result
		pctx, cancel := context.WithTimeout(ctx, r.cfg.Timeout)
		c.target.do(pctx, &p, time.Now(), &discard)
		cancel()
	}

	n := r.cfg.Warmup + r.cfg.Requests
	out := make([]Result, r.cfg.Requests)
	got := make([]bool, r.cfg.Requests)
	one := func(i int, scheduled time.Time) {
		p := r.w.build(i, cm, c.nonce)
		rctx, cancel := context.WithTimeout(ctx, r.cfg.Timeout)
		defer cancel()
		sent := time.Now()
		var res Result
		c.target.do(rctx, &p, sent, &res)
		if ctx.Err() != nil && !res.OK() {
			return // cut short by the interruption: not a provider failure
		}
		if i < r.cfg.Warmup {
			return
		}
		res.schedule(r.start, scheduled, sent)
		res.Config, res.Target, res.Index = c.config.Index, c.target.name, i-r.cfg.Warmup
		out[res.Index], got[res.Index] = res, true
		r.record(&res)
	}

	var wg sync.WaitGroup
	if c.config.Loop == "open" {
		rng := rand.New(rand.NewPCG(c.seed, 0x5eed))
		t0 := time.Now()
		at := time.Duration(0)
		timer := time.NewTimer(0)
		<-timer.C
	dispatch:
		for i := range n {
			if i > 0 {
				gap := 1 / c.config.Rate
				if c.config.Arrival == "poisson" {
					gap = rng.ExpFloat64() / c.config.Rate
				}
				at += time.Duration(gap * float64(time.Second))
			}
			scheduled := t0.Add(at)
			if d := time.Until(scheduled); d > 0 {
				timer.Reset(d)
				select {
				case <-timer.C:
				case <-ctx.Done():
					timer.Stop()
					break dispatch
				}
			}
			if ctx.Err() != nil {
				break
			}
			wg.Go(func() { one(i, scheduled) })
		}
	} else {
		var next atomic.Int64
		for range c.config.Concurrency {
			wg.Go(func() {
				for ctx.Err() == nil {
					i := int(next.Add(1) - 1)
					if i >= n {
						return
					}
					one(i, time.Now())
				}
			})
		}
	}
	wg.Wait()
	kept := out[:0]
	for i := range out {
		if got[i] {
			kept = append(kept, out[i])
		}
	}
	return kept
}

func (r *runner) record(res *Result) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.done++
	if !res.OK() {
		r.errs++
		return
	}
	if res.TTFTMS > 0 {
		r.ttft = append(r.ttft, res.TTFTMS)
	}
	if res.TPSOK {
		r.tpsV = append(r.tpsV, res.TPS)
	}
}

// snapshot returns the current Progress.
func (r *runner) snapshot() Progress {
	r.mu.Lock()
	p := Progress{Label: r.label, Done: r.done, Total: r.total, Errors: r.errs}
	ttft := slices.Clone(r.ttft)
	tpsV := slices.Clone(r.tpsV)
	r.mu.Unlock()
	p.Elapsed = time.Since(r.start)
	if p.Done > 0 && p.Total > p.Done {
		p.ETA = time.Duration(float64(p.Elapsed) / float64(p.Done) * float64(p.Total-p.Done))
	}
	slices.Sort(ttft)
	slices.Sort(tpsV)
	p.TTFTP50, _ = Percentile(ttft, 50)
	p.TPSP50, _ = Percentile(tpsV, 50)
	return p
}

// progressLoop starts the Progress calls and returns the idempotent function
// that stops them, after a final call.
func (r *runner) progressLoop() (stop func()) {
	if r.cfg.Progress == nil {
		return func() {}
	}
	every := r.cfg.ProgressInterval
	if every <= 0 {
		every = 500 * time.Millisecond
	}
	quit := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				r.cfg.Progress(r.snapshot())
			case <-quit:
				return
			}
		}
	})
	var once sync.Once
	return func() {
		once.Do(func() {
			close(quit)
			wg.Wait()
			p := r.snapshot()
			p.Finished = true
			p.ETA = 0
			r.cfg.Progress(p)
		})
	}
}
