package main

import (
	"io"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tpsroute/tpsroute/measure"
	"github.com/tpsroute/tpsroute/replay"
	"github.com/tpsroute/tpsroute/route"
)

// TestNestedBodyRefused: 4 and 8 MiB bodies of nested '[' are a 400 saying
// so, found without recursion. gjson.ValidBytes recursed once per bracket:
// about 900 MiB of goroutine stack for 4 MiB, and a fatal stack overflow,
// which cut every stream in flight, for 8 MiB with -max-body 8388608.
func TestNestedBodyRefused(t *testing.T) {
	e := threeProviders(t, "")
	e.g.opts.MaxBody = 9 << 20
	base := e.serve(t)
	for _, size := range []int{4 << 20, 8 << 20} {
		t.Run(strconv.Itoa(size>>20)+"MiB", func(t *testing.T) {
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			resp := post(t, base, `{"model":"m",`+hi+`,"x":`+strings.Repeat("[", size)+`}`)
			defer resp.Body.Close()
			runtime.ReadMemStats(&after)
			b, err := io.ReadAll(resp.Body)
			require.NoError(t, err)
			require.Equal(t, http.StatusBadRequest, resp.StatusCode, string(b))
			assert.Contains(t, errorOf(t, b).Get("message").Str, "deeper than 128 levels")
			assert.Less(t, after.StackSys, before.StackSys+64<<20, "stack obtained from the OS")
		})
	}
	assert.Empty(t, e.cap.all(), "nothing reached a provider")
}

// list returns a JSON array of n strings: prefix0, prefix1, ... or, with
// same, n times prefix.
func list(prefix string, n int, same bool) string {
	var b strings.Builder
	b.WriteByte('[')
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`"` + prefix)
		if !same {
			b.WriteString(strconv.Itoa(i))
		}
		b.WriteByte('"')
	}
	b.WriteByte(']')
	return b.String()
}

// TestDirectiveListsBounded: 40,000 entries of provider.order and
// provider.only (with allow_fallbacks false), or 40,000 distinct "models"
// with a wildcard deployment, cost seconds of quadratic work before; now a
// list of more than maxListEntries distinct entries is a 400 found after
// reading that many, and repeated entries are dropped as read, so the work
// is linear in the body and the routing work bounded.
func TestDirectiveListsBounded(t *testing.T) {
	const n = 40000
	wild := dep("w", "us", route.Wildcard)
	wild.ProviderModel = ""
	e := newEnv(t, map[string]replay.Script{"a-m": prof(3), "m0": prof(3)}, testConfig(dep("a", "us", "m"), wild), options{})
	base := e.serve(t)
	for _, tc := range []struct {
		name, body string
		status     int
		param      string
	}{
		{"distinct order and only", req("m", false, `"provider":{"order":`+list("p", n, false)+`,"only":`+list("p", n, false)+`,"allow_fallbacks":false}`),
			400, "provider.order"},
		{"distinct models", `{"models":` + list("m", n, false) + `,` + hi + `}`, 400, "models"},
		{"repeated order and only", req("m", false, `"provider":{"order":`+list("a", n, true)+`,"only":`+list("a", n, true)+`,"allow_fallbacks":false}`),
			200, ""},
		{"repeated models", `{"models":` + list("m0", n, true) + `,` + hi + `}`, 200, ""},
		{"most distinct models", `{"models":` + list("m", maxListEntries, false) + `,` + hi + `}`, 200, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := post(t, base, tc.body)
			defer resp.Body.Close()
			b, err := io.ReadAll(resp.Body)
			require.NoError(t, err)
			require.Equal(t, tc.status, resp.StatusCode, string(b))
			if tc.param != "" {
				er := errorOf(t, b)
				assert.Equal(t, tc.param, er.Get("param").Str)
				assert.Contains(t, er.Get("message").Str, "more than 128 distinct entries")
			}
		})
	}

	// The work of parsing is linear: the allocations do not grow with the
	// number of repeated entries, and stay bounded for distinct ones.
	allocs := func(body string) float64 {
		b := []byte(body)
		return testing.AllocsPerRun(3, func() {
			if _, err := parseDirectives(b, nil); err != nil && err.Status != http.StatusBadRequest {
				t.Fatal(err)
			}
		})
	}
	for _, tc := range []struct {
		name string
		body func(n int) string
	}{
		{"repeated", func(n int) string { return req("m", false, `"provider":{"order":`+list("a", n, true)+`}`) }},
		{"distinct", func(n int) string { return `{"models":` + list("m", n, false) + `,` + hi + `}` }},
	} {
		small, large := allocs(tc.body(1000)), allocs(tc.body(n))
		assert.LessOrEqual(t, large, small+8, "%s: allocations at 1,000 and 40,000 entries", tc.name)
	}
}

// BenchmarkDirectives reads the directives of bodies with long lists, per
// entry of the body: repeated entries (kept once) and distinct ones (a 400
// after maxListEntries+1).
func BenchmarkDirectives(b *testing.B) {
	for _, n := range []int{1000, 40000} {
		for _, same := range []bool{true, false} {
			name := "distinct"
			if same {
				name = "repeated"
			}
			body := []byte(req("m", false, `"provider":{"order":`+list("a", n, same)+`,"only":`+list("a", n, same)+`,"allow_fallbacks":false}`))
			b.Run(name+"/entries="+strconv.Itoa(n), func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					_, _ = parseDirectives(body, nil)
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(2*n), "ns/entry")
			})
		}
	}
}

// blockingTransport holds every upstream request until release is closed,
// saying on arrived when one comes.
type blockingTransport struct {
	next    http.RoundTripper
	arrived chan struct{}
	release chan struct{}
}

func (b *blockingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	b.arrived <- struct{}{}
	<-b.release
	return b.next.RoundTrip(r)
}

// TestInFlightCap: past options.MaxInFlight chat requests at once, one more
// is answered 429 with Retry-After, without reaching a provider; once a slot
// is free, requests are served again.
func TestInFlightCap(t *testing.T) {
	h := replay.NewHandler(map[string]replay.Script{"a-m": prof(3)})
	bt := &blockingTransport{next: h.Transport(), arrived: make(chan struct{}, 8), release: make(chan struct{})}
	client, err := newClient(testConfig(dep("a", "us", "m")), bt)
	require.NoError(t, err)
	g := newGateway(client, options{MaxInFlight: 2})
	base := (&env{g: g}).serve(t)

	var wg sync.WaitGroup
	codes := make(chan int, 2)
	for range 2 {
		wg.Go(func() {
			resp := post(t, base, req("m", false, ""))
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			codes <- resp.StatusCode
		})
	}
	<-bt.arrived
	<-bt.arrived // both are in flight, held upstream

	resp := post(t, base, req("m", false, ""))
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusTooManyRequests, resp.StatusCode, string(b))
	assert.Equal(t, "1", resp.Header.Get("Retry-After"))
	er := errorOf(t, b)
	assert.Equal(t, "gateway_busy", er.Get("code").Str)
	assert.Contains(t, er.Get("message").Str, "-max-in-flight")
	assert.Len(t, bt.arrived, 0, "the refused request reached no provider")

	close(bt.release)
	wg.Wait()
	assert.Equal(t, http.StatusOK, <-codes)
	assert.Equal(t, http.StatusOK, <-codes)
	resp = post(t, base, req("m", false, ""))
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode, "served again once slots are free")
	assert.Zero(t, g.inFlight.Load())
}

// TestHistoryDropsGoneKeys: the debug history keeps only the keys of the
// latest sample; a key gone from the statistics is dropped, not kept for
// ever.
func TestHistoryDropsGoneKeys(t *testing.T) {
	h := newHistory()
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	a, b := measure.Key{Provider: "a", Model: "m"}, measure.Key{Provider: "w", Model: "invented-1"}
	var snap measure.Snapshot
	h.sample(t0, []measure.Key{a, b}, snap)
	require.Len(t, h.series, 2)
	h.sample(t0.Add(historyInterval), []measure.Key{a}, snap)
	assert.Len(t, h.series, 1, "series")
	assert.Len(t, h.requests, 1, "request counts")
	assert.Contains(t, h.series, a)
	h.sample(t0.Add(2*historyInterval), []measure.Key{a, b}, snap)
	assert.Len(t, h.series[b].Share, len(h.times), "a key seen again starts with as many samples as the others")
}
