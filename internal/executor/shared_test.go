package executor_test

import (
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tpsroute/tpsroute/fallback"
	"github.com/tpsroute/tpsroute/internal/executor"
	"github.com/tpsroute/tpsroute/measure"
	"github.com/tpsroute/tpsroute/replay"
	"github.com/tpsroute/tpsroute/route"
)

// fakeShared is a fleet that denies keys it is told to and records what the
// Executor reports.
type fakeShared struct {
	mu     sync.Mutex
	deny   map[string]error // provider -> Admit's answer
	view   map[string]route.BreakerState
	done   []string // provider:failure
	opened []string
}

func (f *fakeShared) Admit(k measure.Key, _ time.Time, _ int64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.deny[k.Provider]
}

func (f *fakeShared) Done(k measure.Key, _ time.Time, o executor.Outcome) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.done = append(f.done, k.Provider+":"+[...]string{"ok", "fail", "excluded"}[o])
}

func (f *fakeShared) Opened(k measure.Key, now, until time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.opened = append(f.opened, k.Provider+":"+until.Sub(now).String())
}

func (f *fakeShared) Breaker(k measure.Key, _ time.Time) route.BreakerState {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.view[k.Provider]
}

// TestSharedSeam: a deployment the fleet holds open is skipped without a
// request, one without fleet budget too, every admitted attempt reports its
// breaker verdict, a local trip is reported with its half-open time, and
// Status shows the fleet's view of a breaker this Executor never tripped.
func TestSharedSeam(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sh := &fakeShared{
			deny: map[string]error{"a": fallback.ErrOpen, "b": fallback.ErrNoBudget},
			view: map[string]route.BreakerState{"a": route.BreakerOpen},
		}
		e := newEnv(map[string]replay.Script{
			"a-m": prof(8), "b-m": prof(8), "c-m": replay.WithFaults(prof(8), replay.Status(502, "", nil)), "d-m": prof(8),
		}, fallback.Options{Breaker: fallback.BreakerSettings{ConsecutiveFailures: 1, Timeout: 7 * time.Second}, AttemptsPerDeployment: 1}, executor.Hooks{Shared: sh})
		res, err := e.do(t, planOf(dep("a", "a-m"), dep("b", "b-m"), dep("c", "c-m"), dep("d", "d-m")), executor.Call{Stream: true})
		require.NoError(t, err)
		drain(t, res.Body)
		assert.Empty(t, attemptsFor(e.h, "a-m"))
		assert.Empty(t, attemptsFor(e.h, "b-m"))
		var errs []error
		for _, a := range res.Attempts() {
			errs = append(errs, a.Err)
		}
		require.GreaterOrEqual(t, len(errs), 3)
		assert.ErrorIs(t, errs[0], fallback.ErrOpen)
		assert.ErrorIs(t, errs[1], fallback.ErrNoBudget)
		sh.mu.Lock()
		assert.Equal(t, []string{"c:fail", "d:ok"}, sh.done)
		assert.Equal(t, []string{"c:7s"}, sh.opened)
		sh.mu.Unlock()
		assert.Equal(t, route.BreakerOpen, e.ex.Status(measure.Key{Provider: "a", Model: "m"}, time.Now()).Breaker)
		assert.Equal(t, route.BreakerOpen, e.ex.Status(measure.Key{Provider: "c", Model: "m"}, time.Now()).Breaker)
		assert.Equal(t, route.BreakerClosed, e.ex.Status(measure.Key{Provider: "d", Model: "m"}, time.Now()).Breaker)
	})
}

// TestSharedCallerFaultIsExcluded: an attempt that fails by the caller's
// fault (a 400) tells the fleet nothing of the deployment's health: its
// Done is OutcomeExcluded, so a half-open probe neither closes nor reopens
// the fleet's breaker.
func TestSharedCallerFaultIsExcluded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sh := &fakeShared{}
		e := newEnv(map[string]replay.Script{"a-m": replay.WithFaults(prof(8), replay.Status(400, "", nil))}, fallback.Options{}, executor.Hooks{Shared: sh})
		_, err := e.do(t, planOf(dep("a", "a-m")), executor.Call{Stream: true})
		require.Error(t, err)
		sh.mu.Lock()
		defer sh.mu.Unlock()
		assert.Equal(t, []string{"a:excluded"}, sh.done)
	})
}

// TestSharedRefusalKeepsLocalBudget: calls the fleet refuses must not spend
// the local limiter's tokens, or a replica that was refused for a while
// would then refuse on its own once the fleet has room again.
func TestSharedRefusalKeepsLocalBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sh := &fakeShared{deny: map[string]error{"a": fallback.ErrNoBudget}}
		e := newEnv(map[string]replay.Script{"a-m": prof(4)}, fallback.Options{MaxWait: -1}, executor.Hooks{Shared: sh})
		a := dep("a", "a-m")
		a.Limits.RPM = 2
		for range 5 {
			_, err := e.do(t, planOf(a), executor.Call{Stream: true})
			require.ErrorIs(t, err, fallback.ErrNoBudget)
		}
		sh.mu.Lock()
		sh.deny = nil
		sh.mu.Unlock()
		res, err := e.do(t, planOf(a), executor.Call{Stream: true})
		require.NoError(t, err)
		drain(t, res.Body)
	})
}

// TestSharedRefusalHedgeAndContinuation: a hedge and a mid-stream
// continuation ask the fleet too, as a first attempt does, so neither goes
// to a deployment whose breaker another replica holds open.
func TestSharedRefusalHedgeAndContinuation(t *testing.T) {
	t.Run("hedge", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			sh := &fakeShared{deny: map[string]error{"b": fallback.ErrOpen}}
			e := newEnv(map[string]replay.Script{"a-m": replay.WithFaults(prof(8), replay.SlowFirstToken(3*time.Second)), "b-m": prof(8)},
				fallback.Options{Hedge: fallback.HedgeOptions{Delay: time.Second, Budget: 1}}, executor.Hooks{Shared: sh})
			res, err := e.do(t, planOf(dep("a", "a-m"), dep("b", "b-m")), executor.Call{Stream: true})
			require.NoError(t, err)
			assert.Equal(t, replay.Text(8), drain(t, res.Body).text)
			assert.Equal(t, "a", res.Deployment().Provider)
			assert.Empty(t, attemptsFor(e.h, "b-m"))
		})
	})
	t.Run("continuation", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			sh := &fakeShared{deny: map[string]error{"b": fallback.ErrOpen}}
			e := newEnv(map[string]replay.Script{"a-m": replay.WithFaults(prof(40), replay.CutAfter(10)), "b-m": prof(40)},
				fallback.Options{}, executor.Hooks{Shared: sh})
			res, err := e.do(t, planOf(dep("a", "a-m"), prefillDep("b", "b-m")), executor.Call{Stream: true})
			require.NoError(t, err)
			assert.ErrorIs(t, drain(t, res.Body).err, fallback.ErrMidStream)
			assert.Empty(t, attemptsFor(e.h, "b-m"))
		})
	})
}
