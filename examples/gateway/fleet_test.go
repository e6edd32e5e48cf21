package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tpsroute/tpsroute/internal/redistest"
	"github.com/tpsroute/tpsroute/replay"
)

// fleetChildEnv, when set, makes the test binary a gateway process: it runs
// with the tab-separated arguments in fleetArgsEnv, prints its address and
// serves until its stdin closes.
const (
	fleetChildEnv = "GATEWAY_FLEET_CHILD"
	fleetArgsEnv  = "GATEWAY_FLEET_ARGS"
)

func fleetChild() {
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		cancel()
	}()
	ready := make(chan string, 1)
	go func() { fmt.Println(<-ready) }()
	if err := run(ctx, strings.Split(os.Getenv(fleetArgsEnv), "\t"), os.Stderr, os.LookupEnv, ready); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
}

// switchable is a fake provider whose behaviour the test changes while the
// gateways run: a replay handler, or a 500 on every request.
type switchable struct {
	h    atomic.Pointer[replay.Handler]
	fail atomic.Bool
	hits atomic.Int64
	srv  *httptest.Server
}

func newSwitchable(t *testing.T, p *replay.Profile) *switchable {
	s := &switchable{}
	s.set(p)
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/chat/completions" {
			s.hits.Add(1)
		}
		if s.fail.Load() {
			http.Error(w, `{"error":{"message":"down","type":"server_error"}}`, http.StatusInternalServerError)
			return
		}
		s.h.Load().ServeHTTP(w, r)
	}))
	t.Cleanup(func() { s.srv.CloseClientConnections(); s.srv.Close() })
	return s
}

func (s *switchable) set(p *replay.Profile) {
	s.h.Store(replay.NewHandler(map[string]replay.Script{"w": p}))
}

// replicaProc is one gateway process.
type replicaProc struct {
	addr  string
	stdin io.WriteCloser
	cmd   *exec.Cmd
}

func startReplica(t *testing.T, args []string, env []string) *replicaProc {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(append(os.Environ(), fleetChildEnv+"=1", fleetArgsEnv+"="+strings.Join(args, "\t")), env...)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	line, err := bufio.NewReader(stdout).ReadString('\n')
	require.NoError(t, err)
	p := &replicaProc{addr: strings.TrimSpace(line), stdin: stdin, cmd: cmd}
	t.Cleanup(func() { p.stdin.Close(); _ = p.cmd.Wait() })
	return p
}

// call sends one chat completion and returns the status and the deployment
// that served it.
func (p *replicaProc) call(t *testing.T, model, pin string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, "http://"+p.addr+"/v1/chat/completions",
		strings.NewReader(`{"model":"`+model+`","messages":[{"role":"user","content":"hi"}]}`))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	if pin != "" {
		req.Header.Set("X-Route-Provider", pin)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, resp.Header.Get("X-Tpsroute-Deployment")
}

type debugDoc struct {
	Deployments []struct {
		Key struct {
			Provider string `json:"provider"`
		} `json:"key"`
		Breaker      string  `json:"breaker"`
		FleetTTFTP50 float64 `json:"fleet_ttft_p50_s"`
	} `json:"deployments"`
	Fleet *struct {
		Connected bool    `json:"connected"`
		Replicas  int     `json:"replicas_seen"`
		Age       float64 `json:"last_sync_age_s"`
	} `json:"fleet"`
}

func (p *replicaProc) debug(t *testing.T) debugDoc {
	t.Helper()
	resp, err := http.Get("http://" + p.addr + "/debug/tpsroute")
	require.NoError(t, err)
	defer resp.Body.Close()
	var d debugDoc
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&d))
	return d
}

// waitFor polls cond every 20 ms until it holds or max passes, and returns
// how long it took.
func waitFor(t *testing.T, max time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > max {
			t.Fatalf("%s: not within %s", what, max)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return time.Since(start)
}

// TestFleetEndToEnd runs three gateway processes on one redis-server in
// front of fake providers: a slowdown measured through replica 1 moves the
// traffic of replicas 2 and 3 within two sync intervals; a breaker opened
// through replica 1 keeps 2 and 3 off that provider; a 60-RPM limit holds
// across the three; stopping redis-server loses no call and restarting it
// lets them rejoin.
func TestFleetEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three gateway processes and a redis-server")
	}
	rs := redistest.Start(t)
	const syncIv = 250 * time.Millisecond
	fastP := &replay.Profile{TTFT: 20 * time.Millisecond, OutputTokens: 4}
	a := newSwitchable(t, fastP)
	b := newSwitchable(t, &replay.Profile{TTFT: 150 * time.Millisecond, OutputTokens: 4})
	c := newSwitchable(t, fastP)
	d := newSwitchable(t, &replay.Profile{TTFT: 100 * time.Millisecond, OutputTokens: 4})
	e := newSwitchable(t, fastP)
	deployment := func(name, model string, s *switchable, extra string) string {
		return fmt.Sprintf(`{"provider":%q,"model":%q,"provider_model":"w","base_url":%q,"api_key_env":"FAKE_KEY",
			"capabilities":{"include_usage":true}%s}`, name, model, s.srv.URL+"/v1", extra)
	}
	cfg := `{"deployments":[` + strings.Join([]string{
		deployment("a", "m", a, ""), deployment("b", "m", b, ""),
		deployment("c", "n", c, ""), deployment("d", "n", d, ""),
		deployment("e", "r", e, `,"limits":{"rpm":60}`),
	}, ",") + `],
		"policy": "latency",
		"route": {"exploration": "off", "band": "off", "cold_probes": "off"},
		"measure": {"min_samples": 3},
		"fallback": {"attempts_per_deployment": 1, "max_wait": "0s", "backoff_base": "1ms", "backoff_max": "2ms",
			"breaker": {"consecutive_failures": 2, "timeout": "60s"}},
		"fleet": {"name": "e2e", "sync": "250ms"}}`
	path := filepath.Join(t.TempDir(), "fleet.json")
	require.NoError(t, os.WriteFile(path, []byte(cfg), 0o600))
	args := []string{"-config", path, "-addr", "127.0.0.1:0", "-redis", "redis://" + rs.Addr + "/0"}
	var reps []*replicaProc
	for range 3 {
		reps = append(reps, startReplica(t, args, []string{"FAKE_KEY=sk-fake"}))
	}
	r1, r2, r3 := reps[0], reps[1], reps[2]
	for _, r := range reps {
		waitFor(t, 5*time.Second, "replicas see each other", func() bool {
			f := r.debug(t).Fleet
			return f != nil && f.Connected && f.Replicas == 2
		})
	}

	// Warm-up: every replica measures a (fast) and b.
	for _, r := range reps {
		for range 3 {
			for _, p := range []string{"a", "b"} {
				st, _ := r.call(t, "m", p)
				require.Equal(t, http.StatusOK, st)
			}
		}
	}
	time.Sleep(3 * syncIv) // let every replica merge the others' warm-up
	for _, r := range reps {
		st, dep := r.call(t, "m", "")
		require.Equal(t, http.StatusOK, st)
		require.True(t, strings.HasPrefix(dep, "a/"), dep)
	}

	t.Run("slowdown", func(t *testing.T) {
		a.set(&replay.Profile{TTFT: 900 * time.Millisecond, OutputTokens: 4})
		var wg sync.WaitGroup
		for range 20 {
			wg.Go(func() {
				st, _ := r1.call(t, "m", "a")
				assert.Equal(t, http.StatusOK, st)
			})
		}
		wg.Wait()
		took := waitFor(t, 2*syncIv+time.Second, "replicas 2 and 3 see a slow", func() bool {
			for _, r := range []*replicaProc{r2, r3} {
				for _, dv := range r.debug(t).Deployments {
					if dv.Key.Provider == "a" && dv.FleetTTFTP50 < 0.5 {
						return false
					}
				}
			}
			return true
		})
		t.Logf("replicas 2 and 3 saw the slowdown %s after replica 1 measured it (sync %s)", took, syncIv)
		before := a.hits.Load()
		for _, r := range []*replicaProc{r2, r3} {
			for range 5 {
				st, dep := r.call(t, "m", "")
				assert.Equal(t, http.StatusOK, st)
				assert.True(t, strings.HasPrefix(dep, "b/"), dep)
			}
		}
		assert.Equal(t, before, a.hits.Load(), "replicas 2 and 3 did not call the slow provider")
	})

	t.Run("breaker", func(t *testing.T) {
		c.fail.Store(true)
		for range 3 {
			r1.call(t, "n", "c")
		}
		waitFor(t, 2*syncIv+time.Second, "replicas 2 and 3 see c open", func() bool {
			for _, r := range []*replicaProc{r2, r3} {
				for _, dv := range r.debug(t).Deployments {
					if dv.Key.Provider == "c" && dv.Breaker != "open" {
						return false
					}
				}
			}
			return true
		})
		c.fail.Store(false)
		before := c.hits.Load()
		for _, r := range []*replicaProc{r2, r3} {
			for range 5 {
				st, dep := r.call(t, "n", "")
				assert.Equal(t, http.StatusOK, st)
				assert.True(t, strings.HasPrefix(dep, "d/"), dep)
			}
		}
		assert.Equal(t, before, c.hits.Load(), "replicas 2 and 3 stayed off the open provider")
	})

	t.Run("rpm", func(t *testing.T) {
		// 60 RPM is one call a second (burst one): three replicas calling as
		// fast as they can for 6 s get about 6 through, where each alone
		// would let 60 through at once.
		before := e.hits.Load()
		start := time.Now()
		var wg sync.WaitGroup
		var ok, all atomic.Int64
		var slowest atomic.Int64
		for _, r := range reps {
			for range 2 {
				wg.Go(func() {
					for time.Since(start) < 6*time.Second {
						s := time.Now()
						if st, _ := r.call(t, "r", ""); st == http.StatusOK {
							ok.Add(1)
						}
						all.Add(1)
						if d := int64(time.Since(s)); d > slowest.Load() {
							slowest.Store(d)
						}
						time.Sleep(20 * time.Millisecond)
					}
				})
			}
		}
		wg.Wait()
		secs := time.Since(start).Seconds()
		got := e.hits.Load() - before
		t.Logf("%d calls reached the 60-RPM provider in %.1fs (%d answered of %d, slowest %s)", got, secs, ok.Load(), all.Load(), time.Duration(slowest.Load()))
		// A rate of 1/s, a burst of 1, and the first call of each replica
		// after an idle spell on credit.
		assert.LessOrEqual(t, float64(got), secs+1+3)
		assert.GreaterOrEqual(t, float64(got), secs-3)
	})

	t.Run("redis down and back", func(t *testing.T) {
		var lat []time.Duration
		call := func(r *replicaProc) {
			s := time.Now()
			st, _ := r.call(t, "m", "")
			lat = append(lat, time.Since(s))
			assert.Equal(t, http.StatusOK, st, "no call lost")
		}
		for range 4 {
			for _, r := range reps {
				call(r)
			}
		}
		baseline := slicesMax(lat)
		rs.Stop()
		lat = lat[:0]
		for range 8 {
			for _, r := range reps {
				call(r)
			}
		}
		t.Logf("slowest call before the outage %s, during it %s", baseline, slicesMax(lat))
		assert.Less(t, slicesMax(lat), baseline+500*time.Millisecond, "Redis is not on the call path")
		for _, r := range reps {
			waitFor(t, 5*time.Second, "disconnected shows", func() bool { return !r.debug(t).Fleet.Connected })
		}
		rs.Restart()
		for _, r := range reps {
			waitFor(t, 5*time.Second, "rejoined", func() bool {
				f := r.debug(t).Fleet
				return f.Connected && f.Replicas == 2
			})
		}
	})
}

func slicesMax(ds []time.Duration) time.Duration {
	var m time.Duration
	for _, d := range ds {
		m = max(m, d)
	}
	return m
}
