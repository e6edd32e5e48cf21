package bench

import (
	"bytes"
	"context"
	"encoding/csv"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tpsroute/tpsroute/replay"
	"github.com/tpsroute/tpsroute/tps"
)

func TestPercentileAgainstOracle(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{1, 2, 7, 20, 101, 1000} {
		t.Run("n="+string(rune('0'+n%10)), func(t *testing.T) {
			v := make([]float64, n)
			for i := range v {
				v[i] = r.Float64() * 1000
			}
			d := NewDist(slices.Clone(v))
			slices.Sort(v)
			for _, q := range []struct {
				p   float64
				got float64
			}{{50, d.P50}, {90, d.P90}, {95, d.P95}, {99, d.P99}} {
				// Oracle: the smallest value with at least p% of values <= it.
				var want float64
				for _, x := range v {
					le := 0
					for _, y := range v {
						if y <= x {
							le++
						}
					}
					if float64(le)*100 >= q.p*float64(n) {
						want = x
						break
					}
				}
				assert.Equal(t, want, q.got, "p%v of %d", q.p, n)
			}
			assert.Equal(t, v[0], d.Min)
			assert.Equal(t, v[n-1], d.Max)
		})
	}
	_, ok := Percentile(nil, 50)
	assert.False(t, ok)
}

func TestParseSLO(t *testing.T) {
	tests := []struct {
		in   string
		want SLO
		err  bool
	}{
		{in: "", want: SLO{}},
		{in: "ttft=300ms,tps=30", want: SLO{TTFT: 300 * time.Millisecond, TPS: 30}},
		{in: "e2e=5s, p=99", want: SLO{E2E: 5 * time.Second, Percentile: 99}},
		{in: "ttft=300", err: true},
		{in: "tps", err: true},
		{in: "rps=3", err: true},
		{in: "p=120", err: true},
		{in: "tps=-1", err: true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseSLO(tt.in)
			if tt.err {
				require.Error(t, err)
				assert.True(t, strings.HasPrefix(err.Error(), "bench: "))
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestSummarize(t *testing.T) {
	ok := func(ttft, tps float64, lag float64) Result {
		return Result{TTFTMS: ttft, TTFTSchedMS: ttft + lag, LagMS: lag, TPS: tps, TPSOK: true, E2EMS: ttft + 1000, E2ESchedMS: ttft + 1000 + lag,
			OutputTokens: 100, InputTokens: 200, CachedTokens: 50, Target: "t"}
	}
	results := []Result{
		ok(100, 50, 0), ok(200, 40, 0), ok(250, 20, 0), ok(280, 35, 100), // the last misses TTFT from its schedule
		{Target: "t", ErrorClass: "rate_limit", Error: "429"},
		{Target: "t", ErrorClass: "mid_stream", Error: "cut", OutputTokens: 3},
	}
	for i := range results {
		results[i].SentMS = float64(i * 100)
		results[i].ScheduledMS = results[i].SentMS - results[i].LagMS
	}
	tests := []struct {
		name    string
		slo     SLO
		goodput float64
		met     bool
	}{
		{name: "no SLO: success rate", slo: SLO{}, goodput: 4.0 / 6, met: true},
		{name: "ttft from schedule", slo: SLO{TTFT: 300 * time.Millisecond}, goodput: 3.0 / 6, met: false},
		{name: "ttft and tps", slo: SLO{TTFT: 300 * time.Millisecond, TPS: 30}, goodput: 2.0 / 6, met: false},
		{name: "lenient percentile", slo: SLO{TTFT: time.Second, Percentile: 60}, goodput: 4.0 / 6, met: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := Summarize(results, tt.slo)
			assert.Equal(t, 6, s.Requests)
			assert.Equal(t, 4, s.OK)
			assert.Equal(t, map[string]int{"rate_limit": 1, "mid_stream": 1}, s.Errors)
			assert.InDelta(t, tt.goodput, s.Goodput, 1e-9)
			assert.Equal(t, tt.met, s.SLOMet)
			assert.Equal(t, 4, s.TTFT.N, "failed requests are not in the percentiles")
			assert.Equal(t, 200.0, s.TTFT.P50)
			assert.Equal(t, 280.0, s.TTFT.P99)
			assert.Equal(t, 380.0, s.TTFTSched.P99)
			assert.InDelta(t, 207.5, s.TTFT.Mean, 1e-9)
			assert.Equal(t, 35.0, s.TPS.P50)
			assert.Equal(t, int64(400), s.OutputTokens, "tokens of successful requests")
			assert.InDelta(t, 0.25, s.CachedShare, 1e-9)
			assert.Greater(t, s.Throughput, 0.0)
		})
	}
}

func TestRunErrorsByClass(t *testing.T) {
	prof := func() *replay.Profile {
		return &replay.Profile{TTFT: 100 * time.Millisecond, TPS: 100, OutputTokens: 20}
	}
	tests := []struct {
		name     string
		fault    replay.Fault
		class    string
		phase    string
		cooldown bool
	}{
		{name: "rate limited", fault: replay.RateLimited("1"), class: "rate_limit", phase: "headers"},
		{name: "quota", fault: replay.InsufficientQuota(), class: "quota", phase: "headers", cooldown: true},
		{name: "unauthorized", fault: replay.Unauthorized(), class: "auth", phase: "headers", cooldown: true},
		{name: "server error", fault: replay.Status(500, "", nil), class: "server", phase: "headers"},
		{name: "cut mid-stream", fault: replay.CutAfter(5), class: "mid_stream", phase: "mid_stream"},
		{name: "reset", fault: replay.ResetBeforeHeaders(), class: "connect", phase: "connect"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				cfg := Config{
					Router: knownConfig(map[string]*replay.Profile{"a": prof()}),
					// Every third request fails.
					Requests: 21,
				}
				cfg.Router = knownConfigScripts(map[string]replay.Script{"a": replay.WithFaults(prof(), tt.fault.OnAttempts(3, 6, 9, 12, 15, 18, 21))})
				rep, err := Run(context.Background(), cfg)
				require.NoError(t, err)
				require.Len(t, rep.Summaries, 1)
				s := rep.Summaries[0]
				failed := map[string]int{}
				first := true
				for _, r := range rep.Results {
					if r.OK() {
						continue
					}
					failed[r.ErrorClass]++
					require.True(t, strings.HasPrefix(r.Error, "bench: ") || r.ErrorClass == tt.class, r.Error)
					if r.ErrorClass == "skipped" {
						assert.Empty(t, r.ErrorPhase, "a skipped request reached no provider")
						continue
					}
					assert.Equal(t, tt.class, r.ErrorClass, r.Error)
					assert.Equal(t, tt.phase, r.ErrorPhase, r.Error)
					if first {
						assert.Equal(t, 2, r.Index, "the third request fails first")
						first = false
					}
				}
				assert.Equal(t, s.Requests-s.OK, failed[tt.class]+failed["skipped"])
				if tt.cooldown {
					// The router leaves the deployment alone after such an
					// answer: the rest of the run is skipped, not sent.
					assert.Equal(t, 1, failed[tt.class], "errors %v", failed)
					assert.Equal(t, 18, failed["skipped"], "errors %v", failed)
				} else {
					assert.Equal(t, 7, failed[tt.class], "errors %v", failed)
				}
			})
		})
	}
}

func TestRunRouted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := Config{
			Router: knownConfig(map[string]*replay.Profile{
				"a": {TTFT: 100 * time.Millisecond, TPS: 100, OutputTokens: 20},
				"b": {TTFT: 400 * time.Millisecond, TPS: 50, OutputTokens: 20},
			}),
			Mode:     Routed,
			Requests: 30,
			Warmup:   5,
		}
		// Seeded exploration and band draws make the split reproducible; three
		// samples make a deployment measured, so both are compared within the
		// warmup instead of one staying cold behind the other.
		cfg.Router.Route.Seed = 7
		cfg.Router.Measure.MinSamples = 3
		rep, err := Run(context.Background(), cfg)
		require.NoError(t, err)
		assert.Equal(t, []string{"routed"}, rep.Targets)
		require.Len(t, rep.Results, 30)
		served := map[string]int{}
		for _, r := range rep.Results {
			require.True(t, r.OK(), r.Error)
			served[r.Deployment.Provider]++
			assert.GreaterOrEqual(t, r.Attempts, 1)
		}
		assert.Greater(t, served["a"], served["b"], "the router prefers the faster deployment: %v", served)
	})
}

func TestRunOpenLoopSchedule(t *testing.T) {
	run := func(t *testing.T, poisson bool, seed uint64) []float64 {
		var sched []float64
		synctest.Test(t, func(t *testing.T) {
			cfg := Config{
				Router: knownConfig(map[string]*replay.Profile{"a": {TTFT: 50 * time.Millisecond, TPS: 200, OutputTokens: 10}}),
				Rates:  []float64{20}, Poisson: poisson, Seed: seed, Requests: 200, Warmup: 3,
			}
			rep, err := Run(context.Background(), cfg)
			require.NoError(t, err)
			require.Len(t, rep.Results, 200)
			assert.Equal(t, "open", rep.Configs[0].Loop)
			for _, r := range rep.Results {
				sched = append(sched, r.ScheduledMS)
				assert.Zero(t, r.LagMS, "no lag in a bubble")
				assert.InDelta(t, r.TTFTMS, r.TTFTSchedMS, 1e-9)
			}
		})
		return sched
	}
	t.Run("constant", func(t *testing.T) {
		s := run(t, false, 1)
		for i := 1; i < len(s); i++ {
			assert.InDelta(t, 50, s[i]-s[i-1], 1e-6)
		}
	})
	t.Run("poisson is seeded", func(t *testing.T) {
		a, b, c := run(t, true, 1), run(t, true, 1), run(t, true, 2)
		assert.Equal(t, a, b)
		assert.NotEqual(t, a, c)
		mean := (a[len(a)-1] - a[0]) / float64(len(a)-1)
		assert.InEpsilon(t, 50, mean, 0.2, "mean gap of a 20/s Poisson process")
		gaps := map[int]bool{}
		for i := 1; i < len(a); i++ {
			gaps[int(a[i]-a[i-1])] = true
		}
		assert.Greater(t, len(gaps), 20, "gaps vary")
	})
}

func TestRunInterrupted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cfg := Config{
			Router:      knownConfig(map[string]*replay.Profile{"a": {TTFT: time.Second, TPS: 10, OutputTokens: 20}, "b": {TTFT: time.Second, OutputTokens: 20}}),
			Concurrency: []int{2},
			Requests:    20,
		}
		time.AfterFunc(5500*time.Millisecond, cancel)
		rep, err := Run(ctx, cfg)
		require.ErrorIs(t, err, context.Canceled)
		require.NotNil(t, rep)
		assert.True(t, rep.Partial)
		assert.NotEmpty(t, rep.Results)
		assert.Less(t, len(rep.Results), 20)
		for _, r := range rep.Results {
			assert.True(t, r.OK(), "requests cut by the interruption are dropped: %s", r.Error)
		}
	})
}

func TestRunRefusesFewRequests(t *testing.T) {
	cfg := Config{Router: knownConfig(map[string]*replay.Profile{"a": {}}), Requests: 5}
	_, err := Run(context.Background(), cfg)
	require.ErrorIs(t, err, ErrTooFewRequests)
	cfg.Targets = []string{"nobody"}
	cfg.Force = true
	_, err = Run(context.Background(), cfg)
	require.ErrorIs(t, err, ErrInvalidConfig)
	assert.Contains(t, err.Error(), `model "m"`, "names the model")
}

func TestReportRoundTrip(t *testing.T) {
	rep := sweepReport(t)
	var js bytes.Buffer
	require.NoError(t, rep.WriteJSON(&js))
	back, err := ReadReport(bytes.NewReader(js.Bytes()))
	require.NoError(t, err)
	assert.Equal(t, rep.Summaries, back.Summaries, "summaries recomputed from the JSON results are identical")
	assert.Equal(t, len(rep.Results), len(back.Results))

	for _, bad := range []string{`{"version":99}`, `{"version":` + strconv.Itoa(ReportVersion) + `}`, `{"version":`} {
		_, err = ReadReport(strings.NewReader(bad))
		require.ErrorIs(t, err, ErrReport, bad)
	}

	var c bytes.Buffer
	require.NoError(t, rep.WriteCSV(&c))
	rows, err := csv.NewReader(&c).ReadAll()
	require.NoError(t, err)
	require.Len(t, rows, 1+len(rep.Results))
	assert.Equal(t, "config", rows[0][0])
	assert.Len(t, rows[1], len(rows[0]))

	var tbl bytes.Buffer
	require.NoError(t, rep.WriteTable(&tbl))
	lines := strings.Split(strings.TrimSpace(tbl.String()), "\n")
	assert.Contains(t, lines[0], "TTFT p50")
	assert.Contains(t, tbl.String(), "warm c=4")
	assert.Contains(t, tbl.String(), "SLO ttft=300ms")
}

// TestSchemaNames pins the strings the JSON and CSV carry for tps values to
// the spellings docs/BENCH.md documents, now that they come from tps's String
// methods.
func TestSchemaNames(t *testing.T) {
	tests := []struct {
		name string
		got  string
		want string
	}{
		{"phase none", phaseName(tps.PhaseNone), ""},
		{"phase connect", phaseName(tps.PhaseConnect), "connect"},
		{"phase headers", phaseName(tps.PhaseHeaders), "headers"},
		{"phase first token", phaseName(tps.PhaseFirstToken), "first_token"},
		{"phase mid-stream", phaseName(tps.PhaseMidStream), "mid_stream"},
		{"cache unknown", tps.CacheUnknown.String(), "unknown"},
		{"cache cold", tps.CacheCold.String(), "cold"},
		{"cache warm", tps.CacheWarm.String(), "warm"},
		{"source none", tps.TokenSourceNone.String(), "none"},
		{"source usage", tps.TokenSourceUsage.String(), "usage"},
		{"source tokenizer", tps.TokenSourceTokenizer.String(), "tokenizer"},
		{"source chunks", tps.TokenSourceChunks.String(), "chunks"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, tt.got)
		})
	}
	t.Run("fill", func(t *testing.T) {
		var r Result
		r.fill(tps.Sample{Cache: tps.CacheWarm, TokenSource: tps.TokenSourceUsage}, time.Time{})
		assert.Equal(t, "warm", r.Cache)
		assert.Equal(t, "usage", r.TokenSource)
	})
}
