package fleet

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/tpsroute/tpsroute/fallback"
	"github.com/tpsroute/tpsroute/internal/executor"
	"github.com/tpsroute/tpsroute/internal/registry"
	"github.com/tpsroute/tpsroute/measure"
	"github.com/tpsroute/tpsroute/route"
	"github.com/tpsroute/tpsroute/tps"
)

// sh is the executor.Shared that JoinClient returns for f.
func (f *Fleet) sh() shared { return shared{f} }

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var (
	t0   = time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	slow = route.Deployment{Provider: "slow", Model: "m", BaseURL: "http://slow.test/v1"}
	fast = route.Deployment{Provider: "fast", Model: "m", BaseURL: "http://fast.test/v1",
		Limits: route.Limits{RPM: 60}}
)

// replica is one Client's side of the fleet, driven round by round.
type replica struct {
	f    *Fleet
	reg  *registry.Registry
	logs *syncBuffer

	mu      sync.Mutex
	learned map[string]measure.Key
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func newReplica(t *testing.T, url, name string) *replica {
	t.Helper()
	return newReplicaIn(t, url, "test", name)
}

func newReplicaIn(t *testing.T, url, fleetName, name string) *replica {
	t.Helper()
	r := &replica{reg: registry.New(measure.Options{}), logs: &syncBuffer{}, learned: map[string]measure.Key{}}
	f, err := New(Options{URL: url, Name: fleetName, Replica: name,
		Logger: slog.New(slog.NewTextHandler(r.logs, nil))})
	require.NoError(t, err)
	f.manual = true
	_, err = f.JoinClient(r.reg, []route.Deployment{slow, fast}, func(ck string, k measure.Key, _ time.Time) {
		r.mu.Lock()
		r.learned[ck] = k
		r.mu.Unlock()
	})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, f.Close()) })
	r.f = f
	return r
}

func (r *replica) round(now time.Time) { r.f.syncAt(context.Background(), now, true) }

func sample(ttft time.Duration, rate float64) tps.Sample {
	return tps.Sample{TTFT: ttft, TPS: rate, TPSOK: true, E2E: ttft + time.Second, Total: ttft + time.Second, OutputTokens: 100}
}

// TestStatsShared: a degradation measured by replica 1 moves replica 2's
// estimate within one round each side, without replica 2 calling it.
func TestStatsShared(t *testing.T) {
	mr := miniredis.RunT(t)
	url := "redis://" + mr.Addr()
	r1, r2 := newReplica(t, url, "r1"), newReplica(t, url, "r2")
	now := t0
	for range 20 {
		now = now.Add(50 * time.Millisecond)
		r1.reg.RecordAt(now, slow.Key(), sample(200*time.Millisecond, 100))
	}
	r1.round(now)
	r2.round(now)
	e, ok := r2.reg.Estimate(slow.Key())
	require.True(t, ok, "replica 2 learned the key from replica 1")
	assert.InEpsilon(t, 0.2, e.TTFTP50, 0.02)

	for range 20 {
		now = now.Add(50 * time.Millisecond)
		r1.reg.RecordAt(now, slow.Key(), sample(4*time.Second, 5))
	}
	now = now.Add(time.Second)
	r1.round(now)
	r2.round(now)
	e, _ = r2.reg.Estimate(slow.Key())
	assert.Greater(t, e.TTFTEWMA, 2.0)
	assert.Greater(t, e.TTFTP95, 3.9)
	// Replica 1 does not merge its own data back.
	rt := merged(r1.reg, slow.Key(), now)
	assert.Nil(t, rt, "%+v", rt)
	rt = merged(r2.reg, slow.Key(), now)
	require.NotNil(t, rt)
	assert.Equal(t, int64(40), rt.Requests)

	st := r2.f.Status(now)
	assert.True(t, st.Connected)
	assert.Equal(t, 1, st.Replicas)
	assert.True(t, now.Equal(st.LastSync), "%v", st.LastSync)
	assert.Positive(t, r1.f.Status(now).SentBytes)
	assert.Positive(t, st.RecvBytes)

	// Nothing secret or textual is stored: only the fleet's namespaced keys.
	for _, k := range mr.Keys() {
		assert.True(t, strings.HasPrefix(k, "tpsroute:v1:test:") || k == "tpsroute:test:replicas", k)
	}
	assert.Positive(t, mr.TTL("tpsroute:v1:test:stats"))
	assert.Positive(t, mr.TTL("tpsroute:test:replicas"))
}

// TestBreakerShared: a breaker tripped on replica 1 keeps replica 2 off the
// deployment; after the interval exactly one replica gets the probe; a
// failed probe reopens for twice as long, a good one closes it everywhere.
func TestBreakerShared(t *testing.T) {
	mr := miniredis.RunT(t)
	url := "redis://" + mr.Addr()
	r1, r2 := newReplica(t, url, "r1"), newReplica(t, url, "r2")
	k := slow.Key()
	now := time.Now() // breaker records carry wall-clock ms
	r1.round(now)
	r2.round(now)
	require.NoError(t, r2.f.sh().Admit(k, now, 0))
	r2.f.sh().Done(k, now, executor.OutcomeSuccess)

	r1.f.sh().Opened(k, now, now.Add(2*time.Second))
	r1.round(now)
	r2.round(now)
	assert.ErrorIs(t, r2.f.sh().Admit(k, now, 0), fallback.ErrOpen)
	assert.Equal(t, route.BreakerOpen, r2.f.sh().Breaker(k, now))
	assert.NoError(t, r1.f.sh().Admit(k, now, 0), "the opener's own breaker decides for itself")

	later := now.Add(3 * time.Second)
	r1.round(later)
	r2.round(later)
	e1, e2 := r1.f.sh().Admit(k, later, 0), r2.f.sh().Admit(k, later, 0)
	assert.True(t, (e1 == nil) != (e2 == nil), "exactly one probe: %v, %v", e1, e2)
	prober, other := r1, r2
	if e2 == nil {
		prober, other = r2, r1
	}
	assert.ErrorIs(t, prober.f.sh().Admit(k, later, 0), fallback.ErrOpen, "one probe only")
	prober.f.sh().Done(k, later, executor.OutcomeFailure) // the probe failed: reopen, for longer
	prober.round(later)
	other.round(later)
	assert.ErrorIs(t, other.f.sh().Admit(k, later.Add(3*time.Second), 0), fallback.ErrOpen)
	ks := other.f.state(k)
	ks.mu.Lock()
	assert.Equal(t, 4*time.Second, ks.interval)
	ks.mu.Unlock()

	end := later.Add(5 * time.Second)
	r1.round(end)
	r2.round(end)
	e1, e2 = r1.f.sh().Admit(k, end, 0), r2.f.sh().Admit(k, end, 0)
	require.True(t, (e1 == nil) != (e2 == nil), "%v, %v", e1, e2)
	prober, other = r1, r2
	if e2 == nil {
		prober, other = r2, r1
	}
	// A probe that failed by the caller's fault learned nothing: the
	// breaker stays half-open, the other replica stays out, and the same
	// replica probes again.
	prober.f.sh().Done(k, end, executor.OutcomeExcluded)
	prober.round(end)
	other.round(end)
	assert.ErrorIs(t, other.f.sh().Admit(k, end, 0), fallback.ErrOpen, "an excluded probe does not close the breaker")
	require.NoError(t, prober.f.sh().Admit(k, end, 0), "the prober probes again")
	prober.f.sh().Done(k, end, executor.OutcomeSuccess)
	prober.round(end)
	other.round(end)
	assert.NoError(t, other.f.sh().Admit(k, end, 0))
	assert.Equal(t, route.BreakerClosed, other.f.sh().Breaker(k, end))
	assert.False(t, mr.Exists("tpsroute:v1:test:breaker:slow//m"))
}

// TestLimitShared: 60 RPM holds across three replicas calling as fast as
// they can; each replica alone would allow 60 at once.
func TestLimitShared(t *testing.T) {
	mr := miniredis.RunT(t)
	url := "redis://" + mr.Addr()
	rs := []*replica{newReplica(t, url, "r1"), newReplica(t, url, "r2"), newReplica(t, url, "r3")}
	k := fast.Key()
	start := time.Now()
	admitted := 0
	// Ten seconds of virtual calls, ten per replica per second. Redis's
	// clock (miniredis's TIME) is moved along with ours.
	for step := range 100 {
		now := start.Add(time.Duration(step) * 100 * time.Millisecond)
		mr.SetTime(now)
		for _, r := range rs {
			r.f.syncAt(context.Background(), now, false)
			if r.f.sh().Admit(k, now, 0) == nil {
				admitted++
			}
		}
	}
	// 1/s for 10 s, plus the burst of 1 and the first call of each replica
	// admitted on credit.
	assert.LessOrEqual(t, admitted, 10+1+3)
	assert.GreaterOrEqual(t, admitted, 9)
}

// TestAffinityShared: a cache key served on replica 1 is learned by 2.
func TestAffinityShared(t *testing.T) {
	mr := miniredis.RunT(t)
	url := "redis://" + mr.Addr()
	r1, r2 := newReplica(t, url, "r1"), newReplica(t, url, "r2")
	r1.f.Served("fleet:abc", fast.Key(), t0)
	r1.round(t0)
	r2.round(t0)
	r2.mu.Lock()
	assert.Equal(t, fast.Key(), r2.learned["fleet:abc"])
	r2.mu.Unlock()
	r1.mu.Lock()
	assert.Empty(t, r1.learned)
	r1.mu.Unlock()
}

// TestRedisDown: a dead Redis costs no call (every method answers at once,
// admitting everything), is logged once, shows in Status, and the replica
// rejoins when Redis is back, publishing what it measured meanwhile.
func TestRedisDown(t *testing.T) {
	mr := miniredis.RunT(t)
	url := "redis://" + mr.Addr()
	r1, r2 := newReplica(t, url, "r1"), newReplica(t, url, "r2")
	now := t0
	r1.round(now)
	r2.round(now)
	r1.f.sh().Opened(slow.Key(), time.Now(), time.Now().Add(time.Hour))
	r1.round(now)
	r2.round(now)
	require.ErrorIs(t, r2.f.sh().Admit(slow.Key(), time.Now(), 0), fallback.ErrOpen)

	addr := mr.Addr()
	mr.Close()
	for range 3 {
		now = now.Add(time.Second)
		r2.reg.RecordAt(now, fast.Key(), sample(time.Second, 50))
		r2.round(now)
	}
	st := r2.f.Status(now)
	assert.False(t, st.Connected)
	assert.Equal(t, int64(3), st.Failures)
	assert.Equal(t, 1, strings.Count(r2.logs.String(), "Redis unreachable"), r2.logs.String())
	assert.NoError(t, r2.f.sh().Admit(slow.Key(), time.Now(), 0), "alone, the local breaker decides")
	assert.Equal(t, route.BreakerClosed, r2.f.sh().Breaker(slow.Key(), time.Now()))

	mr2 := miniredis.NewMiniRedis()
	require.NoError(t, mr2.StartAddr(addr))
	defer mr2.Close()
	now = now.Add(time.Second)
	r2.round(now)
	r1.round(now)
	assert.True(t, r2.f.Status(now).Connected)
	assert.Contains(t, r2.logs.String(), "rejoined")
	rt := merged(r1.reg, fast.Key(), now)
	require.NotNil(t, rt, "what r2 measured while alone reached r1")
	assert.Equal(t, int64(3), rt.Requests)
}

// TestOtherSchemaIgnored: a replica announcing another schema version is
// logged once and not counted.
func TestOtherSchemaIgnored(t *testing.T) {
	mr := miniredis.RunT(t)
	r1 := newReplica(t, "redis://"+mr.Addr(), "r1")
	mr.HSet("tpsroute:test:replicas", "future", "v2 "+time.Now().Format("0"))
	r1.round(t0)
	r1.round(t0.Add(time.Second))
	assert.Equal(t, 1, strings.Count(r1.logs.String(), "ignoring replica"), r1.logs.String())
	assert.Equal(t, 0, r1.f.Status(t0).Replicas)
}

// TestAuthAndURL: AUTH in the URL works, and a bad password leaves no
// password in the log.
func TestAuthAndURL(t *testing.T) {
	mr := miniredis.RunT(t)
	mr.RequireUserAuth("u", "s3cret-pass")
	ok := newReplica(t, "redis://u:s3cret-pass@"+mr.Addr(), "r1")
	ok.round(t0)
	assert.True(t, ok.f.Status(t0).Connected)
	bad := newReplica(t, "redis://u:wrong-pass@"+mr.Addr(), "r2")
	bad.round(t0)
	assert.False(t, bad.f.Status(t0).Connected)
	assert.NotContains(t, bad.logs.String(), "wrong-pass")

	_, err := New(Options{URL: "http://x"})
	require.Error(t, err)
	_, err = New(Options{URL: "rediss://u:pw@127.0.0.1:1/0"})
	require.NoError(t, err)
	_, err = New(Options{})
	require.Error(t, err)
}

// TestLoopAndClose: the real loop syncs on its own, Close stops it (goleak
// checks in TestMain), and Join after Close fails.
func TestLoopAndClose(t *testing.T) {
	mr := miniredis.RunT(t)
	f, err := New(Options{URL: "redis://" + mr.Addr(), Name: "test", Sync: 10 * time.Millisecond})
	require.NoError(t, err)
	reg := registry.New(measure.Options{})
	_, err = f.JoinClient(reg, []route.Deployment{fast}, nil)
	require.NoError(t, err)
	_, err = f.JoinClient(reg, nil, nil)
	require.Error(t, err)
	require.Eventually(t, func() bool { return f.Status(time.Now()).Connected }, 5*time.Second, 5*time.Millisecond)
	require.NoError(t, f.Close())
	require.NoError(t, f.Close())
	assert.False(t, f.Status(time.Now()).Connected)
	_, err = f.JoinClient(reg, nil, nil)
	require.ErrorIs(t, err, ErrClosed)
}

// TestOpenedGrowth: trips within one open period do not grow the interval.
// After it, the replica whose breaker set the record's interval reopens it
// for the interval that breaker reports (fallback's rule, shorter than twice
// the last under traffic, issue 16 item 2), also when the trip ends its own
// failed probe; a trip on another replica, whose breaker may not know the
// outage, doubles it, capped.
func TestOpenedGrowth(t *testing.T) {
	mr := miniredis.RunT(t)
	url := "redis://" + mr.Addr()
	r1, r2 := newReplica(t, url, "r1"), newReplica(t, url, "r2")
	k := slow.Key()
	now := time.Now()
	r1.round(now)
	r2.round(now)
	interval := func(r *replica) time.Duration {
		ks := r.f.state(k)
		ks.mu.Lock()
		defer ks.mu.Unlock()
		return ks.interval
	}
	r1.f.sh().Opened(k, now, now.Add(2*time.Second))
	r1.f.sh().Opened(k, now.Add(time.Second), now.Add(3*time.Second)) // in-flight calls failing
	assert.Equal(t, 2*time.Second, interval(r1))
	r1.f.sh().Opened(k, now.Add(4*time.Second), now.Add(5*time.Second))
	assert.Equal(t, time.Second, interval(r1), "its breaker's interval, not twice the last")

	// r1's own probe fails: its breaker reopens it (Opened), then Done.
	at := now.Add(6 * time.Second)
	r1.round(at)
	require.NoError(t, r1.f.sh().Admit(k, at, 0), "r1 holds the probe")
	r1.f.sh().Opened(k, at, at.Add(3*time.Second))
	r1.f.sh().Done(k, at, executor.OutcomeFailure)
	assert.Equal(t, 3*time.Second, interval(r1), "its breaker's interval stands")
	r1.round(at)
	r2.round(at)
	assert.Equal(t, 3*time.Second, interval(r2), "as the fleet sees it")

	for i := range 8 {
		at := now.Add(time.Duration(10+i*100) * time.Second)
		r2.f.sh().Opened(k, at, at.Add(2*time.Second))
	}
	assert.Equal(t, maxOpen, interval(r2), "another replica's trips double it")
}

// TestRestoredStateNotRepublished: a replica restarted from a state file
// (registry.Registry.RestoreState before JoinClient, as tpsroute.New does)
// does not publish the restored samples again, which would count them twice
// in every other replica; what it records afterwards is published.
func TestRestoredStateNotRepublished(t *testing.T) {
	mr := miniredis.RunT(t)
	url := "redis://" + mr.Addr()
	before := registry.New(measure.Options{})
	now := t0
	for range 30 {
		now = now.Add(100 * time.Millisecond)
		before.RecordAt(now, slow.Key(), sample(300*time.Millisecond, 80))
	}
	var file bytes.Buffer
	require.NoError(t, before.SaveState(&file, now))

	reg := registry.New(measure.Options{})
	_, err := reg.RestoreState(&file, now, nil)
	require.NoError(t, err)
	f, err := New(Options{URL: url, Name: "test", Replica: "restarted"})
	require.NoError(t, err)
	f.manual = true
	_, err = f.JoinClient(reg, []route.Deployment{slow, fast}, nil)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, f.Close()) })
	other := newReplica(t, url, "other")

	f.syncAt(context.Background(), now, true)
	other.round(now)
	assert.Nil(t, merged(other.reg, slow.Key(), now), "the restored samples were published again")

	now = now.Add(time.Second)
	reg.RecordAt(now, slow.Key(), sample(300*time.Millisecond, 80))
	f.syncAt(context.Background(), now, true)
	other.round(now)
	rt := merged(other.reg, slow.Key(), now)
	require.NotNil(t, rt)
	assert.Equal(t, int64(1), rt.Requests, "only the sample recorded after the restart")
}

// TestRestartedReplicaCountsNothingTwice: a replica restarted from a state
// file under a new replica name (the gateway's are random) holds its own
// samples and what it had merged, once each: it reads the fleet's stream
// from the save on, so neither its old self's deltas nor the others' come
// back a second time; what the others publish afterwards arrives as usual.
func TestRestartedReplicaCountsNothingTwice(t *testing.T) {
	mr := miniredis.RunT(t)
	url := "redis://" + mr.Addr()
	r1, r2 := newReplica(t, url, "r1"), newReplica(t, url, "r2")
	now := time.Now() // stream entry ids are the server's clock
	for i := range 20 {
		r1.reg.RecordAt(now.Add(time.Duration(i)*time.Millisecond), slow.Key(), sample(300*time.Millisecond, 80))
	}
	for i := range 10 {
		r2.reg.RecordAt(now.Add(time.Duration(i)*time.Millisecond), slow.Key(), sample(time.Second, 40))
	}
	r1.round(now)
	r2.round(now)
	r1.round(now)
	rt := merged(r1.reg, slow.Key(), now)
	require.NotNil(t, rt)
	require.Equal(t, int64(10), rt.Requests)

	time.Sleep(2 * time.Millisecond) // the save comes after every entry so far
	saved := time.Now()
	var file bytes.Buffer
	require.NoError(t, r1.reg.SaveState(&file, saved))
	reg := registry.New(measure.Options{})
	_, err := reg.RestoreState(&file, saved, nil)
	require.NoError(t, err)
	f, err := New(Options{URL: url, Name: "test", Replica: "r1-restarted"})
	require.NoError(t, err)
	f.manual = true
	_, err = f.JoinClient(reg, []route.Deployment{slow, fast}, nil)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, f.Close()) })

	f.syncAt(context.Background(), time.Now(), true)
	rt = merged(reg, slow.Key(), time.Now())
	require.NotNil(t, rt)
	assert.Equal(t, int64(10), rt.Requests, "r2's samples once, r1's old ones not as remote")
	st, _ := reg.Snapshot().Lookup(slow.Key())
	assert.Equal(t, int64(20), st.Requests, "r1's own samples, restored")

	for range 5 {
		r2.reg.RecordAt(time.Now(), slow.Key(), sample(time.Second, 40))
	}
	r2.round(time.Now())
	f.syncAt(context.Background(), time.Now(), true)
	rt = merged(reg, slow.Key(), time.Now())
	require.NotNil(t, rt)
	assert.Equal(t, int64(15), rt.Requests, "what r2 published after the restart arrives")
}

// merged returns what reg merged from other replicas for k (Stats.Fleet),
// read at now; nil when nothing was.
func merged(reg *registry.Registry, k measure.Key, now time.Time) *measure.FleetStats {
	st, _ := reg.SnapshotAt(now).Lookup(k)
	return st.Fleet
}
