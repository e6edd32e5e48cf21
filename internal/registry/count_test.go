package registry

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tpsroute/tpsroute/measure"
	"github.com/tpsroute/tpsroute/tps"
)

// TestCountersSaturate: counts a lying upstream reports (2^63-1 tokens)
// saturate every counter and meter at maxCount instead of wrapping it
// negative, in each cache state, in the sums over them, in what a fleet
// peer merges, and in the cost; and the state the Registry then saves is
// one it restores. Before, the second such sample wrapped the meters
// negative and the next start refused the whole file ("counter ... out of
// range").
func TestCountersSaturate(t *testing.T) {
	now := t0.Add(time.Hour)
	r := New(measure.Options{Prices: map[measure.Key]measure.Price{kA: {Input: 1e9, CachedInput: 1e9, Output: 1e9}}})
	huge := okSample(time.Second, 50, tps.CacheCold)
	huge.InputTokens, huge.CachedTokens, huge.OutputTokens, huge.ReasoningTokens = math.MaxInt64, math.MaxInt64, math.MaxInt64, math.MaxInt64
	for i, cs := range []tps.CacheState{tps.CacheUnknown, tps.CacheCold, tps.CacheWarm, tps.CacheCold, tps.CacheWarm} {
		huge.Cache = cs
		r.RecordAt(now.Add(time.Duration(i)*time.Second), kA, huge)
	}
	src := New(measure.Options{})
	src.RecordAt(now, kA, huge)
	for range 3 {
		for _, d := range src.NewExporter().Export() {
			d.Requests, d.InputTokens, d.OutputTokens, d.Cost.Dollars = maxCount, maxCount, maxCount, maxCount
			require.NoError(t, r.MergeAt(now, &d))
		}
	}
	now = now.Add(5 * time.Second)

	st, ok := r.SnapshotAt(now).Lookup(kA)
	require.True(t, ok)
	for name, v := range map[string]int64{
		"input": st.InputTokens, "cached": st.CachedTokens, "output": st.OutputTokens, "reasoning": st.ReasoningTokens,
		"cold output":    st.Cold.OutputTokens,
		"fleet requests": st.Fleet.Requests, "fleet output": st.Fleet.OutputTokens, "fleet dollars": st.Fleet.CostExact.Dollars,
	} {
		assert.Equal(t, int64(maxCount), v, name)
	}
	assert.Equal(t, int64(5), st.Requests)
	assert.Equal(t, int64(5*maxCount/picoPerDollar), st.CostExact.Dollars, "each call's cost saturates at maxCount picodollars")
	assert.True(t, st.Cost > 0 && !math.IsInf(st.Cost, 0), "%v", st.Cost)

	var b bytes.Buffer
	require.NoError(t, r.SaveState(&b, now))
	got := New(measure.Options{Prices: map[measure.Key]measure.Price{kA: {Input: 1e9}}})
	info, err := got.RestoreState(bytes.NewReader(b.Bytes()), now, nil)
	require.NoError(t, err, "the Registry never saves a state it refuses")
	assert.Equal(t, 1, info.Keys)
	assert.Zero(t, info.Bad)
	back, _ := got.SnapshotAt(now).Lookup(kA)
	assert.Equal(t, st, back)
}

// TestCostSaturates: one call's cost at the highest price a Price converts
// (1e9 dollars per million tokens) and 2^32 tokens overflowed int64
// picodollars and came out negative.
func TestCostSaturates(t *testing.T) {
	p := perToken(measure.Price{Input: 1e9, Output: 1e9})
	assert.Equal(t, int64(maxCount), p.Cost(1<<32, 0, 1<<32))
	assert.Equal(t, int64(1e15), p.Cost(1, 0, 0))
	var m measure.Money
	for range 3 {
		addPico(&m, maxCount)
	}
	assert.True(t, m.Dollars > 0 && m.Dollars <= maxCount, "%d", m.Dollars)
	addMoney(&m, measure.Money{Dollars: maxCount})
	assert.Equal(t, int64(maxCount), m.Dollars)
}

// TestStateNeverWritesWhatItRefuses: a key whose model name is longer than
// a state file holds (a caller's 5,000-byte name on a wildcard deployment)
// is left out of the saved file, and an error class name longer than a
// file holds counts as ClassOther: the file restores, with every other key.
// Before, the next start refused the whole file ("key longer than 4096
// bytes").
func TestStateNeverWritesWhatItRefuses(t *testing.T) {
	now := t0.Add(time.Hour)
	r := New(measure.Options{})
	long := measure.Key{Provider: "wild", Model: strings.Repeat("m", 5000)}
	r.RecordAt(now, long, okSample(time.Second, 50, tps.CacheCold))
	r.RecordAt(now, kA, okSample(time.Second, 50, tps.CacheCold))
	r.RecordClassAt(now, kB, tps.Sample{Err: errors.New("x"), ErrPhase: tps.PhaseConnect}, strings.Repeat("c", maxClassString+1))
	st, _ := r.SnapshotAt(now).Lookup(kB)
	assert.Equal(t, map[string]int64{measure.ClassOther: 1}, st.ErrorsByClass)

	var b bytes.Buffer
	require.NoError(t, r.SaveState(&b, now))
	got := New(measure.Options{})
	info, err := got.RestoreState(bytes.NewReader(b.Bytes()), now, nil)
	require.NoError(t, err)
	assert.Equal(t, 2, info.Keys)
	assert.Zero(t, info.Bad)
	_, ok := got.SnapshotAt(now).Lookup(long)
	assert.False(t, ok, "the long key is not saved")
	back, _ := got.SnapshotAt(now).Lookup(kB)
	assert.Equal(t, st, back)
}

// TestRecordCountsImplausibleUsage: each sample whose usage tps did not
// trust counts in Stats.ImplausibleUsage (implausible_usage in JSON), which
// a state file keeps (section 6).
func TestRecordCountsImplausibleUsage(t *testing.T) {
	now := t0.Add(time.Hour)
	r := New(measure.Options{})
	for i, why := range []tps.Implausible{tps.ImplausibleNone, tps.ImplausibleOverStreamed, tps.ImplausibleNone,
		tps.ImplausibleNegative, tps.ImplausibleNoVisible} {
		s := okSample(time.Second, 50, tps.CacheCold)
		s.Implausible = why
		r.RecordAt(now.Add(time.Duration(i)*time.Second), kA, s)
	}
	r.RecordAt(now, kB, okSample(time.Second, 50, tps.CacheCold))
	now = now.Add(5 * time.Second)
	snap := r.SnapshotAt(now)
	a, _ := snap.Lookup(kA)
	b, _ := snap.Lookup(kB)
	assert.Equal(t, int64(3), a.ImplausibleUsage)
	assert.Zero(t, b.ImplausibleUsage)
	js, err := json.Marshal(snap)
	require.NoError(t, err)
	assert.Contains(t, string(js), `"implausible_usage":3`)

	var buf bytes.Buffer
	require.NoError(t, r.SaveState(&buf, now))
	got := New(measure.Options{})
	_, err = got.RestoreState(bytes.NewReader(buf.Bytes()), now, nil)
	require.NoError(t, err)
	back, _ := got.SnapshotAt(now).Lookup(kA)
	assert.Equal(t, int64(3), back.ImplausibleUsage, "kept across a restart")
}
