package fleet

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tpsroute/tpsroute/fallback"
	"github.com/tpsroute/tpsroute/internal/executor"
	"github.com/tpsroute/tpsroute/measure"
	"github.com/tpsroute/tpsroute/route"
)

// Breaker sharing. A replica whose breaker trips writes
// "<until ms> <interval ms> <replica>" under breaker:<key>; every replica
// reads those records each round and keeps the deployment off until then.
// After until, the deployment is half-open fleet-wide: the replicas race to
// SET probe:<key> NX, and only the winner sends the one probe. A successful
// probe deletes the record; a failed one reopens it for the interval the
// prober's own breaker reports when that breaker set the record's interval
// (see Opened), else for twice the interval, at most maxOpen.
const (
	// maxOpen caps the open interval of a breaker reopened by failed
	// probes.
	maxOpen = 60 * time.Second
	// breakerGrace is how long a half-open record outlives its open
	// interval when no replica probes (no traffic): then it expires and the
	// deployment is closed again.
	breakerGrace = time.Minute
	// probeTTL bounds how long a claimed probe blocks the other replicas
	// when its holder dies before reporting.
	probeTTL = 30 * time.Second
)

// keyState is the fleet's view of one deployment key. Its fields are
// guarded by mu.
type keyState struct {
	key measure.Key
	rk  string // the key as it appears in Redis key names

	mu sync.Mutex
	// The fleet's breaker record, as last read.
	recorded  bool
	openUntil time.Time
	interval  time.Duration
	opener    string
	own       bool // the interval is the one this replica's breaker reported (Opened), not grown here
	probeMine bool // this replica holds the half-open probe
	probeUsed bool // the probe was admitted and has not ended
	// Writes for the next round: an open record (zero: none) or a delete.
	wantOpen  time.Time
	wantIntvl time.Duration
	wantClose bool

	rpm, tpm *bucket // nil when unlimited
}

func newKeyState(k measure.Key, l route.Limits, sync time.Duration) *keyState {
	ks := &keyState{key: k, rk: redisKeyPart(k)}
	if l.RPM > 0 {
		// One second's worth at once: any 60 s window sees at most RPM+1.
		ks.rpm = newBucket(float64(l.RPM)/60, max(1, float64(l.RPM)/60), sync)
	}
	if l.TPM > 0 {
		// Ten seconds' worth at once, so that one large request fits.
		ks.tpm = newBucket(float64(l.TPM)/60, float64(l.TPM)/6, sync)
	}
	return ks
}

// redisKeyPart writes k as provider/region/model with '/' and ':' escaped.
func redisKeyPart(k measure.Key) string {
	esc := strings.NewReplacer("%", "%25", "/", "%2F", ":", "%3A")
	return esc.Replace(k.Provider) + "/" + esc.Replace(k.Region) + "/" + esc.Replace(k.Model)
}

// shared is the executor.Shared a Fleet gives the Client it joins
// (JoinClient): the fleet-wide breakers and limits. Its methods are the
// executor's, on an unexported type, so that they are no part of the
// Fleet's API. It is safe for concurrent use.
type shared struct{ *Fleet }

// state returns the keyState of k, or nil for a key the Client did not
// configure (wildcard deployments): those are not shared.
func (f *Fleet) state(k measure.Key) *keyState {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.keys[k]
}

// Admit implements executor.Shared. While Redis is unreachable it admits
// everything: each replica's own breakers and limiters decide.
func (f shared) Admit(k measure.Key, now time.Time, tokens int64) error {
	ks := f.state(k)
	if ks == nil || !f.connected.Load() {
		return nil
	}
	ks.mu.Lock()
	defer ks.mu.Unlock()
	if ks.recorded {
		switch {
		case now.Before(ks.openUntil):
			if ks.opener != f.opts.Replica {
				return fallback.ErrOpen
			}
		case ks.probeMine && !ks.probeUsed:
			ks.probeUsed = true
		default:
			return fallback.ErrOpen
		}
	}
	if ks.rpm != nil && !ks.rpm.take(now, 1) {
		f.wake()
		return fallback.ErrNoBudget
	}
	if ks.tpm != nil && tokens > 0 && !ks.tpm.take(now, float64(tokens)) {
		if ks.rpm != nil {
			ks.rpm.refund(1)
		}
		f.wake()
		return fallback.ErrNoBudget
	}
	if ks.rpm != nil && ks.rpm.low() || ks.tpm != nil && ks.tpm.low() {
		f.wake()
	}
	return nil
}

// Done implements executor.Shared: the end of the half-open probe closes
// (success) or reopens (failure) the fleet's breaker; an excluded outcome
// (the caller's fault, a cancellation) leaves it half-open with the probe
// still this replica's to send.
func (f shared) Done(k measure.Key, now time.Time, o executor.Outcome) {
	ks := f.state(k)
	if ks == nil {
		return
	}
	ks.mu.Lock()
	if !ks.probeUsed {
		ks.mu.Unlock()
		return
	}
	if o == executor.OutcomeExcluded {
		ks.probeUsed = false // nothing learned: the next call probes again
		ks.mu.Unlock()
		return
	}
	failure := o == executor.OutcomeFailure
	ks.probeUsed, ks.probeMine = false, false
	switch {
	case failure && ks.own && now.Before(ks.openUntil):
		// This replica's breaker reopened it for this probe (Opened
		// comes first): its interval stands.
	case failure:
		iv := min(max(2*ks.interval, time.Second), maxOpen)
		ks.wantOpen, ks.wantIntvl, ks.wantClose = now.Add(iv), iv, false
		ks.openUntil, ks.interval, ks.opener, ks.own = now.Add(iv), iv, f.opts.Replica, false
	default:
		ks.wantOpen, ks.wantClose = time.Time{}, true
		ks.recorded = false
	}
	ks.mu.Unlock()
	f.wake()
}

// Opened implements executor.Shared: a breaker that tripped here is
// published at once (the loop is woken). A trip after the record's open
// interval reopens it for the interval this replica's breaker reports
// (fallback's rule: doubling, at most a quarter of the outage and about 50
// of this replica's calls) when that breaker set the record's interval,
// else for at least twice the record's interval, at most maxOpen: a breaker
// that did not may not know how long the deployment has been down.
func (f shared) Opened(k measure.Key, now, until time.Time) {
	ks := f.state(k)
	if ks == nil {
		return
	}
	ks.mu.Lock()
	iv, grown := until.Sub(now), false
	switch {
	case ks.recorded && now.Before(ks.openUntil):
		// Another trip within the same open period (calls that were in
		// flight): keep the later end, do not grow.
		if !until.After(ks.openUntil) {
			ks.mu.Unlock()
			return
		}
	case ks.recorded && ks.interval > 0 && !ks.own:
		iv = max(iv, min(2*ks.interval, maxOpen)) // tripped again after it: grow
		until, grown = now.Add(iv), true
	}
	ks.wantOpen, ks.wantIntvl, ks.wantClose = until, iv, false
	ks.recorded, ks.openUntil, ks.interval, ks.opener, ks.own = true, until, iv, f.opts.Replica, !grown
	ks.mu.Unlock()
	f.wake()
}

// Breaker implements executor.Shared: open while a record's interval runs,
// half-open after it until a probe ends, closed otherwise or while Redis is
// unreachable.
func (f shared) Breaker(k measure.Key, now time.Time) route.BreakerState {
	ks := f.state(k)
	if ks == nil || !f.connected.Load() {
		return route.BreakerClosed
	}
	ks.mu.Lock()
	defer ks.mu.Unlock()
	switch {
	case !ks.recorded:
		return route.BreakerClosed
	case now.Before(ks.openUntil):
		if ks.opener == f.opts.Replica {
			return route.BreakerClosed // the local breaker speaks for itself
		}
		return route.BreakerOpen
	}
	return route.BreakerHalfOpen
}

var _ executor.Shared = shared{}

// syncBreakers writes this replica's pending breaker changes, reads every
// key's record, and claims the probe of half-open keys.
//
// It is long (about 90 lines, complexity about 28) because the write, the
// read and the probe claim are pipelined Redis round trips over the same
// snapshot of keys and must be applied in that order.
func (f *Fleet) syncBreakers(ctx context.Context, now time.Time) error {
	f.mu.Lock()
	states := make([]*keyState, 0, len(f.keys))
	for _, ks := range f.keys {
		states = append(states, ks)
	}
	f.mu.Unlock()
	if len(states) == 0 {
		return nil
	}
	type write struct {
		ks    *keyState
		until time.Time
		close bool
	}
	var writes []write
	pipe := f.rdb.Pipeline()
	for _, ks := range states {
		ks.mu.Lock()
		switch {
		case ks.wantClose:
			pipe.Del(ctx, f.prefix+"breaker:"+ks.rk, f.prefix+"probe:"+ks.rk)
			writes = append(writes, write{ks: ks, close: true})
		case !ks.wantOpen.IsZero():
			v := fmt.Sprintf("%d %d %s", ks.wantOpen.UnixMilli(), ks.wantIntvl.Milliseconds(), f.opts.Replica)
			pipe.Set(ctx, f.prefix+"breaker:"+ks.rk, v, max(ks.wantOpen.Sub(now), 0)+breakerGrace)
			pipe.Del(ctx, f.prefix+"probe:"+ks.rk)
			writes = append(writes, write{ks: ks, until: ks.wantOpen})
		}
		ks.mu.Unlock()
	}
	gets := make([]*redis.StringCmd, len(states))
	for i, ks := range states {
		gets[i] = pipe.Get(ctx, f.prefix+"breaker:"+ks.rk)
	}
	if _, err := pipe.Exec(ctx); err != nil && err != redis.Nil {
		return err
	}
	for _, w := range writes {
		w.ks.mu.Lock()
		if w.close && w.ks.wantClose {
			w.ks.wantClose = false
		} else if !w.close && w.ks.wantOpen.Equal(w.until) {
			w.ks.wantOpen = time.Time{}
		}
		w.ks.mu.Unlock()
	}
	var claim []*keyState
	for i, ks := range states {
		v, err := gets[i].Result()
		ks.mu.Lock()
		if !ks.wantOpen.IsZero() || ks.wantClose {
			ks.mu.Unlock() // changed while we read: next round
			continue
		}
		if err == redis.Nil {
			ks.recorded, ks.probeMine, ks.own = false, false, false
		} else if until, iv, opener, ok := parseBreaker(v); ok {
			if !ks.recorded || !ks.openUntil.Equal(until) {
				ks.probeMine = false // a new open period
			}
			ks.own = ks.own && opener == f.opts.Replica
			ks.recorded, ks.openUntil, ks.interval, ks.opener = true, until, iv, opener
			if !now.Before(until) && !ks.probeMine {
				claim = append(claim, ks)
			}
		}
		ks.mu.Unlock()
	}
	if len(claim) == 0 {
		return nil
	}
	pipe = f.rdb.Pipeline()
	sets := make([]*redis.BoolCmd, len(claim))
	for i, ks := range claim {
		sets[i] = pipe.SetNX(ctx, f.prefix+"probe:"+ks.rk, f.opts.Replica, probeTTL)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return err
	}
	for i, ks := range claim {
		if ok, _ := sets[i].Result(); ok {
			ks.mu.Lock()
			ks.probeMine, ks.probeUsed = true, false
			ks.mu.Unlock()
		}
	}
	return nil
}

func parseBreaker(v string) (until time.Time, interval time.Duration, opener string, ok bool) {
	parts := strings.SplitN(v, " ", 3)
	if len(parts) != 3 {
		return until, 0, "", false
	}
	ms, err1 := strconv.ParseInt(parts[0], 10, 64)
	iv, err2 := strconv.ParseInt(parts[1], 10, 64)
	if err1 != nil || err2 != nil || iv < 0 {
		return until, 0, "", false
	}
	return time.UnixMilli(ms), time.Duration(iv) * time.Millisecond, parts[2], true
}

// bucket is this replica's share of one fleet-wide limit: units leased from
// the GCRA in Redis and not yet spent. Leased units expire after hold, so an
// idle replica does not sit on the fleet's budget. After an idle spell the
// first request is admitted on credit (the next lease pays it back), so a
// replica that wakes up does not refuse its first call; the fleet can exceed
// its limit by at most one unit per waking replica.
type bucket struct {
	perSec  float64 // units per second, fleet-wide
	burst   float64 // units the GCRA lets through at once
	lease   float64 // units asked per lease
	hold    time.Duration
	avail   float64 // may be negative: credit taken
	expires time.Time
	lastUse time.Time
	want    float64 // the largest single request refused, so the next lease covers it
	leased  bool
}

func newBucket(perSec, burst float64, sync time.Duration) *bucket {
	lease := max(1, math.Ceil(perSec*sync.Seconds()/4))
	return &bucket{perSec: perSec, burst: burst, lease: min(lease, burst), hold: 5 * sync}
}

// take spends n units at now; false when the lease is spent.
func (b *bucket) take(now time.Time, n float64) bool {
	if !now.Before(b.expires) && b.avail > 0 {
		b.avail = 0
	}
	idle := b.lastUse.IsZero() || now.Sub(b.lastUse) > b.hold
	b.lastUse = now
	if b.avail >= n || idle && b.avail >= 0 {
		b.avail -= n
		return true
	}
	b.want = max(b.want, min(n, b.burst))
	return false
}

func (b *bucket) refund(n float64) { b.avail += n }

// low reports whether the lease should be topped up.
func (b *bucket) low() bool { return b.avail < b.lease/2 }

// need returns how many units to lease at now (0: none): enough for the
// lease, the largest refused request and any credit taken, while the bucket
// is in use.
func (b *bucket) need(now time.Time) float64 {
	if b.leased && (b.lastUse.IsZero() || now.Sub(b.lastUse) > b.hold) && b.avail >= 0 {
		return 0
	}
	if !now.Before(b.expires) && b.avail > 0 {
		b.avail = 0
	}
	target := max(b.lease, b.want)
	if b.avail >= target/2 && b.avail >= b.want {
		return 0
	}
	return math.Ceil(min(target-b.avail, b.burst))
}

// gcraScript grants up to ARGV[3] units of a GCRA with emission interval
// ARGV[1] microseconds and burst ARGV[2] units, on Redis's clock, and
// returns the units granted. The TAT expires when it is in the past.
var gcraScript = redis.NewScript(`
local interval = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local want = tonumber(ARGV[3])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local tat = tonumber(redis.call('GET', KEYS[1]) or now)
if tat < now then tat = now end
local room = math.floor((burst * interval - (tat - now)) / interval)
local grant = math.min(want, room)
if grant <= 0 then return 0 end
tat = tat + grant * interval
redis.call('SET', KEYS[1], string.format('%.0f', tat), 'PX', math.ceil((tat - now) / 1000) + 1000)
return grant
`)

// syncLimits tops up the leases of the limits in use.
func (f *Fleet) syncLimits(ctx context.Context, now time.Time) error {
	f.mu.Lock()
	states := make([]*keyState, 0, len(f.keys))
	for _, ks := range f.keys {
		if ks.rpm != nil || ks.tpm != nil {
			states = append(states, ks)
		}
	}
	f.mu.Unlock()
	for _, ks := range states {
		for _, l := range []struct {
			name string
			b    *bucket
		}{{"rpm", ks.rpm}, {"tpm", ks.tpm}} {
			if l.b == nil {
				continue
			}
			ks.mu.Lock()
			n := l.b.need(now)
			ks.mu.Unlock()
			if n <= 0 {
				continue
			}
			interval := 1e6 / l.b.perSec
			g, err := gcraScript.Run(ctx, f.rdb, []string{f.prefix + "limit:" + l.name + ":" + ks.rk},
				strconv.FormatFloat(interval, 'f', 3, 64), strconv.FormatFloat(l.b.burst, 'f', 0, 64), strconv.FormatFloat(n, 'f', 0, 64)).Int64()
			if err != nil {
				return err
			}
			ks.mu.Lock()
			l.b.leased = true
			if g > 0 {
				if !now.Before(l.b.expires) && l.b.avail > 0 {
					l.b.avail = 0
				}
				l.b.avail += float64(g)
				l.b.expires = now.Add(l.b.hold)
				if l.b.avail >= l.b.want {
					l.b.want = 0
				}
			}
			ks.mu.Unlock()
		}
	}
	return nil
}
