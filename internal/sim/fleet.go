package sim

import (
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tpsroute/tpsroute/replay"
	"github.com/tpsroute/tpsroute/route"
)

// model is the logical model every simulated deployment serves.
const model = "sim-model"

// fleet is a scenario's deployments brought to life: one replay handler per
// deployment whose answers follow the deployment's parameters at the moment
// and load of each request. It is safe for concurrent use.
type fleet struct {
	sc    *Scenario
	start time.Time
	deps  []*simDeployment
	hosts map[string]*simDeployment
}

// simDeployment is one live deployment.
type simDeployment struct {
	idx      int
	spec     *Deployment
	seed     uint64
	start    time.Time
	inFlight atomic.Int64  // streams open at the provider, this one included
	claimed  atomic.Int64  // calls chosen for it that have not reached it (claim)
	streams  atomic.Uint64 // live streams begun, numbering their noise draws
	live     bool
	slow     [][2]time.Duration
	rt       http.RoundTripper
}

func newFleet(sc *Scenario) *fleet {
	f := &fleet{sc: sc, start: time.Now(), hosts: map[string]*simDeployment{}}
	for i := range sc.Deployments {
		d := &simDeployment{idx: i, spec: &sc.Deployments[i], seed: sc.Seed ^ uint64(i+1)*0x9e3779b97f4a7c15, start: f.start, live: sc.Live}
		d.slow = slowPeriods(d.spec.Noisy, time.Duration(sc.Duration), d.seed)
		h := replay.NewHandler(map[string]replay.Script{model: replay.Func(d.decide)})
		d.rt = h.Transport()
		f.deps = append(f.deps, d)
		f.hosts[host(i)] = d
	}
	return f
}

// host is deployment i's host name in its base URL.
func host(i int) string { return "d" + strconv.Itoa(i) + ".sim.invalid" }

// deployments returns the route deployments the Client is configured with.
func (f *fleet) deployments() []route.Deployment {
	out := make([]route.Deployment, len(f.deps))
	for i, d := range f.deps {
		out[i] = route.Deployment{
			Provider: d.spec.Provider, Region: d.spec.Region, Model: model,
			BaseURL: "http://" + host(i) + "/v1", APIKey: "sim-key-" + strconv.Itoa(i),
			Price:    d.spec.Price,
			Expected: route.Prior{TPS: d.spec.Expected.TPS, TTFT: time.Duration(d.spec.Expected.TTFT)},
		}
	}
	return out
}

// slowPeriods draws the noisy-neighbour slow periods of one deployment over
// the scenario: exponential gaps of mean n.Every, each n.Length long.
func slowPeriods(n Noisy, total time.Duration, seed uint64) [][2]time.Duration {
	if n.Every <= 0 {
		return nil
	}
	r := rand.New(rand.NewPCG(seed, 7))
	var out [][2]time.Duration
	at := time.Duration(0)
	for {
		at += time.Duration(r.ExpFloat64() * float64(n.Every))
		if at >= total {
			return out
		}
		out = append(out, [2]time.Duration{at, at + time.Duration(n.Length)})
		at += time.Duration(n.Length)
	}
}

// params is a deployment's true behaviour for one call: the medians before
// noise, and the failure probabilities. limited says the call is over the
// deployment's concurrency Limit (then status is 429).
type params struct {
	ttft    time.Duration
	tps     float64
	status  int
	limited bool
	errs    Errors
}

// truth returns deployment d's parameters at elapsed time t for a call that
// would be its n-th concurrent stream with a prompt of prompt tokens.
func (d *simDeployment) truth(t time.Duration, n int64, prompt int) params {
	s := d.spec
	p := params{ttft: time.Duration(s.TTFT), tps: s.TPS, errs: s.Errors}
	if ph := s.phaseAt(t); ph != nil {
		if ph.TPSFactor > 0 {
			p.tps *= ph.TPSFactor
		}
		if ph.TTFTFactor > 0 {
			p.ttft = time.Duration(float64(p.ttft) * ph.TTFTFactor)
		}
		p.status = ph.Status
		if ph.Errors != nil {
			p.errs = *ph.Errors
		}
	}
	p.tps *= s.Drift.factor(t)
	if s.Limit > 0 && n > int64(s.Limit) && p.status == 0 {
		p.status, p.limited = http.StatusTooManyRequests, true
	}
	for _, sp := range d.slow {
		if t >= sp[0] && t < sp[1] {
			p.tps *= s.Noisy.Depth
			p.ttft = time.Duration(float64(p.ttft) / s.Noisy.Depth)
			break
		}
	}
	if s.LoadK > 0 && n > 1 {
		f := 1 + float64(n-1)/s.LoadK
		p.tps /= f
		p.ttft = time.Duration(float64(p.ttft) * f)
	}
	if s.ContextK > 0 {
		p.tps /= 1 + float64(prompt)/s.ContextK
	}
	if s.PrefillTPS > 0 {
		p.ttft += time.Duration(float64(prompt) / s.PrefillTPS * float64(time.Second))
	}
	return p
}

// decide is the deployment's replay.Func: the answer to one request.
func (d *simDeployment) decide(c replay.Call) replay.Script {
	t := c.Time.Sub(d.start)
	n, r := d.inFlight.Load(), rand.New(rand.NewPCG(d.seed, uint64(c.Attempt)))
	if k, ok := parseRequestKey(c.Header.Get(simCallHeader)); ok { // the call's own draws and load
		n, r = k.streams, k.rand(d.seed, 1)
	}
	p := d.truth(t, n, c.PromptTokens)
	noise := func() float64 {
		if d.spec.Sigma == 0 {
			return 1
		}
		return math.Exp(d.spec.Sigma * r.NormFloat64())
	}
	out := max(c.MaxTokens, 2)
	ttft := float64(p.ttft) * noise()
	if a := d.spec.TTFTPareto; a > 0 {
		ttft *= min(math.Pow(1-r.Float64(), -1/a), 100)
	}
	tps := p.tps * noise()
	if d.live {
		tps = 0 // liveBody paces the chunks
	}
	prof := &replay.Profile{
		TTFT:           time.Duration(ttft),
		TPS:            tps,
		OutputTokens:   out,
		TokensPerChunk: d.perChunk(out),
		Region:         d.spec.Region,
		Seed:           d.seed,
	}
	if p.limited {
		return replay.WithFaults(prof, replay.RateLimited(retryAfter(p.errs.RetryAfter)))
	}
	if p.status != 0 {
		return replay.WithFaults(prof, replay.Status(p.status, "", nil))
	}
	e := p.errs
	u := r.Float64()
	pick := func(prob float64) bool {
		if u < prob {
			return true
		}
		u -= prob
		return false
	}
	switch {
	case pick(e.RateLimit):
		return replay.WithFaults(prof, replay.RateLimited(retryAfter(e.RetryAfter)))
	case pick(e.ServerError):
		return replay.WithFaults(prof, replay.Status(http.StatusInternalServerError, "", nil))
	case pick(e.Reset):
		return replay.WithFaults(prof, replay.ResetBeforeHeaders())
	case pick(e.Cut):
		return replay.WithFaults(prof, replay.CutAfter(2))
	case pick(e.Stall):
		st := time.Duration(e.StallFor)
		if st <= 0 {
			st = time.Minute
		}
		return replay.WithFaults(prof, replay.StallAfter(2, st))
	}
	return prof
}

// liveChunk is the tokens per chunk of a live deployment: a provider's
// chunking does not depend on the answer's length.
const liveChunk = 20

// perChunk returns the tokens per content chunk of an answer of out
// tokens: a tenth of it, or liveChunk in live mode.
func (d *simDeployment) perChunk(out int) int {
	if d.live {
		return liveChunk
	}
	return max(1, out/10)
}

// retryAfter is a Retry-After header value for ra, whole seconds, 1 when ra
// is zero.
func retryAfter(ra Duration) string {
	if ra <= 0 {
		ra = Duration(time.Second)
	}
	return strconv.Itoa(int(math.Ceil(time.Duration(ra).Seconds())))
}

// RoundTrip sends req to the deployment its host names and counts the
// deployment's open streams until the body ends.
func (f *fleet) RoundTrip(req *http.Request) (*http.Response, error) {
	d := f.hosts[req.URL.Host]
	if d == nil {
		if req.Body != nil {
			_ = req.Body.Close()
		}
		return nil, fmt.Errorf("sim: no deployment at %s", req.URL.Host)
	}
	streams := d.inFlight.Add(1)
	info, _ := req.Context().Value(callInfoKey{}).(callInfo)
	if info.claim != nil && info.claim.d == d {
		info.claim.release()
	}
	var key *requestKey
	if info.requests != nil { // Workload.Keyed
		key = &requestKey{seq: info.seq, n: info.requests.Add(1), streams: streams}
		req = req.Clone(req.Context())
		req.Header.Set(simCallHeader, key.String())
	}
	resp, err := d.rt.RoundTrip(req)
	if err != nil {
		d.inFlight.Add(-1)
		return nil, err
	}
	if d.live && resp.StatusCode == http.StatusOK {
		resp.Body = d.pace(info, key, resp.Body)
	}
	resp.Body = &countedBody{ReadCloser: resp.Body, done: func() { d.inFlight.Add(-1) }}
	return resp, nil
}

// countedBody calls done once, when the body ends or is closed.
type countedBody struct {
	io.ReadCloser
	once sync.Once
	done func()
}

func (b *countedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil {
		b.once.Do(b.done)
	}
	return n, err
}

func (b *countedBody) Close() error {
	b.once.Do(b.done)
	return b.ReadCloser.Close()
}
