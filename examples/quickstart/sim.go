package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/openai/openai-go/v3"

	"github.com/tpsroute/tpsroute"
	"github.com/tpsroute/tpsroute/fallback"
	"github.com/tpsroute/tpsroute/measure"
	"github.com/tpsroute/tpsroute/replay"
	"github.com/tpsroute/tpsroute/route"
)

// config is what the flags set.
type config struct {
	Policy      route.Policy  // how the router orders deployments
	Duration    time.Duration // how long new calls are started; in-flight calls then finish
	Concurrency int           // calls in flight at all times
	Tick        time.Duration // how often the live table is printed; 0 means 1 s
	Color       bool          // ANSI colours in the output
	// Live redraws the table in place, with every event so far below it,
	// instead of appending a table per tick: for a terminal.
	Live bool
	// InMemory serves the simulated providers through in-memory transports
	// instead of 127.0.0.1 sockets, so a test can run the whole simulation
	// in a testing/synctest bubble, in virtual time.
	InMemory bool
}

// result is what a run did, for the summary line and for tests.
type result struct {
	Calls, Answered, Lost int
	FailedOver            int // answered by another deployment after a failed attempt
	Retried               int // answered by the same deployment after a failed attempt
	Continued             int // cut mid-answer and resumed on another deployment
	Interrupted           int // stopped by the caller (Ctrl-C); not counted as lost
	Phases                []phaseResult
	Labels                []string // deployments, in configuration order
}

// phaseResult is where the calls started in one phase were answered.
type phaseResult struct {
	phase
	Calls      int
	ByLabel    map[string]int // answered calls by deployment label
	openSeen   map[string]bool
	lastPlan   route.Plan            // the last decision in the phase
	policyPlan route.Plan            // the last decision made by the policy (best score or band)
	latePicks  map[string]int        // policy decisions in the phase's second half, by first deployment
	latePlan   map[string]route.Plan // the last of those decisions, by first deployment
}

// Choice returns the router's settled choice at the end of the phase: of the
// decisions made by the policy (not by a cold probe, exploration or
// affinity) in the phase's second half, the most frequent first deployment,
// with its latest plan. Without such decisions it is the last policy
// decision of the phase, or else its last plan.
func (p phaseResult) Choice() route.Plan {
	best, n := "", 0
	for l, c := range p.latePicks {
		if c > n || (c == n && l < best) {
			best, n = l, c
		}
	}
	switch {
	case best != "":
		return p.latePlan[best]
	case len(p.policyPlan.Deployments) > 0:
		return p.policyPlan
	}
	return p.lastPlan
}

// Top returns the deployment that answered most calls in the phase and its share.
func (p phaseResult) Top() (string, float64) {
	best, n, total := "", 0, 0
	for l, c := range p.ByLabel {
		total += c
		if c > n || (c == n && l < best) {
			best, n = l, c
		}
	}
	if total == 0 {
		return "", 0
	}
	return best, float64(n) / float64(total)
}

// run starts the simulated providers, sends traffic through a tpsroute.Client
// for cfg.Duration at cfg.Concurrency, prints a live table every cfg.Tick and
// a summary at the end to w, and returns what happened.
func run(ctx context.Context, cfg config, w io.Writer) (*result, error) {
	if cfg.Duration <= 0 || cfg.Concurrency <= 0 {
		return nil, errors.New("quickstart: -duration and -concurrency must be positive")
	}
	if cfg.Tick <= 0 {
		cfg.Tick = time.Second
	}
	tl := newTimeline(cfg.Duration)
	sims := providers(tl)

	// 1. Start the simulated providers. Each is a replay server: an
	// OpenAI-compatible endpoint on 127.0.0.1 that streams with the TTFT,
	// speed and faults of its script.
	hc, deployments, stop := startProviders(sims, cfg.InMemory)
	defer stop()

	// 2. Make the Client. In your program this is the only part you write:
	// a list of deployments (URL, key, model id, price) and a policy.
	s := newSim(cfg, tl, sims)
	client, err := tpsroute.New(tpsroute.Config{
		Deployments: deployments,
		HTTPClient:  hc,
		OnDecision:  s.decided,
		// A tripped breaker is drawn on the timeline.
		OnBreakerChange: s.breakerChanged,
		Route: route.Options{
			Policy: cfg.Policy,
			Seed:   1,
			// Probe a new (cold) deployment up to 3 times every 2 s (within
			// route's default 25 % share of picks), so that all five are
			// measured within the first seconds of the demo.
			ColdProbes: 3, ColdProbeInterval: 2 * time.Second,
		},
		// The demo compresses time: production defaults (a 5-minute window,
		// a 30 s half-life, 10 samples before a deployment counts as measured)
		// react within a minute; these react within seconds.
		Measure: measure.Options{Window: measure.WindowOptions{Length: 10 * time.Second}, HalfLife: time.Second, MinSamples: 5},
		Fallback: fallback.Options{
			Seed:        1,
			BackoffBase: 50 * time.Millisecond,
			// A stream cut mid-answer continues on another deployment that
			// supports assistant prefill; the caller reads one coherent answer.
			MidStream: fallback.MidStreamContinue,
			// A tripped breaker lets a probe through after 2 s (default 15 s).
			Breaker: fallback.BreakerSettings{Timeout: 2 * time.Second},
		},
	})
	if err != nil {
		return nil, err
	}
	s.client = client

	fmt.Fprint(w, s.legend())
	start := time.Now()
	s.start = start

	// 3. Traffic: cfg.Concurrency workers, each sending one streaming call
	// after another until the duration is up.
	var wg sync.WaitGroup
	for i := range cfg.Concurrency {
		wg.Go(func() {
			for n := 0; ; n++ {
				if ctx.Err() != nil || time.Since(start) >= cfg.Duration {
					return
				}
				s.call(ctx, i, n)
			}
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()

	// 4. Every tick, print the table; at the end, the summary.
	tick := time.NewTicker(cfg.Tick)
	defer tick.Stop()
	var log []string // every event so far, for the live view
	drawn := 0       // lines of the last live view, to redraw over
	for loop := true; loop; {
		select {
		case <-tick.C:
			table, events := s.table(time.Since(start))
			if !cfg.Live {
				fmt.Fprint(w, table+lines(events)+"\n")
				continue
			}
			log = append(log, events...)
			view := table + lines(log[max(0, len(log)-12):]) + "\n"
			if drawn > 0 {
				fmt.Fprintf(w, "\x1b[%dA\x1b[J", drawn) // cursor up, clear to the end
			}
			fmt.Fprint(w, view)
			drawn = strings.Count(view, "\n")
		case <-done:
			loop = false
		}
	}
	res := s.result()
	fmt.Fprint(w, s.summary(res, time.Since(start)))
	return res, nil
}

// lines joins ls, each followed by a newline.
func lines(ls []string) string {
	if len(ls) == 0 {
		return ""
	}
	return strings.Join(ls, "\n") + "\n"
}

// startProviders serves each simulated provider and returns the HTTP client
// to reach them, their deployments and a function that stops them.
func startProviders(sims []simProvider, inMemory bool) (*http.Client, []route.Deployment, func()) {
	var ds []route.Deployment
	if inMemory {
		// Each provider gets a made-up host; a small RoundTripper sends each
		// request to the handler of its host, without any socket.
		hosts := replay.Hosts{}
		for _, p := range sims {
			host := p.Provider + "." + p.Region + ".sim"
			hosts[host] = replay.NewHandler(map[string]replay.Script{p.WireModel: p.script})
			ds = append(ds, p.deployment("http://"+host+"/v1"))
		}
		return &http.Client{Transport: hosts}, ds, func() {}
	}
	var servers []*replay.Server
	for _, p := range sims {
		srv := replay.NewServer(map[string]replay.Script{p.WireModel: p.script})
		servers = append(servers, srv)
		ds = append(ds, p.deployment(srv.URL()))
	}
	// Enough idle connections for every call in flight, so that the demo
	// measures the providers and not TCP handshakes.
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 64
	return &http.Client{Transport: tr}, ds, func() {
		tr.CloseIdleConnections()
		for _, s := range servers {
			s.Close()
		}
	}
}

// sim holds the running tallies. Its methods are safe for concurrent use.
type sim struct {
	cfg    config
	tl     timeline
	sims   []simProvider
	labels []string
	keys   map[string]measure.Key
	client *tpsroute.Client
	start  time.Time

	mu       sync.Mutex
	res      result
	tickBy   map[string]int // calls committed since the last table, by label
	tickN    int
	breakers []string // breaker changes since the last table
	events   int      // scripted events already announced
	failures []string // the first lost calls, for the summary
}

func newSim(cfg config, tl timeline, sims []simProvider) *sim {
	s := &sim{cfg: cfg, tl: tl, sims: sims, keys: map[string]measure.Key{}, tickBy: map[string]int{}}
	for _, p := range sims {
		s.labels = append(s.labels, p.Label())
		s.keys[p.Label()] = measure.Key{Provider: p.Provider, Region: p.Region, Model: model}
	}
	for _, ph := range tl.phases() {
		s.res.Phases = append(s.res.Phases, phaseResult{phase: ph, ByLabel: map[string]int{},
			openSeen: map[string]bool{}, latePicks: map[string]int{}, latePlan: map[string]route.Plan{}})
	}
	s.res.Labels = s.labels
	return s
}

func label(k measure.Key) string { return k.Provider + "/" + k.Region }

// call sends one streaming call and checks the answer word for word.
func (s *sim) call(ctx context.Context, worker, n int) {
	ph := s.tl.phaseAt(time.Since(s.start))
	stream := s.client.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{
		Model: model,
		Messages: []openai.ChatCompletionMessageParamUnion{
			openai.UserMessage(fmt.Sprintf("Worker %d, question %d: explain TTFT in %d words.", worker, n, outputTokens)),
		},
	})
	defer stream.Close()

	// NewStreaming returns at the commit point: the first output chunk has
	// arrived, and Deployment says who is answering.
	committed := stream.Outcome().Deployment
	if committed.Provider != "" {
		s.mu.Lock()
		s.tickBy[label(committed.Key())]++
		s.tickN++
		s.mu.Unlock()
	}

	var text strings.Builder
	for stream.Next() {
		for _, c := range stream.Current().Choices {
			text.WriteString(c.Delta.Content)
		}
	}
	err := stream.Err()
	if err == nil && text.String() != replay.Text(outputTokens) {
		err = fmt.Errorf("quickstart: answer is not the %d expected tokens (%d bytes)", outputTokens, text.Len())
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	s.res.Calls++
	s.res.Phases[ph].Calls++
	switch {
	case err != nil && ctx.Err() != nil:
		s.res.Interrupted++
		return
	case err != nil:
		s.res.Lost++
		if len(s.failures) < 5 {
			s.failures = append(s.failures, err.Error())
		}
		return
	}
	s.res.Answered++
	o := stream.Outcome()
	answered := label(o.Deployment.Key())
	s.res.Phases[ph].ByLabel[answered]++

	var other, same, cut bool
	for _, a := range o.Attempts {
		switch a.Class {
		case fallback.ClassNone, fallback.ClassSkipped:
		case fallback.ClassMidStream:
			cut = true
		default:
			if label(a.Key) == answered {
				same = true
			} else {
				other = true
			}
		}
	}
	switch {
	case cut:
		s.res.Continued++
	case other:
		s.res.FailedOver++
	case same:
		s.res.Retried++
	}
}

// decided is Config.OnDecision: it keeps the phase's latest plans, to explain
// the router's choice in the summary.
func (s *sim) decided(_ route.Request, plan route.Plan) {
	at := time.Since(s.start)
	ph := s.tl.phaseAt(at)
	s.mu.Lock()
	defer s.mu.Unlock()
	p := &s.res.Phases[ph]
	if len(plan.Deployments) == 0 {
		return
	}
	p.lastPlan = plan
	if c := plan.Deployments[0]; c.Reason == route.ReasonBest || c.Reason == route.ReasonBand {
		p.policyPlan = plan
		if 2*(at-p.From) >= p.To-p.From {
			p.latePicks[label(c.Key())]++
			p.latePlan[label(c.Key())] = plan
		}
	}
	for _, c := range plan.Excluded {
		if c.Reason == route.ReasonOpen {
			p.openSeen[label(c.Key())] = true
		}
	}
}

// breakerChanged is fallback's OnStateChange hook. It runs under the
// breaker's lock, so it only appends a line for the next table.
func (s *sim) breakerChanged(k measure.Key, from, to route.BreakerState) {
	line := fmt.Sprintf("%5s  breaker %s: %s -> %s", secs(time.Since(s.start)), label(k), from, to)
	s.mu.Lock()
	s.breakers = append(s.breakers, line)
	s.mu.Unlock()
}

func (s *sim) result() *result {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.res
	r.Phases = append([]phaseResult(nil), s.res.Phases...)
	return &r
}
