package registry

import (
	"bytes"
	"math"
	"math/rand/v2"
	"runtime"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tpsroute/tpsroute/measure"
	"github.com/tpsroute/tpsroute/tps"
)

// samples returns n realistic samples: lognormal TTFT around 400 ms, TPS
// around 80 tokens/s, and a mix of cache states.
func samples(n int, seed uint64) []tps.Sample {
	r := rand.New(rand.NewPCG(seed, 7))
	out := make([]tps.Sample, n)
	for i := range out {
		ttft := time.Duration(float64(400*time.Millisecond) * math.Exp(r.NormFloat64()*0.6))
		rate := 80 * math.Exp(r.NormFloat64()*0.3)
		tokens := int64(50 + r.IntN(1000))
		gen := time.Duration(float64(tokens) / rate * float64(time.Second))
		s := tps.Sample{
			TTFT: ttft, TPS: rate, TPSOK: true, TPOT: gen / time.Duration(tokens),
			E2E: ttft + gen, Total: ttft + gen, OutputTokens: tokens, InputTokens: int64(500 + r.IntN(4000)),
			Cache: tps.CacheState(r.IntN(3)),
			Gaps:  tps.GapStats{Count: tokens - 1, Sum: gen},
		}
		if s.Cache == tps.CacheWarm {
			s.CachedTokens = s.InputTokens / 2
		}
		if r.IntN(50) == 0 {
			s.Err, s.ErrPhase = errBench, tps.PhaseMidStream
		}
		out[i] = s
	}
	return out
}

type benchErr struct{}

func (benchErr) Error() string { return "bench failure" }

var errBench error = benchErr{}

// cpuTime returns the process's user+system CPU time. Reported per op next to
// ns/op, it shows the cost of an operation even when other processes share
// the cores (ns/op is wall time and grows with the machine's load).
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func reportCPU(b *testing.B, since time.Duration) {
	b.ReportMetric(float64(cpuTime()-since)/float64(b.N), "cpu-ns/op")
}

var benchPrices = map[measure.Key]measure.Price{kA: {Input: 0.59, CachedInput: 0.3, Output: 0.79}}

func BenchmarkRecord(b *testing.B) {
	r := New(measure.Options{Prices: benchPrices})
	ss := samples(4096, 1)
	now := t0
	// Steady state: every sub-window and cache state already seen.
	for i := range 20_000 {
		now = now.Add(20 * time.Millisecond)
		r.RecordAt(now, kA, ss[i%len(ss)])
	}
	b.ReportAllocs()
	b.ResetTimer()
	cpu := cpuTime()
	for i := 0; b.Loop(); i++ {
		now = now.Add(time.Millisecond) // 1000 calls/s on one key
		r.RecordAt(now, kA, ss[i&4095])
	}
	reportCPU(b, cpu)
}

// BenchmarkRecordLoaded is BenchmarkRecord with calls in flight: 8 begun
// and ended in turn, and every sample's generation within the key's
// in-flight marks, so that both load fits take it (the mean over the
// generation walks the marks it spans).
func BenchmarkRecordLoaded(b *testing.B) {
	r := New(measure.Options{Prices: benchPrices})
	ss := samples(4096, 1)
	now := t0
	var ends [8]func()
	step := func(i int) {
		now = now.Add(time.Millisecond) // 1000 calls/s on one key
		if e := ends[i&7]; e != nil {
			e()
		}
		ends[i&7] = r.BeginAt(now, kA)
		s := ss[i&4095]
		s.Start, s.TTFT, s.Last = now.Add(-20*time.Millisecond), 2*time.Millisecond, 19*time.Millisecond
		r.RecordAt(now, kA, s)
	}
	for i := range 20_000 {
		step(i)
	}
	b.ReportAllocs()
	b.ResetTimer()
	cpu := cpuTime()
	for i := 0; b.Loop(); i++ {
		step(i)
	}
	reportCPU(b, cpu)
}

func BenchmarkRecordParallel(b *testing.B) {
	r := New(measure.Options{Prices: benchPrices})
	ss := samples(4096, 2)
	keys := make([]measure.Key, 16)
	for i := range keys {
		keys[i] = measure.Key{Provider: "p", Region: "r", Model: string(rune('a' + i))}
		for j := range 2000 {
			r.RecordAt(t0.Add(time.Duration(j)*150*time.Millisecond), keys[i], ss[j%len(ss)])
		}
	}
	base := t0.Add(5 * time.Minute)
	var ctr atomic.Int64
	b.ReportAllocs()
	b.ResetTimer()
	cpu := cpuTime()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			i := ctr.Add(1)
			r.RecordAt(base.Add(time.Duration(i)*100*time.Microsecond), keys[i&15], ss[i&4095])
		}
	})
	reportCPU(b, cpu)
}

func BenchmarkEstimate(b *testing.B) {
	r := New(measure.Options{})
	ss := samples(1024, 3)
	keys := make([]measure.Key, 16)
	for i := range keys {
		keys[i] = measure.Key{Provider: "provider", Region: "us-east-1", Model: "llama-3.3-70b-" + string(rune('a'+i))}
		for j, s := range ss {
			r.RecordAt(t0.Add(time.Duration(j)*100*time.Millisecond), keys[i], s)
		}
	}
	k := keys[7]
	if _, ok := r.Estimate(k); !ok {
		b.Fatal("estimate not OK")
	}
	b.ReportAllocs()
	b.ResetTimer()
	var sink float64
	cpu := cpuTime()
	for b.Loop() {
		e, _ := r.Estimate(k)
		sink += e.TPSP50
	}
	reportCPU(b, cpu)
	_ = sink
}

// fillKeys records n samples into each of k keys, round robin, spread over
// two window lengths so that every sub-window of every window is full,
// across all three cache states.
func fillKeys(r *Registry, keys []measure.Key, n int) {
	ss := samples(8192, 4)
	span := 2 * defaultWindow
	total := n * len(keys)
	for i := range total {
		r.RecordAt(t0.Add(time.Duration(i)*(span/time.Duration(total))), keys[i%len(keys)], ss[i&8191])
	}
}

func TestMemoryPerKey(t *testing.T) {
	if testing.Short() {
		t.Skip("records a million samples")
	}
	r := New(measure.Options{Prices: benchPrices})
	fillKeys(r, []measure.Key{kA}, 1_000_000)
	st, _ := r.SnapshotAt(t0.Add(2 * defaultWindow)).Lookup(kA)
	require.Equal(t, int64(1_000_000), st.Requests)
	require.Positive(t, st.Unknown.TTFT.Count)
	require.Positive(t, st.Cold.TTFT.Count)
	require.Positive(t, st.Warm.TTFT.Count)
	bytes := r.lookup(kA).memBytes()
	t.Logf("accounted heap for one key after 1e6 samples: %d bytes", bytes)
	assert.LessOrEqual(t, bytes, 64<<10)
}

// BenchmarkMemoryPerKey measures with runtime.MemStats the heap held per key
// after 1e6 samples each, over 8 keys to average out heap noise.
func BenchmarkMemoryPerKey(b *testing.B) {
	const nkeys = 8
	keys := make([]measure.Key, nkeys)
	for i := range keys {
		keys[i] = measure.Key{Provider: "p", Model: string(rune('a' + i))}
	}
	var heap, accounted float64
	for b.Loop() {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		r := New(measure.Options{Prices: benchPrices})
		fillKeys(r, keys, 1_000_000)
		runtime.GC()
		runtime.ReadMemStats(&after)
		heap = (float64(after.HeapAlloc) - float64(before.HeapAlloc)) / nkeys
		accounted = float64(r.lookup(keys[0]).memBytes())
		runtime.KeepAlive(r)
	}
	b.ReportMetric(heap, "heap-B/key")
	b.ReportMetric(accounted, "accounted-B/key")
}

// BenchmarkRecordFleet is BenchmarkRecord on a key that also holds another
// registry's merged data (fleet mode): the refresh folds the remote windows
// in, Record itself does nothing more.
func BenchmarkRecordFleet(b *testing.B) {
	r := New(measure.Options{Prices: benchPrices})
	other := New(measure.Options{Prices: benchPrices})
	x := other.NewExporter()
	ss := samples(4096, 1)
	now := t0
	for i := range 20_000 {
		now = now.Add(20 * time.Millisecond)
		r.RecordAt(now, kA, ss[i%len(ss)])
		other.RecordAt(now, kA, ss[(i+7)%len(ss)])
		if i%50 == 0 {
			for _, d := range x.Export() {
				if err := r.MergeAt(now, &d); err != nil {
					b.Fatal(err)
				}
			}
			x.Commit()
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	cpu := cpuTime()
	for i := 0; b.Loop(); i++ {
		now = now.Add(time.Millisecond)
		r.RecordAt(now, kA, ss[i&4095])
	}
	reportCPU(b, cpu)
}

// BenchmarkEstimateFleet is BenchmarkEstimate with merged fleet data.
func BenchmarkEstimateFleet(b *testing.B) {
	r, other := New(measure.Options{}), New(measure.Options{})
	ss := samples(1024, 3)
	for j, s := range ss {
		r.RecordAt(t0.Add(time.Duration(j)*100*time.Millisecond), kA, s)
		other.RecordAt(t0.Add(time.Duration(j)*100*time.Millisecond), kA, s)
	}
	for _, d := range other.NewExporter().Export() {
		if err := r.MergeAt(t0.Add(102*time.Second), &d); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	var sink float64
	for b.Loop() {
		e, _ := r.Estimate(kA)
		sink += e.TPSP50
	}
	_ = sink
}

// busyKeys returns a Registry of n keys, each recorded 10 times a second
// over the last five minutes (a full default window, every cache state),
// and the time of the last sample.
func busyKeys(n int) (*Registry, time.Time) {
	r := New(measure.Options{Prices: benchPrices})
	keys := make([]measure.Key, n)
	for i := range keys {
		keys[i] = measure.Key{Provider: "provider", Region: "region", Model: "model-" + string(rune('A'+i/26)) + string(rune('a'+i%26))}
	}
	ss := samples(8192, 12)
	const perKey = 3000
	step := defaultWindow / perKey / time.Duration(n)
	now := t0
	for i := range perKey * n {
		now = now.Add(step)
		r.RecordAt(now, keys[i%n], ss[i&8191])
	}
	return r, now
}

// BenchmarkSaveState saves a Registry of 256 busy keys (3,000 samples
// each within the window) to memory.
func BenchmarkSaveState(b *testing.B) {
	r, now := busyKeys(256)
	var buf bytes.Buffer
	b.ReportAllocs()
	b.ResetTimer()
	cpu := cpuTime()
	for b.Loop() {
		buf.Reset()
		if err := r.SaveState(&buf, now); err != nil {
			b.Fatal(err)
		}
	}
	reportCPU(b, cpu)
	b.ReportMetric(float64(buf.Len()), "file-B")
	b.ReportMetric(float64(buf.Len())/256, "B/key")
}

// BenchmarkRestoreState restores that file into a new Registry.
func BenchmarkRestoreState(b *testing.B) {
	r, now := busyKeys(256)
	var buf bytes.Buffer
	if err := r.SaveState(&buf, now); err != nil {
		b.Fatal(err)
	}
	data := buf.Bytes()
	b.ReportAllocs()
	b.ResetTimer()
	cpu := cpuTime()
	for b.Loop() {
		nr := New(measure.Options{Prices: benchPrices})
		if _, err := nr.RestoreState(bytes.NewReader(data), now, nil); err != nil {
			b.Fatal(err)
		}
	}
	reportCPU(b, cpu)
	b.ReportMetric(float64(len(data)), "file-B")
}
