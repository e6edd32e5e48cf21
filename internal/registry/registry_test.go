package registry

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/tpsroute/tpsroute/measure"
	"github.com/tpsroute/tpsroute/tps"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var (
	kA = measure.Key{Provider: "groq", Region: "us", Model: "llama"}
	kB = measure.Key{Provider: "openai", Region: "eu", Model: "gpt"}
)

// ok returns a successful sample with the given TTFT and TPS.
func okSample(ttft time.Duration, tpsv float64, cache tps.CacheState) tps.Sample {
	return tps.Sample{
		TTFT: ttft, TPS: tpsv, TPSOK: true, TPOT: time.Duration(float64(time.Second) / tpsv),
		E2E: ttft + time.Second, Total: ttft + time.Second,
		OutputTokens: 100, InputTokens: 1000, CachedTokens: 0, Cache: cache,
		Gaps: tps.GapStats{Count: 99, Sum: 990 * time.Millisecond},
	}
}

func TestRecordSuccess(t *testing.T) {
	r := New(measure.Options{})
	for i := range 20 {
		s := okSample(200*time.Millisecond, 100, tps.CacheCold)
		if i%2 == 1 {
			s = okSample(100*time.Millisecond, 50, tps.CacheWarm)
			s.CachedTokens = 800
		}
		r.RecordAt(t0.Add(time.Duration(i)*time.Second), kA, s)
	}
	now := t0.Add(20 * time.Second)
	snap := r.SnapshotAt(now)
	st, ok := snap.Lookup(kA)
	require.True(t, ok)
	assert.Equal(t, int64(20), st.Requests)
	assert.Equal(t, int64(20), st.Successes)
	assert.Equal(t, int64(20), st.TTFT.Count)
	assert.Equal(t, int64(10), st.Cold.TTFT.Count)
	assert.Equal(t, int64(10), st.Warm.TTFT.Count)
	assert.Equal(t, int64(0), st.Unknown.Requests)
	assert.InEpsilon(t, 0.2, st.Cold.TTFT.P50, 0.01)
	assert.InEpsilon(t, 0.1, st.Warm.TTFT.P50, 0.01)
	assert.InEpsilon(t, 0.15, st.TTFT.Mean, 1e-9)
	assert.InEpsilon(t, 100, st.Cold.TPS.P99, 0.01)
	assert.InEpsilon(t, 0.01, st.Cold.TPOT.P50, 0.01)
	assert.InEpsilon(t, 0.01, st.ChunkGap.P50, 0.01)
	assert.InEpsilon(t, 1.2, st.Cold.E2E.P50, 0.01)
	assert.Equal(t, int64(20000), st.InputTokens)
	assert.Equal(t, int64(8000), st.CachedTokens)
	assert.Equal(t, int64(2000), st.OutputTokens)
	assert.Greater(t, st.TTFT.EWMA, 0.1)
	assert.Zero(t, st.ErrorRate)
	assert.Equal(t, now.UnixNano()-time.Second.Nanoseconds(), st.Newest.UnixNano())
	_, ok = snap.Lookup(kB)
	assert.False(t, ok)
}

func TestRecordOutcomes(t *testing.T) {
	timeoutErr := fmt.Errorf("wrapped: %w", context.DeadlineExceeded)
	tests := []struct {
		name   string
		sample tps.Sample
		check  func(t *testing.T, st measure.Stats)
	}{
		{"tpsok_false_never_enters_tps", tps.Sample{TTFT: time.Second, TPS: 500, TPSOK: false, E2E: time.Second}, func(t *testing.T, st measure.Stats) {
			assert.Zero(t, st.TPS.Count)
			assert.Zero(t, st.TPS.EWMA)
			assert.Equal(t, int64(1), st.TTFT.Count)
			assert.Equal(t, int64(1), st.Successes)
		}},
		{"unstreamed_has_no_ttft", tps.Sample{TTFT: 3 * time.Second, Last: 3 * time.Second, E2E: 3 * time.Second, Unstreamed: true, OutputTokens: 40}, func(t *testing.T, st measure.Stats) {
			assert.Zero(t, st.TTFT.Count, "a plain call's TTFT is its whole latency")
			assert.Zero(t, st.TPS.Count)
			assert.Equal(t, int64(1), st.E2E.Count)
			assert.Equal(t, int64(40), st.OutputTokens)
			assert.Equal(t, int64(1), st.Successes)
		}},
		{"mid_stream_failure_keeps_ttft_only", tps.Sample{TTFT: time.Second, TPS: 10, TPSOK: true, TPOT: time.Second, E2E: 3 * time.Second,
			Err: errors.New("boom"), ErrPhase: tps.PhaseMidStream, OutputTokens: 7}, func(t *testing.T, st measure.Stats) {
			assert.Equal(t, int64(1), st.TTFT.Count)
			assert.Zero(t, st.TPS.Count)
			assert.Zero(t, st.TPOT.Count)
			assert.Zero(t, st.E2E.Count)
			assert.Equal(t, int64(1), st.Errors)
			assert.Equal(t, int64(1), st.ErrorsByPhase.MidStream)
			assert.Equal(t, int64(1), st.ErrorsByClass[measure.ClassOther])
			assert.Equal(t, int64(7), st.OutputTokens, "tokens delivered before the error are kept")
			assert.Equal(t, 1.0, st.ErrorRate)
		}},
		{"timeout_before_first_token", tps.Sample{Err: timeoutErr, ErrPhase: tps.PhaseFirstToken}, func(t *testing.T, st measure.Stats) {
			assert.Zero(t, st.TTFT.Count)
			assert.Equal(t, int64(1), st.Timeouts)
			assert.Equal(t, int64(1), st.ErrorsByPhase.FirstToken)
			assert.Equal(t, int64(1), st.ErrorsByClass[measure.ClassTimeout])
		}},
		{"canceled_is_not_an_error", tps.Sample{Err: context.Canceled, ErrPhase: tps.PhaseHeaders}, func(t *testing.T, st measure.Stats) {
			assert.Equal(t, int64(1), st.Requests)
			assert.Zero(t, st.Errors)
			assert.Equal(t, int64(1), st.Canceled)
			assert.Zero(t, st.ErrorsByPhase.Headers)
			assert.Zero(t, st.ErrorRate)
			assert.Equal(t, int64(1), st.ErrorsByClass[measure.ClassCanceled])
		}},
		{"phase_without_err", tps.Sample{ErrPhase: tps.PhaseConnect}, func(t *testing.T, st measure.Stats) {
			assert.Equal(t, int64(1), st.Errors)
			assert.Equal(t, int64(1), st.ErrorsByPhase.Connect)
		}},
		{"garbage_is_dropped", tps.Sample{TTFT: -time.Second, TPS: math.NaN(), TPSOK: true, TPOT: -1, E2E: -1,
			InputTokens: -5, OutputTokens: -3, Cache: tps.CacheState(99)}, func(t *testing.T, st measure.Stats) {
			assert.Zero(t, st.TTFT.Count)
			assert.Zero(t, st.TPS.Count)
			assert.Zero(t, st.InputTokens)
			assert.Equal(t, int64(1), st.Unknown.Requests)
		}},
		{"inf_tps_dropped", tps.Sample{TTFT: time.Second, TPS: math.Inf(1), TPSOK: true}, func(t *testing.T, st measure.Stats) {
			assert.Zero(t, st.TPS.Count)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := New(measure.Options{})
			r.RecordAt(t0, kA, tt.sample)
			st, ok := r.SnapshotAt(t0).Lookup(kA)
			require.True(t, ok)
			tt.check(t, st)
			_, err := json.Marshal(r.SnapshotAt(t0))
			require.NoError(t, err)
		})
	}
	t.Run("given_class_and_class_cap", func(t *testing.T) {
		r := New(measure.Options{})
		for i := range 100 {
			r.RecordClassAt(t0, kA, tps.Sample{Err: context.Canceled, ErrPhase: tps.PhaseHeaders}, fmt.Sprintf("c%d", i))
		}
		st, _ := r.SnapshotAt(t0).Lookup(kA)
		assert.Len(t, st.ErrorsByClass, maxClasses+1)
		assert.Equal(t, int64(100-maxClasses), st.ErrorsByClass[measure.ClassOther])
	})
}

// TestRecordCallerClass checks that a failure of ClassCaller (the caller's
// input was refused) counts as a request and keeps its tokens and TTFT, but is
// not the deployment's error: not in Errors, Canceled, ErrorsByPhase or the
// error rate, even once the key holds maxClasses other classes.
func TestRecordCallerClass(t *testing.T) {
	r := New(measure.Options{})
	for i := range maxClasses {
		r.RecordClassAt(t0, kB, tps.Sample{Err: errors.New("x"), ErrPhase: tps.PhaseConnect}, fmt.Sprintf("c%d", i))
	}
	for _, k := range []measure.Key{kA, kB} {
		r.RecordClassAt(t0, k, tps.Sample{TTFT: time.Second, OutputTokens: 3,
			Err: errors.New("content policy"), ErrPhase: tps.PhaseMidStream}, measure.ClassCaller)
	}
	snap := r.SnapshotAt(t0)
	st, ok := snap.Lookup(kA)
	require.True(t, ok)
	assert.Equal(t, int64(1), st.Requests)
	assert.Zero(t, st.Errors)
	assert.Zero(t, st.Canceled)
	assert.Zero(t, st.ErrorsByPhase.MidStream)
	assert.Zero(t, st.ErrorRate)
	assert.Equal(t, int64(1), st.ErrorsByClass[measure.ClassCaller])
	assert.Equal(t, int64(3), st.OutputTokens, "tokens delivered before the refusal are kept")
	assert.Equal(t, int64(1), st.TTFT.Count)
	st, ok = snap.Lookup(kB)
	require.True(t, ok)
	assert.Equal(t, int64(maxClasses), st.Errors, "a full class map does not make the caller's refusal an error")
}

func TestRecordTime(t *testing.T) {
	r := New(measure.Options{})
	s := okSample(time.Second, 10, tps.CacheCold)
	s.Start = t0
	r.Record(kA, s)
	st, _ := r.SnapshotAt(t0.Add(time.Minute)).Lookup(kA)
	assert.Equal(t, t0.Add(s.Total).UnixNano(), st.Newest.UnixNano(), "sample time is Start+Total")
	assert.Equal(t, int64(1), st.TTFT.Count)
}

func TestNoNaNAnywhere(t *testing.T) {
	tests := []struct {
		name string
		fill func(r *Registry)
	}{
		{"empty", func(*Registry) {}},
		{"begin_only", func(r *Registry) { r.BeginAt(t0, kA) }},
		{"failures_only", func(r *Registry) { r.RecordAt(t0, kA, tps.Sample{ErrPhase: tps.PhaseConnect}) }},
		{"zero_sample", func(r *Registry) { r.RecordAt(t0, kA, tps.Sample{}) }},
		{"nan_inf", func(r *Registry) {
			r.RecordAt(t0, kA, tps.Sample{TPS: math.NaN(), TPSOK: true, E2ETPS: math.Inf(1), TTFT: math.MaxInt64})
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := New(measure.Options{})
			tt.fill(r)
			for _, at := range []time.Time{t0, t0.Add(time.Hour)} {
				b, err := json.Marshal(r.SnapshotAt(at))
				require.NoError(t, err)
				assert.NotContains(t, string(b), "NaN")
				e, _ := r.Estimate(kA)
				_, err = json.Marshal(e)
				require.NoError(t, err)
			}
		})
	}
}

func TestSnapshotJSONFieldNames(t *testing.T) {
	r := New(measure.Options{})
	r.RecordAt(t0, kA, okSample(time.Second, 10, tps.CacheWarm))
	b, err := json.Marshal(r.SnapshotAt(t0))
	require.NoError(t, err)
	var doc map[string]any
	require.NoError(t, json.Unmarshal(b, &doc))
	require.Contains(t, doc, "at")
	keys := doc["keys"].([]any)
	require.Len(t, keys, 1)
	st := keys[0].(map[string]any)
	for _, f := range []string{"key", "ttft", "tps", "tpot", "e2e", "chunk_gap", "requests", "successes", "errors",
		"canceled", "timeouts", "error_rate", "errors_by_phase", "errors_by_class", "in_flight", "newest",
		"input_tokens", "cached_tokens", "output_tokens", "reasoning_tokens", "cost_usd", "cost_exact",
		"cache_unknown", "cache_cold", "cache_warm"} {
		assert.Contains(t, st, f)
	}
	assert.Equal(t, map[string]any{"provider": "groq", "region": "us", "model": "llama"}, st["key"])
	ttft := st["ttft"].(map[string]any)
	for _, f := range []string{"count", "p50", "p90", "p95", "p99", "mean", "ewma"} {
		assert.Contains(t, ttft, f)
	}
	assert.Len(t, ttft, 7)
	phases := st["errors_by_phase"].(map[string]any)
	assert.Len(t, phases, 4)
	assert.Contains(t, phases, "first_token")
}

func TestSnapshotIteration(t *testing.T) {
	r := New(measure.Options{})
	ks := []measure.Key{kB, kA, {Provider: "groq", Region: "eu", Model: "llama"}}
	for _, k := range ks {
		r.RecordAt(t0, k, okSample(time.Second, 10, tps.CacheCold))
	}
	snap := r.SnapshotAt(t0)
	want := []measure.Key{{Provider: "groq", Region: "eu", Model: "llama"}, kA, kB}
	assert.Equal(t, want, snap.Keys())
	assert.Equal(t, 3, snap.Len())
	var got []measure.Key
	for k, st := range snap.All() {
		assert.Equal(t, k, st.Key)
		got = append(got, k)
		break
	}
	assert.Equal(t, want[:1], got)
	var zero measure.Snapshot
	assert.Zero(t, zero.Len())
	_, ok := zero.Lookup(kA)
	assert.False(t, ok)
	b, err := json.Marshal(zero)
	require.NoError(t, err)
	assert.JSONEq(t, `{"at":"0001-01-01T00:00:00Z","keys":[]}`, string(b))
}

func TestWindowExpiresInRegistry(t *testing.T) {
	r := New(measure.Options{})
	for i := range 30 {
		r.RecordAt(t0.Add(time.Duration(i)*time.Second), kA, okSample(time.Second, 10, tps.CacheCold))
	}
	r.RecordAt(t0, kA, tps.Sample{ErrPhase: tps.PhaseConnect})
	tests := []struct {
		name      string
		at        time.Duration
		count     int64
		errorRate bool
	}{
		{"inside", time.Minute, 30, true},
		{"after_window", 30*time.Second + defaultWindow, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st, _ := r.SnapshotAt(t0.Add(tt.at)).Lookup(kA)
			assert.Equal(t, tt.count, st.TTFT.Count)
			assert.Equal(t, tt.count, st.TPS.Count)
			assert.Equal(t, tt.errorRate, st.ErrorRate > 0)
			assert.Equal(t, int64(31), st.Requests, "totals do not expire")
			e, ok := r.Estimate(kA)
			assert.Equal(t, tt.count >= DefaultMinSamples, ok)
			assert.Equal(t, tt.count, e.Samples)
		})
	}
}

func TestEstimate(t *testing.T) {
	r := New(measure.Options{MinSamples: 5})
	t.Run("unknown", func(t *testing.T) {
		e, ok := r.Estimate(kA)
		assert.False(t, ok)
		assert.Equal(t, Estimate{}, e)
	})
	t.Run("not_ok_until_min_samples", func(t *testing.T) {
		for i := range 4 {
			r.RecordAt(t0.Add(time.Duration(i)*time.Millisecond), kA, okSample(time.Second, 100, tps.CacheCold))
			e, ok := r.Estimate(kA)
			assert.False(t, ok)
			assert.False(t, e.OK)
			assert.Equal(t, int64(i+1), e.Samples, "published every sample while not OK")
		}
		r.RecordAt(t0.Add(4*time.Millisecond), kA, okSample(time.Second, 100, tps.CacheWarm))
		e, ok := r.Estimate(kA)
		require.True(t, ok)
		assert.InEpsilon(t, 1, e.TTFTP50, 0.01)
		assert.InEpsilon(t, 100, e.TPSP95, 0.01)
		assert.InEpsilon(t, 1, e.TTFTEWMA, 1e-9)
		assert.Equal(t, int64(5), e.TPSSamples)
		assert.Equal(t, t0.Add(4*time.Millisecond).UnixNano(), e.Newest.UnixNano())
	})
	t.Run("refresh_bound", func(t *testing.T) {
		base := t0.Add(time.Second)
		r.RecordAt(base, kA, okSample(time.Second, 100, tps.CacheCold))
		e1, _ := r.Estimate(kA)
		r.RecordAt(base.Add(defaultRefresh/2), kA, okSample(time.Second, 100, tps.CacheCold))
		e2, _ := r.Estimate(kA)
		assert.Equal(t, e1.Samples, e2.Samples, "not republished within Refresh")
		r.RecordAt(base.Add(defaultRefresh), kA, okSample(time.Second, 100, tps.CacheCold))
		e3, _ := r.Estimate(kA)
		assert.Equal(t, e1.Samples+2, e3.Samples, "republished after Refresh")
	})
	t.Run("in_flight", func(t *testing.T) {
		end1 := r.BeginAt(t0, kA)
		end2 := r.BeginAt(t0, kA)
		e, _ := r.Estimate(kA)
		assert.Equal(t, int64(2), e.InFlight)
		end1()
		end1()
		e, _ = r.Estimate(kA)
		assert.Equal(t, int64(1), e.InFlight, "end is idempotent")
		st, _ := r.SnapshotAt(t0).Lookup(kA)
		assert.Equal(t, int64(1), st.InFlight)
		end2()
		e, _ = r.Estimate(kA)
		assert.Zero(t, e.InFlight)
	})
	t.Run("error_rate", func(t *testing.T) {
		r := New(measure.Options{MinSamples: 1})
		for i := range 10 {
			s := okSample(time.Second, 10, tps.CacheCold)
			if i < 3 {
				s = tps.Sample{ErrPhase: tps.PhaseHeaders}
			}
			r.RecordAt(t0, kA, s)
		}
		r.SnapshotAt(t0)
		e, _ := r.Estimate(kA)
		assert.InDelta(t, 0.3, e.ErrorRate, 1e-12)
	})
}

func TestPrune(t *testing.T) {
	r := New(measure.Options{TTL: time.Minute})
	r.RecordAt(t0, kA, okSample(time.Second, 10, tps.CacheCold))
	r.RecordAt(t0.Add(50*time.Second), kB, okSample(time.Second, 10, tps.CacheCold))
	kC := measure.Key{Provider: "c"}
	end := r.BeginAt(t0, kC)
	require.Equal(t, 3, r.Len())

	assert.Zero(t, r.PruneAt(t0.Add(time.Minute)))
	assert.Equal(t, 1, r.PruneAt(t0.Add(time.Minute+time.Nanosecond)), "kA idle past TTL")
	_, ok := r.Estimate(kA)
	assert.False(t, ok)
	_, ok = r.SnapshotAt(t0.Add(2 * time.Minute)).Lookup(kA)
	assert.False(t, ok)
	assert.Equal(t, 1, r.PruneAt(t0.Add(10*time.Minute)), "kB dropped, kC in flight")
	end()
	assert.Equal(t, 1, r.PruneAt(t0.Add(10*time.Minute)))
	assert.Zero(t, r.Len())

	t.Run("record_prunes", func(t *testing.T) {
		r := New(measure.Options{TTL: time.Minute})
		r.RecordAt(t0, kA, tps.Sample{})
		r.RecordAt(t0.Add(10*time.Minute), kB, tps.Sample{})
		assert.Equal(t, 1, r.Len())
		_, ok := r.SnapshotAt(t0.Add(10 * time.Minute)).Lookup(kB)
		assert.True(t, ok)
	})
	t.Run("recorded_again_starts_afresh", func(t *testing.T) {
		r := New(measure.Options{TTL: time.Minute})
		r.RecordAt(t0, kA, tps.Sample{})
		r.PruneAt(t0.Add(time.Hour))
		r.RecordAt(t0.Add(time.Hour), kA, tps.Sample{})
		st, ok := r.SnapshotAt(t0.Add(time.Hour)).Lookup(kA)
		require.True(t, ok)
		assert.Equal(t, int64(1), st.Requests)
	})
}

func TestCostExact(t *testing.T) {
	tests := []struct {
		name                  string
		n                     int
		price                 measure.Price
		in, cached, out       int64
		wantDollars, wantPico int64
	}{
		// 1e6 calls * (1134*2.5 + 100*1.25 + 567*10) / 1e6 = $8630
		{"round", 1_000_000, measure.Price{Input: 2.5, CachedInput: 1.25, Output: 10}, 1234, 100, 567, 8630, 0},
		// 1e6 * (1000*0.075 + 333*0.3)/1e6 = 75 + 99.9 = $174.9
		{"fractional", 1_000_000, measure.Price{Input: 0.075, Output: 0.3}, 1000, 0, 333, 174, 900_000_000_000},
		// cached price zero: cached billed at the input price; 1e4 * 0.15e-3 + 1e4 * 0.6e-6
		{"no_cache_discount", 10_000, measure.Price{Input: 0.15, Output: 0.6}, 1000, 999, 1, 1, 506_000_000_000},
		{"free", 10_000, measure.Price{}, 1000, 0, 1000, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := New(measure.Options{Prices: map[measure.Key]measure.Price{kA: tt.price}})
			s := tps.Sample{InputTokens: tt.in, CachedTokens: tt.cached, OutputTokens: tt.out, Cache: tps.CacheWarm}
			var naive float64
			per := (float64(tt.in-tt.cached)*tt.price.Input + float64(tt.cached)*tt.price.CachedInput + float64(tt.out)*tt.price.Output) / 1e6
			for range tt.n {
				r.RecordAt(t0, kA, s)
				naive += per
			}
			st, _ := r.SnapshotAt(t0).Lookup(kA)
			assert.Equal(t, measure.Money{Dollars: tt.wantDollars, Picodollars: tt.wantPico}, st.CostExact)
			assert.Equal(t, st.CostExact, st.Warm.CostExact)
			want := float64(tt.wantDollars) + float64(tt.wantPico)/1e12
			assert.Equal(t, want, st.Cost, "exact, where naive float summing gives %.12f", naive)
		})
	}
}

func TestConcurrent(t *testing.T) {
	r := New(measure.Options{TTL: time.Hour})
	keys := []measure.Key{kA, kB, {Provider: "x"}, {Provider: "y"}}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(g), 0))
			for i := range 2000 {
				k := keys[rng.IntN(len(keys))]
				end := r.BeginAt(t0, k)
				r.RecordAt(t0.Add(time.Duration(i)*time.Millisecond), k, okSample(time.Duration(rng.IntN(1000)+1)*time.Millisecond, 50, tps.CacheState(rng.IntN(3))))
				end()
				if i%100 == 0 {
					r.PruneAt(t0)
				}
			}
		})
	}
	wg.Go(func() {
		for range 200 {
			for _, k := range keys {
				r.Estimate(k)
			}
			_ = r.SnapshotAt(t0.Add(time.Second))
		}
	})
	wg.Wait()
	var total int64
	for _, st := range r.SnapshotAt(t0.Add(2 * time.Second)).All() {
		total += st.Requests
		assert.Zero(t, st.InFlight)
	}
	assert.Equal(t, int64(8000), total)
}

func TestHotPathAllocs(t *testing.T) {
	r := New(measure.Options{Prices: map[measure.Key]measure.Price{kA: {Input: 1, Output: 2}}})
	ss := samples(64, 5)
	now := t0
	for i := range 2000 {
		now = now.Add(10 * time.Millisecond)
		r.RecordAt(now, kA, ss[i%len(ss)])
	}
	i := 0
	allocs := testing.AllocsPerRun(1000, func() {
		now = now.Add(10 * time.Microsecond) // stays within one refresh interval
		i++
		s := ss[i%len(ss)]
		s.Err, s.ErrPhase = nil, tps.PhaseNone
		r.RecordAt(now, kA, s)
	})
	assert.Zero(t, allocs, "RecordAt")
	allocs = testing.AllocsPerRun(1000, func() { r.Estimate(kA) })
	assert.Zero(t, allocs, "Estimate")
}

func TestHandle(t *testing.T) {
	t.Run("unknown_key_is_nil", func(t *testing.T) {
		r := New(measure.Options{})
		assert.Nil(t, r.Handle(kA))
	})
	t.Run("reads_what_estimate_reads", func(t *testing.T) {
		r := New(measure.Options{MinSamples: 2})
		r.RecordAt(t0, kA, okSample(200*time.Millisecond, 100, tps.CacheCold))
		h := r.Handle(kA)
		require.NotNil(t, h)
		require.True(t, h.Live())
		est, ok := h.Estimate()
		assert.False(t, ok, "one sample is below MinSamples")
		want, wantOK := r.Estimate(kA)
		assert.Equal(t, want, est)
		assert.Equal(t, wantOK, ok)

		r.RecordAt(t0.Add(time.Second), kA, okSample(300*time.Millisecond, 80, tps.CacheCold))
		end := r.BeginAt(t0.Add(time.Second), kA)
		defer end()
		est, ok = h.Estimate()
		assert.True(t, ok, "the same handle sees later samples")
		assert.Equal(t, int64(2), est.Samples)
		assert.Equal(t, int64(1), est.InFlight, "InFlight read live")
		want, _ = r.Estimate(kA)
		assert.Equal(t, want, est)
	})
	t.Run("pruned_handle_is_dead_and_a_new_one_starts_afresh", func(t *testing.T) {
		r := New(measure.Options{TTL: time.Minute, MinSamples: 1})
		r.RecordAt(t0, kA, okSample(200*time.Millisecond, 100, tps.CacheCold))
		h := r.Handle(kA)
		require.NotNil(t, h)
		require.Equal(t, 1, r.PruneAt(t0.Add(2*time.Minute)))
		assert.False(t, h.Live())
		assert.Nil(t, r.Handle(kA), "pruned key")

		r.RecordAt(t0.Add(3*time.Minute), kA, okSample(time.Second, 10, tps.CacheCold))
		assert.False(t, h.Live(), "stays dead after the key is recorded again")
		h2 := r.Handle(kA)
		require.NotNil(t, h2)
		assert.True(t, h2.Live())
		est, ok := h2.Estimate()
		assert.True(t, ok)
		assert.Equal(t, int64(1), est.Samples, "the new entry starts afresh")
	})
	t.Run("concurrent_prune_record_read", func(t *testing.T) {
		r := New(measure.Options{TTL: time.Minute, MinSamples: 1})
		var wg sync.WaitGroup
		wg.Add(3)
		go func() {
			defer wg.Done()
			for i := range 200 {
				r.RecordAt(t0.Add(time.Duration(i)*time.Minute), kA, okSample(time.Second, 10, tps.CacheCold))
			}
		}()
		go func() {
			defer wg.Done()
			for i := range 200 {
				r.PruneAt(t0.Add(time.Duration(i)*time.Minute + 30*time.Second))
			}
		}()
		go func() {
			defer wg.Done()
			var h EstimateHandle
			for range 2000 {
				if h == nil || !h.Live() {
					h = r.Handle(kA)
				}
				if h != nil {
					est, ok := h.Estimate()
					if ok && est.Samples < 1 {
						t.Error("OK estimate with no samples")
						return
					}
				}
			}
		}()
		wg.Wait()
	})
}

// TestReadEstimate checks that ReadEstimate writes exactly what the
// handle's Estimate returns, for a Registry handle cold and warm (InFlight
// read live) and for any other EstimateHandle, overwriting whatever the
// value held before.
func TestReadEstimate(t *testing.T) {
	kA := measure.Key{Provider: "a", Model: "m"}
	r := New(measure.Options{MinSamples: 2})
	r.BeginAt(t0, kA)
	h := r.Handle(kA)
	require.NotNil(t, h)
	for i := range 3 {
		want, wantOK := h.Estimate()
		got := Estimate{TTFTP50: 99, Samples: 99, InFlight: 99, OK: !wantOK}
		gotOK := ReadEstimate(h, &got)
		assert.Equal(t, wantOK, gotOK, "ok after %d samples", i)
		assert.Equal(t, want, got, "estimate after %d samples", i)
		r.RecordAt(t0.Add(time.Duration(i+1)*time.Second), kA, okSample(time.Second, 100+float64(i), tps.CacheCold))
	}
	var got Estimate
	assert.True(t, ReadEstimate(h, &got), "warm at two samples")
	assert.EqualValues(t, 1, got.InFlight, "the begun call is still in flight")

	other := otherHandle{est: Estimate{TPSP50: 7, Samples: 3, OK: true}}
	assert.True(t, ReadEstimate(other, &got), "another EstimateHandle's ok")
	assert.Equal(t, other.est, got, "another EstimateHandle's Estimate")
}

// otherHandle is an EstimateHandle that is not a Registry's.
type otherHandle struct{ est Estimate }

func (o otherHandle) Estimate() (Estimate, bool) { return o.est, o.est.OK }
func (o otherHandle) Live() bool                 { return true }

// TestSweepAt checks that SweepAt keeps an idle key's Estimate fresh: once
// its only sample has left the window the key turns cold, with no Record and
// no Prune from outside. The first call only starts the clock, and calls
// within a second of it do nothing.
func TestSweepAt(t *testing.T) {
	kA := measure.Key{Provider: "a", Model: "m"}
	r := New(measure.Options{MinSamples: 1, Window: measure.WindowOptions{Length: 10 * time.Second, Buckets: 10}})
	r.RecordAt(t0, kA, okSample(time.Second, 100, tps.CacheCold))
	_, ok := r.Estimate(kA)
	require.True(t, ok, "warm after one sample")

	r.SweepAt(t0.Add(15 * time.Second))
	_, ok = r.Estimate(kA)
	assert.True(t, ok, "the first SweepAt only starts the clock")
	r.SweepAt(t0.Add(15*time.Second + 900*time.Millisecond))
	_, ok = r.Estimate(kA)
	assert.True(t, ok, "within a second of the last: nothing")

	r.SweepAt(t0.Add(16 * time.Second))
	e, ok := r.Estimate(kA)
	assert.False(t, ok, "kA's only sample left the window: cold again")
	assert.Zero(t, e.Samples)
	assert.Equal(t, 1, r.Len(), "idle within TTL: kept")
}

// A change the detector begins to see is published with the next refresh:
// one first token at half the level shows in the Estimate as pending at
// that level, while its figures stay at the old level.
func TestRegistryPublishesPending(t *testing.T) {
	r := New(measure.Options{})
	t0 := time.Unix(1_700_000_000, 0)
	s := tps.Sample{TTFT: 400 * time.Millisecond, TPS: 600, TPSOK: true, OutputTokens: 200}
	for i := range 30 {
		r.RecordAt(t0.Add(time.Duration(i)*time.Second), kA, s)
	}
	e, ok := r.Estimate(kA)
	require.True(t, ok)
	assert.Zero(t, e.TTFTPending)
	s.TTFT = 200 * time.Millisecond
	r.RecordAt(t0.Add(30*time.Second), kA, s)
	e, _ = r.Estimate(kA)
	assert.InDelta(t, 0.2, e.TTFTPending, 1e-9)
	assert.Zero(t, e.TPSPending)
	assert.InDelta(t, 0.4, e.TTFTP50, 0.01, "the level is not moved before the change is confirmed")
}
