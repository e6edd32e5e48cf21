package fleet

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tpsroute/tpsroute/fallback"
	"github.com/tpsroute/tpsroute/internal/redistest"
	"github.com/tpsroute/tpsroute/internal/registry"
	"github.com/tpsroute/tpsroute/measure"
	"github.com/tpsroute/tpsroute/route"
)

// uniqueName keeps tests sharing one redis-server apart.
func uniqueName(t testing.TB) string {
	return fmt.Sprintf("it%d", time.Now().UnixNano())
}

// TestRealRedis runs the sharing scenarios against a real redis-server
// (TPSROUTE_REDIS_ADDR, set by .ci/run): measurements, breaker and probe,
// the GCRA script on Redis's own clock, and affinity.
func TestRealRedis(t *testing.T) {
	url := "redis://" + redistest.Addr(t) + "/0"
	name := uniqueName(t)
	r1, r2, r3 := newReplicaIn(t, url, name, "r1"), newReplicaIn(t, url, name, "r2"), newReplicaIn(t, url, name, "r3")
	now := time.Now()
	for range 20 {
		r1.reg.RecordAt(now, slow.Key(), sample(3*time.Second, 5))
	}
	r1.f.Served("fleet:xyz", fast.Key(), now)
	r1.f.sh().Opened(slow.Key(), now, now.Add(time.Hour))
	for _, r := range []*replica{r1, r2, r3} {
		r.round(now)
	}
	e, ok := r2.reg.Estimate(slow.Key())
	require.True(t, ok)
	assert.Greater(t, e.TTFTP50, 2.9)
	assert.ErrorIs(t, r3.f.sh().Admit(slow.Key(), now, 0), fallback.ErrOpen)
	r2.mu.Lock()
	assert.Equal(t, fast.Key(), r2.learned["fleet:xyz"])
	r2.mu.Unlock()
	assert.Equal(t, 2, r3.f.Status(now).Replicas)

	// 60 RPM across three replicas calling every 20 ms for a second and a
	// half of real time: the GCRA runs on Redis's clock.
	start := time.Now()
	admitted := 0
	for time.Since(start) < 1500*time.Millisecond {
		for _, r := range []*replica{r1, r2, r3} {
			r.f.syncAt(context.Background(), time.Now(), false)
			if r.f.sh().Admit(fast.Key(), time.Now(), 0) == nil {
				admitted++
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	elapsed := time.Since(start).Seconds()
	// One per second, the burst of one, and one first call per replica on
	// credit.
	assert.LessOrEqual(t, float64(admitted), elapsed+1+3+1)
	assert.GreaterOrEqual(t, admitted, 1)
}

// BenchmarkSync measures one replica's round with 256 keys, each with new
// samples every round: CPU per round, bytes published per round, and the
// Redis memory each key's share of the stream takes (MEMORY USAGE, real
// redis-server only).
func BenchmarkSync(b *testing.B) {
	url := "redis://" + redistest.Addr(b) + "/0"
	name := uniqueName(b)
	reg := registry.New(measure.Options{})
	f, err := New(Options{URL: url, Name: name, Replica: "bench"})
	require.NoError(b, err)
	f.manual = true
	deps := make([]route.Deployment, 256)
	for i := range deps {
		deps[i] = route.Deployment{Provider: fmt.Sprintf("p%03d", i), Region: "us-east-1", Model: "llama-3.3-70b", BaseURL: "http://x.test/v1"}
	}
	_, err = f.JoinClient(reg, deps, nil)
	require.NoError(b, err)
	defer f.Close()
	ss := []time.Duration{180, 220, 250, 300, 410, 520, 800, 1300}
	now := time.Now()
	record := func() {
		for i, d := range deps {
			for j := range 4 { // 4 calls per key per second
				reg.RecordAt(now, d.Key(), sample(ss[(i+j)%len(ss)]*time.Millisecond, 60+float64(j*7)))
			}
		}
	}
	var cpu time.Duration
	sent0 := f.sentBytes.Load()
	for b.Loop() {
		b.StopTimer()
		now = now.Add(time.Second)
		record()
		c0 := cpuNow()
		b.StartTimer()
		f.syncAt(context.Background(), now, true)
		b.StopTimer()
		cpu += cpuNow() - c0
		b.StartTimer()
	}
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/round")
	b.ReportMetric(float64(f.sentBytes.Load()-sent0)/float64(b.N), "wire-B/round")
	rdb := redis.NewClient(&redis.Options{Addr: redistest.Addr(b)})
	defer rdb.Close()
	mem, err := rdb.MemoryUsage(context.Background(), f.streamKey()).Result()
	require.NoError(b, err)
	xlen, _ := rdb.XLen(context.Background(), f.streamKey()).Result()
	if xlen > 0 {
		// The stream holds one entry per round within the window; report
		// the bytes per key per entry and per key at steady state (ten
		// minutes' window of entries is not reached in a short run).
		b.ReportMetric(float64(mem)/float64(xlen)/256, "redis-B/key/round")
	}
}

func cpuNow() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
