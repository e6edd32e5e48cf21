package sim

import (
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tpsroute/tpsroute"
	"github.com/tpsroute/tpsroute/fallback"
	"github.com/tpsroute/tpsroute/internal/bench"
	"github.com/tpsroute/tpsroute/measure"
	"github.com/tpsroute/tpsroute/replay"
	"github.com/tpsroute/tpsroute/route"
)

// Call is one call of a run as its caller saw it. Times are offsets from the
// run's start. It is a plain value.
type Call struct {
	Start time.Duration `json:"start"`
	// Sent is the first deployment that received the call; Answered the one
	// whose answer the caller got. -1 when none.
	Sent     int `json:"sent"`
	Answered int `json:"answered"`
	// Failed says the caller got an error.
	Failed bool          `json:"failed,omitempty"`
	TTFT   time.Duration `json:"ttft"`
	TPS    float64       `json:"tps"`
	// InputTokens and OutputTokens are the answer's usage; Cost its price
	// in US dollars at the answering deployment's prices.
	InputTokens  int64   `json:"input_tokens"`
	OutputTokens int64   `json:"output_tokens"`
	Cost         float64 `json:"cost"`
	// TrueBest says Sent was truly best for the call on the scenario's
	// objective when it started, or tied for it: the deployment the oracle
	// picks, judged on the scenario's noise-free parameters at Start (phase,
	// slow period, its concurrent streams with this call, the prompt size,
	// failure rates).
	TrueBest bool `json:"true_best"`
}

// Result is one policy's run of one scenario.
type Result struct {
	Policy string `json:"policy"`
	// Calls in the order they started.
	Calls []Call `json:"-"`
	// Summary is computed from Calls.
	Summary Summary `json:"summary"`
	// Timeline is the run in buckets of Bucket.
	Bucket   time.Duration `json:"bucket"`
	Timeline []Bucket      `json:"timeline"`
	// Route is the run's Client's routing counters at the end
	// (tpsroute.Client.RouteStats): its explorations, cold and half-open
	// probes among its picks.
	Route route.Stats `json:"route"`
}

// tokenWords counts the output tokens of replay's synthetic answers, one
// token per space-separated word, so the first chunk's tokens are exact.
type tokenWords struct{}

func (tokenWords) Count(s string) int { return len(strings.Fields(s)) }

// Run sends sc's workload through a fresh tpsroute.Client against sc's
// simulated deployments, with p choosing each call's first deployment, and
// returns what the callers got. The run takes sc.Duration of real time (run
// it inside a testing/synctest bubble for virtual time); calls still in
// flight at the end complete and count. A cancelled ctx stops the run and
// returns its error.
func Run(ctx context.Context, sc *Scenario, p Policy) (*Result, error) {
	if err := sc.Validate(); err != nil {
		return nil, err
	}
	pol, _ := sc.policy()
	f := newFleet(sc)
	r := &runner{sc: sc, f: f, p: p, pending: make([]atomic.Int64, len(sc.Deployments))}
	r.bufs.New = func() any { return new([8 << 10]byte) }
	client, err := tpsroute.New(tpsroute.Config{
		Deployments: f.deployments(),
		Route: route.Options{Seed: sc.Seed, Policy: pol,
			SLO: route.SLO{MinTPS: sc.SLO.MinTPS, MaxTTFT: time.Duration(sc.SLO.MaxTTFT)}},
		HTTPClient: &http.Client{Transport: f},
		Tokenizer:  tokenWords{},
		OnDecision: func(route.Request, route.Plan) { r.decided() },
	})
	if err != nil {
		return nil, err
	}
	r.c = client
	r.keys = map[measure.Key]int{}
	for i, d := range client.Deployments() {
		r.keys[d.Key()] = i
	}
	r.workload = workload(sc)
	r.run(ctx)
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	res := &Result{Policy: p.Name(), Calls: r.calls, Route: client.RouteStats()}
	res.summarise(sc)
	return res, nil
}

// turn is one call's hold on the runner's pickMu, from its number to the
// Client's decision for it (Config.OnDecision), so that the calls woken at
// one virtual instant are numbered, chosen for and routed, by a policy or
// by the Client inside Do, one after the other: the Client's picks then
// do not depend on the order the goroutines ran in. No call waits in
// virtual time between the two (the Client routes before any attempt).
type turn struct {
	mu   *sync.Mutex
	once sync.Once
}

// end releases the turn; only its first call does so.
func (t *turn) end() { t.once.Do(t.mu.Unlock) }

// decided ends the turn of the call the Client has just routed. The Client
// routes each call once, in the calling goroutine, which holds pickMu.
func (r *runner) decided() {
	if t := r.holding; t != nil {
		r.holding = nil
		t.end()
	}
}

// workload is the scenario's load as a bench workload: prompts of the
// scenario's sizes, each with its output cap.
func workload(sc *Scenario) bench.Workload {
	in, out := sc.Workload.inputs(), sc.Workload.outputs()
	n := len(in) * len(out)
	w := bench.Workload{Model: model, Seed: sc.Seed}
	for i := range n {
		a, b := i%len(in), i%len(out)
		if sc.Workload.Shuffle { // every pairing, in and out drawn apart
			a, b = i/len(out), i%len(out)
		}
		w.Prompts = append(w.Prompts, bench.Prompt{
			Messages:  []bench.Message{{Role: "user", Content: bench.Words(in[a], sc.Seed, uint64(i)+1)}},
			MaxTokens: out[b],
		})
	}
	return w
}

// prompt returns the index in r.workload.Prompts of call i's prompt:
// i's turn in the cycle, or with Workload.Shuffle a draw from the
// scenario's seed and i.
func (r *runner) prompt(i int) int {
	n := len(r.workload.Prompts)
	if !r.sc.Workload.Shuffle {
		return i % n
	}
	return int(mix(r.sc.Seed^mix(uint64(i))) % uint64(n))
}

type runner struct {
	sc       *Scenario
	f        *fleet
	c        *tpsroute.Client
	p        Policy
	keys     map[measure.Key]int
	workload bench.Workload
	pending  []atomic.Int64
	seq      atomic.Int64

	// pickMu makes each call's number, view, choice and claim one step, so that
	// calls woken at one virtual instant choose one after the other, each
	// seeing the claims of those before it.
	pickMu sync.Mutex
	// holding is the call that holds pickMu, until the Client has routed it
	// (decided); guarded by pickMu.
	holding *turn

	mu    sync.Mutex
	calls []Call

	bufs sync.Pool // *[8 << 10]byte: the read buffers of open-loop calls
}

func (r *runner) run(ctx context.Context) {
	end := r.f.start.Add(time.Duration(r.sc.Duration))
	var wg sync.WaitGroup
	w := r.sc.Workload
	if w.Concurrency > 0 {
		for range w.Concurrency {
			wg.Go(func() {
				buf := make([]byte, 32<<10)
				for ctx.Err() == nil && time.Now().Before(end) {
					if r.call(ctx, buf) {
						// A caller whose call failed waits a second before
						// the next, as a client backs off: when every
						// deployment fails at once, a closed loop would
						// otherwise spin without time passing.
						select {
						case <-ctx.Done():
						case <-time.After(failedPause):
						}
					}
				}
			})
		}
		wg.Wait()
		return
	}
	rng := rand.New(rand.NewPCG(r.sc.Seed, 5))
	gap := time.Duration(float64(time.Second) / w.Rate)
	next := r.f.start
	t := time.NewTimer(0)
	defer t.Stop()
	for ctx.Err() == nil {
		if w.Poisson {
			next = next.Add(time.Duration(rng.ExpFloat64() * float64(gap)))
		} else {
			next = next.Add(gap)
		}
		if !next.Before(end) {
			break
		}
		t.Reset(time.Until(next))
		select {
		case <-ctx.Done():
		case <-t.C:
			wg.Go(func() {
				buf := r.bufs.Get().(*[8 << 10]byte)
				r.call(ctx, buf[:])
				r.bufs.Put(buf)
			})
		}
	}
	wg.Wait()
}

// available returns the deployments present at elapsed and the ignore option
// for those not yet joined.
func (r *runner) available(elapsed time.Duration) ([]int, []string) {
	var av []int
	var ignore []string
	for i, d := range r.sc.Deployments {
		if time.Duration(d.Join) <= elapsed {
			av = append(av, i)
		} else {
			ignore = append(ignore, d.Provider)
		}
	}
	return av, ignore
}

// failedPause is how long a closed-loop caller waits after a failed call.
const failedPause = time.Second

// call sends one call, records it and reports whether it failed.
//
// It is long (about 90 lines) because one simulated call's request, read
// and accounting of every attempt share the call's state and the runner's
// lock.
func (r *runner) call(ctx context.Context, buf []byte) (failed bool) {
	// Numbered under pickMu with its view and choice, so that the calls
	// woken at one virtual instant are numbered in the order they choose:
	// call i's sizes and draws (Workload.Shuffle, simCallHeader) do not
	// depend on which goroutine ran first.
	r.pickMu.Lock()
	tn := &turn{mu: &r.pickMu}
	r.holding = tn
	i := int(r.seq.Add(1) - 1)
	w := r.workload // the call's prompt alone, so that Body takes it
	j := r.prompt(i)
	w.Prompts = w.Prompts[j : j+1]
	cm := bench.Cold
	if r.sc.Workload.Warm {
		cm = bench.Warm
	}
	body := w.Body(i, cm, "sim")
	now := time.Now()
	elapsed := now.Sub(r.f.start)
	av, ignore := r.available(elapsed)
	prompt, _ := replay.PromptTokens(body)
	out := w.Prompts[0].MaxTokens
	v := &View{
		Now: now, Elapsed: elapsed, Available: av, Deployments: r.sc.Deployments,
		Pending:      func(i int) int { return int(r.pending[i].Load()) },
		PromptTokens: prompt, OutputTokens: out,
		obj: r.sc.Objective, slo: r.sc.SLO,
	}
	info := callInfo{prompt: prompt, out: out, seq: uint64(i)}
	if r.sc.Workload.Keyed {
		info.requests = new(atomic.Uint64)
	}
	v.scores = trueScores(r.f, v)
	chosen := r.p.Choose(v)
	if chosen >= 0 {
		info.claim = &claim{d: r.f.deps[chosen]}
		info.claim.d.claimed.Add(1)
		defer info.claim.release()
	}
	var opts []tpsroute.CallOption
	if len(ignore) > 0 {
		opts = append(opts, tpsroute.WithIgnore(ignore...))
	}
	if chosen >= 0 {
		d := r.sc.Deployments[chosen]
		opts = append(opts, tpsroute.WithPin(d.Provider, d.Region))
		r.pending[chosen].Add(1)
		defer r.pending[chosen].Add(-1)
	}
	o := Outcome{Chosen: chosen, Sent: -1, Answered: -1, Start: now}
	c := Call{Start: elapsed, Sent: -1, Answered: -1}
	res, err := r.c.Do(context.WithValue(ctx, callInfoKey{}, info), body, opts...)
	tn.end() // routed (decided) or failed before it was
	var attempts []fallback.Attempt
	if err == nil {
		var rerr error
		for rerr == nil {
			_, rerr = res.Body.Read(buf)
		}
		_ = res.Body.Close()
		out := res.Outcome()
		attempts = out.Attempts
		s := out.Sample
		o.End = time.Now()
		if rerr != io.EOF {
			err = rerr
		} else {
			d := r.keys[out.Deployment.Key()]
			o.Answered, c.Answered = d, d
			o.TTFT = s.TTFT + s.Start.Sub(now)
			if s.TPSOK {
				o.TPS = s.TPS
			}
			o.OutputTokens = s.OutputTokens
			c.TTFT, c.TPS, c.InputTokens, c.OutputTokens = o.TTFT, o.TPS, s.InputTokens, s.OutputTokens
			c.Cost = r.sc.Deployments[d].Price.Dollars(s.InputTokens, s.CachedTokens, s.OutputTokens)
		}
	}
	if err != nil {
		o.End = time.Now()
		o.Failed, c.Failed = true, true
		var fe *fallback.Error
		if errors.As(err, &fe) {
			attempts = fe.Attempts
		}
		o.Timeout = fallback.Attempt{Err: err}.Timeout() // the Executor's own list of deadline errors
	}
	for _, a := range attempts {
		d, ok := r.keys[a.Key]
		if !ok || a.Class == fallback.ClassSkipped {
			continue
		}
		if o.Sent < 0 {
			o.Sent, c.Sent = d, d
		}
		if a.Class != fallback.ClassNone && a.Class != fallback.ClassCanceled {
			o.Troubled = append(o.Troubled, d)
		}
	}
	c.TrueBest = c.Sent >= 0 && v.trueBest(c.Sent)
	r.p.Observe(o)
	r.mu.Lock()
	r.calls = append(r.calls, c)
	r.mu.Unlock()
	return c.Failed
}
