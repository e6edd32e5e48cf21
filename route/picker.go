package route

import (
	crand "crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tpsroute/tpsroute/measure"
)

// Source gives the current statistics of a deployment. *measure.Registry
// satisfies it. ok is false when the key has no statistics at all.
// Implementations must be safe for concurrent use and must not block: Pick
// calls Estimate once per candidate deployment.
type Source interface {
	Estimate(k measure.Key) (measure.Estimate, bool)
}

// HandleSource is a Source that also hands out stable per-key handles, so
// that Pick reads a configured deployment's Estimate through an atomic
// pointer instead of hashing its key on every call. *measure.Registry
// implements it. The Picker asks for a deployment's handle the first time it
// needs it, and again whenever the handle is no longer Live (the key was
// pruned) or Handle returned nil (the key has no statistics yet); wildcard
// deployments, whose key depends on the request, always use Estimate.
// Implementations must be safe for concurrent use and must not block.
type HandleSource interface {
	Source
	// Handle returns a handle on k's Estimate, or nil when k has no
	// statistics (Estimate would report the zero Estimate and false).
	Handle(k measure.Key) measure.EstimateHandle
}

// ErrNoDeployment means no configured deployment can serve the request: the
// model, a pinned provider, region or revision is unknown, the pins leave
// nothing, or a strict SLO drops everything. The error Pick returns wraps it
// with a message that lists what exists; test with errors.Is.
var ErrNoDeployment = errors.New("route: no deployment")

// Off turns off the Options share or count it is assigned to (Exploration,
// Band, ColdProbes, ColdShare), whose zero value means the default: any
// negative value does, and Off names it. A config file spells it "off".
const Off = -1

// Defaults for the zero fields of Options.
const (
	// DefaultExploration is the share of picks that explore: 5%.
	DefaultExploration = 0.05
	// DefaultBand is the relative score distance of near-equal candidates: 5%.
	DefaultBand = 0.05
	// DefaultColdProbes is the number of cold probes per deployment per
	// ColdProbeInterval: measure.DefaultMinSamples, so that a cold deployment
	// can collect the samples that make its Estimate OK (and it comparable
	// with warm ones) within one interval, when traffic allows: at the
	// default ColdShare that takes 33 picks per interval (3.3/s) for one cold
	// deployment.
	DefaultColdProbes = measure.DefaultMinSamples
	// DefaultColdShare is the share of a ColdProbeInterval's picks that may
	// be cold probes beyond each deployment's first: 25%. Higher lets a cold
	// deployment catch up sooner at low traffic but sends more calls to
	// unmeasured deployments; at 25% the warm ones keep about three calls in
	// four once every cold deployment had its first probe of the interval.
	DefaultColdShare = 0.25
	// DefaultColdProbeInterval is the window cold probes are counted over.
	DefaultColdProbeInterval = 10 * time.Second
	// DefaultHalfOpenProbeInterval is the least time between two picks that
	// put the same half-open deployment first: 1 s.
	DefaultHalfOpenProbeInterval = time.Second
	// DefaultAffinityTTL is how long a cache key stays with its deployment:
	// about as long as providers keep a prompt prefix cached.
	DefaultAffinityTTL = 5 * time.Minute
	// DefaultAffinityEntries is the number of cache keys remembered.
	DefaultAffinityEntries = 10000
)

// Options configures a Picker. A zero Options consists entirely of default
// values: every deployment healthy, Throughput, LatencyTTFT, TTFT read at
// P95 and TPS at P50, no SLO, 5% exploration, a 5% band, up to 10 cold
// probes per deployment per 10 s within a 25% share of the picks (but at
// least one per deployment), a half-open probe per deployment at most every 1 s,
// and a 5-minute cache affinity over at most 10,000 keys.
type Options struct {
	// Policy is the default ordering; zero means Throughput.
	Policy Policy
	// LatencyMetric is what Latency minimises by default; zero means LatencyTTFT.
	LatencyMetric LatencyMetric
	// Scorer, when not nil, replaces Policy as the default ordering.
	Scorer Scorer
	// TTFTPercentile is the TTFT percentile blended with the EWMA; zero means P95.
	TTFTPercentile Percentile
	// TPSPercentile is the TPS percentile blended with the EWMA; zero means P50.
	TPSPercentile Percentile
	// SLO applies to every request; a Request's SLO fields override it.
	SLO SLO
	// Exploration is the share of picks, in [0,1], that put a random healthy,
	// compliant deployment other than the best first, to keep estimates fresh.
	// Zero means DefaultExploration (5%); Off (any negative value) disables
	// exploration.
	Exploration float64
	// Band is the relative score distance, in [0,1], within which candidates
	// count as near-equal; the first place is then drawn among them, weighted by
	// Deployment.Weight, so callers do not herd onto one deployment.
	// Zero means DefaultBand (5%); Off (any negative value) always takes the
	// best.
	Band float64
	// ColdProbes is at most how many picks per ColdProbeInterval put one cold
	// deployment (one whose Estimate is not OK) first, per configured
	// deployment, within ColdShare. Zero means DefaultColdProbes (10, the
	// samples measure needs by default); Off (any negative value) disables
	// cold probes (cold deployments then only go behind warm ones).
	ColdProbes int
	// ColdProbeInterval is the window ColdProbes and ColdShare count over;
	// zero means DefaultColdProbeInterval (10 s).
	ColdProbeInterval time.Duration
	// ColdShare caps, in [0,1], the share of the picks in a ColdProbeInterval
	// (all picks of the Picker, whatever the model) that are cold probes, so
	// that probing follows the traffic: a deployment's first probe of an
	// interval is always given, so a cold deployment gets its first sample
	// quickly at any traffic, and counts; a further probe is given only while
	// the interval's probes other than its first are fewer than ColdShare
	// times its picks, this one included. Over an interval of K picks with D
	// cold deployments there are thus at most ceil(ColdShare*K)+D probes.
	// The cap protects measured traffic, so it applies to picks that a warm
	// deployment leads: when every leading candidate is cold, a probe takes
	// no call from a measured one, and only ColdProbes limits it (it is not
	// counted in the share).
	// Zero means DefaultColdShare (25%); Off (any negative value) removes the
	// share cap (ColdProbes alone limits probes).
	ColdShare float64
	// HalfOpenProbeInterval is the least time between two picks that put the
	// same half-open deployment (Status.Breaker == BreakerHalfOpen) first, as
	// a probe: a half-open breaker lets a probe through and closes again only
	// when it succeeds, yet ranks behind every closed deployment, so without
	// probes it would never get the call it needs. A deployment is probed
	// whatever its score (the breaker decides), but only when a healthy,
	// compliant deployment of the same model leads, it complies with the SLO
	// itself, the request has no cache-affinity hit and allows fallbacks
	// (a probe that fails, or that the breaker turns away because another
	// probe is in flight, fails over to the next deployment). Zero means
	// DefaultHalfOpenProbeInterval (1 s); a negative value disables these
	// probes (half-open deployments then only go behind closed ones).
	HalfOpenProbeInterval time.Duration
	// AffinityTTL is how long a cache key stays with the deployment that served
	// it; zero means DefaultAffinityTTL, a negative value disables affinity.
	AffinityTTL time.Duration
	// AffinityEntries caps the cache keys remembered; the oldest go first.
	// Zero means DefaultAffinityEntries.
	AffinityEntries int
	// Seed seeds the picks' random draws, so tests are deterministic; zero
	// means a random seed.
	Seed uint64
}

// Stats counts what a Picker did since it was made. It is a snapshot value,
// safe for concurrent reads. It marshals to JSON with snake_case names.
type Stats struct {
	Picks          uint64 `json:"picks"`            // Pick calls that returned a Plan
	NoDeployment   uint64 `json:"no_deployment"`    // Pick calls that returned ErrNoDeployment
	AffinityHits   uint64 `json:"affinity_hits"`    // picks that put the cache key's deployment first
	AffinityMisses uint64 `json:"affinity_misses"`  // picks with a CacheKey and no live entry
	AffinityBroken uint64 `json:"affinity_broken"`  // picks whose cache key's deployment was unhealthy, off-SLO, expired or not eligible
	ColdProbes     uint64 `json:"cold_probes"`      // picks that put a cold deployment first
	Explorations   uint64 `json:"explorations"`     // picks that put a random deployment first by the exploration share
	BandPicks      uint64 `json:"band_picks"`       // picks whose first place was drawn among near-equal candidates and was not the top score
	HalfOpenProbes uint64 `json:"half_open_probes"` // picks that put a half-open deployment first (Options.HalfOpenProbeInterval)
}

// Picker orders deployments for each call. It is safe for concurrent use;
// Pick never blocks and reads the Source and Health once per candidate.
type Picker struct {
	ds       []Deployment
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
	opts     Options
	seed     uint64
	coldMax  int64
	coldWin  int64
	cold     []coldState
	share    float64                    // Options.ColdShare; 0 means no share cap
	shareWin atomic.Pointer[shareState] // the current share window; nil none yet
	halfWin  int64                      // Options.HalfOpenProbeInterval in ns; 0 disables
	half     []atomic.Int64             // per deployment: unix ns of its last half-open probe; 0 none
	aff      *affinity
	counter  atomic.Uint64
	scratch  sync.Pool
	counters [9]atomic.Uint64
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
}

// hbox holds a resolved measure.EstimateHandle behind an atomic pointer.
type hbox struct{ h measure.EstimateHandle }

type coldState struct {
	window atomic.Int64 // start of the current window, unix nanoseconds
	n      atomic.Int64 // probes given in the current window
}

// shareState counts the cold probes of one ColdShare window. A new window
// is a new shareState swapped in, so a probe counted late by a concurrent
// pick lands in the window it was checked against.
type shareState struct {
	start  int64  // unix nanoseconds
	picks0 uint64 // counters[cPicks] at start
	probes atomic.Int64
}

// NewPicker returns a Picker over ds, reading statistics from src (nil means
// none: every deployment stays cold) and breaker and limiter state from
// health (nil means every deployment is healthy). ds is copied. It returns a
// *DeploymentError (matching ErrInvalidDeployment) naming the first invalid
// field, or a duplicate Key, and an error for out-of-range Options.
func NewPicker(ds []Deployment, src Source, health Health, opts Options) (*Picker, error) {
	if len(ds) == 0 {
		return nil, fmt.Errorf("%w: no deployments", ErrInvalidDeployment)
	}
	if len(ds) > math.MaxInt32 {
		return nil, fmt.Errorf("%w: too many deployments", ErrInvalidDeployment)
	}
	if err := opts.resolve(); err != nil {
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
			de := err.(*DeploymentError)
			de.Index = i
			return nil, de
		}
		k := d.Key()
		if j, dup := seen[k]; dup {
			return nil, &DeploymentError{Index: i, Key: k.String(), Field: "Key",
				Reason: fmt.Sprintf("duplicate of deployment %d (same Provider, Region, Model and Revision)", j)}
		}
		seen[k] = i
		if d.IsWildcard() {
			k.Model = Wildcard // replaced by the requested model per pick
		}
		p.keys[i] = k
		p.meta[i] = meta{wild: d.IsWildcard(), weight: weight(d.Weight), priceIn: d.Price.Input, priceOut: d.Price.Output}
		if d.IsWildcard() {
			p.wild = append(p.wild, int32(i))
		} else {
			p.byModel[d.Model] = append(p.byModel[d.Model], int32(i))
		}
		p.provs[d.Provider] = struct{}{}
		p.regions[d.Region] = struct{}{}
	}
	if opts.AffinityTTL > 0 {
		p.aff = newAffinity(opts.AffinityTTL, opts.AffinityEntries)
	}
	p.scratch.New = func() any { return new(scratch) }
	return p, nil
}

func (o *Options) resolve() error {
	var err error
	if o.Policy > Cost {
		return fmt.Errorf("route: Options.Policy: unknown policy %d", o.Policy)
	}
	if o.Policy == 0 {
		o.Policy = Throughput
	}
	if o.LatencyMetric == 0 {
		o.LatencyMetric = LatencyTTFT
	}
	if o.TTFTPercentile == 0 {
		o.TTFTPercentile = P95
	}
	if o.TPSPercentile == 0 {
		o.TPSPercentile = P50
	}
	if o.Exploration, err = share("Exploration", o.Exploration, DefaultExploration); err != nil {
		return err
	}
	if o.Band, err = share("Band", o.Band, DefaultBand); err != nil {
		return err
	}
	if o.ColdProbes == 0 {
		o.ColdProbes = DefaultColdProbes
	} else if o.ColdProbes < 0 {
		o.ColdProbes = 0
	}
	if o.ColdShare, err = share("ColdShare", o.ColdShare, DefaultColdShare); err != nil {
		return err
	}
	if o.ColdProbeInterval <= 0 {
		o.ColdProbeInterval = DefaultColdProbeInterval
	}
	if o.HalfOpenProbeInterval == 0 {
		o.HalfOpenProbeInterval = DefaultHalfOpenProbeInterval
	} else if o.HalfOpenProbeInterval < 0 {
		o.HalfOpenProbeInterval = 0
	}
	if o.AffinityTTL == 0 {
		o.AffinityTTL = DefaultAffinityTTL
	}
	if o.AffinityEntries <= 0 {
		o.AffinityEntries = DefaultAffinityEntries
	}
	return nil
}

// Deployments returns a copy of the configured deployments, in the order given.
func (p *Picker) Deployments() []Deployment { return slices.Clone(p.ds) }

// Stats returns the Picker's counters.
func (p *Picker) Stats() Stats {
	c := &p.counters
	return Stats{
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
func (p *Picker) Pick(r Request) (Plan, error) { return p.PickAt(r, time.Now()) }

// item is the per-candidate working state of one pick. It holds no
// pointers, so the pooled scratch costs the garbage collector nothing.
type item struct {
	sort   uint64 // model<<48 | health<<40 | violating<<32 | provider order<<8 | cold
	score  float64
	tie    float64
	cost   float64
	exp    Expected
	idx    int32 // into p.ds
	model  int32 // into scratch.models
	health uint8
	busy   uint8 // why healthBusy: busyCooling, busyHeadroom or busyLimited
	excl   uint8 // exclNone, exclStrict or exclOpen
	viol   Violation
	cold   bool
}

const (
	exclNone uint8 = iota
	exclStrict
	exclOpen
)

const (
	busyCooling uint8 = iota
	busyHeadroom
	busyLimited
)

const (
	healthOK uint8 = iota
	healthHalfOpen
	healthBusy
	healthOpen
)

type model struct {
	name, rev, keyModel string
	idxs                []int32 // p.byModel[name], looked up once
}

// rank is an item's sort key, kept apart from the item so the sort moves
// small values and compares without indirection.
type rank struct {
	tier  uint64 // item.sort
	score float64
	tie   float64
	idx   int32 // into p.ds: the final tie-break
	item  int32 // into scratch.items
}

type scratch struct {
	req    Request
	items  []item
	ranks  []rank
	order  []int32
	models []model
	nWild  int  // candidates from wildcard deployments
	costly bool // the built-in Cost policy orders: a cold score is known
}

// PickAt orders the deployments that can serve r as seen at now. It reads
// each candidate's statistics and health once and never blocks. It returns an
// error wrapping ErrNoDeployment when nothing can serve r; the Plan then still
// lists in Excluded what a strict SLO or open breakers left out.
func (p *Picker) PickAt(r Request, now time.Time) (Plan, error) {
	s := p.scratch.Get().(*scratch)
	defer p.scratch.Put(s)
	plan, err := p.pick(s, &r, now)
	s.req = Request{} // drop references to the caller's slices and Scorer
	if err != nil {
		p.counters[cNoDeployment].Add(1)
		return plan, err
	}
	p.counters[cPicks].Add(1)
	return plan, nil
}

func (p *Picker) pick(s *scratch, r *Request, now time.Time) (Plan, error) {
	s.req = *r
	req := &s.req
	s.items, s.ranks, s.order, s.models = s.items[:0], s.ranks[:0], s.order[:0], s.models[:0]
	s.nWild = 0
	if req.Policy > Cost || req.LatencyMetric > LatencyCompletion {
		return Plan{}, fmt.Errorf("route: Request: unknown Policy %d or LatencyMetric %d", req.Policy, req.LatencyMetric)
	}
	if req.Policy == 0 {
		req.Policy = p.opts.Policy
	}
	if req.LatencyMetric == 0 {
		req.LatencyMetric = p.opts.LatencyMetric
	}
	if req.ExpectedInputTokens <= 0 {
		req.ExpectedInputTokens = DefaultExpectedInputTokens
	}
	if req.ExpectedOutputTokens <= 0 {
		req.ExpectedOutputTokens = DefaultExpectedOutputTokens
	}
	scorer := req.Scorer
	if scorer == nil && r.Policy == 0 {
		scorer = p.opts.Scorer
	}
	policyName := "custom"
	if scorer == nil {
		policyName = req.Policy.String()
		if req.Policy == Latency && req.LatencyMetric == LatencyCompletion {
			policyName = "latency(completion)"
		}
	}
	slo := req.SLO.merge(p.opts.SLO)
	// Cost needs no samples: prices are known up front, so cold deployments
	// are ordered by expected cost too (see chooseFirst).
	s.costly = scorer == nil && req.Policy == Cost
	checkSLO := slo.MaxTTFT > 0 || slo.MinTPS > 0 || slo.MaxPrice > 0 || slo.MaxErrorRate > 0
	in, out := float64(req.ExpectedInputTokens), float64(req.ExpectedOutputTokens)

	if err := p.checkPins(req); err != nil {
		return Plan{Policy: policyName}, err
	}
	if err := p.resolveModels(s); err != nil {
		return Plan{Policy: policyName}, err
	}

	// Candidates, in model order.
	for mi := range s.models {
		p.collect(s, req, s.models[mi].idxs, mi)
		p.collect(s, req, p.wild, mi)
	}
	if len(s.items) == 0 {
		return Plan{Policy: policyName}, p.noDeployment(req, s.models)
	}

	// Statistics, then score and classify.
	if p.src != nil {
		p.readEstimates(s)
	}
	open, usable := 0, 0
	health := p.health
	var wd Deployment
	for i := range s.items {
		it := &s.items[i]
		m := &p.meta[it.idx]
		d := &p.ds[it.idx]
		kp := &p.keys[it.idx]
		var wk measure.Key
		if m.wild {
			wd = *d
			wd.Model = s.models[it.model].name
			d = &wd
			wk = p.keyOf(s, it)
			kp = &wk
			s.nWild++
		}
		it.cold = !it.exp.OK
		if health != nil {
			st := health.Status(*kp, now)
			switch {
			case st.Breaker == BreakerOpen:
				it.health = healthOpen
				open++
			case st.CoolingUntil.After(now):
				it.health, it.busy = healthBusy, busyCooling
			case st.NoHeadroom:
				it.health, it.busy = healthBusy, busyHeadroom
			case st.RateLimited:
				it.health, it.busy = healthBusy, busyLimited
			case st.Breaker == BreakerHalfOpen:
				it.health = healthHalfOpen
			}
		}
		if checkSLO {
			it.viol = slo.check(m.priceOut, &it.exp)
			if it.viol != 0 && slo.Strict {
				it.excl = exclStrict
			}
		}
		if it.excl == exclNone && it.health != healthOpen {
			usable++
		}
		var v, c, prov uint64
		if it.viol != 0 {
			v = 1
		}
		if it.cold {
			c = 1
		}
		if len(req.Providers) > 0 {
			prov = uint64(min(indexOf(req.Providers, d.Provider), 1<<20))
		}
		it.sort = uint64(it.model)<<48 | uint64(it.health)<<40 | v<<32 | prov<<8 | c
		it.cost = (in*m.priceIn + out*m.priceOut) / 1e6
		switch {
		case scorer != nil:
			it.score = clamp(scorer.Score(*d, it.exp, req))
		case req.Policy == Cost:
			it.score = clamp(-it.cost)
			if it.exp.TPSOK {
				it.tie = clamp(it.exp.TPS)
			}
		default:
			it.score = req.Policy.score(d, &it.exp, req)
		}
	}
	// Open breakers are excluded, unless every remaining candidate is open:
	// then all of them are tried, last resort first by score (fail-open).
	excludeOpen := open > 0 && usable > 0
	for i := range s.items {
		it := &s.items[i]
		if excludeOpen && it.health == healthOpen && it.excl == exclNone {
			it.excl = exclOpen
		}
		if it.excl == exclNone {
			s.ranks = append(s.ranks, rank{tier: it.sort, score: it.score, tie: it.tie, idx: it.idx, item: int32(i)})
		}
	}
	if len(s.ranks) == 0 {
		plan := p.materialize(s, policyName)
		return plan, fmt.Errorf("%w: all %d deployments of %s are excluded (%s)",
			ErrNoDeployment, len(s.items), modelList(s.models), plan.Excluded[0].Reason)
	}
	// Scores and ties are never NaN (clamped), so plain comparisons order
	// them totally.
	sortRanks(s.ranks)
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

// collect appends the deployments idxs of model s.models[mi] that the
// request's revision and Only, Ignore and Regions pins keep.
func (p *Picker) collect(s *scratch, req *Request, idxs []int32, mi int) {
	rev := s.models[mi].rev
	if rev == "" && len(req.Only) == 0 && len(req.Ignore) == 0 && len(req.Regions) == 0 {
		// No pins: keep every unversioned deployment.
		for _, idx := range idxs {
			if p.ds[idx].Revision == "" {
				s.items = append(s.items, item{idx: idx, model: int32(mi)})
			}
		}
		return
	}
	for _, idx := range idxs {
		d := &p.ds[idx]
		if d.Revision != rev ||
			(len(req.Only) > 0 && !contains(req.Only, d.Provider)) || contains(req.Ignore, d.Provider) ||
			(len(req.Regions) > 0 && !contains(req.Regions, d.Region)) {
			continue
		}
		s.items = append(s.items, item{idx: idx, model: int32(mi)})
	}
}

// sortRanks sorts r by compareRanks: by insertion for the usual handful of
// candidates (often already nearly in order), by pdqsort beyond.
func sortRanks(r []rank) {
	if len(r) > 24 {
		slices.SortFunc(r, compareRanks)
		return
	}
	for i := 1; i < len(r); i++ {
		for j := i; j > 0 && compareRanks(r[j], r[j-1]) < 0; j-- {
			r[j], r[j-1] = r[j-1], r[j]
		}
	}
}

// compareRanks orders by tier, then higher score, then higher tie-break,
// then configuration order.
func compareRanks(x, y rank) int {
	switch {
	case x.tier != y.tier:
		if x.tier < y.tier {
			return -1
		}
		return 1
	case x.score != y.score:
		if x.score > y.score {
			return -1
		}
		return 1
	case x.tie != y.tie:
		if x.tie > y.tie {
			return -1
		}
		return 1
	}
	return int(x.idx - y.idx)
}

// chooseFirst moves one candidate to the front by cache affinity, half-open
// probe, cold probe, exploration or a weighted draw within the band, and
// returns the reason for the first place. All but the half-open probe choose
// within the leading tier.
func (p *Picker) chooseFirst(s *scratch, req *Request, now time.Time) string {
	items, order := s.items, s.order
	// The head: the leading run of candidates in the same model, health,
	// SLO and provider-order tier as the first, warm or cold.
	head := 1
	tier := items[order[0]].sort &^ 1
	for head < len(order) && items[order[head]].sort&^1 == tier {
		head++
	}
	healthy := items[order[0]].health == healthOK && items[order[0]].viol == 0

	var rng rand.PCG
	rng.Seed(p.seed, splitmix(p.counter.Add(1)))
	u := float64(rng.Uint64()>>11) * 0x1p-53

	if req.CacheKey != "" && p.aff != nil {
		k, live, found := p.aff.get(req.CacheKey, now)
		switch {
		case !found:
			p.counters[cAffinityMisses].Add(1)
		case !live:
			p.counters[cAffinityBroken].Add(1)
		default:
			at := -1
			for i, o := range order[:head] {
				if p.keyOf(s, &items[o]) == k {
					at = i
					break
				}
			}
			if at >= 0 && healthy {
				moveFront(order, at)
				p.counters[cAffinityHits].Add(1)
				return ReasonAffinity
			}
			p.counters[cAffinityBroken].Add(1)
		}
	}
	if !healthy {
		return "" // keep the demotion reason
	}
	if p.halfWin > 0 && !req.NoFallbacks {
		if i := p.halfOpenProbe(s, head, now); i >= 0 {
			moveFront(order, i)
			p.counters[cHalfOpenProbes].Add(1)
			return ReasonHalfOpenProbe
		}
	}
	if head == 1 && !items[order[0]].cold {
		return ReasonBest
	}
	// Cold probe: the first cold candidate of the head with budget left.
	// The share cap applies when a warm candidate leads (warm sort before
	// cold within the head): only then does a probe take a measured call.
	if p.coldMax > 0 {
		shared := p.share > 0 && !items[order[0]].cold
		for i := range head {
			it := &items[order[i]]
			if it.cold && p.takeCold(it.idx, now, shared) {
				moveFront(order, i)
				p.counters[cColdProbes].Add(1)
				return ReasonColdProbe
			}
		}
	}
	if items[order[0]].cold && !s.costly {
		// Only cold candidates (probe budgets spent) and nothing known to
		// rank them by: spread the first place over all of them by weight,
		// rather than herd onto one. Under Cost the expected cost is known
		// without samples, so they go on to the cheapest (exploration and the
		// band still apply), not to a blind draw.
		p.draw(s, head, u, drawFilter{all: true})
		return ReasonColdProbe
	}
	if u < p.opts.Exploration && head > 1 {
		i := 1 + int(rng.Uint64()%uint64(head-1))
		moveFront(order, i)
		p.counters[cExplorations].Add(1)
		return ReasonExplore
	}
	if p.opts.Band > 0 {
		best := &items[order[0]]
		lo := best.score - p.opts.Band*math.Abs(best.score)
		tlo := best.tie - p.opts.Band*math.Abs(best.tie)
		v := float64(rng.Uint64()>>11) * 0x1p-53
		if i := p.draw(s, head, v, drawFilter{lo: lo, tlo: tlo, cold: s.costly}); i >= 0 {
			if i > 0 {
				p.counters[cBandPicks].Add(1)
			}
			return ReasonBand
		}
	}
	return ReasonBest
}

// drawFilter says which candidates a draw is among: all of them, or those
// scoring at least lo with a tie-break at least tlo, cold ones only if cold.
type drawFilter struct {
	all     bool
	cold    bool
	lo, tlo float64
}

func (f drawFilter) in(it *item) bool {
	return f.all || ((!it.cold || f.cold) && it.score >= f.lo && it.tie >= f.tlo)
}

// draw moves to the front a candidate drawn by Deployment.Weight from the
// leading run of order[:head] that f admits, using v in [0,1). It returns
// the drawn position, or -1 when fewer than two candidates qualify.
func (p *Picker) draw(s *scratch, head int, v float64, f drawFilter) int {
	items, order := s.items, s.order
	n, total := 0, 0.0
	for _, o := range order[:head] {
		if !f.in(&items[o]) {
			break
		}
		n++
		total += p.meta[items[o].idx].weight
	}
	if n < 2 {
		return -1
	}
	x := v * total
	for i, o := range order[:n] {
		x -= p.meta[items[o].idx].weight
		if x < 0 || i == n-1 {
			moveFront(order, i)
			return i
		}
	}
	return -1
}

func weight(w float64) float64 {
	if w <= 0 {
		return 1
	}
	return w
}

// halfOpenProbe returns the position in s.order of the first half-open,
// SLO-compliant candidate of the leading model whose probe budget it takes,
// or -1. Candidates are sorted by model, then health, so the half-open ones
// of the leading model follow the head.
func (p *Picker) halfOpenProbe(s *scratch, head int, now time.Time) int {
	items, order := s.items, s.order
	m := items[order[0]].model
	for i := head; i < len(order); i++ {
		it := &items[order[i]]
		if it.model != m || it.health > healthHalfOpen {
			break
		}
		if it.health == healthHalfOpen && it.viol == 0 && p.takeHalfOpen(it.idx, now) {
			return i
		}
	}
	return -1
}

// takeHalfOpen spends the half-open probe of deployment idx if none was
// given within the last Options.HalfOpenProbeInterval before now. A clock
// that went back by more than the interval starts afresh; smaller steps back
// (concurrent picks that read the clock out of order) do not give a second
// probe.
func (p *Picker) takeHalfOpen(idx int32, now time.Time) bool {
	h := &p.half[idx]
	t := now.UnixNano()
	last := h.Load()
	if last != 0 && t-last < p.halfWin && last-t <= p.halfWin {
		return false
	}
	return h.CompareAndSwap(last, t)
}

// takeCold spends one cold probe of deployment idx, if its window has
// budget and, when shared and beyond its first probe of the window, the
// Picker's ColdShare window has room. A new window starts once the interval has passed, or
// when the clock went back by more than the interval; smaller steps back
// (concurrent picks that read the clock out of order) stay in the current
// window, as in takeHalfOpen. It takes no lock: the share is reserved first
// (compare-and-swap), then the deployment's count, and the share is given
// back if the count was taken meanwhile.
func (p *Picker) takeCold(idx int32, now time.Time, shared bool) bool {
	c := &p.cold[idx]
	t := now.UnixNano()
	if w := c.window.Load(); t-w >= p.coldWin || w-t > p.coldWin {
		if c.window.CompareAndSwap(w, t) {
			c.n.Store(0)
		}
	}
	var sw *shareState
	if shared {
		sw = p.shareWindow(t)
	}
	n := c.n.Load()
	if n == 0 {
		// The first probe of the window is always given.
		if c.n.CompareAndSwap(0, 1) {
			if sw != nil {
				sw.probes.Add(1)
			}
			return true
		}
		n = c.n.Load()
	}
	if n >= p.coldMax {
		return false
	}
	if sw != nil && !p.reserveShare(sw) {
		return false
	}
	for ; n < p.coldMax; n = c.n.Load() {
		if c.n.CompareAndSwap(n, n+1) {
			return true
		}
	}
	if sw != nil {
		sw.probes.Add(-1)
	}
	return false
}

// shareWindow returns the ColdShare window that t falls in, starting a new
// one when the interval has passed or the clock went back by more than it.
func (p *Picker) shareWindow(t int64) *shareState {
	for {
		sw := p.shareWin.Load()
		if sw != nil && t-sw.start < p.coldWin && sw.start-t <= p.coldWin {
			return sw
		}
		next := &shareState{start: t, picks0: p.counters[cPicks].Load()}
		if p.shareWin.CompareAndSwap(sw, next) {
			return next
		}
	}
}

// reserveShare counts one more probe in sw if the probes other than the
// window's first stay fewer than ColdShare times the window's picks, this
// one included.
func (p *Picker) reserveShare(sw *shareState) bool {
	limit := p.share*float64(p.counters[cPicks].Load()-sw.picks0+1) + 1
	for {
		n := sw.probes.Load()
		if float64(n) >= limit {
			return false
		}
		if sw.probes.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

func moveFront(order []int32, i int) {
	if i == 0 {
		return
	}
	v := order[i]
	copy(order[1:i+1], order[:i])
	order[0] = v
}

func splitmix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// materialize builds the Plan from s.order (included, in order) and the
// excluded items, in one allocation; a second one holds the concrete copies
// of wildcard deployments, and their keys, if any.
func (p *Picker) materialize(s *scratch, policyName string) Plan {
	nExcl := 0
	for i := range s.items {
		if s.items[i].excl != exclNone {
			nExcl++
		}
	}
	out := make([]Candidate, len(s.order)+nExcl)
	var wild []concrete
	if s.nWild > 0 {
		wild = make([]concrete, 0, s.nWild)
	}
	for i, o := range s.order {
		p.candidate(&out[i], s, &s.items[o], &wild)
	}
	j := len(s.order)
	for i := range s.items {
		if it := &s.items[i]; it.excl != exclNone {
			p.candidate(&out[j], s, it, &wild)
			out[j].Reason = ReasonStrictSLO
			if it.excl == exclOpen {
				out[j].Reason = ReasonOpen
			}
			j++
		}
	}
	plan := Plan{Deployments: out[:len(s.order):len(s.order)], Policy: policyName}
	if nExcl > 0 {
		plan.Excluded = out[len(s.order):]
	}
	return plan
}

// concrete is a wildcard deployment made concrete for one Plan, with its key.
type concrete struct {
	d Deployment
	k measure.Key
}

// candidate fills c from it. c.Deployment and c.key point into p.ds and
// p.keys, or for a wildcard deployment into a concrete copy appended to
// *wild (whose capacity covers every wildcard candidate, so earlier pointers
// stay valid).
func (p *Picker) candidate(c *Candidate, s *scratch, it *item, wild *[]concrete) {
	if p.meta[it.idx].wild {
		*wild = append(*wild, concrete{d: p.ds[it.idx], k: p.keys[it.idx]})
		w := &(*wild)[len(*wild)-1]
		w.d.Model = s.models[it.model].name
		w.d.Capabilities = w.d.capabilitiesFor(w.d.Model)
		w.k.Model = s.models[it.model].keyModel
		c.Deployment, c.key = &w.d, &w.k
	} else {
		c.Deployment, c.key = &p.ds[it.idx], &p.keys[it.idx]
	}
	c.Score = it.score
	c.Violations = it.viol
	c.Expected = it.exp
	c.Cost = it.cost
	c.Demoted = it.health != healthOK || it.viol != 0
	switch {
	case it.health == healthOpen:
		c.Reason = ReasonFailOpen
	case it.health == healthBusy && it.busy == busyHeadroom:
		c.Reason = ReasonNoHeadroom
	case it.health == healthBusy && it.busy == busyLimited:
		c.Reason = ReasonLimited
	case it.health == healthBusy:
		c.Reason = ReasonCooling
	case it.health == healthHalfOpen:
		c.Reason = ReasonHalfOpen
	case it.viol != 0:
		c.Reason = ReasonSLO
	case it.cold:
		c.Reason = ReasonCold
	default:
		c.Reason = ReasonRanked
	}
}

// readEstimates sets every item's Expected from the Source: through the
// deployment's handle when the Source hands them out (decided once, in
// NewPicker), else through Source.Estimate. The two loops are kept apart so
// that a plain Source pays nothing for the handle machinery.
func (p *Picker) readEstimates(s *scratch) {
	tAt, pAt := p.opts.TTFTPercentile, p.opts.TPSPercentile
	items := s.items
	if p.hsrc == nil {
		for i := range items {
			it := &items[i]
			var est measure.Estimate
			var ok bool
			if p.meta[it.idx].wild {
				est, ok = p.src.Estimate(p.keyOf(s, it))
			} else {
				est, ok = p.src.Estimate(p.keys[it.idx])
			}
			blend(&it.exp, &est, ok, tAt, pAt)
		}
		return
	}
	for i := range items {
		it := &items[i]
		var est measure.Estimate
		var ok bool
		if b := p.handles[it.idx].Load(); b != nil && b.h.Live() {
			est, ok = b.h.Estimate()
		} else {
			est, ok = p.resolveEstimate(s, it)
		}
		blend(&it.exp, &est, ok, tAt, pAt)
	}
}

// resolveEstimate reads it's statistics when its deployment has no live
// handle: a wildcard deployment (whose key depends on the request) always
// reads Source.Estimate; any other asks the HandleSource for a handle and
// keeps it for the next picks.
func (p *Picker) resolveEstimate(s *scratch, it *item) (measure.Estimate, bool) {
	if p.meta[it.idx].wild {
		return p.src.Estimate(p.keyOf(s, it))
	}
	// Concurrent picks may resolve at once and store in any order; a stale
	// handle stored last is not Live and is resolved again next time.
	h := p.hsrc.Handle(p.keys[it.idx])
	if h == nil {
		return measure.Estimate{}, false
	}
	p.handles[it.idx].Store(&hbox{h: h})
	return h.Estimate()
}

// keyOf returns the measure.Key of it: the precomputed key, or for a wildcard
// deployment the key for the requested model.
func (p *Picker) keyOf(s *scratch, it *item) measure.Key {
	if p.meta[it.idx].wild {
		k := p.keys[it.idx]
		k.Model = s.models[it.model].keyModel
		return k
	}
	return p.keys[it.idx]
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
