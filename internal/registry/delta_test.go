package registry

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tpsroute/tpsroute/measure"
)

// ship exports x's deltas, sends them through the binary encoding and
// merges them into dst at now, then commits.
func ship(t *testing.T, x *Exporter, dst *Registry, now time.Time) int {
	t.Helper()
	ds := x.Export()
	for i := range ds {
		b, err := ds[i].MarshalBinary()
		require.NoError(t, err)
		var d Delta
		require.NoError(t, d.UnmarshalBinary(b))
		require.NoError(t, dst.MergeAt(now, &d))
	}
	x.Commit()
	return len(ds)
}

// TestDeltaMergeMatchesUnion checks the merge against an oracle: replica B,
// holding its own samples plus every delta replica A published, estimates
// exactly what one registry that recorded all the samples estimates
// (quantiles and error rate exactly, the linear TPS EWMA to rounding).
func TestDeltaMergeMatchesUnion(t *testing.T) {
	a, b, all := New(measure.Options{}), New(measure.Options{}), New(measure.Options{})
	x := a.NewExporter()
	ss := samples(3000, 42)
	now := t0
	for round := range 30 {
		for i := range 100 {
			s := ss[round*100+i]
			now = now.Add(37 * time.Millisecond)
			if i%3 == 0 {
				b.RecordAt(now, kA, s)
			} else {
				a.RecordAt(now, kA, s)
			}
			all.RecordAt(now, kA, s)
		}
		ship(t, x, b, now)
		// An export with nothing new sends nothing.
		assert.Empty(t, x.Export(), "round %d", round)
		x.Commit()
	}
	for _, r := range []*Registry{a, b, all} {
		r.PruneAt(now) // refresh every estimate at the same time
	}
	got, okB := b.Estimate(kA)
	want, okAll := all.Estimate(kA)
	require.True(t, okB)
	require.True(t, okAll)
	assert.Equal(t, want.TTFTP50, got.TTFTP50)
	assert.Equal(t, want.TTFTP95, got.TTFTP95)
	assert.Equal(t, want.TPSP50, got.TPSP50)
	assert.Equal(t, want.TPSP95, got.TPSP95)
	assert.Equal(t, want.Samples, got.Samples)
	assert.Equal(t, want.TPSSamples, got.TPSSamples)
	assert.Equal(t, want.ErrorRate, got.ErrorRate)
	// The union's published TPS EWMA is at most its change detector's
	// per-call level (shift.go), which a replica that merged other
	// replicas' samples does not apply (its detector sees its own samples
	// only): the merge is checked against the union's linear EWMA.
	linear, ok := all.lookup(kA).combined(func(s *stateStats) *EWMA { return &s.tpsE })
	require.True(t, ok)
	assert.InEpsilon(t, linear, got.TPSEWMA, 1e-9)
	assert.LessOrEqual(t, want.TPSEWMA, linear)
	assert.Equal(t, want.Newest, got.Newest)
	// The peak-sensitive TTFT average is not linear in its updates: the
	// merge is a weighted average of the replicas' peak averages.
	assert.InEpsilon(t, want.TTFTEWMA, got.TTFTEWMA, 0.5)

	sb, _ := b.SnapshotAt(now).Lookup(kA)
	rt := sb.Fleet
	require.NotNil(t, rt)
	sa, _ := a.SnapshotAt(now).Lookup(kA)
	assert.Equal(t, sa.Requests, rt.Requests)
	assert.Equal(t, sa.Errors, rt.Errors)
	assert.Equal(t, sa.OutputTokens, rt.OutputTokens)
	assert.Equal(t, sa.Cost, rt.Cost)
}

// TestDeltaNotCommittedIsResent checks that a failed publish (no Commit)
// loses nothing: the next Export carries the older changes too.
func TestDeltaNotCommittedIsResent(t *testing.T) {
	a, b, all := New(measure.Options{}), New(measure.Options{}), New(measure.Options{})
	x := a.NewExporter()
	now := t0
	for i, s := range samples(60, 7) {
		now = now.Add(time.Second)
		a.RecordAt(now, kA, s)
		all.RecordAt(now, kA, s)
		if i == 29 {
			require.Len(t, x.Export(), 1) // publish failed: no Commit
		}
	}
	require.Equal(t, 1, ship(t, x, b, now))
	b.PruneAt(now)
	all.PruneAt(now)
	got, _ := b.Estimate(kA)
	want, _ := all.Estimate(kA)
	assert.Equal(t, want.Samples, got.Samples)
	assert.Equal(t, want.TTFTP95, got.TTFTP95)
}

// TestRemoteDegradationMovesEstimate is the point of fleet mode: B never
// calls the slow deployment, yet its estimate turns slow from A's data.
func TestRemoteDegradationMovesEstimate(t *testing.T) {
	a, b := New(measure.Options{}), New(measure.Options{})
	x := a.NewExporter()
	now := t0
	for range 20 {
		now = now.Add(100 * time.Millisecond)
		s := okSample(200*time.Millisecond, 100, 0)
		a.RecordAt(now, kA, s)
		b.RecordAt(now, kA, s)
	}
	ship(t, x, b, now)
	before, _ := b.Estimate(kA)
	for range 20 {
		now = now.Add(100 * time.Millisecond)
		a.RecordAt(now, kA, okSample(3*time.Second, 10, 0))
	}
	ship(t, x, b, now)
	after, ok := b.Estimate(kA)
	require.True(t, ok)
	assert.InEpsilon(t, 0.2, before.TTFTEWMA, 0.05)
	assert.Greater(t, after.TTFTEWMA, 1.0)
	assert.Greater(t, after.TTFTP95, 2.9)
	assert.Less(t, after.TPSEWMA, before.TPSEWMA)
}

func TestMergeIncompatible(t *testing.T) {
	a := New(measure.Options{Window: measure.WindowOptions{Length: time.Minute}})
	b := New(measure.Options{})
	a.RecordAt(t0, kA, okSample(time.Second, 50, 0))
	ds := a.NewExporter().Export()
	require.Len(t, ds, 1)
	require.ErrorIs(t, b.MergeAt(t0, &ds[0]), ErrIncompatible)
	assert.Zero(t, b.Len(), "nothing merged")
}

func TestDeltaUnmarshalRejectsGarbage(t *testing.T) {
	a := New(measure.Options{})
	a.RecordAt(t0, kA, okSample(time.Second, 50, 0))
	ds := a.NewExporter().Export()
	require.Len(t, ds, 1)
	good, err := ds[0].MarshalBinary()
	require.NoError(t, err)
	for n := range len(good) {
		var d Delta
		require.ErrorIs(t, d.UnmarshalBinary(good[:n]), ErrEncoding, "truncated at %d", n)
	}
	var d Delta
	require.ErrorIs(t, d.UnmarshalBinary(append(good, 0)), ErrEncoding)
}

// TestHotPathAllocsWithRemote checks that merged fleet data leaves Record
// and Estimate allocation-free.
func TestHotPathAllocsWithRemote(t *testing.T) {
	a, b := New(measure.Options{}), New(measure.Options{})
	ss := samples(100, 3)
	for i, s := range ss {
		a.RecordAt(t0.Add(time.Duration(i)*time.Millisecond), kA, s)
		b.RecordAt(t0.Add(time.Duration(i)*time.Millisecond), kA, s)
	}
	ds := a.NewExporter().Export()
	require.NoError(t, b.MergeAt(t0, &ds[0]))
	now := t0.Add(time.Second)
	s := ss[0]
	s.Err, s.ErrPhase = nil, 0
	b.RecordAt(now, kA, s)
	assert.Zero(t, testing.AllocsPerRun(100, func() { b.RecordAt(now, kA, s) }))
	assert.Zero(t, testing.AllocsPerRun(100, func() { b.Estimate(kA) }))
}

// TestDeltaRejectsIndexesNoValueReaches: a Delta from another replica whose
// bins lie where no finite value maps is malformed (ErrEncoding), so it is
// never merged and the receiving Registry keeps what it held; before, it
// decoded and MergeAt's quantiles built one array across the whole span.
func TestDeltaRejectsIndexesNoValueReaches(t *testing.T) {
	r, now := busyRegistry(t, 3)
	want := r.SnapshotAt(now)
	src := New(measure.Options{})
	src.RecordAt(now, kA, okSample(time.Second, 50, 0))
	ds := src.NewExporter().Export()
	require.Len(t, ds, 1)
	plantBins(&ds[0].TTFT, now, -hostileSpan, hostileSpan)
	b, err := ds[0].MarshalBinary()
	require.NoError(t, err)
	var d Delta
	err = d.UnmarshalBinary(b)
	if err == nil {
		n := allocated(func() { require.NoError(t, r.MergeAt(now, &d)) })
		assert.LessOrEqual(t, n, uint64(maxQueryBytes), "MergeAt allocated %d bytes", n)
	}
	require.ErrorIs(t, err, ErrEncoding)
	assert.Equal(t, want, r.SnapshotAt(now), "nothing merged")
}

// FuzzDeltaUnmarshal: a Delta is what other replicas send through Redis,
// so any bytes either fail to decode with ErrEncoding or decode to a Delta
// that merges (or is ErrIncompatible), answers a Snapshot and round-trips.
func FuzzDeltaUnmarshal(f *testing.F) {
	src, now := busyRegistry(f, 5)
	ds := src.NewExporter().Export()
	for i := range ds {
		b, err := ds[i].MarshalBinary()
		require.NoError(f, err)
		f.Add(b)
	}
	// Bins where no finite value maps (TestDeltaRejectsIndexesNoValueReaches).
	plantBins(&ds[0].TPS, now, -hostileSpan, hostileSpan)
	b, err := ds[0].MarshalBinary()
	require.NoError(f, err)
	f.Add(b)
	f.Fuzz(func(t *testing.T, data []byte) {
		var d Delta
		if err := d.UnmarshalBinary(data); err != nil {
			require.ErrorIs(t, err, ErrEncoding)
			return
		}
		r := New(measure.Options{})
		if err := r.MergeAt(now, &d); err != nil {
			require.ErrorIs(t, err, ErrIncompatible)
			require.Zero(t, r.Len())
			return
		}
		r.SnapshotAt(now)
		again, err := d.MarshalBinary()
		require.NoError(t, err)
		var d2 Delta
		require.NoError(t, d2.UnmarshalBinary(again))
	})
}
