package tpsroute

import (
	"bufio"
	"bytes"
	"io"
	"net/http"
	"strconv"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tpsroute/tpsroute/measure"
	"github.com/tpsroute/tpsroute/replay"
	"github.com/tpsroute/tpsroute/route"
)

// lyingBody passes an SSE body through line by line, with the usage's
// completion_tokens replaced: an upstream that inflates what it reports.
type lyingBody struct {
	r    *bufio.Reader
	c    io.Closer
	from []byte
	to   []byte
	out  []byte
}

func (l *lyingBody) Read(p []byte) (int, error) {
	if len(l.out) == 0 {
		line, err := l.r.ReadSlice('\n')
		if len(line) == 0 {
			return 0, err
		}
		l.out = bytes.ReplaceAll(line, l.from, l.to)
	}
	n := copy(p, l.out)
	l.out = l.out[n:]
	return n, nil
}

func (l *lyingBody) Close() error { return l.c.Close() }

// inflatedUsageRun runs calls against two deployments of equal real speed
// (the same profile, seeded apart) in a synctest bubble, "liar" reporting
// completion_tokens lie instead of its true 5 (0: it tells the truth), under
// the default throughput policy, and returns liar's share of the calls and
// liar's Stats.
func inflatedUsageRun(t *testing.T, lie int64, seed uint64, calls int) (float64, measure.Stats) {
	var share float64
	var st measure.Stats
	synctest.Test(t, func(t *testing.T) {
		f := newMemFleet()
		prof := func(s uint64) map[string]replay.Script {
			return map[string]replay.Script{"m": &replay.Profile{TTFT: 200 * time.Millisecond, TPS: 50, Jitter: 0.3, OutputTokens: 5, Seed: s}}
		}
		honest := f.add("honest", prof(seed))
		liar := f.add("liar", prof(seed+1))
		if lie != 0 {
			inner := f.rts["liar"]
			f.rts["liar"] = rtFunc(func(r *http.Request) (*http.Response, error) {
				resp, err := inner.RoundTrip(r)
				if err == nil {
					resp.Body = &lyingBody{r: bufio.NewReader(resp.Body), c: resp.Body,
						from: []byte(`"completion_tokens":5,`), to: []byte(`"completion_tokens":` + strconv.FormatInt(lie, 10) + `,`)}
				}
				return resp, err
			})
		}
		c := mustNew(t, Config{
			HTTPClient:  &http.Client{Transport: f},
			Deployments: []route.Deployment{dep("honest", "", "m", honest), dep("liar", "", "m", liar)},
			Route:       route.Options{Seed: seed},
		})
		seq := make([]string, 0, calls)
		for range calls {
			s, _, err := streamOnce(t, c, "m")
			require.NoError(t, err)
			seq = append(seq, s.Outcome().Deployment.Provider)
			time.Sleep(time.Second)
		}
		share = float64(countOf(seq, "liar")) / float64(len(seq))
		st, _ = c.Stats().Lookup(dep("liar", "", "m", liar).Key())
	})
	return share, st
}

func countOf(seq []string, s string) int {
	n := 0
	for _, x := range seq {
		if x == s {
			n++
		}
	}
	return n
}

// TestInflatedUsageGainsNoTraffic is issue 33's lying upstream: of two
// deployments of equal real speed, the one reporting 1e18 completion tokens
// for a 5-chunk answer served 77 of 80 calls under the default throughput
// policy (its measured TPS was 5e18). Its usage is now implausible, counted
// as such, and measured on the chunks it streamed: over several seeds it
// takes the share it takes when it tells the truth, within noise, whether it
// claims 1e18 or 2^63-1.
func TestInflatedUsageGainsNoTraffic(t *testing.T) {
	const calls = 80
	seeds := []uint64{1, 2, 3}
	mean := func(lie int64) (float64, []measure.Stats) {
		var sum float64
		var sts []measure.Stats
		for _, seed := range seeds {
			sh, st := inflatedUsageRun(t, lie, seed, calls)
			sum += sh
			sts = append(sts, st)
		}
		return sum / float64(len(seeds)), sts
	}
	truth, sts := mean(0)
	t.Logf("liar's share telling the truth: %.3f", truth)
	for _, st := range sts {
		assert.Zero(t, st.ImplausibleUsage)
	}
	for _, lie := range []int64{1e18, 1<<63 - 1} {
		t.Run(strconv.FormatInt(lie, 10), func(t *testing.T) {
			share, sts := mean(lie)
			t.Logf("liar's share lying: %.3f", share)
			assert.InDelta(t, truth, share, 0.1, "the lie gains no share")
			assert.InDelta(t, 0.5, share, 0.25, "equal speeds split the calls")
			for _, st := range sts {
				require.Positive(t, st.Requests)
				assert.Equal(t, st.Requests, st.ImplausibleUsage, "every lie is counted")
				assert.Equal(t, 5*st.Requests, st.OutputTokens, "measured on what was streamed")
				assert.Less(t, st.TPS.P95, 200.0, "no rate beyond the stream's")
			}
		})
	}
}
