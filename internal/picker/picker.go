package picker

import (
	"cmp"
	crand "crypto/rand"
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tpsroute/tpsroute/internal/registry"
	"github.com/tpsroute/tpsroute/internal/routekit"
	"github.com/tpsroute/tpsroute/measure"
	"github.com/tpsroute/tpsroute/route"
)

// Source gives the current statistics of a deployment. The Client's
// statistics (internal/registry's *Registry) satisfy it. ok is false when the key has no statistics at all.
// Implementations must be safe for concurrent use and must not block: Pick
// calls Estimate once per candidate deployment.
type Source interface {
	Estimate(k measure.Key) (registry.Estimate, bool)
}

// HandleSource is a Source that also hands out stable per-key handles, so
// that Pick reads a configured deployment's Estimate through an atomic
// pointer instead of hashing its key on every call. The Client's
// statistics (internal/registry's *Registry) implement it. The Picker asks for a deployment's handle the first time it
// needs it, and again whenever the handle is no longer Live (the key was
// pruned) or Handle returned nil (the key has no statistics yet); wildcard
// deployments, whose key depends on the request, always use Estimate.
// Implementations must be safe for concurrent use and must not block.
type HandleSource interface {
	Source
	// Handle returns a handle on k's Estimate, or nil when k has no
	// statistics (Estimate would report the zero Estimate and false).
	Handle(k measure.Key) registry.EstimateHandle
}

// Defaults for the zero fields of route.Options; the fields' comments
// and docs/CONFIG.md state the same values.
const (
	// defaultExploration caps the share of picks that explore: 20%. Far
	// fewer do in a steady fleet (a pick explores a deployment with the
	// chance that it would now lead, see route.Options.Exploration); the cap binds
	// at low traffic, when a demoted leader is re-measured every 10 to 20 s.
	defaultExploration = 0.2
	// defaultBand is the relative score distance of near-equal candidates: 5%.
	defaultBand = 0.05
	// defaultColdProbes is the number of cold probes per deployment per
	// ColdProbeInterval: registry.DefaultMinSamples, so that a cold deployment
	// can collect the samples that make its Estimate OK (and it comparable
	// with warm ones) within one interval, when traffic allows: at the
	// default ColdShare that takes 33 picks per interval (3.3/s) for one cold
	// deployment.
	defaultColdProbes = registry.DefaultMinSamples
	// defaultColdShare is the share of a ColdProbeInterval's picks that may
	// be cold probes beyond each deployment's first: 25%. Higher lets a cold
	// deployment catch up sooner at low traffic but sends more calls to
	// unmeasured deployments; at 25% the warm ones keep about three calls in
	// four once every cold deployment had its first probe of the interval.
	defaultColdShare = 0.25
	// defaultColdProbeInterval is the window cold probes are counted over.
	defaultColdProbeInterval = 10 * time.Second
	// defaultHalfOpenProbeInterval is the least time between two picks that
	// put the same half-open deployment first: 1 s.
	defaultHalfOpenProbeInterval = time.Second
	// defaultAffinityTTL is how long a cache key stays with its deployment:
	// about as long as providers keep a prompt prefix cached.
	defaultAffinityTTL = 5 * time.Minute
	// defaultAffinityEntries is the number of cache keys remembered.
	defaultAffinityEntries = 10000
)

// Picker orders deployments for each call. It is safe for concurrent use;
// Pick never blocks and reads the Source and Health once per candidate.
type Picker struct {
	ds       []route.Deployment
	keys     []measure.Key // precomputed; a wildcard's Model is "*"
	meta     []meta        // precomputed per deployment, parallel to ds
	byModel  map[string][]int32
	wild     []int32
	provs    map[string]struct{}
	regions  map[string]struct{}
	src      Source
	health   Health                 // nil: every deployment healthy
	hsrc     HandleSource           // src, when it hands out handles
	handles  []atomic.Pointer[hbox] // per deployment: its resolved handle; nil none yet
	opts     route.Options
	seed     uint64
	coldMax  int64
	coldWin  int64
	cold     []coldState
	share    float64                    // Options.ColdShare; 0 means no share cap
	shareWin atomic.Pointer[shareState] // the current share window; nil none yet
	halfWin  int64                      // Options.HalfOpenProbeInterval in ns; 0 disables
	half     []atomic.Int64             // per deployment: unix ns of its last half-open probe; 0 none
	memo     []memo                     // per deployment: what exploration remembers of it (explore.go)
	rising   atomic.Int64               // memo entries with rising set
	aff      *affinity
	counter  atomic.Uint64
	scratch  sync.Pool
	counters [9]atomic.Uint64
	answered bool // every deployment serves only embeddings: answered whole, no output phase (defaults)
}

const (
	cPicks = iota
	cNoDeployment
	cAffinityHits
	cAffinityMisses
	cAffinityBroken
	cColdProbes
	cExplorations
	cBandPicks
	cHalfOpenProbes
)

// meta is what Pick reads of a deployment on every call, precomputed so the
// hot loops neither compare strings nor touch the whole Deployment.
type meta struct {
	wild     bool
	weight   float64 // weight(Deployment.Weight)
	priceIn  float64 // Price.Input
	priceOut float64 // Price.Output
	prior    bool    // Deployment.Expected is set
	revised  bool    // Deployment.Revision is set
}

// Health reports the state of deployments: internal/executor's Executor
// implements it, and the root wires it into the picker. Implementations
// must be safe for concurrent use and must not block.
type Health interface {
	Status(k measure.Key, now time.Time) route.Status
}

// New returns a Picker over ds, reading statistics from src (nil means
// none: every deployment stays cold) and breaker and limiter state from
// health (nil means every deployment is healthy). ds is copied. It returns a
// *route.DeploymentError (matching route.ErrInvalidDeployment) naming the
// first invalid field, or a duplicate Key, and an error for out-of-range
// route.Options (zero fields take the defaults above).
func New(ds []route.Deployment, src Source, health Health, opts route.Options) (*Picker, error) {
	if len(ds) == 0 {
		return nil, fmt.Errorf("%w: no deployments", route.ErrInvalidDeployment)
	}
	if len(ds) > math.MaxInt32 {
		return nil, fmt.Errorf("%w: too many deployments", route.ErrInvalidDeployment)
	}
	if err := resolve(&opts); err != nil {
		return nil, err
	}
	p := &Picker{
		ds:      slices.Clone(ds),
		keys:    make([]measure.Key, len(ds)),
		meta:    make([]meta, len(ds)),
		byModel: make(map[string][]int32),
		provs:   make(map[string]struct{}),
		regions: make(map[string]struct{}),
		src:     src,
		health:  health,
		opts:    opts,
		seed:    opts.Seed,
		coldMax: int64(opts.ColdProbes),
		coldWin: int64(opts.ColdProbeInterval),
		cold:    make([]coldState, len(ds)),
		share:   opts.ColdShare,
		halfWin: int64(opts.HalfOpenProbeInterval),
		half:    make([]atomic.Int64, len(ds)),
		memo:    make([]memo, len(ds)),
	}
	if hs, ok := src.(HandleSource); ok {
		p.hsrc = hs
		p.handles = make([]atomic.Pointer[hbox], len(ds))
	}
	if p.seed == 0 {
		var b [8]byte
		_, _ = crand.Read(b[:])
		p.seed = binary.LittleEndian.Uint64(b[:])
	}
	seen := make(map[measure.Key]int, len(ds))
	for i := range p.ds {
		d := &p.ds[i]
		if err := d.Validate(); err != nil {
			de := err.(*route.DeploymentError)
			de.Index = i
			return nil, de
		}
		k := d.Key()
		if j, dup := seen[k]; dup {
			return nil, &route.DeploymentError{Index: i, Key: k.String(), Field: "Key",
				Reason: fmt.Sprintf("duplicate of deployment %d (same Provider, Region, Model and Revision)", j)}
		}
		seen[k] = i
		if d.IsWildcard() {
			k.Model = route.Wildcard // replaced by the requested model per pick
			p.wild = append(p.wild, int32(i))
		} else {
			p.byModel[d.Model] = append(p.byModel[d.Model], int32(i))
		}
		p.keys[i] = k
		p.meta[i] = meta{wild: d.IsWildcard(), weight: weight(d.Weight), priceIn: d.Price.Input, priceOut: d.Price.Output,
			prior: d.Expected.TPS > 0 || d.Expected.TTFT > 0, revised: d.Revision != ""}
		p.provs[d.Provider] = struct{}{}
		p.regions[d.Region] = struct{}{}
	}
	p.answered = !slices.ContainsFunc(p.keys, func(k measure.Key) bool { return k.API != string(route.APIEmbeddings) })
	if opts.AffinityTTL > 0 {
		p.aff = newAffinity(opts.AffinityTTL, opts.AffinityEntries)
	}
	p.scratch.New = func() any { return new(scratch) }
	return p, nil
}

func resolve(o *route.Options) error {
	var err error
	if o.Policy > route.Cost {
		return fmt.Errorf("route: Options.Policy: unknown policy %d", o.Policy)
	}
	o.Policy = cmp.Or(o.Policy, route.Throughput)
	o.LatencyMetric = cmp.Or(o.LatencyMetric, route.LatencyTTFT)
	o.TTFTPercentile = cmp.Or(o.TTFTPercentile, route.P95)
	o.TPSPercentile = cmp.Or(o.TPSPercentile, route.P50)
	if o.Exploration, err = share("Exploration", o.Exploration, defaultExploration); err != nil {
		return err
	}
	if o.Band, err = share("Band", o.Band, defaultBand); err != nil {
		return err
	}
	if o.ColdProbes == 0 {
		o.ColdProbes = defaultColdProbes
	} else if o.ColdProbes < 0 {
		o.ColdProbes = 0
	}
	if o.ColdShare, err = share("ColdShare", o.ColdShare, defaultColdShare); err != nil {
		return err
	}
	if o.ColdProbeInterval <= 0 {
		o.ColdProbeInterval = defaultColdProbeInterval
	}
	if o.HalfOpenProbeInterval == 0 {
		o.HalfOpenProbeInterval = defaultHalfOpenProbeInterval
	} else if o.HalfOpenProbeInterval < 0 {
		o.HalfOpenProbeInterval = 0
	}
	o.AffinityTTL = cmp.Or(o.AffinityTTL, defaultAffinityTTL)
	if o.AffinityEntries <= 0 {
		o.AffinityEntries = defaultAffinityEntries
	}
	return nil
}

// Deployments returns a copy of the configured deployments, in the order given.
func (p *Picker) Deployments() []route.Deployment { return slices.Clone(p.ds) }

// Stats returns the Picker's counters.
func (p *Picker) Stats() route.Stats {
	c := &p.counters
	return route.Stats{
		Picks: c[cPicks].Load(), NoDeployment: c[cNoDeployment].Load(),
		AffinityHits: c[cAffinityHits].Load(), AffinityMisses: c[cAffinityMisses].Load(),
		AffinityBroken: c[cAffinityBroken].Load(), ColdProbes: c[cColdProbes].Load(),
		Explorations: c[cExplorations].Load(), BandPicks: c[cBandPicks].Load(),
		HalfOpenProbes: c[cHalfOpenProbes].Load(),
	}
}

// Served records that the deployment with key k served a call with cacheKey
// at now, so later requests with that CacheKey prefer it for
// Options.AffinityTTL. Call it when a call has succeeded (the root does this
// from its completion path). An empty cacheKey, or disabled affinity, makes it
// a no-op. It is safe for concurrent use; it takes a short per-shard lock
// that Pick never waits on.
func (p *Picker) Served(cacheKey string, k measure.Key, now time.Time) {
	if p.aff == nil || cacheKey == "" {
		return
	}
	p.aff.put(cacheKey, k, now)
}

// Pick is PickAt(r, time.Now()).
func (p *Picker) Pick(r route.Request) (route.Plan, error) { return p.PickAt(r, time.Now()) }

// PickAt orders the deployments that can serve r as seen at now. It reads
// each candidate's statistics and health once and never blocks. It returns an
// error wrapping ErrNoDeployment when nothing can serve r: a *NameError when
// r names a model, provider or region no deployment has, a *PinError when
// r.Pin matches no candidate, else an error saying what the pins, the price
// cap or the SLO left out; the Plan then still lists in Excluded what a
// strict SLO or open breakers left out.
func (p *Picker) PickAt(r route.Request, now time.Time) (route.Plan, error) {
	s := p.scratch.Get().(*scratch)
	defer p.scratch.Put(s)
	pin, only := r.Pin, r.NoFallbacks
	if pin != (route.Pin{}) {
		r.NoFallbacks = false // the pin decides the first; applyPin trims
	}
	plan, err := p.pick(s, &r, now)
	s.req, s.scorer = route.Request{}, nil // drop references to the caller's slices and Scorer
	if pin != (route.Pin{}) && (err == nil || len(plan.Excluded) > 0) {
		// A pinned deployment left out (open breaker, strict SLO) is still
		// the caller's explicit choice: applyPin honours it.
		plan, err = applyPin(plan, pin, only)
	}
	if err != nil {
		p.counters[cNoDeployment].Add(1)
		return plan, err
	}
	p.counters[cPicks].Add(1)
	return plan, nil
}

func (p *Picker) pick(s *scratch, r *route.Request, now time.Time) (route.Plan, error) {
	s.req = *r
	req := &s.req
	s.items, s.ranks, s.order, s.models = s.items[:0], s.ranks[:0], s.order[:0], s.models[:0]
	s.nWild, s.nCold, s.nExcl = 0, 0, 0
	if p.hsrc != nil && len(s.derived) != len(p.ds) {
		s.derived = make([]derived, len(p.ds))
	}
	if req.Policy > route.Cost || req.LatencyMetric > route.LatencyCompletion {
		return route.Plan{}, fmt.Errorf("route: Request: unknown Policy %d or LatencyMetric %d", req.Policy, req.LatencyMetric)
	}
	scorer, policyName := p.defaults(req, r.Policy == 0)
	slo := rk.Merge(req.SLO, p.opts.SLO)
	// Cost needs no samples: prices are known up front, so cold deployments
	// are ordered by expected cost too (see chooseFirst).
	s.costly = scorer == nil && req.Policy == route.Cost
	checkSLO := slo.MaxTTFT > 0 || slo.MinTPS > 0 || slo.MaxPrice > 0 || slo.MaxErrorRate > 0
	in, out := float64(req.ExpectedInputTokens), float64(req.ExpectedOutputTokens)
	if p.answered {
		out = 0 // no output tokens: the cost is the input's
	}

	if err := p.checkPins(req); err != nil {
		return route.Plan{Policy: policyName}, err
	}
	if err := p.resolveModels(s); err != nil {
		return route.Plan{Policy: policyName}, err
	}

	// Candidates, in model order.
	for mi := range s.models {
		p.collect(s, req, s.models[mi].idxs, mi)
		p.collect(s, req, p.wild, mi)
	}
	if len(s.items) == 0 {
		return route.Plan{Policy: policyName}, p.noDeployment(req, s.models)
	}

	// Statistics, then score, classify and rank.
	s.slo, s.checkSLO, s.scorer = slo, checkSLO, scorer
	open, usable := p.scoreItems(s, &scoring{scorer: scorer, slo: slo, checkSLO: checkSLO, in: in, out: out}, r.ExpectedInputTokens, now)
	// Open breakers are excluded, unless every remaining candidate is open:
	// then all of them are tried, last resort first by score (fail-open).
	if open > 0 && usable > 0 {
		p.excludeOpen(s)
	}
	if len(s.ranks) == 0 {
		plan := p.materialize(s, policyName)
		return plan, fmt.Errorf("%w: all %d deployments of %s are excluded (%s)",
			route.ErrNoDeployment, len(s.items), modelList(s.models), plan.Excluded[0].Reason)
	}
	// Scores and ties are never NaN (clamped), so plain comparisons order
	// them totally.
	s.presort(len(p.ds))
	for i := range s.ranks {
		s.order = append(s.order, s.ranks[i].item)
	}

	first := p.chooseFirst(s, req, now)
	if req.NoFallbacks {
		s.order = s.order[:1]
	}
	plan := p.materialize(s, policyName)
	if first != "" {
		plan.Deployments[0].Reason = first
	}
	return plan, nil
}

// defaults applies the Picker's defaults to req's zero Policy,
// LatencyMetric and expected token counts, and returns the Scorer that
// orders it (nil: the built-in Policy; the Options' Scorer only when the
// request named no Policy, as noPolicy says) and the policy's name for the
// Plan.
func (p *Picker) defaults(req *route.Request, noPolicy bool) (route.Scorer, string) {
	if req.Policy == 0 {
		req.Policy = p.opts.Policy
	}
	if req.LatencyMetric == 0 {
		req.LatencyMetric = p.opts.LatencyMetric
	}
	if req.ExpectedInputTokens <= 0 {
		req.ExpectedInputTokens = routekit.ExpectedInputTokens
	}
	if req.ExpectedOutputTokens <= 0 {
		req.ExpectedOutputTokens = routekit.ExpectedOutputTokens
	}
	if p.answered {
		// An embeddings answer has no output phase: the time to it is its
		// latency (TTFT), which Throughput and LatencyCompletion rank by too.
		if req.Policy == route.Throughput {
			req.Policy = route.Latency
		}
		req.LatencyMetric = route.LatencyTTFT
	}
	scorer := req.Scorer
	if scorer == nil && noPolicy {
		scorer = p.opts.Scorer
	}
	switch {
	case scorer != nil:
		return scorer, "custom"
	case req.Policy == route.Latency && req.LatencyMetric == route.LatencyCompletion:
		return nil, "latency(completion)"
	}
	return nil, req.Policy.String()
}

// collect appends the deployments idxs of model s.models[mi] that the
// request's revision, Only, Ignore and Regions pins and PriceCap keep (and,
// for wildcard deployments, whose Models list admits the model).
func (p *Picker) collect(s *scratch, req *route.Request, idxs []int32, mi int) {
	rev := s.models[mi].rev
	capped := req.PriceCap != (measure.Price{})
	wild := len(idxs) > 0 && p.meta[idxs[0]].wild // idxs is p.wild
	if rev == "" && len(req.Only) == 0 && len(req.Ignore) == 0 && len(req.Regions) == 0 && !capped && !wild {
		// No pins: keep every unversioned deployment (read from meta, so
		// that this loop touches no Deployment).
		items := slices.Grow(s.items, len(idxs))
		for _, idx := range idxs {
			if !p.meta[idx].revised {
				n := len(items)
				items = items[:n+1]
				items[n] = item{idx: idx, model: int32(mi)} // in place: append would copy a zeroed item
			}
		}
		s.items = items
		return
	}
	for _, idx := range idxs {
		d := &p.ds[idx]
		if d.Revision != rev ||
			(len(req.Only) > 0 && !slices.Contains(req.Only, d.Provider)) || slices.Contains(req.Ignore, d.Provider) ||
			(len(req.Regions) > 0 && !slices.Contains(req.Regions, d.Region)) ||
			(capped && rk.OverCap(&d.Price, &req.PriceCap)) ||
			(wild && !rk.Admits(d, s.models[mi].name)) {
			continue
		}
		s.items = append(s.items, item{idx: idx, model: int32(mi)})
	}
}

// share applies the Options convention for a share: 0 means def, a negative
// value turns the feature off (0), and NaN or a value above 1 is an error
// naming the field.
func share(field string, v, def float64) (float64, error) {
	switch {
	case math.IsNaN(v) || v > 1:
		return 0, fmt.Errorf("route: Options.%s: %v is not in [0,1]", field, v)
	case v == 0:
		return def, nil
	case v < 0:
		return 0, nil
	}
	return v, nil
}
