package executor_test

import (
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tpsroute/tpsroute/fallback"
	"github.com/tpsroute/tpsroute/internal/executor"
	"github.com/tpsroute/tpsroute/replay"
)

// limitedTransport counts the streams open at provider "a" (until their
// bodies are closed), for a script that answers 429 beyond a limit.
type limitedTransport struct {
	rt   http.RoundTripper
	open atomic.Int64
}

func (l *limitedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Host != "a.test" {
		return l.rt.RoundTrip(req)
	}
	l.open.Add(1)
	resp, err := l.rt.RoundTrip(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		l.open.Add(-1)
		if resp != nil && err == nil {
			return resp, nil
		}
		return resp, err
	}
	resp.Body = &onClose{ReadCloser: resp.Body, f: func() { l.open.Add(-1) }}
	return resp, nil
}

// limitedEnv returns an executor over two providers: a, which answers a
// 20-second stream while its open streams stay within limit and a 429 with
// Retry-After retryAfter beyond it (counted by a limitedTransport), and b,
// which answers at once; opts (at most one) tune the executor.
func limitedEnv(limit *atomic.Int64, retryAfter string, opts ...fallback.Options) env {
	long := &replay.Profile{OutputTokens: 200, TPS: 10, TTFT: 10 * time.Millisecond} // 20 s
	fast := &replay.Profile{OutputTokens: 4, TPS: 1000, TTFT: 10 * time.Millisecond}
	lt := &limitedTransport{}
	h := replay.NewHandler(map[string]replay.Script{
		"a-m": replay.Func(func(replay.Call) replay.Script {
			if lt.open.Load() > limit.Load() {
				return replay.WithFaults(fast, replay.RateLimited(retryAfter))
			}
			return long
		}),
		"b-m": fast,
	})
	lt.rt = h.Transport()
	var o fallback.Options
	if len(opts) > 0 {
		o = opts[0]
	}
	ex := executor.New(o, executor.Hooks{Transport: lt})
	return env{h: h, ex: ex, start: time.Now()}
}

// TestLearntConcurrencyLimit: provider a admits 2 concurrent streams and
// answers the third 429 with Retry-After 5 s. The 429 that arrives while two
// of our calls are in flight teaches the limit: the call goes to b at once,
// a takes no third stream while two run, and a takes calls again as soon as
// one of them ends, not 5 s later. A 429 with nothing in flight is still a
// rate limit: a cools down for its Retry-After.
func TestLearntConcurrencyLimit(t *testing.T) {
	tests := []struct {
		name string
		busy int // calls held open on a before the 429
	}{
		{"concurrency_limit", 2},
		{"rate_limit_alone", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var limit atomic.Int64
				limit.Store(int64(tt.busy))
				e := limitedEnv(&limit, "5")
				a, b := dep("a", "a-m"), dep("b", "b-m")

				var held []*executor.Result
				for range tt.busy {
					res, err := e.do(t, planOf(a), executor.Call{Stream: true})
					require.NoError(t, err)
					require.Equal(t, "a", res.Deployment().Provider)
					held = append(held, res)
				}
				// Over the limit (or rate limited): b answers.
				res, err := e.do(t, planOf(a, b), executor.Call{Stream: true})
				require.NoError(t, err)
				assert.Equal(t, "b", res.Deployment().Provider)
				require.NoError(t, drain(t, res.Body).err)
				st := e.ex.Status(a.Key(), time.Now())
				if tt.busy == 0 {
					assert.True(t, st.CoolingUntil.After(time.Now()), "a rate limit cools down")
					assert.True(t, st.RateLimited, "its x-ratelimit-remaining-requests 0 is read")
					return
				}
				assert.True(t, st.CoolingUntil.IsZero(), "a concurrency 429 sets no cooldown")
				assert.False(t, st.RateLimited, "nor is its x-ratelimit-remaining-requests 0 read as a rate limit")
				assert.True(t, st.NoHeadroom, "a is full at its learnt limit")

				// Still full: the executor does not try a (no new 429).
				before := len(attemptsFor(e.h, "a-m"))
				res, err = e.do(t, planOf(a, b), executor.Call{Stream: true})
				require.NoError(t, err)
				assert.Equal(t, "b", res.Deployment().Provider)
				require.NoError(t, drain(t, res.Body).err)
				assert.Len(t, attemptsFor(e.h, "a-m"), before, "no attempt on a while it is full")

				// One stream ends, well within the Retry-After: a serves again.
				time.Sleep(100 * time.Millisecond)
				require.NoError(t, held[0].Body.Close())
				synctest.Wait()
				assert.False(t, e.ex.Status(a.Key(), time.Now()).NoHeadroom)
				res, err = e.do(t, planOf(a, b), executor.Call{Stream: true})
				require.NoError(t, err)
				assert.Equal(t, "a", res.Deployment().Provider, "back on a once a stream ended")
				assert.Less(t, time.Since(e.start), time.Second)
				require.NoError(t, res.Body.Close())
				for _, r := range held[1:] {
					require.NoError(t, r.Body.Close())
				}
			})
		})
	}
}

// TestLearntLimitRisesAgain: a limit learnt at 1 is probed one above after
// the Retry-After; the provider now admits 3, so successes raise it.
func TestLearntLimitRisesAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var limit atomic.Int64
		limit.Store(1)
		e := limitedEnv(&limit, "1")
		a, b := dep("a", "a-m"), dep("b", "b-m")
		onA := func() (*executor.Result, bool) {
			res, err := e.do(t, planOf(a, b), executor.Call{Stream: true})
			require.NoError(t, err)
			if res.Deployment().Provider == "a" {
				return res, true
			}
			require.NoError(t, drain(t, res.Body).err)
			return nil, false
		}
		first, ok := onA()
		require.True(t, ok)
		_, ok = onA() // 429 with one in flight: the limit is 1
		require.False(t, ok)
		limit.Store(3) // the provider raises it
		_, ok = onA()
		require.False(t, ok, "held at 1 during the Retry-After")
		time.Sleep(time.Second)
		second, ok := onA()
		require.True(t, ok, "one above the limit after the Retry-After")
		third, ok := onA()
		require.True(t, ok, "the success raised the limit to 2, and the probe above it is allowed")
		_, ok = onA()
		require.False(t, ok, "the provider's limit of 3 is found again")
		assert.Less(t, time.Since(e.start), 2*time.Second)
		for _, r := range []*executor.Result{first, second, third} {
			require.NoError(t, r.Body.Close())
		}
	})
}

// onClose calls f once when the body is closed.
type onClose struct {
	io.ReadCloser
	once sync.Once
	f    func()
}

func (o *onClose) Close() error {
	o.once.Do(o.f)
	return o.ReadCloser.Close()
}
