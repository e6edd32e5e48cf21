package executor_test

import (
	"net/http"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tpsroute/tpsroute/fallback"
	"github.com/tpsroute/tpsroute/internal/executor"
	"github.com/tpsroute/tpsroute/replay"
	"github.com/tpsroute/tpsroute/tps"
)

// TestHealthyDeploymentNeverUntried is issue 13 point 1: a resets, b answers
// 502, c is healthy. The default attempt budget must reach c; a same-deployment
// retry never takes the place of an untried deployment.
func TestHealthyDeploymentNeverUntried(t *testing.T) {
	a, b, c := dep("a", "a-m"), dep("b", "b-m"), dep("c", "c-m")
	scripts := func() map[string]replay.Script {
		return map[string]replay.Script{
			"a-m": replay.WithFaults(prof(8), replay.ResetBeforeHeaders()),
			"b-m": replay.WithFaults(prof(8), replay.Status(http.StatusBadGateway, "", nil)),
			"c-m": prof(8),
		}
	}
	for _, stream := range []bool{true, false} {
		t.Run(map[bool]string{true: "stream", false: "buffered"}[stream], func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := newEnv(scripts(), fallback.Options{})
				res, err := e.do(t, planOf(a, b, c), executor.Call{Stream: stream})
				require.NoError(t, err)
				assert.Equal(t, "c", res.Deployment().Provider)
				assert.Equal(t, replay.Text(8), drain(t, res.Body).text)
				assert.Len(t, attemptsFor(e.h, "c-m"), 1)
				// The budget (plan length + 1) leaves room for one retry,
				// taken by a, the first retryable failure.
				assert.Len(t, attemptsFor(e.h, "a-m"), 2)
				assert.Len(t, attemptsFor(e.h, "b-m"), 1)
			})
		})
	}
	t.Run("all_failing_each_tried", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			ss := scripts()
			ss["c-m"] = replay.WithFaults(prof(8), replay.Status(http.StatusBadGateway, "", nil))
			e := newEnv(ss, fallback.Options{})
			_, err := e.do(t, planOf(a, b, c), executor.Call{Stream: true})
			require.Error(t, err)
			for _, m := range []string{"a-m", "b-m", "c-m"} {
				assert.NotEmpty(t, attemptsFor(e.h, m), m)
			}
			var fe *fallback.Error
			require.ErrorAs(t, err, &fe)
			assert.Len(t, fe.Attempts, 4, "budget len(plan)+1: one retry, every deployment once")
		})
	})
	t.Run("long_plan_over_default_cap", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			ss := map[string]replay.Script{}
			p := planOf()
			for _, n := range []string{"d1", "d2", "d3", "d4", "d5", "d6", "d7", "d8", "d9", "d10", "d11", "d12"} {
				ss[n+"-m"] = replay.WithFaults(prof(8), replay.Status(http.StatusBadGateway, "", nil))
				p.Deployments = append(p.Deployments, planOf(dep(n, n+"-m")).Deployments...)
			}
			ss["d12-m"] = prof(8)
			e := newEnv(ss, fallback.Options{})
			res, err := e.do(t, p, executor.Call{Stream: true})
			require.NoError(t, err, "the default cap never leaves a deployment untried")
			assert.Equal(t, "d12", res.Deployment().Provider)
			require.NoError(t, res.Body.Close())
		})
	})
	t.Run("explicit_max_attempts_bounds", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := newEnv(scripts(), fallback.Options{MaxAttempts: 2})
			_, err := e.do(t, planOf(a, b, c), executor.Call{Stream: true})
			require.Error(t, err)
			assert.Len(t, attemptsFor(e.h, "a-m"), 1, "no retry in place of untried b")
			assert.Len(t, attemptsFor(e.h, "b-m"), 1)
			assert.Empty(t, attemptsFor(e.h, "c-m"), "MaxAttempts set explicitly bounds the walk")
		})
	})
	t.Run("policy_stops", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			ss := scripts()
			ss["a-m"] = replay.WithFaults(prof(8), replay.ContentPolicy())
			e := newEnv(ss, fallback.Options{})
			_, err := e.do(t, planOf(a, b, c), executor.Call{Stream: true})
			require.Error(t, err)
			assert.Empty(t, attemptsFor(e.h, "b-m"))
			assert.Empty(t, attemptsFor(e.h, "c-m"))
		})
	})
}

// TestOneClassificationEitherDoor is issue 13 point 9: a stream cut after
// output is ErrMidStream whichever door the call used, the attempt counts
// agree, and MidStreamContinue says why no continuation was made.
func TestOneClassificationEitherDoor(t *testing.T) {
	a, b := dep("a", "a-m"), dep("b", "b-m")
	for _, stream := range []bool{true, false} {
		t.Run(map[bool]string{true: "stream", false: "buffered"}[stream], func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := newEnv(map[string]replay.Script{"a-m": replay.WithFaults(prof(16), replay.CutAfter(4))}, fallback.Options{})
				res, err := e.do(t, planOf(a), executor.Call{Stream: stream})
				if stream {
					require.NoError(t, err)
					assert.Equal(t, 1, res.AttemptCount(), "the committed attempt counts while it streams")
					err = drain(t, res.Body).err
					assert.Equal(t, 1, res.AttemptCount(), "and once it failed, not twice")
				}
				require.Error(t, err)
				assert.ErrorIs(t, err, fallback.ErrMidStream)
				var fe *fallback.Error
				require.ErrorAs(t, err, &fe)
				assert.Equal(t, tps.PhaseMidStream, fe.Phase())
				last, _ := fe.Last()
				assert.Equal(t, fallback.ClassMidStream, last.Class)
				assert.Contains(t, err.Error(), "fallback: 1 attempt (")
				// Why nothing was continued (issue 29 item 2): a's stream
				// reached the caller and has no target; a buffered call
				// delivered nothing and failed over instead.
				if stream {
					assert.ErrorIs(t, err, fallback.ErrContinuation)
					assert.Equal(t, fallback.ContinuationNoTarget, fe.Continuation())
				} else {
					assert.NotErrorIs(t, err, fallback.ErrContinuation, "nothing to continue")
					assert.Equal(t, fallback.ContinuationUncommitted, fe.Continuation())
				}
			})
		})
	}
	t.Run("continue_impossible_says_why", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := newEnv(map[string]replay.Script{
				"a-m": replay.WithFaults(prof(16), replay.CutAfter(4)),
				"b-m": prof(16),
			}, fallback.Options{MidStream: fallback.MidStreamContinue})
			res, err := e.do(t, planOf(a, b), executor.Call{Stream: true}) // b declares no prefill
			require.NoError(t, err)
			d := drain(t, res.Body)
			require.Error(t, d.err)
			assert.ErrorIs(t, d.err, fallback.ErrMidStream)
			assert.ErrorIs(t, d.err, fallback.ErrContinuation)
			assert.Contains(t, d.err.Error(), "continuation not possible: no deployment left that declares assistant prefill")
			assert.Equal(t, 1, res.AttemptCount())
		})
	})
}

// TestContextLengthFallsThroughListedModels is issue 13 point 6: a
// context_length_exceeded moves on to a larger known window, or, with windows
// unknown, to the next model the caller listed; never to the same model.
func TestContextLengthFallsThroughListedModels(t *testing.T) {
	a, same := dep("a", "a-m"), dep("s", "s-m") // model m, window unknown
	next := dep("b", "b-m")
	next.Model = "m2" // the caller's next listed model, window unknown
	small := dep("c", "c-m")
	small.Model, small.ContextWindow = "m3", 4096
	large := dep("d", "d-m")
	large.ContextWindow = 200_000
	scripts := func() map[string]replay.Script {
		return map[string]replay.Script{
			"a-m": replay.WithFaults(prof(8), replay.ContextLengthExceeded()),
			"s-m": prof(8), "b-m": prof(8), "c-m": prof(8), "d-m": prof(8),
		}
	}
	t.Run("next_listed_model", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := newEnv(scripts(), fallback.Options{})
			res, err := e.do(t, planOf(a, same, next), executor.Call{Stream: true})
			require.NoError(t, err)
			assert.Equal(t, "b", res.Deployment().Provider)
			assert.Equal(t, replay.Text(8), drain(t, res.Body).text)
			assert.Empty(t, attemptsFor(e.h, "s-m"), "the same model with an unknown window would only repeat")
		})
	})
	t.Run("larger_known_window", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			aw := a
			aw.ContextWindow = 8192
			e := newEnv(scripts(), fallback.Options{})
			res, err := e.do(t, planOf(aw, small, large), executor.Call{Stream: true})
			require.NoError(t, err)
			assert.Equal(t, "d", res.Deployment().Provider)
			require.NoError(t, res.Body.Close())
			assert.Empty(t, attemptsFor(e.h, "c-m"), "a smaller known window is not tried")
		})
	})
	t.Run("one_model_stops", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := newEnv(scripts(), fallback.Options{})
			_, err := e.do(t, planOf(a, same), executor.Call{Stream: true})
			require.Error(t, err)
			assert.Empty(t, attemptsFor(e.h, "s-m"))
		})
	})
}
