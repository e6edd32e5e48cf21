package tpsroute

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tpsroute/tpsroute/fallback"
	"github.com/tpsroute/tpsroute/measure"
	"github.com/tpsroute/tpsroute/replay"
	"github.com/tpsroute/tpsroute/route"
	"github.com/tpsroute/tpsroute/tps"
)

func TestCancelEndsUpstreamPromptly(t *testing.T) {
	for _, how := range []string{"context", "close"} {
		t.Run(how, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := newMemFleet()
				url := f.add("a", map[string]replay.Script{"m": &replay.Profile{TPS: 10, OutputTokens: 100}})
				c := mustNew(t, Config{HTTPClient: &http.Client{Transport: f}, Deployments: []route.Deployment{dep("a", "", "m", url)}})
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				s := c.Chat.Completions.NewStreaming(ctx, userParams("m", "hi"))
				for i := 0; i < 3 && s.Next(); i++ {
				}
				stopped := time.Now()
				if how == "context" {
					cancel()
					for s.Next() {
					}
					require.Error(t, s.Err())
					assert.ErrorIs(t, s.Err(), context.Canceled)
				} else {
					require.NoError(t, s.Close())
					assert.False(t, s.Next())
					assert.NoError(t, s.Err(), "an early Close is not an error")
				}
				require.NoError(t, s.Close())
				synctest.Wait()
				att := f.providers["a"].h.Attempts()
				require.Len(t, att, 1)
				require.False(t, att[0].End.IsZero(), "the upstream request has ended")
				assert.Less(t, att[0].End.Sub(stopped), 50*time.Millisecond, "the upstream ends at once")
				assert.Less(t, att[0].Chunks, 10)

				st, ok := c.Stats().Lookup(measure.Key{Provider: "a", Model: "m"})
				require.True(t, ok)
				assert.EqualValues(t, 1, st.Canceled, "counted as cancelled")
				assert.Zero(t, st.Errors, "not a provider failure")
				assert.Equal(t, route.BreakerClosed, c.Status(measure.Key{Provider: "a", Model: "m"}).Breaker)
			})
		})
	}
}

func TestMidStreamFailure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newMemFleet()
		cut := replay.WithFaults(&replay.Profile{TPS: 100, OutputTokens: 60}, replay.CutAfter(40))
		a := dep("a", "", "m", f.add("a", map[string]replay.Script{"m": cut}))
		b := dep("b", "", "m", f.add("b", map[string]replay.Script{"m": &replay.Profile{TPS: 100, OutputTokens: 60}}))
		c := mustNew(t, Config{HTTPClient: &http.Client{Transport: f}, Deployments: []route.Deployment{a, b}})

		// Streaming: a clear mid-stream error, never a clean end.
		s, text, err := streamOnce(t, c, "m", WithPin("a", ""))
		require.Error(t, err)
		assert.ErrorIs(t, err, fallback.ErrMidStream)
		var fe *fallback.Error
		require.ErrorAs(t, err, &fe)
		assert.Equal(t, tps.PhaseMidStream, fe.Phase())
		assert.NotEqual(t, replay.Text(60), text)
		assert.Equal(t, "a", s.Outcome().Deployment.Provider)
		assert.Equal(t, err, s.Outcome().Err, "the Stream's Outcome carries its error")

		// Do: the error that ended Body is the Response's Outcome's, and
		// WithOutcome's, with the same attempts.
		var o Outcome
		r, err := c.Do(context.Background(), []byte(`{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`),
			WithPin("a", ""), WithOutcome(&o))
		require.NoError(t, err)
		assert.NoError(t, r.Outcome().Err, "no error before Body ends")
		_, rerr := io.ReadAll(r.Body)
		require.ErrorIs(t, rerr, fallback.ErrMidStream)
		assert.ErrorIs(t, r.Outcome().Err, fallback.ErrMidStream)
		assert.ErrorIs(t, o.Err, fallback.ErrMidStream)
		assert.Equal(t, 1, r.Outcome().AttemptCount)
		assert.Equal(t, r.Outcome().Attempts, o.Attempts)

		// Non-streaming: restarts invisibly on b.
		got, err := c.Chat.Completions.New(context.Background(), userParams("m", "hi"), WithPin("a", ""))
		require.NoError(t, err)
		assert.Equal(t, replay.Text(60), got.Choices[0].Message.Content)
		assert.Equal(t, "chat.completion", string(got.Object))
	})
}

func TestCacheAffinityGivesWarmHits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newMemFleet()
		cache := func() map[string]replay.Script {
			return map[string]replay.Script{"m": &replay.Profile{TTFT: 200 * time.Millisecond, TPS: 100, OutputTokens: 10,
				PromptCache: replay.PromptCache{Enabled: true}}}
		}
		c := mustNew(t, Config{
			HTTPClient:  &http.Client{Transport: f},
			Deployments: []route.Deployment{dep("a", "", "m", f.add("a", cache())), dep("b", "", "m", f.add("b", cache()))},
			Route:       route.Options{Seed: 5},
		})
		system := strings.Repeat("You are a careful assistant. ", 200) // ~5,800 bytes: a cacheable prefix
		warm := 0
		for i := range 20 {
			p := openai.ChatCompletionNewParams{Model: "m", Messages: []openai.ChatCompletionMessageParamUnion{
				openai.SystemMessage(system), openai.UserMessage(fmt.Sprintf("question %d", i)),
			}}
			s := c.Chat.Completions.NewStreaming(context.Background(), p)
			_, err := drain(t, s)
			require.NoError(t, err)
			if s.Outcome().Sample.Cache == tps.CacheWarm {
				warm++
			}
			time.Sleep(time.Second)
		}
		assert.GreaterOrEqual(t, warm, 17, "the prefix stays on the deployment that cached it")
		assert.GreaterOrEqual(t, c.RouteStats().AffinityHits, uint64(17))
		var warmSamples int64
		for _, st := range c.Stats().All() {
			warmSamples += st.Warm.Requests
		}
		assert.GreaterOrEqual(t, warmSamples, int64(17), "warm calls are recorded as warm")
	})
}

func TestConcurrentStreams(t *testing.T) {
	if testing.Short() {
		t.Skip("1,000 streams")
	}
	f := newTCPFleet(t)
	prof := map[string]replay.Script{"m": &replay.Profile{OutputTokens: 16}}
	// 1,000 streams over real TCP on a loaded 2-core machine can wait
	// longer than the default deadlines for headers and a first token; this
	// test is about concurrency, not deadlines, so those are switched off.
	c := mustNew(t, Config{HTTPClient: f.client, Deployments: []route.Deployment{
		dep("a", "", "m", f.add("a", prof)), dep("b", "", "m", f.add("b", prof)),
	}, Fallback: fallback.Options{Deadlines: fallback.Deadlines{Headers: -1, TTFT: -1}}})
	const n = 1000
	var wg sync.WaitGroup
	errs := make(chan error, n)
	start := make(chan struct{})
	for range n {
		wg.Go(func() {
			<-start
			s := c.Chat.Completions.NewStreaming(context.Background(), userParams("m", "hi"))
			defer s.Close()
			var b strings.Builder
			for s.Next() {
				for _, ch := range s.Current().Choices {
					b.WriteString(ch.Delta.Content)
				}
			}
			switch {
			case s.Err() != nil:
				errs <- s.Err()
			case b.String() != replay.Text(16):
				errs <- errors.New("wrong text")
			}
		})
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	var total int64
	for _, st := range c.Stats().All() {
		total += st.Successes
	}
	assert.EqualValues(t, n, total)
}

func TestMidStreamContinue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newMemFleet()
		prefill := route.Capabilities{AssistantPrefill: true}
		a := dep("a", "", "m", f.add("a", map[string]replay.Script{"m-a": replay.WithFaults(&replay.Profile{TPS: 100, OutputTokens: 60}, replay.CutAfter(20))}))
		a.ProviderModel, a.Capabilities = "m-a", prefill
		b := dep("b", "", "m", f.add("b", map[string]replay.Script{"m-b": &replay.Profile{TPS: 100, OutputTokens: 60}}))
		b.ProviderModel, b.Capabilities = "m-b", prefill
		c := mustNew(t, Config{
			HTTPClient:  &http.Client{Transport: f},
			Deployments: []route.Deployment{a, b},
			Fallback:    fallback.Options{MidStream: fallback.MidStreamContinue},
		})
		s, text, err := streamOnce(t, c, "m", WithPin("a", ""))
		require.NoError(t, err)
		assert.Equal(t, replay.Text(60), text, "one continuous answer")
		assert.Equal(t, "b", s.Outcome().Deployment.Provider, "b continued")
		reqs := f.providers["b"].requests()
		require.Len(t, reqs, 1)
		assert.Contains(t, reqs[0].Body, `"model":"m-b"`, "the continuation carries b's model id")
		assert.NotContains(t, everything(reqs[0]), "key-a", "and b's key only")
	})
}

// TestCloseFromAnotherGoroutine: Close aborts a Stream whose reader is
// blocked in Next; the reader sees a clean stop, the upstream request ends and
// the Outcome is filled once.
func TestCloseFromAnotherGoroutine(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newMemFleet()
		url := f.add("a", map[string]replay.Script{"m": &replay.Profile{TPS: 1, OutputTokens: 100}})
		c := mustNew(t, Config{HTTPClient: &http.Client{Transport: f}, Deployments: []route.Deployment{dep("a", "", "m", url)}})
		var rep Outcome
		s := c.Chat.Completions.NewStreaming(context.Background(), userParams("m", "hi"), WithOutcome(&rep))
		require.True(t, s.Next(), "the first chunk is the commit point")
		read := make(chan int)
		go func() {
			n := 1
			for s.Next() {
				n++
			}
			read <- n
		}()
		time.Sleep(2500 * time.Millisecond) // two more chunks at 1 token/s
		require.NoError(t, s.Close())
		n := <-read
		assert.Less(t, n, 10)
		assert.NoError(t, s.Err(), "an early Close is not an error")
		synctest.Wait()
		att := f.providers["a"].h.Attempts()
		require.Len(t, att, 1)
		assert.False(t, att[0].End.IsZero(), "the upstream request has ended")
		assert.NoError(t, rep.Err)
		assert.Equal(t, "a", rep.Deployment.Provider)
	})
}

// TestAttemptInFlight checks that an attempt counts in measure's in-flight
// gauge from its start until its completion handle runs, and that its sample
// is recorded by the same handle: one in flight while the caller reads, none
// and one request once the stream is closed.
func TestAttemptInFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newMemFleet()
		url := f.add("a", map[string]replay.Script{"m": &replay.Profile{TPS: 10, OutputTokens: 20}})
		c := mustNew(t, Config{HTTPClient: &http.Client{Transport: f}, Deployments: []route.Deployment{dep("a", "", "m", url)}})
		k := measure.Key{Provider: "a", Model: "m"}
		s := c.Chat.Completions.NewStreaming(context.Background(), userParams("m", "hi"))
		require.True(t, s.Next())
		st, ok := c.Stats().Lookup(k)
		require.True(t, ok)
		assert.EqualValues(t, 1, st.InFlight, "in flight while the caller reads")
		assert.Zero(t, st.Requests, "not recorded before it ends")
		for s.Next() {
		}
		require.NoError(t, s.Err())
		require.NoError(t, s.Close())
		st, _ = c.Stats().Lookup(k)
		assert.Zero(t, st.InFlight, "ended with the attempt")
		assert.EqualValues(t, 1, st.Requests, "recorded once")
	})
}
