package sim

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The same seed and space draw the same fleet; another seed another.
func TestGenerateReproducible(t *testing.T) {
	for _, class := range append(Classes(), "") {
		t.Run("class="+class, func(t *testing.T) {
			a, err := Generate(7, Space{Class: class})
			require.NoError(t, err)
			b, err := Generate(7, Space{Class: class})
			require.NoError(t, err)
			c, err := Generate(8, Space{Class: class})
			require.NoError(t, err)
			ja, _ := json.Marshal(a)
			jb, _ := json.Marshal(b)
			jc, _ := json.Marshal(c)
			assert.Equal(t, string(ja), string(jb))
			assert.NotEqual(t, string(ja), string(jc))
			// A generated scenario reads back as it was written.
			back, err := ParseScenario(bytes.NewReader(ja))
			require.NoError(t, err)
			assert.Equal(t, a, back)
		})
	}
	_, err := Generate(1, Space{Class: "nope"})
	var ge *GenerateError
	require.ErrorAs(t, err, &ge)
	assert.ErrorContains(t, err, `sim: generate: unknown class "nope"`)
}

// The draws cover the documented space: 2 to 16 deployments, 1 to 32
// closed-loop callers and open loops, every class, and each class's
// feature.
func TestGenerateSpace(t *testing.T) {
	classes := map[string]int{}
	var minN, maxN, minC, maxC = 99, 0, 99, 0
	open, prompt := 0, 0
	for seed := range uint64(600) {
		sc, err := Generate(seed, Space{})
		require.NoError(t, err)
		require.True(t, sc.Live)
		classes[sc.Class]++
		n := len(sc.Deployments)
		minN, maxN = min(minN, n), max(maxN, n)
		if c := sc.Workload.Concurrency; c > 0 {
			minC, maxC = min(minC, c), max(maxC, c)
		} else {
			open++
		}
		if sc.Deployments[0].ContextK > 0 {
			prompt++
		}
		has := func(f func(Deployment) bool) bool {
			for _, d := range sc.Deployments {
				if f(d) {
					return true
				}
			}
			return false
		}
		switch sc.Class {
		case ClassDrift:
			assert.True(t, has(func(d Deployment) bool { return d.Drift.Rate < 0 }), sc.Name)
		case ClassBatching:
			assert.True(t, has(func(d Deployment) bool { return d.LoadK > 0 && d.LoadK <= 4 }), sc.Name)
			assert.GreaterOrEqual(t, sc.Workload.Concurrency, 8, sc.Name)
		case ClassWidth:
			assert.GreaterOrEqual(t, n, 8, sc.Name)
		case ClassSteps:
			assert.True(t, has(func(d Deployment) bool { return len(d.Phases) > 0 }), sc.Name)
		case ClassTails:
			assert.True(t, has(func(d Deployment) bool { return d.Noisy.Every > 0 }), sc.Name)
		case ClassLimits:
			assert.True(t, has(func(d Deployment) bool { return d.Limit > 0 }), sc.Name)
		case ClassCuts:
			assert.True(t, has(func(d Deployment) bool { return d.Errors.Cut > 0 }), sc.Name)
		}
	}
	assert.Len(t, classes, len(Classes()))
	assert.Equal(t, 2, minN)
	assert.Equal(t, 16, maxN)
	assert.Equal(t, 1, minC)
	assert.Equal(t, 32, maxC)
	assert.Greater(t, open, 100)
	assert.Greater(t, prompt, 100)
}

// Live batching: a stream running alone on a deployment with LoadK 1 slows
// when a second joins half-way, chunk by chunk, and speeds up again when it
// leaves; with the speed fixed at the start (not Live) it does not slow.
func TestLiveBatching(t *testing.T) {
	for _, live := range []bool{true, false} {
		t.Run("live="+map[bool]string{true: "on", false: "off"}[live], func(t *testing.T) {
			sc := &Scenario{Name: "live", Duration: Duration(3 * time.Second), Live: live,
				Workload:    Workload{Rate: 1, OutputTokens: []int{2000}},
				Deployments: []Deployment{{Provider: "p", TTFT: Duration(time.Millisecond), TPS: 1000, LoadK: 1}}}
			// Calls at 1 s and 2 s: each 2,000 tokens at 1,000 tok/s alone
			// take 2 s, so the second joins the first half-way.
			res := run(t, sc, Pinned(0)).Results[0]
			require.Len(t, res.Calls, 2)
			first := res.Calls[0]
			if live {
				assert.Less(t, first.TPS, 990.0, "the first stream slowed when the second joined")
				assert.Greater(t, first.TPS, 500.0, "but only for part of its run")
			} else {
				assert.InDelta(t, 1000, first.TPS, 1)
			}
		})
	}
}

// A concurrency Limit answers 429 with its Retry-After past the limit;
// the oracle counts the limited deployment out.
func TestLimit(t *testing.T) {
	sc := &Scenario{Name: "limit", Duration: Duration(20 * time.Second),
		Workload: Workload{Concurrency: 3, OutputTokens: []int{100}},
		Deployments: []Deployment{
			{Provider: "fast", TTFT: Duration(100 * time.Millisecond), TPS: 1000, Limit: 1, Errors: Errors{RetryAfter: Duration(2 * time.Second)}},
			{Provider: "slow", TTFT: Duration(100 * time.Millisecond), TPS: 200},
		}}
	rep := run(t, sc, Pinned(0), Oracle())
	pin := rep.Result("pinned-0")
	n := 0
	for _, c := range pin.Calls {
		if c.Answered == 1 {
			n++
		}
	}
	assert.Greater(t, n, 0, "calls over the limit failed over to slow")
	assert.Zero(t, pin.Summary.Failed)
	// Callers woken together choose one after the other, each seeing the
	// others' claims, so the oracle never sends two at once to fast: none
	// meets a 429 and every call goes where the oracle chose, under any
	// goroutine order (-race and -cpu included).
	assert.Equal(t, 1.0, rep.Result("oracle").Summary.TrueBest)
}

// A closed-loop caller whose call failed waits a second: a whole outage
// under two callers for 10 s fails about 20 calls, where a loop without
// the pause spins forever in virtual time.
func TestClosedLoopOutagePauses(t *testing.T) {
	sc := &Scenario{Name: "down-closed", Duration: Duration(10 * time.Second),
		Workload:    Workload{Concurrency: 2},
		Deployments: []Deployment{{Provider: "p", TTFT: Duration(time.Millisecond), TPS: 100, Phases: []Phase{{Status: 503}}}}}
	s := run(t, sc, Defaults()).Results[0].Summary
	assert.Equal(t, s.Calls, s.Failed)
	assert.InDelta(t, 20, s.Calls, 2)
}

// A drift multiplies TPS by exp(rate × t) from From, held at Floor.
func TestDriftFactor(t *testing.T) {
	d := Drift{From: Duration(10 * time.Second), Rate: -0.1, Floor: 0.5}
	assert.Equal(t, 1.0, d.factor(5*time.Second))
	assert.InDelta(t, 0.9048, d.factor(11*time.Second), 1e-4)
	assert.Equal(t, 0.5, d.factor(time.Hour))
	assert.Equal(t, 1.0, Drift{}.factor(time.Hour))
}

var randomFlag = flag.Int("sim.random", 0, "TestRandomFleets: this many fleets instead of randomFleets")

var dumpFlag = flag.String("sim.dump", "", "TestRandomFleets: write each fleet's score as JSON to this file, to compare two runs fleet by fleet")

var leanFlag = flag.Bool("sim.lean", false, "TestRandomFleets: score only the defaults, the oracle and mean10 (about half the CPU), while exploring a change")

var classFlag = flag.String("sim.class", "", "TestRandomFleets: draw only fleets of this class (sim.Space.Class), while exploring a change that concerns one")

var fromFlag = flag.Uint64("sim.from", 1, "TestRandomFleets: the first seed (1001 scores a range disjoint from the default's)")

// randomFleets is how many generated fleets TestRandomFleets scores.
const randomFleets = 200

// scoreRandom scores n generated fleets from seed from on, each in its own
// synctest bubble.
func scoreRandom(t *testing.T, from uint64, n int, sp Space, policies func(*Scenario) []Policy) *Distribution {
	t.Helper()
	d := &Distribution{}
	for seed := from; seed < from+uint64(n); seed++ {
		sc, err := Generate(seed, sp)
		require.NoError(t, err)
		synctest.Test(t, func(t *testing.T) {
			fs, err := ScoreFleet(context.Background(), sc, policies(sc))
			require.NoError(t, err)
			d.Fleets = append(d.Fleets, fs)
		})
	}
	return d
}

// testBaselines are the policies the random-fleet tests score: the
// defaults, the oracle, round-robin, LiteLLM, P2C and Mean10. Random and
// OpenRouter are left out to save CPU: generated fleets have no prices, so
// OpenRouter is uniform random, and both score as round-robin ("tpsbench
// sim -random N" runs them all).
func testBaselines(seed uint64) []Policy {
	return []Policy{Defaults(), Oracle(), RoundRobin(), LiteLLM(seed), P2C(seed), Mean10(seed)}
}

// TestRandomFleets scores the defaults and the baselines over 200 generated
// fleets in virtual time, within 2 minutes of CPU, and logs the
// distribution table (docs/ROUTING.md, "Random fleets").
func TestRandomFleets(t *testing.T) {
	if raceEnabled {
		t.Skip("skipped under the race detector; TestRandomFloors runs a fixed set")
	}
	n := randomFleets
	if *randomFlag > 0 {
		n = *randomFlag
	}
	cpu0, ok := processCPU()
	sp := Space{Class: *classFlag}
	d := scoreRandom(t, *fromFlag, n, sp, func(sc *Scenario) []Policy {
		if *leanFlag {
			return []Policy{Defaults(), Oracle(), Mean10(sc.Seed)}
		}
		return testBaselines(sc.Seed)
	})
	cpu1, ok1 := processCPU()
	// The batching class's check, the defaults over the best static split,
	// in a second pass (the defaults run again beside the splits), so that
	// the CPU figure above is the scoring's alone.
	for _, f := range d.Fleets {
		if f.Class != ClassBatching {
			continue
		}
		sc, err := Generate(f.Seed, sp)
		require.NoError(t, err)
		synctest.Test(t, func(t *testing.T) {
			fs, err := ScoreFleet(context.Background(), sc, append([]Policy{Defaults(), Oracle()}, Splits(sc)...))
			require.NoError(t, err)
			f.Checks[CheckBestSplit] = fs.Checks[CheckBestSplit]
			f.Checks[CheckBestSplitTotal] = fs.Checks[CheckBestSplitTotal]
		})
	}
	if *dumpFlag != "" {
		js, err := json.Marshal(d.Fleets)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(*dumpFlag, js, 0o644))
	}
	var b bytes.Buffer
	require.NoError(t, d.WriteTable(&b))
	t.Logf("%d random fleets from seed %d\n%s", n, *fromFlag, b.String())
	if cpu2, ok2 := processCPU(); ok && ok1 && ok2 {
		t.Logf("CPU: %v scoring, %v more for the batching fleets' best static splits", (cpu1 - cpu0).Round(time.Millisecond), (cpu2 - cpu1).Round(time.Millisecond))
		if n <= randomFleets {
			assert.Less(t, cpu1-cpu0, 2*time.Minute)
		}
	}
}

var fleetFlag = flag.String("sim.fleet", "", "TestOneFleet: the class-seed of a generated fleet to run and show")

// TestOneFleet runs one generated fleet ("CLASS-SEED", -sim.fleet; "any-SEED"
// for the fleet TestRandomFleets draws for SEED, whatever its class) under
// the random-fleet policies and logs its table and scenario: the way to
// look into a fleet the distribution shows the defaults losing.
func TestOneFleet(t *testing.T) {
	if *fleetFlag == "" {
		t.Skip("set -sim.fleet CLASS-SEED")
	}
	class, seed, ok := strings.Cut(*fleetFlag, "-")
	require.True(t, ok)
	n, err := strconv.ParseUint(seed, 10, 64)
	require.NoError(t, err)
	sp := Space{Class: class}
	if class == "any" { // the fleet TestRandomFleets draws for this seed
		sp = Space{}
	}
	sc, err := Generate(n, sp)
	require.NoError(t, err)
	js, _ := json.MarshalIndent(sc, "", "  ")
	t.Logf("%s", js)
	rep := run(t, sc, testBaselines(n)...)
	for _, r := range rep.Results {
		share := make([]float64, len(sc.Deployments))
		for _, c := range r.Calls {
			if c.Sent >= 0 {
				share[c.Sent] += 1 / float64(len(r.Calls))
			}
		}
		t.Logf("%s: shares %.2f; route %+v", r.Policy, share, r.Route)
		if *callsFlag {
			var b strings.Builder
			for _, c := range r.Calls {
				fmt.Fprintf(&b, "%.2fs→%d %.0f; ", c.Start.Seconds(), c.Sent, c.TPS)
			}
			t.Logf("%s calls (start→sent TPS): %s", r.Policy, b.String())
		}
	}
}

var callsFlag = flag.Bool("sim.calls", false, "TestOneFleet: log every call of every policy (start, deployment sent to, TPS), in the order they ended")

// randomFloors are the least the defaults reach over TestRandomFloors'
// fixed set of generated fleets (seeds from floorSeed), measured and less
// a margin, so that a regression fails CI: the median and p10 of their
// ratio to the oracle, the most any baseline's median may reach relative
// to theirs, and the largest share of fleets a baseline may beat them in
// by more than 5%. Issue 28's targets are median 0.92, p10 0.80, every
// baseline's median below the defaults' and a share of at most 5%;
// docs/ROUTING.md ("Random fleets") says which are met.
var randomFloors = struct {
	median, p10, baselineMedian, ahead float64
}{median: 0.93, p10: 0.85, baselineMedian: 1.01, ahead: 0.12} // measured after issue 28's eighth round (the load probe): 0.960, 0.884, 0.980 (mean10: 0.941/0.960), 0.08 (mean10; 0.06 before the probe)

// floorSeed is the first seed of TestRandomFloors' fleets, apart from
// TestRandomFleets' so that the floors are not read off the same draws.
const floorSeed = 100_001

// floorFleets is the size of TestRandomFloors' fixed set.
const floorFleets = 50

// TestRandomFloors scores a fixed set of 50 generated fleets (every class)
// and fails below randomFloors. It runs under the race detector too (about
// a minute of CPU there).
func TestRandomFloors(t *testing.T) {
	d := scoreRandom(t, floorSeed, floorFleets, Space{}, func(sc *Scenario) []Policy {
		return []Policy{Defaults(), Oracle(), RoundRobin(), P2C(sc.Seed), Mean10(sc.Seed)}
	})
	var b bytes.Buffer
	require.NoError(t, d.WriteTable(&b))
	t.Logf("%d fixed random fleets\n%s", floorFleets, b.String())
	stats := d.Stats("")
	def := stats[0]
	require.Equal(t, Defaults().Name(), def.Policy)
	assert.GreaterOrEqual(t, def.Median, randomFloors.median, "defaults' median ratio to the oracle")
	assert.GreaterOrEqual(t, def.P10, randomFloors.p10, "defaults' p10 ratio to the oracle")
	for _, s := range stats[1:] {
		if s.Policy == Oracle().Name() {
			continue
		}
		assert.LessOrEqual(t, s.Median/def.Median, randomFloors.baselineMedian, "%s's median over the defaults'", s.Policy)
		assert.LessOrEqual(t, s.Ahead, randomFloors.ahead, "share of fleets %s beats the defaults in by more than 5%%", s.Policy)
	}
}

// classFloors are the least the defaults reach on TestClassTargets' class
// checks, measured less a margin (issue 28's targets in brackets):
// the leader's share before it is 30% slower than the runner-up, at most
// (below 0.5); the calls until the best of a wide fleet holds 80% of 20, at
// most (40); the ratio to the oracle over a wide fleet's 400 calls (0.85);
// and the ratio to the best static split under live batching (0.85).
var classFloors = struct {
	driftShare, widthHold, widthRatio, bestSplit float64
}{driftShare: 0.70, widthHold: 32, widthRatio: 0.95, bestSplit: 0.85} // measured at the tip of issue 28's fifth round: 0.58, 25.5, 0.98, 1.00 (0.96, 1.00, 1.01)

// TestClassTargets runs issue 28's class checks on fixed fleets of the
// drift, width and batching classes (the latter against Splits) and fails
// below classFloors; the medians are checked, each fleet's figure logged.
func TestClassTargets(t *testing.T) {
	if raceEnabled {
		t.Skip("skipped under the race detector; run go test ./internal/sim without -race")
	}
	base := func(sc *Scenario) []Policy { return []Policy{Defaults(), Oracle()} }
	drift := scoreRandom(t, floorSeed, 6, Space{Class: ClassDrift}, base)
	width := scoreRandom(t, floorSeed, 6, Space{Class: ClassWidth}, base)
	batching := scoreRandom(t, floorSeed, 3, Space{Class: ClassBatching}, func(sc *Scenario) []Policy {
		return append(base(sc), Splits(sc)...)
	})
	median := func(v []float64) float64 { require.NotEmpty(t, v); return quantile(v, 0.5) }
	ds, wh, bs := drift.Check(CheckDriftShare), width.Check(CheckWidthHold), batching.Check(CheckBestSplit)
	var wr []float64
	for _, f := range width.Fleets {
		wr = append(wr, f.Ratio[Defaults().Name()])
	}
	slices.Sort(wr)
	t.Logf("drift share at 30%% slower: %.2f; width hold within: %.0f; width ratio: %.2f; best split: %.2f (by tokens delivered: %.2f)", ds, wh, wr, bs, batching.Check(CheckBestSplitTotal))
	assert.LessOrEqual(t, median(ds), classFloors.driftShare)
	assert.LessOrEqual(t, median(wh), classFloors.widthHold)
	assert.GreaterOrEqual(t, median(wr), classFloors.widthRatio)
	assert.GreaterOrEqual(t, median(bs), classFloors.bestSplit)
}
