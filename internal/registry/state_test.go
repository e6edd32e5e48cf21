package registry

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"io"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	enc "github.com/DataDog/sketches-go/ddsketch/encoding"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tpsroute/tpsroute/measure"
	"github.com/tpsroute/tpsroute/tps"
)

// busyRegistry returns a Registry with three keys recorded over six
// minutes up to the returned time: every cache state, failures of every
// class and phase, costs, chunk gaps, and on kB a 4x fall in TPS three
// minutes in (so its change detector has fired and rebases its Estimate).
func busyRegistry(t testing.TB, seed uint64) (*Registry, time.Time) {
	t.Helper()
	r := New(measure.Options{Prices: map[measure.Key]measure.Price{kA: {Input: 0.5, CachedInput: 0.25, Output: 1.5}}})
	kC := measure.Key{Provider: "local", Region: "", Model: "m@rev"}
	ss := samples(2000, seed)
	rng := rand.New(rand.NewPCG(seed, 99))
	now := t0
	for i, s := range ss {
		now = now.Add(180 * time.Millisecond)
		k := []measure.Key{kA, kB, kC}[i%3]
		switch rng.IntN(40) {
		case 0:
			s.Err, s.ErrPhase = context.DeadlineExceeded, tps.PhaseFirstToken
		case 1:
			s.Err = context.Canceled
		case 2:
			s.Err, s.ErrPhase = errors.New("reset"), tps.PhaseConnect
		}
		if k == kB && i > len(ss)/2 {
			s.TPS /= 4
		}
		r.RecordAt(now, k, s)
	}
	require.Equal(t, 3, r.Len())
	return r, now
}

func save(t testing.TB, r *Registry, now time.Time) []byte {
	t.Helper()
	var b bytes.Buffer
	require.NoError(t, r.SaveState(&b, now))
	return b.Bytes()
}

func restore(t testing.TB, data []byte, now time.Time) (*Registry, RestoreInfo) {
	t.Helper()
	r := New(measure.Options{Prices: map[measure.Key]measure.Price{kA: {Input: 0.5, CachedInput: 0.25, Output: 1.5}}})
	info, err := r.RestoreState(bytes.NewReader(data), now, nil)
	require.NoError(t, err)
	return r, info
}

// TestStateRoundTrip: a restored Registry is the one that was saved. Its
// Snapshot and Estimates at the save time are equal, and fed the same
// further samples both stay equal, so the detectors, EWMAs, windows and
// outcome rings came back whole, not only what a Snapshot shows.
func TestStateRoundTrip(t *testing.T) {
	orig, now := busyRegistry(t, 1)
	st, _ := orig.SnapshotAt(now).Lookup(kB)
	require.NotZero(t, orig.lookup(kB).tpsSince, "kB's detector should have fired")
	require.Positive(t, st.Errors)
	data := save(t, orig, now)
	got, info := restore(t, data, now)
	assert.Equal(t, RestoreInfo{SavedAt: time.Unix(0, now.UnixNano()), Keys: 3}, info)
	assert.Equal(t, orig.SnapshotAt(now), got.SnapshotAt(now))
	for _, k := range orig.SnapshotAt(now).Keys() {
		want, okW := orig.Estimate(k)
		have, okH := got.Estimate(k)
		assert.Equal(t, want, have, "%v", k)
		assert.Equal(t, okW, okH, "%v", k)
	}
	assert.True(t, bytes.Equal(data, save(t, got, now)), "saving the restored registry gives the same bytes")

	more := samples(500, 2)
	for i, s := range more {
		now = now.Add(300 * time.Millisecond)
		k := []measure.Key{kA, kB}[i%2]
		if i > 100 && k == kA {
			s.TPS *= 5 // a change both detectors must see alike
		}
		orig.RecordAt(now, k, s)
		got.RecordAt(now, k, s)
		if i%50 == 0 {
			a, _ := orig.Estimate(k)
			b, _ := got.Estimate(k)
			require.Equal(t, a, b, "after %d more samples", i)
		}
	}
	assert.Equal(t, orig.SnapshotAt(now), got.SnapshotAt(now))
}

// TestStateAges: a file restored later is as old as the time passed. Read at
// the restore time, it equals the stopped registry read at that time:
// sub-windows that left the window are gone, the error rate's outcomes too,
// and the EWMAs weigh against new samples by their age, so one new sample
// moves both alike.
func TestStateAges(t *testing.T) {
	orig, saved := busyRegistry(t, 3)
	data := save(t, orig, saved)
	for _, d := range []time.Duration{0, 45 * time.Second, 3 * time.Minute, 4*time.Minute + 50*time.Second} {
		t.Run(d.String(), func(t *testing.T) {
			at := saved.Add(d)
			got, info := restore(t, data, at)
			require.Equal(t, 3, info.Keys)
			require.Zero(t, info.Shift)
			want := orig.SnapshotAt(at)
			assert.Equal(t, want, got.SnapshotAt(at))
			st, _ := want.Lookup(kA)
			full, _ := orig.SnapshotAt(saved).Lookup(kA)
			if d >= 3*time.Minute {
				assert.Less(t, st.TTFT.Count, full.TTFT.Count, "older sub-windows left the window")
			}
			s := okSample(time.Second, 10, tps.CacheCold)
			o2 := New(measure.Options{Prices: map[measure.Key]measure.Price{kA: {Input: 0.5, CachedInput: 0.25, Output: 1.5}}})
			_, err := o2.RestoreState(bytes.NewReader(data), saved, nil)
			require.NoError(t, err)
			o2.RecordAt(at, kA, s)
			got.RecordAt(at, kA, s)
			assert.Equal(t, o2.SnapshotAt(at), got.SnapshotAt(at))
			w, _ := o2.Estimate(kA)
			h, _ := got.Estimate(kA)
			assert.Equal(t, w, h)
		})
	}
}

// TestStateExpired: keys idle for longer than the TTL are not restored, as
// a prune would have dropped them.
func TestStateExpired(t *testing.T) {
	orig, saved := busyRegistry(t, 4)
	data := save(t, orig, saved)
	got, info := restore(t, data, saved.Add(defaultTTL+time.Minute))
	assert.Equal(t, 0, got.Len())
	assert.Equal(t, 3, info.Expired)
	assert.Equal(t, 0, info.Keys)
	// Saving after the TTL leaves them out.
	got, info = restore(t, save(t, orig, saved.Add(defaultTTL+time.Minute)), saved.Add(defaultTTL+time.Minute))
	assert.Equal(t, 0, got.Len())
	assert.Equal(t, RestoreInfo{SavedAt: time.Unix(0, saved.Add(defaultTTL+time.Minute).UnixNano())}, info)
}

// TestStateFromTheFuture: a file saved after the restore's now (a clock
// stepped back, or a test's virtual clock restarted) is moved back by whole
// sub-windows, so the state is as old as when it was saved.
func TestStateFromTheFuture(t *testing.T) {
	orig, saved := busyRegistry(t, 5)
	data := save(t, orig, saved)
	for _, back := range []time.Duration{time.Nanosecond, 50 * time.Second, 90 * time.Second, time.Hour} {
		t.Run(back.String(), func(t *testing.T) {
			at := saved.Add(-back)
			got, info := restore(t, data, at)
			width := defaultWindow / defaultBuckets
			assert.LessOrEqual(t, info.Shift, -back)
			assert.Greater(t, info.Shift, -back-width)
			assert.Zero(t, info.Shift%width)
			assert.Equal(t, 3, info.Keys)
			for _, k := range []measure.Key{kA, kB} {
				w, okW := orig.Estimate(k)
				// orig read at saved - Shift... read it at the same age.
				w2 := orig.SnapshotAt(at.Add(-info.Shift))
				h, okH := got.Estimate(k)
				assert.Equal(t, okW, okH)
				assert.Equal(t, w.Newest.Add(info.Shift), h.Newest, "%v", k)
				ws, _ := w2.Lookup(k)
				hs, _ := got.SnapshotAt(at).Lookup(k)
				assert.Equal(t, ws.TTFT.Count, hs.TTFT.Count, "%v", k)
				assert.Equal(t, ws.TTFT.P95, hs.TTFT.P95, "%v", k)
				assert.Equal(t, ws.TPS.P50, hs.TPS.P50, "%v", k)
				assert.Equal(t, ws.ErrorRate, hs.ErrorRate, "%v", k)
				assert.Equal(t, ws.Requests, hs.Requests, "%v", k)
			}
		})
	}
}

// TestStateKeep: keep decides which keys come back.
func TestStateKeep(t *testing.T) {
	orig, now := busyRegistry(t, 6)
	r := New(measure.Options{})
	info, err := r.RestoreState(bytes.NewReader(save(t, orig, now)), now, func(k measure.Key) bool { return k != kB })
	require.NoError(t, err)
	assert.Equal(t, 2, info.Keys)
	assert.Equal(t, 1, info.Skipped)
	assert.Nil(t, r.Handle(kB))
	assert.NotNil(t, r.Handle(kA))
}

// TestStateRejects: every malformed input is a typed error, and the
// Registry is left empty, never partly restored.
func TestStateRejects(t *testing.T) {
	orig, now := busyRegistry(t, 7)
	good := save(t, orig, now)
	resum := func(b []byte) []byte {
		b = b[:len(b)-4]
		return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
	}
	flipped := bytes.Clone(good)
	flipped[len(flipped)/2] ^= 0x40
	version := bytes.Clone(good)
	version[4] = 2
	badBody := resum(append(bytes.Clone(good[:len(good)-5]), 7, 0, 0, 0, 0)) // last key's terminator damaged
	for _, tc := range []struct {
		name string
		data []byte
		want error
	}{
		{"empty", nil, measure.ErrStateFormat},
		{"garbage", []byte("{\"not\": \"a state file\"}"), measure.ErrStateFormat},
		{"magic only", []byte("TPSS"), ErrStateCorrupt},
		{"other version", version, ErrStateVersion},
		{"flipped byte", flipped, ErrStateCorrupt},
		{"truncated", good[:len(good)-1], ErrStateCorrupt},
		{"trailing", append(bytes.Clone(good), 0), ErrStateCorrupt},
		{"bad body, good checksum", badBody, ErrStateCorrupt},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := New(measure.Options{})
			_, err := r.RestoreState(bytes.NewReader(tc.data), now, nil)
			require.ErrorIs(t, err, tc.want)
			assert.True(t, strings.HasPrefix(err.Error(), "measure: "), err.Error())
			assert.Equal(t, 0, r.Len())
		})
	}
	t.Run("every truncation", func(t *testing.T) {
		for n := range len(good) {
			r := New(measure.Options{})
			_, err := r.RestoreState(bytes.NewReader(good[:n]), now, nil)
			require.Error(t, err, "%d bytes", n)
			require.True(t, errors.Is(err, ErrStateCorrupt) || errors.Is(err, measure.ErrStateFormat), "%d bytes: %v", n, err)
			require.Equal(t, 0, r.Len())
		}
	})
	t.Run("other window options", func(t *testing.T) {
		r := New(measure.Options{Window: measure.WindowOptions{Length: time.Minute}})
		_, err := r.RestoreState(bytes.NewReader(good), now, nil)
		require.ErrorIs(t, err, ErrIncompatible)
		assert.Equal(t, 0, r.Len())
	})
	t.Run("not empty", func(t *testing.T) {
		r := New(measure.Options{})
		r.RecordAt(now, kA, okSample(time.Second, 50, tps.CacheCold))
		before := r.SnapshotAt(now)
		_, err := r.RestoreState(bytes.NewReader(good), now, nil)
		require.ErrorIs(t, err, ErrStateNotEmpty)
		assert.Equal(t, before, r.SnapshotAt(now))
	})
	t.Run("reader error", func(t *testing.T) {
		boom := errors.New("disk on fire")
		_, err := New(measure.Options{}).RestoreState(errReader{boom}, now, nil)
		assert.ErrorIs(t, err, boom)
	})
}

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

// TestStateSkipsUnknownSections: a section of a tag this version does not
// know (a later writer's) is skipped, not an error.
func TestStateSkipsUnknownSections(t *testing.T) {
	r := New(measure.Options{})
	now := t0
	for i := range 30 {
		now = now.Add(time.Second)
		r.RecordAt(now, kA, okSample(time.Duration(300+i)*time.Millisecond, 60, tps.CacheCold))
	}
	good := save(t, r, now)
	// The byte before the checksum is the only key's terminating 0 tag.
	body := bytes.Clone(good[:len(good)-5])
	body = append(body, 9, 3, 'x', 'y', 'z', 0)
	data := binary.LittleEndian.AppendUint32(body, crc32.Checksum(body, castagnoli))
	got, info := restore(t, data, now)
	assert.Equal(t, 1, info.Keys)
	assert.Equal(t, r.SnapshotAt(now), got.SnapshotAt(now))
}

// TestStateFleetData: what other Registries merged in is saved and
// restored with the rest (Stats.Fleet, and the Estimate that reads it);
// calls in flight and keys only begun are not.
func TestStateFleetData(t *testing.T) {
	r, now := busyRegistry(t, 8)
	end := r.BeginAt(now, kA)
	defer end()
	other := New(measure.Options{})
	kD := measure.Key{Provider: "remote", Model: "only"}
	for i := range 20 {
		at := now.Add(time.Duration(i-20) * time.Second)
		other.RecordAt(at, kD, okSample(time.Second, 50, tps.CacheCold))
		other.RecordAt(at, kA, okSample(2*time.Second, 20, tps.CacheCold))
	}
	other.RecordAt(now, kA, tps.Sample{TTFT: time.Second, Err: errors.New("x"), ErrPhase: tps.PhaseMidStream})
	for _, d := range other.NewExporter().Export() {
		require.NoError(t, r.MergeAt(now, &d))
	}
	r.BeginAt(now, measure.Key{Provider: "begun", Model: "only"})() // begun, never recorded
	_, ok := r.Restored()
	assert.False(t, ok)

	got, info := restore(t, save(t, r, now), now)
	assert.Equal(t, 4, info.Keys, "kA, kB, kC and the remote-only kD")
	at, ok := got.Restored()
	require.True(t, ok)
	assert.True(t, at.Equal(now), "%v", at)

	want := r.SnapshotAt(now)
	have := got.SnapshotAt(now)
	st, ok := have.Lookup(kA)
	require.True(t, ok)
	assert.Zero(t, st.InFlight, "calls in flight are not restored")
	require.NotNil(t, st.Fleet)
	ws, _ := want.Lookup(kA)
	ws.InFlight = 0
	assert.Equal(t, ws, st)
	for _, k := range []measure.Key{kB, kD} {
		a, _ := want.Lookup(k)
		b, _ := have.Lookup(k)
		assert.Equal(t, a, b, "%v", k)
		ea, _ := r.Estimate(k)
		eb, _ := got.Estimate(k)
		assert.Equal(t, ea, eb, "%v", k)
	}
	_, ok = have.Lookup(measure.Key{Provider: "begun", Model: "only"})
	assert.False(t, ok, "a key only begun is not saved")
}

// TestStateConcurrent: SaveState runs while Records go on (go test -race).
func TestStateConcurrent(t *testing.T) {
	r, now := busyRegistry(t, 9)
	done := make(chan struct{})
	go func() {
		defer close(done)
		ss := samples(2000, 10)
		for i, s := range ss {
			r.RecordAt(now.Add(time.Duration(i)*time.Millisecond), kA, s)
		}
	}()
	for range 20 {
		got, _ := restore(t, save(t, r, now), now)
		require.Equal(t, 3, got.Len())
	}
	<-done
}

// FuzzRestoreState: no input makes RestoreState panic or leave a partial
// registry, every error is typed, and whatever restores round-trips: saved
// and restored at the same time it is the same registry, byte for byte.
// With fix set the input's last 4 bytes are replaced by the body's checksum,
// so that mutations reach the decoder instead of failing the checksum.
func FuzzRestoreState(f *testing.F) {
	r, now := busyRegistry(f, 11)
	f.Add(save(f, r, now), int64(0), false)
	f.Add(save(f, r, now), int64(-90*time.Second), true)
	f.Add(save(f, New(measure.Options{}), now), int64(time.Minute), false)
	small := New(measure.Options{})
	small.RecordAt(now, kA, okSample(time.Second, 50, tps.CacheWarm))
	small.RecordAt(now, kB, tps.Sample{TTFT: time.Second, Err: errors.New("x"), ErrPhase: tps.PhaseMidStream})
	f.Add(save(f, small, now), int64(0), true)
	merged := New(measure.Options{})
	for _, d := range small.NewExporter().Export() {
		require.NoError(f, merged.MergeAt(now, &d))
	}
	f.Add(save(f, merged, now), int64(0), true)
	f.Add([]byte("TPSS\x01"), int64(0), false)
	f.Add([]byte("TPSS\x02 a later version"), int64(0), false)
	// Records damaged inside a whole file (TestStateSkipsBadKeys): a
	// counter out of range, a key string too long, a section twice.
	implausible := New(measure.Options{})
	for _, k := range []measure.Key{kA, kB} {
		s := okSample(time.Second, 50, tps.CacheCold)
		s.Implausible = tps.ImplausibleOverStreamed
		implausible.RecordAt(now, k, s)
	}
	head, recs := splitState(f, save(f, implausible, now))
	bad := slices.Clone(recs)
	bad[0].rest = withSection(bad[0].rest, false, tagUsage, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f)
	f.Add(joinState(head, bad), int64(0), true)
	bad = slices.Clone(recs)
	bad[1].keyB = nil
	appendKey(&bad[1].keyB, measure.Key{Provider: "p", Model: strings.Repeat("m", maxKeyString+1)})
	f.Add(joinState(head, bad), int64(0), true)
	bad = slices.Clone(recs)
	bad[0].rest = withSection(bad[0].rest, false, tagKey)
	f.Add(joinState(head, bad), int64(0), true)
	// Bins where no finite value maps (TestRestoreRejectsIndexesNoValueReaches).
	plantBins(&r.lookup(kA).gaps, now, -hostileSpan, hostileSpan)
	f.Add(save(f, r, now), int64(0), false)
	f.Fuzz(func(t *testing.T, data []byte, offset int64, fix bool) {
		if fix && len(data) >= 4 {
			body := data[:len(data)-4]
			data = binary.LittleEndian.AppendUint32(bytes.Clone(body), crc32.Checksum(body, castagnoli))
		}
		at := now.Add(time.Duration(offset % int64(24*time.Hour)))
		a := New(measure.Options{})
		info, err := a.RestoreState(bytes.NewReader(data), at, nil)
		if err != nil {
			if !errors.Is(err, measure.ErrStateFormat) && !errors.Is(err, ErrStateVersion) &&
				!errors.Is(err, ErrStateCorrupt) && !errors.Is(err, ErrIncompatible) {
				t.Fatalf("untyped error: %v", err)
			}
			require.Equal(t, 0, a.Len())
			return
		}
		require.Equal(t, info.Keys, a.Len())
		require.LessOrEqual(t, len(info.BadKeys), min(info.Bad, maxBadKeys))
		for _, ke := range info.BadKeys {
			require.ErrorIs(t, ke, ErrStateCorrupt)
			_, restored := a.SnapshotAt(at).Lookup(ke.Key)
			require.False(t, restored, "a bad key is not restored: %v", ke)
		}
		once := save(t, a, at)
		b := New(measure.Options{})
		_, err = b.RestoreState(bytes.NewReader(once), at, nil)
		require.NoError(t, err)
		require.Equal(t, a.SnapshotAt(at), b.SnapshotAt(at))
		require.True(t, bytes.Equal(once, save(t, b, at)), "saved bytes differ")
		// And it goes on working.
		for _, k := range a.SnapshotAt(at).Keys() {
			a.RecordAt(at, k, okSample(time.Second, 50, tps.CacheCold))
			_, _ = a.Estimate(k)
		}
	})
}

// TestRestoreRejectsIndexesNoValueReaches: a key record (valid checksum)
// whose window bins lie where no finite value maps is corrupt
// (ErrStateCorrupt) and not restored, whether the bins are in the key's
// own windows or in what it merged from the fleet; the file's other keys
// are. Before, it restored and the restore's own quantiles built one array
// across the whole span.
func TestRestoreRejectsIndexesNoValueReaches(t *testing.T) {
	for _, where := range []string{"own", "fleet"} {
		t.Run(where, func(t *testing.T) {
			r, now := busyRegistry(t, 4)
			e := r.lookup(kA)
			i := slices.IndexFunc(e.states[:], func(s *stateStats) bool { return s != nil })
			w := &e.states[i].tps
			if where == "fleet" {
				src := New(measure.Options{})
				src.RecordAt(now, kA, okSample(time.Second, 50, 0))
				for _, d := range src.NewExporter().Export() {
					require.NoError(t, r.MergeAt(now, &d))
				}
				w = &e.remote.tps
			}
			plantBins(w, now, -hostileSpan, hostileSpan)
			data := save(t, r, now)
			a := New(measure.Options{})
			var err error
			var info RestoreInfo
			n := allocated(func() { info, err = a.RestoreState(bytes.NewReader(data), now, nil) })
			assert.LessOrEqual(t, n, uint64(4*len(data)+maxQueryBytes), "RestoreState allocated %d bytes", n)
			require.NoError(t, err)
			require.Equal(t, 1, info.Bad)
			require.Len(t, info.BadKeys, 1)
			assert.Equal(t, kA, info.BadKeys[0].Key)
			require.ErrorIs(t, info.BadKeys[0], ErrStateCorrupt)
			assert.ErrorContains(t, info.BadKeys[0], "bin index")
			assert.Equal(t, 2, a.Len(), "the other keys are restored")
			_, ok := a.Estimate(kA)
			assert.False(t, ok, "the bad key is not")
		})
	}
}

// TestStateRejectsDuplicateKey: a key written twice is a corrupt record:
// neither copy is restored, also when the first copy was not restored (keep
// rejected it), which the check against the restored keys alone let through.
func TestStateRejectsDuplicateKey(t *testing.T) {
	now := t0.Add(time.Hour)
	one := New(measure.Options{})
	one.RecordAt(now, kA, okSample(time.Second, 50, tps.CacheCold))
	f1, f0 := save(t, one, now), save(t, New(measure.Options{}), now)
	head := f0[:len(f0)-5] // the header; then the key count (one byte) and the checksum
	require.Equal(t, head, f1[:len(head)])
	rec := f1[len(head)+1 : len(f1)-4]
	dup := append(append(append(bytes.Clone(head), 2), rec...), rec...)
	dup = binary.LittleEndian.AppendUint32(dup, crc32.Checksum(dup, castagnoli))
	calls := 0
	for name, keep := range map[string]func(measure.Key) bool{
		"both kept":          nil,
		"the first not kept": func(measure.Key) bool { calls++; return calls > 1 },
	} {
		t.Run(name, func(t *testing.T) {
			r := New(measure.Options{})
			info, err := r.RestoreState(bytes.NewReader(dup), now, keep)
			require.NoError(t, err)
			require.Equal(t, 1, info.Bad)
			require.ErrorIs(t, info.BadKeys[0], ErrStateCorrupt)
			assert.Contains(t, info.BadKeys[0].Error(), "twice")
			assert.Equal(t, 0, r.Len())
			assert.Zero(t, info.Keys)
		})
	}
}

// stateRecord is one key record of a state file, split at the end of its
// key strings.
type stateRecord struct {
	key        measure.Key
	keyB, rest []byte // rest: the sections and the terminating 0
}

// splitState splits a valid state file into its header (through the
// half-life, before the key count) and its key records.
func splitState(t testing.TB, data []byte) ([]byte, []stateRecord) {
	t.Helper()
	body := data[:len(data)-4]
	d := &decoder{b: body[len(stateMagic)+1:], kind: ErrStateCorrupt}
	d.time("saved")
	d.uvarint("length")
	d.uvarint("buckets")
	d.float("accuracy")
	d.uvarint("half-life")
	head := body[:len(body)-len(d.b)]
	n := d.uvarint("keys")
	var recs []stateRecord
	for range n {
		start := len(d.b)
		k := d.key(math.MaxUint64)
		keyEnd := len(d.b)
		for tag := d.uvarint("tag"); tag != 0; tag = d.uvarint("tag") {
			d.bytes("section", math.MaxUint64)
		}
		require.NoError(t, d.err)
		off := len(body) - start
		recs = append(recs, stateRecord{key: k, keyB: body[off : len(body)-keyEnd], rest: body[len(body)-keyEnd : len(body)-len(d.b)]})
	}
	require.NoError(t, d.end())
	return head, recs
}

// joinState builds a state file, with a good checksum, from a header and
// records.
func joinState(head []byte, recs []stateRecord) []byte {
	b := bytes.Clone(head)
	enc.EncodeUvarint64(&b, uint64(len(recs)))
	for _, r := range recs {
		b = append(append(b, r.keyB...), r.rest...)
	}
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

// withSection returns rest with sec (tag, length, content) added before its
// terminating 0, or at its start.
func withSection(rest []byte, first bool, tag uint64, content ...byte) []byte {
	var sec []byte
	enc.EncodeUvarint64(&sec, tag)
	appendBytes(&sec, content)
	if first {
		return append(sec, rest...)
	}
	return append(append(bytes.Clone(rest[:len(rest)-1]), sec...), 0)
}

// TestStateSkipsBadKeys: one damaged key record in a file that is whole
// (good checksum, good framing) is skipped with an error naming it, and the
// file's other keys are restored as saved; before, the whole file was
// refused, so one lying deployment discarded every deployment's statistics
// at every restart.
func TestStateSkipsBadKeys(t *testing.T) {
	orig, now := busyRegistry(t, 12)
	good := save(t, orig, now)
	head, recs := splitState(t, good)
	require.Len(t, recs, 3)
	require.Equal(t, good, joinState(head, recs), "split and join are exact")
	victim := recs[1]
	huge := func() []byte {
		var b []byte
		enc.EncodeUvarint64(&b, math.MaxInt64)
		return b
	}()
	longModel := strings.Repeat("m", maxKeyString+1)
	for _, tc := range []struct {
		name   string
		damage func(r stateRecord) stateRecord
		key    measure.Key // the key the error names
		msg    string      // in the error
	}{
		{"a key string too long", func(r stateRecord) stateRecord {
			r.keyB = nil
			appendKey(&r.keyB, measure.Key{Provider: r.key.Provider, Region: r.key.Region, Model: longModel})
			return r
		}, measure.Key{Provider: victim.key.Provider, Region: victim.key.Region, Model: longModel[:keyNameBytes] + "…"}, "longer than 4096"},
		{"a counter out of range", func(r stateRecord) stateRecord {
			r.rest = withSection(r.rest, false, tagUsage, huge...)
			return r
		}, victim.key, "implausible usage count"},
		{"a cache state out of range", func(r stateRecord) stateRecord {
			r.rest = withSection(r.rest, false, tagCache, 7)
			return r
		}, victim.key, "cache state 7"},
		{"a section twice", func(r stateRecord) stateRecord {
			r.rest = withSection(r.rest, false, tagKey)
			return r
		}, victim.key, "section 1 twice"},
		{"spreads before the key section", func(r stateRecord) stateRecord {
			r.rest = withSection(r.rest, true, tagCalm)
			return r
		}, victim.key, "before the key section"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bad := slices.Clone(recs)
			bad[1] = tc.damage(victim)
			got := New(measure.Options{Prices: map[measure.Key]measure.Price{kA: {Input: 0.5, CachedInput: 0.25, Output: 1.5}}})
			info, err := got.RestoreState(bytes.NewReader(joinState(head, bad)), now, nil)
			require.NoError(t, err)
			assert.Equal(t, 2, info.Keys)
			assert.Equal(t, 1, info.Bad)
			require.Len(t, info.BadKeys, 1)
			ke := info.BadKeys[0]
			assert.Equal(t, tc.key, ke.Key)
			assert.ErrorIs(t, ke, ErrStateCorrupt)
			assert.ErrorContains(t, ke, tc.msg)
			assert.True(t, strings.HasPrefix(ke.Error(), "measure: "), ke.Error())
			assert.Contains(t, ke.Error(), tc.key.Provider)
			want, have := orig.SnapshotAt(now), got.SnapshotAt(now)
			for _, r := range []stateRecord{recs[0], recs[2]} {
				a, _ := want.Lookup(r.key)
				b, ok := have.Lookup(r.key)
				require.True(t, ok, "%v restored", r.key)
				assert.Equal(t, a, b, "%v", r.key)
			}
			_, ok := have.Lookup(victim.key)
			assert.False(t, ok, "the damaged key is not restored")
		})
	}
	t.Run("many bad keys: the first 16 named, all counted", func(t *testing.T) {
		var many []stateRecord
		for i := range 20 {
			r := victim
			r.keyB = nil
			appendKey(&r.keyB, measure.Key{Provider: "p", Model: strings.Repeat("m", maxKeyString+1+i)})
			many = append(many, r)
		}
		got := New(measure.Options{})
		info, err := got.RestoreState(bytes.NewReader(joinState(head, append(many, recs[0]))), now, nil)
		require.NoError(t, err)
		assert.Equal(t, 20, info.Bad)
		assert.Len(t, info.BadKeys, maxBadKeys)
		assert.Equal(t, 1, info.Keys)
	})
	t.Run("a damaged file is still refused whole", func(t *testing.T) {
		body := joinState(head, recs)
		body[len(body)/2] ^= 0x40 // the checksum no longer matches
		_, err := New(measure.Options{}).RestoreState(bytes.NewReader(body), now, nil)
		require.ErrorIs(t, err, ErrStateCorrupt)
	})
}

// countingReader is an endless source of bytes (head, then filler) that
// counts what was read, and fails once more than limit was.
type countingReader struct {
	head  []byte
	read  int64
	limit int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	if c.read > c.limit {
		return 0, errors.New("read on past the header")
	}
	n := 0
	for n < len(p) {
		if c.read < int64(len(c.head)) {
			p[n] = c.head[c.read]
		} else {
			p[n] = ' '
		}
		n++
		c.read++
	}
	return n, nil
}

// TestRestoreReadsHeaderFirst: a file that is not a state file (issue 34:
// 1.1 GB of something else behind -state) is ErrStateFormat after 5 bytes
// read, and one of another version ErrStateVersion, instead of being read
// whole (up to 1 GiB) first; before, RestoreState read up to 1 GiB and
// reported ErrStateCorrupt ("larger than"), which the root took for a state
// file to replace. CheckStateFile is the same check.
func TestRestoreReadsHeaderFirst(t *testing.T) {
	for _, tc := range []struct {
		name string
		head string
		want error
	}{
		{"not a state file", `{"deployments": [`, measure.ErrStateFormat},
		{"empty", "", measure.ErrStateFormat},
		{"another version", "TPSS\x07", ErrStateVersion},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rd := &countingReader{head: []byte(tc.head), limit: 1 << 20}
			if tc.head == "" {
				_, err := New(measure.Options{}).RestoreState(bytes.NewReader(nil), t0, nil)
				require.ErrorIs(t, err, tc.want)
				require.ErrorIs(t, CheckStateFile(bytes.NewReader(nil)), measure.ErrStateFormat)
				return
			}
			_, err := New(measure.Options{}).RestoreState(rd, t0, nil)
			require.ErrorIs(t, err, tc.want)
			assert.LessOrEqual(t, rd.read, int64(len(stateMagic)+1), "bytes read")

			rd = &countingReader{head: []byte(tc.head), limit: 1 << 20}
			err = CheckStateFile(rd)
			if tc.want == measure.ErrStateFormat {
				require.ErrorIs(t, err, measure.ErrStateFormat)
			} else {
				require.NoError(t, err, "a state file of another version is a state file")
			}
			assert.LessOrEqual(t, rd.read, int64(len(stateMagic)+1), "bytes read")
		})
	}
	t.Run("a state file", func(t *testing.T) {
		r, now := busyRegistry(t, 13)
		require.NoError(t, CheckStateFile(bytes.NewReader(save(t, r, now))))
		require.ErrorIs(t, CheckStateFile(errReader{io.ErrClosedPipe}), io.ErrClosedPipe)
	})
}
