package executor_test

import (
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tpsroute/tpsroute/fallback"
	"github.com/tpsroute/tpsroute/internal/executor"
	"github.com/tpsroute/tpsroute/replay"
	"github.com/tpsroute/tpsroute/route"
)

// rescuePlan is a plan of a then b, both of model m declaring assistant
// prefill, with the expected TPS the Picker would give them.
func rescuePlan(tpsA, tpsB float64) route.Plan {
	a, b := prefillDep("a", "a-m"), prefillDep("b", "b-m")
	return route.Plan{Deployments: []route.Candidate{
		{Deployment: &a, Expected: route.Expected{TPS: tpsA, TPSOK: tpsA > 0, OK: true}},
		{Deployment: &b, Expected: route.Expected{TPS: tpsB, TPSOK: tpsB > 0, OK: true}},
	}}
}

// rescueRun streams a 200-token answer from a, which slows to slow tokens/s
// after chunk k, with b behind it, and returns what the caller read, the
// result and how long the call took.
func rescueRun(t *testing.T, opts fallback.Options, c executor.Call, plan route.Plan, b replay.Script, k int, slow float64) (drained, *executor.Result, time.Duration) {
	t.Helper()
	e := newEnv(map[string]replay.Script{
		"a-m": replay.WithFaults(&replay.Profile{OutputTokens: 200, TPS: 100, TTFT: 200 * time.Millisecond}, replay.SlowAfter(k, slow)),
		"b-m": b,
	}, opts)
	start := time.Now()
	res, err := e.do(t, plan, c)
	require.NoError(t, err)
	d := drain(t, res.Body)
	return d, res, time.Since(start)
}

// TestSlowStreamRescue is issue 29 item 4: a committed stream that slows to
// under a quarter of its deployment's expected TPS for 3 s continues on a
// same-model, prefill-capable deployment expected at least twice as fast,
// with exactly the delivered text; otherwise, or when the target fails, the
// slow stream goes on and the caller loses nothing.
func TestSlowStreamRescue(t *testing.T) {
	fast := func() replay.Script {
		return &replay.Profile{OutputTokens: 200, TPS: 100, TTFT: 200 * time.Millisecond}
	}
	tests := []struct {
		name    string
		opts    fallback.Options
		call    executor.Call
		plan    route.Plan
		b       replay.Script
		slow    float64 // a's rate after chunk 20
		rescued bool
		within  time.Duration
	}{
		{"rescued", fallback.Options{}, executor.Call{}, rescuePlan(100, 100), fast(), 5, true, 6 * time.Second},
		{"off", fallback.Options{Rescue: fallback.RescueOptions{Ratio: -1}}, executor.Call{}, rescuePlan(100, 100), fast(), 5, false, 40 * time.Second},
		{"mid_stream_error_policy", fallback.Options{MidStream: fallback.MidStreamError}, executor.Call{}, rescuePlan(100, 100), fast(), 5, false, 40 * time.Second},
		{"not_slow_enough", fallback.Options{}, executor.Call{}, rescuePlan(100, 100), fast(), 40, false, 6 * time.Second},
		{"tuned_ratio", fallback.Options{Rescue: fallback.RescueOptions{Ratio: 0.5}}, executor.Call{}, rescuePlan(100, 100), fast(), 40, true, 6 * time.Second},
		{"above_min_tps", fallback.Options{}, executor.Call{MinTPS: 4}, rescuePlan(100, 100), fast(), 5, false, 40 * time.Second},
		{"below_min_tps", fallback.Options{}, executor.Call{MinTPS: 20}, rescuePlan(100, 100), fast(), 5, true, 6 * time.Second},
		{"target_not_twice_as_fast", fallback.Options{}, executor.Call{}, rescuePlan(100, 15), fast(), 5, false, 40 * time.Second},
		{"unmeasured_deployment", fallback.Options{}, executor.Call{}, rescuePlan(0, 100), fast(), 5, false, 40 * time.Second},
		{"target_fails_slow_stream_goes_on", fallback.Options{}, executor.Call{}, rescuePlan(100, 100),
			replay.WithFaults(fast(), replay.Status(503, "", nil)), 5, false, 40 * time.Second},
		{"target_rejects_prefill", fallback.Options{}, executor.Call{}, rescuePlan(100, 100),
			replay.WithFaults(fast(), replay.RejectPrefill()), 5, false, 40 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				tt.call.Stream = true
				d, res, took := rescueRun(t, tt.opts, tt.call, tt.plan, tt.b, 20, tt.slow)
				require.NoError(t, d.err)
				assert.Equal(t, replay.Text(200), d.text, "the answer is never altered")
				assert.Less(t, took, tt.within)
				atts := res.Attempts()
				require.NotEmpty(t, atts)
				assert.Equal(t, tt.rescued, atts[0].Rescued)
				if !tt.rescued {
					assert.Equal(t, "a", res.Deployment().Provider)
					assert.NoError(t, atts[len(atts)-1].Err, "the slow stream ended well")
					return
				}
				assert.Equal(t, "b", res.Deployment().Provider)
				// The first window closes 3 s after the first output chunk
				// (200 ms): never earlier, at the chunk that closes it.
				assert.GreaterOrEqual(t, atts[0].Duration, 3200*time.Millisecond, "slow for a whole window first")
				assert.Less(t, atts[0].Duration, 4*time.Second)
				assert.Equal(t, 2, res.AttemptCount())
				assert.ErrorIs(t, atts[0].Err, fallback.ErrRescued)
				assert.Equal(t, fallback.ClassCanceled, atts[0].Class, "no breaker, no error rate")
				assert.Contains(t, atts[0].String(), "rescued")
			})
		})
	}
}

// TestRescueEvidence is the evidence for the rescue's default (issue 29
// item 4): a 200-token answer at 100 tokens/s that slows to slow tokens/s
// after chunk k, with a same-model deployment as fast behind it, read with
// the rescue off and with its defaults. The text is always exactly the
// answer; the rescue never makes the call slower by more than the target's
// TTFT and helps as soon as the slow part is longer than the window and the
// target's TTFT. go test -v prints the table.
func TestRescueEvidence(t *testing.T) {
	type row struct {
		k          int
		slow       float64
		off, on    time.Duration
		rescuedOn  bool
		identical  bool
		speedupPct float64
	}
	var rows []row
	for _, k := range []int{5, 60, 150, 190} {
		for _, slow := range []float64{2, 10, 20, 30} {
			synctest.Test(t, func(t *testing.T) {
				var r row
				r.k, r.slow = k, slow
				c := executor.Call{Stream: true}
				fast := &replay.Profile{OutputTokens: 200, TPS: 100, TTFT: 200 * time.Millisecond}
				dOff, _, off := rescueRun(t, fallback.Options{Rescue: fallback.RescueOptions{Ratio: -1}}, c, rescuePlan(100, 100), fast, k, slow)
				dOn, res, on := rescueRun(t, fallback.Options{}, c, rescuePlan(100, 100), fast, k, slow)
				require.NoError(t, dOff.err)
				require.NoError(t, dOn.err)
				assert.Equal(t, replay.Text(200), dOn.text, "k=%d slow=%v: never altered", k, slow)
				assert.Equal(t, dOff.text, dOn.text)
				assert.LessOrEqual(t, on, off+time.Second, "k=%d slow=%v: at most the target's TTFT worse", k, slow)
				r.off, r.on, r.identical = off, on, dOn.text == dOff.text
				r.rescuedOn = res.Attempts()[0].Rescued
				r.speedupPct = 100 * (1 - float64(on)/float64(off))
				rows = append(rows, r)
			})
		}
	}
	for _, r := range rows {
		t.Logf("slow after %3d chunks to %4.0f tok/s: off %6.2fs, on %6.2fs (%5.1f%% faster), rescued %v, identical %v",
			r.k, r.slow, r.off.Seconds(), r.on.Seconds(), r.speedupPct, r.rescuedOn, r.identical)
	}
	// Where the slow part is long, the rescue must be taken and pay off.
	for _, r := range rows {
		if r.k <= 60 && r.slow <= 10 {
			assert.True(t, r.rescuedOn, "k=%d slow=%v", r.k, r.slow)
			assert.Greater(t, r.speedupPct, 50.0, "k=%d slow=%v", r.k, r.slow)
		}
	}
}

// TestRescueTriesTheNextTarget: when the first target fails before its
// first output, the rescue goes on to the next one, in plan order.
func TestRescueTriesTheNextTarget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fast := func() *replay.Profile {
			return &replay.Profile{OutputTokens: 200, TPS: 100, TTFT: 200 * time.Millisecond}
		}
		e := newEnv(map[string]replay.Script{
			"a-m": replay.WithFaults(fast(), replay.SlowAfter(20, 5)),
			"b-m": replay.WithFaults(fast(), replay.Status(503, "", nil)),
			"c-m": fast(),
		}, fallback.Options{})
		a, b, c := prefillDep("a", "a-m"), prefillDep("b", "b-m"), prefillDep("c", "c-m")
		x := route.Expected{TPS: 100, TPSOK: true, OK: true}
		plan := route.Plan{Deployments: []route.Candidate{{Deployment: &a, Expected: x}, {Deployment: &b, Expected: x}, {Deployment: &c, Expected: x}}}
		res, err := e.do(t, plan, executor.Call{Stream: true})
		require.NoError(t, err)
		d := drain(t, res.Body)
		require.NoError(t, d.err)
		assert.Equal(t, replay.Text(200), d.text)
		assert.Equal(t, "c", res.Deployment().Provider)
		assert.Len(t, attemptsFor(e.h, "b-m"), 1)
		assert.Equal(t, 3, res.AttemptCount())
	})
}

// TestRescueOnAnEarlierDeployment: the target may come before the slow
// deployment in the plan: b, first, was rate limited for a second, the call
// went to a, and a's slow stream is rescued on b once b has cooled down.
func TestRescueOnAnEarlierDeployment(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fast := func() *replay.Profile {
			return &replay.Profile{OutputTokens: 200, TPS: 100, TTFT: 200 * time.Millisecond}
		}
		e := newEnv(map[string]replay.Script{
			"a-m": replay.WithFaults(fast(), replay.SlowAfter(20, 5)),
			"b-m": replay.WithFaults(fast(), replay.RateLimited("1").OnAttempts(1)),
		}, fallback.Options{})
		a, b := prefillDep("a", "a-m"), prefillDep("b", "b-m")
		x := route.Expected{TPS: 100, TPSOK: true, OK: true}
		plan := route.Plan{Deployments: []route.Candidate{{Deployment: &b, Expected: x}, {Deployment: &a, Expected: x}}}
		res, err := e.do(t, plan, executor.Call{Stream: true})
		require.NoError(t, err)
		d := drain(t, res.Body)
		require.NoError(t, d.err)
		assert.Equal(t, replay.Text(200), d.text)
		assert.Equal(t, "b", res.Deployment().Provider)
		at := attemptsFor(e.h, "b-m")
		require.Len(t, at, 2)
		assert.Equal(t, "assistant", at[1].LastRole, "b continued a's text")
	})
}

// TestRescueCountsAgainstTheBudgets: a rescue is an attempt like any other:
// when the target is cut in turn, the call's and the deployments' attempt
// budgets decide whether anything continues it.
func TestRescueCountsAgainstTheBudgets(t *testing.T) {
	for _, tt := range []struct {
		name string
		opts fallback.Options
	}{
		{"per_deployment", fallback.Options{AttemptsPerDeployment: 1, MaxAttempts: 10}},
		{"per_call", fallback.Options{MaxAttempts: 2}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				fast := func() *replay.Profile {
					return &replay.Profile{OutputTokens: 200, TPS: 100, TTFT: 200 * time.Millisecond}
				}
				b := replay.Func(func(c replay.Call) replay.Script {
					if c.Attempt == 1 {
						return replay.WithFaults(fast(), replay.CutAfter(60))
					}
					return fast()
				})
				d, res, _ := rescueRun(t, tt.opts, executor.Call{Stream: true}, rescuePlan(100, 100), b, 20, 5)
				require.ErrorIs(t, d.err, fallback.ErrMidStream)
				var fe *fallback.Error
				require.ErrorAs(t, d.err, &fe)
				assert.Equal(t, fallback.ContinuationBudget, fe.Continuation())
				assert.True(t, res.Attempts()[0].Rescued)
				assert.True(t, strings.HasPrefix(replay.Text(200), d.text))
			})
		})
	}
}
