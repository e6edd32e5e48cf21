package sim

import (
	"cmp"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"time"
)

// Policy chooses the deployment of each call of a run. The run then sends the
// call through the same tpsroute.Client for every policy, pinned to the
// chosen deployment with tpsroute.WithPin and with failover still allowed, so
// that every policy gets the same fallback, breakers and measurement and only
// the first choice differs. A policy that returns -1 lets the Client route.
// Choose and Observe are called concurrently from the run's callers; an
// implementation must be safe for that.
type Policy interface {
	// Name labels the policy in reports.
	Name() string
	// Choose returns the index in Scenario.Deployments of the deployment to
	// pin the call to, one of v.Available, or -1 to let the Client route.
	Choose(v *View) int
	// Observe is told the outcome of every call, when it ends.
	Observe(o Outcome)
}

// View is what a policy knows when it chooses: the time, the deployments
// present, its own calls in flight, and the call's size. It is valid only
// during Choose.
type View struct {
	// Now is the time of the choice; Elapsed is since the run started.
	Now     time.Time
	Elapsed time.Duration
	// Available are the indices of the deployments present (joined).
	Available []int
	// Deployments are the scenario's deployments, indexed as Available.
	Deployments []Deployment
	// Pending returns the calls this run has in flight whose first choice
	// was deployment i (the caller-side outstanding count).
	Pending func(i int) int
	// PromptTokens is the call's prompt size as the providers count it.
	PromptTokens int
	// OutputTokens is the call's output cap.
	OutputTokens int

	obj    string
	slo    SLO
	scores []float64 // the ground truth: trueScores of Available, for the oracle and TrueBest
}

// Outcome is one finished call as its caller saw it.
type Outcome struct {
	// Chosen is the policy's choice (-1 when it let the Client route);
	// Sent is the first deployment that received the call, and Answered the
	// one whose answer the caller got (-1 for a failed call).
	Chosen, Sent, Answered int
	// Start and End bound the call; TTFT is from Start.
	Start, End time.Time
	TTFT       time.Duration
	// TPS is the generation speed delivered (0 when not measurable).
	TPS float64
	// OutputTokens is what the caller received.
	OutputTokens int64
	// Failed says the caller got an error; Timeout that it was a deadline.
	Failed, Timeout bool
	// Troubled lists the deployments that failed an attempt of this call.
	Troubled []int
}

// Defaults returns the policy that lets the tpsroute.Client route every call
// with its configured defaults.
func Defaults() Policy { return defaults{} }

type defaults struct{}

func (defaults) Name() string     { return "tpsroute" }
func (defaults) Choose(*View) int { return -1 }
func (defaults) Observe(Outcome)  {}

// Pinned returns a policy that sends every call to deployment i while it is
// present (failover still allowed), as a fixed configuration would.
func Pinned(i int) Policy { return pinned(i) }

type pinned int

func (p pinned) Name() string { return "pinned-" + strconv.Itoa(int(p)) }
func (p pinned) Choose(v *View) int {
	if slices.Contains(v.Available, int(p)) {
		return int(p)
	}
	return -1
}
func (pinned) Observe(Outcome) {}

// Split returns a static split: each deployment i gets the share
// weights[i] / sum(weights) of the calls, in smooth weighted round-robin
// order (nginx's: the deployments' turns interleave as evenly as the weights
// allow), as a fixed traffic split in a load balancer would. Deployments
// past the weights, or with zero or negative weight, get none; when no
// available deployment has weight the Client routes. Sweeping the weights
// finds the best static split of a scenario (TestLoadBestStaticSplit).
func Split(weights ...float64) Policy {
	return &split{w: slices.Clone(weights), cur: make([]float64, len(weights))}
}

type split struct {
	mu  sync.Mutex
	w   []float64
	cur []float64
}

func (p *split) Name() string {
	var b []byte
	b = append(b, "split"...)
	for i, w := range p.w {
		if i == 0 {
			b = append(b, '-')
		} else {
			b = append(b, '/')
		}
		b = strconv.AppendFloat(b, w, 'g', 4, 64)
	}
	return string(b)
}

func (p *split) Choose(v *View) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	best, total := -1, 0.0
	for _, i := range v.Available {
		if i >= len(p.w) || !(p.w[i] > 0) {
			continue
		}
		p.cur[i] += p.w[i]
		total += p.w[i]
		if best < 0 || p.cur[i] > p.cur[best] {
			best = i
		}
	}
	if best >= 0 {
		p.cur[best] -= total
	}
	return best
}

func (*split) Observe(Outcome) {}

// RoundRobin returns the round-robin baseline: the available deployments in
// turn.
func RoundRobin() Policy { return &roundRobin{} }

type roundRobin struct {
	mu sync.Mutex
	n  int
}

func (*roundRobin) Name() string { return "round-robin" }
func (p *roundRobin) Choose(v *View) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	i := v.Available[p.n%len(v.Available)]
	p.n++
	return i
}
func (*roundRobin) Observe(Outcome) {}

// Random returns the uniform random baseline, seeded.
func Random(seed uint64) Policy { return &random{r: rand.New(rand.NewPCG(seed, 1))} }

type random struct {
	mu sync.Mutex
	r  *rand.Rand
}

func (*random) Name() string { return "random" }
func (p *random) Choose(v *View) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return v.Available[p.r.IntN(len(v.Available))]
}
func (*random) Observe(Outcome) {}

// LiteLLMBuffer is the lowest_latency_buffer the LiteLLM baseline uses: a
// deployment within 10% of the lowest average latency is a candidate.
const LiteLLMBuffer = 0.1

// LiteLLM returns LiteLLM's router with routing_strategy
// "latency-based-routing" (litellm/router_strategy/lowest_latency.py): per
// deployment it keeps the last 10 latencies of successful calls, each the
// call's time divided by its completion tokens; for a streaming call, as
// here, the time to first token divided by the completion tokens. A
// deployment without a latency counts as 0, so each is tried once. A call
// that times out adds a 1000 s penalty. It picks uniformly at random among
// the deployments whose average is within LiteLLMBuffer of the lowest.
func LiteLLM(seed uint64) Policy {
	return &litellm{r: rand.New(rand.NewPCG(seed, 2)), lat: map[int][]float64{}}
}

type litellm struct {
	mu  sync.Mutex
	r   *rand.Rand
	lat map[int][]float64
}

func (*litellm) Name() string { return "litellm-latency" }

func (p *litellm) Choose(v *View) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	type cand struct {
		i   int
		avg float64
	}
	cs := make([]cand, 0, len(v.Available))
	for _, i := range v.Available {
		l := p.lat[i]
		avg := 0.0
		if len(l) > 0 {
			for _, x := range l {
				avg += x
			}
			avg /= float64(len(l))
		}
		cs = append(cs, cand{i, avg})
	}
	p.r.Shuffle(len(cs), func(a, b int) { cs[a], cs[b] = cs[b], cs[a] })
	slices.SortStableFunc(cs, func(a, b cand) int { return cmp.Compare(a.avg, b.avg) })
	lowest := cs[0].avg
	n := 0
	for n < len(cs) && cs[n].avg <= lowest+LiteLLMBuffer*lowest {
		n++
	}
	return cs[p.r.IntN(n)].i
}

func (p *litellm) add(i int, v float64) {
	l := append(p.lat[i], v)
	if len(l) > 10 {
		l = l[len(l)-10:]
	}
	p.lat[i] = l
}

func (p *litellm) Observe(o Outcome) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case !o.Failed && o.Answered >= 0 && o.OutputTokens > 0:
		p.add(o.Answered, o.TTFT.Seconds()/float64(o.OutputTokens))
	case o.Failed && o.Timeout && o.Sent >= 0:
		p.add(o.Sent, 1000)
	}
}

// PeakEWMADecay is the P2C baseline's decay time: Finagle's default for its
// peak-EWMA load metric.
const PeakEWMADecay = 10 * time.Second

// P2C returns power-of-two-choices with peak-EWMA latency, as Finagle's
// "aperture/p2c peakEwma" balancer (and Helicone's, after it) does: pick two
// distinct deployments at random and send to the one with the lower cost,
// where cost = peak-EWMA of the call latency × (calls outstanding + 1). The
// EWMA jumps to any sample above it and otherwise decays toward new samples
// with time constant PeakEWMADecay. A deployment without a sample costs 0,
// so it is tried first.
func P2C(seed uint64) Policy {
	return &p2c{r: rand.New(rand.NewPCG(seed, 3)), ewma: map[int]*peakEWMA{}}
}

type peakEWMA struct {
	v    float64 // seconds
	last time.Time
}

func (e *peakEWMA) observe(rtt float64, now time.Time) {
	if rtt > e.v || e.last.IsZero() {
		e.v = rtt
	} else {
		w := math.Exp(-now.Sub(e.last).Seconds() / PeakEWMADecay.Seconds())
		e.v = e.v*w + rtt*(1-w)
	}
	e.last = now
}

type p2c struct {
	mu   sync.Mutex
	r    *rand.Rand
	ewma map[int]*peakEWMA
}

func (*p2c) Name() string { return "p2c-peak-ewma" }

func (p *p2c) Choose(v *View) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(v.Available) == 1 {
		return v.Available[0]
	}
	a := p.r.IntN(len(v.Available))
	b := p.r.IntN(len(v.Available) - 1)
	if b >= a {
		b++
	}
	cost := func(i int) float64 {
		e := p.ewma[i]
		if e == nil {
			return 0
		}
		return e.v * float64(v.Pending(i)+1)
	}
	ia, ib := v.Available[a], v.Available[b]
	if cost(ib) < cost(ia) {
		return ib
	}
	return ia
}

func (p *p2c) Observe(o Outcome) {
	if o.Sent < 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	e := p.ewma[o.Sent]
	if e == nil {
		e = &peakEWMA{}
		p.ewma[o.Sent] = e
	}
	e.observe(o.End.Sub(o.Start).Seconds(), o.End)
}

// OpenRouterOutageWindow is how long a failure marks a deployment unstable
// in the OpenRouter baseline.
const OpenRouterOutageWindow = 30 * time.Second

// OpenRouter returns OpenRouter's documented default provider routing
// (openrouter.ai/docs, "Provider Routing", price-based load balancing):
// deployments that failed a call in the last 30 seconds go behind the stable
// ones; among the stable ones, one is picked at random weighted by the
// inverse square of its price (output price, the same input/output mix for
// every call), so a $1 provider is 9× likelier than a $3 one. When the
// scenario has an SLO it is applied as OpenRouter's preferred_min_throughput
// and preferred_max_latency at p50: deployments whose measured p50 (over
// their last 50 calls) misses it are deprioritised, not excluded. Deployments
// without a price weigh as the cheapest priced one.
func OpenRouter(seed uint64) Policy {
	return &openRouter{r: rand.New(rand.NewPCG(seed, 4)), failed: map[int]time.Time{}, tps: map[int][]float64{}, ttft: map[int][]float64{}}
}

type openRouter struct {
	mu        sync.Mutex
	r         *rand.Rand
	failed    map[int]time.Time
	tps, ttft map[int][]float64
}

func (*openRouter) Name() string { return "openrouter-price" }

func p50(v []float64) (float64, bool) {
	if len(v) == 0 {
		return 0, false
	}
	s := slices.Clone(v)
	slices.Sort(s)
	return s[(len(s)-1)/2], true
}

func (p *openRouter) Choose(v *View) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	var stable, meets []int
	for _, i := range v.Available {
		if t, ok := p.failed[i]; ok && v.Now.Sub(t) < OpenRouterOutageWindow {
			continue
		}
		stable = append(stable, i)
	}
	if len(stable) == 0 {
		stable = v.Available
	}
	for _, i := range stable {
		ok := true
		if v.slo.MinTPS > 0 {
			if m, has := p50(p.tps[i]); has && m < v.slo.MinTPS {
				ok = false
			}
		}
		if v.slo.MaxTTFT > 0 {
			if m, has := p50(p.ttft[i]); has && m > time.Duration(v.slo.MaxTTFT).Seconds() {
				ok = false
			}
		}
		if ok {
			meets = append(meets, i)
		}
	}
	if len(meets) > 0 {
		stable = meets
	}
	cheapest := math.Inf(1)
	for _, i := range stable {
		if pr := v.Deployments[i].Price.Output; pr > 0 {
			cheapest = min(cheapest, pr)
		}
	}
	if math.IsInf(cheapest, 1) {
		cheapest = 1
	}
	w := make([]float64, len(stable))
	total := 0.0
	for k, i := range stable {
		pr := v.Deployments[i].Price.Output
		if pr <= 0 {
			pr = cheapest
		}
		w[k] = 1 / (pr * pr)
		total += w[k]
	}
	x := p.r.Float64() * total
	for k, i := range stable {
		if x < w[k] {
			return i
		}
		x -= w[k]
	}
	return stable[len(stable)-1]
}

func (p *openRouter) Observe(o Outcome) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, i := range o.Troubled {
		p.failed[i] = o.End
	}
	if !o.Failed && o.Answered >= 0 {
		keep := func(l []float64, x float64) []float64 {
			l = append(l, x)
			if len(l) > 50 {
				l = l[len(l)-50:]
			}
			return l
		}
		if o.TPS > 0 {
			p.tps[o.Answered] = keep(p.tps[o.Answered], o.TPS)
		}
		p.ttft[o.Answered] = keep(p.ttft[o.Answered], o.TTFT.Seconds())
	}
}

// Oracle returns the policy that knows every deployment's true parameters at
// the moment of the call (phase, slow period, its concurrent streams, the
// prompt size and failure rates) and picks the best for each call under the
// scenario's objective: the highest expected TPS × success probability for
// throughput, the lowest expected TTFT for latency, the cheapest that meets
// the SLO for cost. It is the upper bound the other policies are measured
// against. It works only inside Run.
func Oracle() Policy { return oracle{} }

type oracle struct{}

func (oracle) Name() string    { return "oracle" }
func (oracle) Observe(Outcome) {}

func (oracle) Choose(v *View) int {
	best, bestScore := -1, math.Inf(-1)
	for k, i := range v.Available {
		if v.scores[k] > bestScore {
			best, bestScore = i, v.scores[k]
		}
	}
	return best
}

// trueScores returns the true score of each deployment of v.Available, in
// order, for the call v describes, under the scenario's objective (higher is
// better): the oracle picks the highest, and a call's TrueBest says whether
// its deployment had it. It reads each deployment's parameters at the
// moment, with the call counted among its concurrent streams, and so are
// the calls chosen for it that have not reached it yet (claim): the expected
// TPS × success probability for throughput; minus the expected TTFT, less
// 1000 s per unit of failure probability, for latency; for cost, minus the
// call's price (tokens × price per million), less 1000 per unit of failure
// probability, when the deployment meets the SLO and fails under half its
// calls, and otherwise -1e9 plus its expected TPS × success probability,
// so that every deployment meeting it scores above every one missing it and
// the fastest of those missing it leads when none does.
func trueScores(f *fleet, v *View) []float64 {
	out := make([]float64, len(v.Available))
	for k, i := range v.Available {
		d := f.deps[i]
		p := d.truth(v.Elapsed, d.inFlight.Load()+d.claimed.Load()+1, v.PromptTokens)
		ok := 1.0
		if p.status != 0 {
			ok = 0
		} else {
			ok = 1 - p.errs.total()
		}
		var score float64
		switch v.obj {
		case "latency":
			score = -p.ttft.Seconds() - 1000*(1-ok)
		case "cost":
			meets := ok > 0.5 && (v.slo.MinTPS == 0 || p.tps >= v.slo.MinTPS) && (v.slo.MaxTTFT == 0 || p.ttft <= time.Duration(v.slo.MaxTTFT))
			cost := float64(v.PromptTokens)*v.Deployments[i].Price.Input + float64(v.OutputTokens)*v.Deployments[i].Price.Output
			score = -cost - 1e3*(1-ok)
			if !meets {
				score = -1e9 + p.tps*ok
			}
		default:
			score = p.tps * ok
		}
		out[k] = score
	}
	return out
}

// trueBest reports whether deployment i had the highest true score of
// v.Available for the call (trueScores), ties included: scores within a
// relative 1e-12 of the highest count as tied.
func (v *View) trueBest(i int) bool {
	k := slices.Index(v.Available, i)
	if k < 0 {
		return false
	}
	top := slices.Max(v.scores)
	return top-v.scores[k] <= 1e-12*math.Abs(top)
}

// Mean10 returns the simple load-blind baseline a new user writes first, in
// the manner of LiteLLM's latency routing but on throughput: per deployment
// the mean delivered TPS of its last 10 successful calls; a deployment
// without one is tried first; each call goes uniformly at random to one of
// the deployments whose mean is within LiteLLMBuffer (10%) of the highest.
func Mean10(seed uint64) Policy {
	return &mean10{r: rand.New(rand.NewPCG(seed, 6)), tps: map[int][]float64{}}
}

type mean10 struct {
	mu  sync.Mutex
	r   *rand.Rand
	tps map[int][]float64
}

func (*mean10) Name() string { return "mean10" }

func (p *mean10) Choose(v *View) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	var cold, near []int
	best := 0.0
	means := make([]float64, len(v.Available))
	for k, i := range v.Available {
		l := p.tps[i]
		if len(l) == 0 {
			cold = append(cold, i)
			continue
		}
		for _, x := range l {
			means[k] += x
		}
		means[k] /= float64(len(l))
		best = max(best, means[k])
	}
	if len(cold) > 0 {
		return cold[p.r.IntN(len(cold))]
	}
	for k, i := range v.Available {
		if means[k] >= best*(1-LiteLLMBuffer) {
			near = append(near, i)
		}
	}
	return near[p.r.IntN(len(near))]
}

func (p *mean10) Observe(o Outcome) {
	if o.Failed || o.Answered < 0 || !(o.TPS > 0) {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	l := append(p.tps[o.Answered], o.TPS)
	if len(l) > 10 {
		l = l[len(l)-10:]
	}
	p.tps[o.Answered] = l
}
