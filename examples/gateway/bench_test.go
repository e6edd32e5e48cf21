//go:build linux

package main

import (
	"bufio"
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/tpsroute/tpsroute/replay"
)

// benchChunks is the number of output chunks of every benchmark stream.
const benchChunks = 200

// benchEnv is a replay provider on loopback with no delays, and the gateway
// in front of it on loopback.
type benchEnv struct {
	up      *replay.Server
	gw      *httptest.Server
	client  *http.Client
	direct  string // the provider's chat-completions URL
	gateway string // the gateway's
	bodyUp  string // request body for the provider (its model name)
	bodyGw  string // request body for the gateway (the logical model)
}

func newBenchEnv(b *testing.B) *benchEnv {
	b.Helper()
	up := replay.NewServer(map[string]replay.Script{"m-wire": &replay.Profile{OutputTokens: benchChunks}})
	d := dep("p", "us", "m")
	d.ProviderModel = "m-wire"
	d.BaseURL = up.URL()
	cfg := testConfig(d)
	up2 := upstreamTransport()
	c, err := newClient(cfg, up2)
	if err != nil {
		b.Fatal(err)
	}
	gw := httptest.NewServer(newGateway(c, options{}))
	e := &benchEnv{
		up: up, gw: gw,
		client:  &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 128, DisableCompression: true}},
		direct:  up.URL() + "/chat/completions",
		gateway: gw.URL + "/v1/chat/completions",
		bodyUp:  `{"model":"m-wire","stream":true,"stream_options":{"include_usage":true},` + hi + `}`,
		bodyGw:  `{"model":"m","stream":true,` + hi + `}`,
	}
	b.Cleanup(func() {
		gw.Close()
		up.Close()
		up2.CloseIdleConnections()
		e.client.CloseIdleConnections()
	})
	return e
}

// one streams one answer to its end and returns how long it took.
func (e *benchEnv) one(b *testing.B, url, body string) time.Duration {
	start := time.Now()
	resp, err := e.client.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		b.Fatal(err)
	}
	raw, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != 200 || !bytes.HasSuffix(raw, []byte("data: [DONE]\n\n")) {
		b.Fatalf("status %d, err %v, body ends %q", resp.StatusCode, err, raw[max(0, len(raw)-40):])
	}
	return time.Since(start)
}

func p50(ds []time.Duration) time.Duration {
	slices.Sort(ds)
	return ds[len(ds)/2]
}

// BenchmarkAddedLatencyC1 streams 200-chunk answers one at a time, directly
// and through the gateway in alternation, and reports the p50 of each and
// their difference: the latency the gateway adds to a whole stream.
func BenchmarkAddedLatencyC1(b *testing.B) {
	e := newBenchEnv(b)
	for range 20 { // warm connections and statistics
		e.one(b, e.direct, e.bodyUp)
		e.one(b, e.gateway, e.bodyGw)
	}
	direct := make([]time.Duration, 0, b.N)
	gw := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		direct = append(direct, e.one(b, e.direct, e.bodyUp))
		gw = append(gw, e.one(b, e.gateway, e.bodyGw))
	}
	b.StopTimer()
	pd, pg := p50(direct), p50(gw)
	b.ReportMetric(float64(pd.Microseconds()), "direct-p50-µs")
	b.ReportMetric(float64(pg.Microseconds()), "gateway-p50-µs")
	b.ReportMetric(float64((pg - pd).Microseconds()), "added-p50-µs")
}

// cpuTime is the process's user+system CPU time so far.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// load runs n streams on c workers against url and returns the wall time
// and the process CPU time they took.
func (e *benchEnv) load(b *testing.B, url, body string, n, c int) (wall, cpu time.Duration) {
	var wg sync.WaitGroup
	work := make(chan struct{}, n)
	for range n {
		work <- struct{}{}
	}
	close(work)
	c0, start := cpuTime(b), time.Now()
	for range c {
		wg.Go(func() {
			for range work {
				e.one(b, url, body)
			}
		})
	}
	wg.Wait()
	return time.Since(start), cpuTime(b) - c0
}

// BenchmarkThroughputC32 runs b.N streams of 200 chunks on 32 concurrent
// clients, directly and through the gateway, and reports the streams per
// second of each, their ratio, and the gateway's CPU per proxied chunk: the
// process CPU of the gateway run minus that of the direct run (which holds
// the same provider and client work), divided by the chunks relayed.
func BenchmarkThroughputC32(b *testing.B) {
	e := newBenchEnv(b)
	const c = 32
	e.load(b, e.direct, e.bodyUp, 2*c, c) // warm connections
	e.load(b, e.gateway, e.bodyGw, 2*c, c)
	n := max(b.N, c)
	b.ResetTimer()
	wd, cd := e.load(b, e.direct, e.bodyUp, n, c)
	wg, cg := e.load(b, e.gateway, e.bodyGw, n, c)
	b.StopTimer()
	rd, rg := float64(n)/wd.Seconds(), float64(n)/wg.Seconds()
	b.ReportMetric(rd, "direct-streams/s")
	b.ReportMetric(rg, "gateway-streams/s")
	b.ReportMetric(rg/rd, "gateway/direct")
	b.ReportMetric(float64((cg-cd).Nanoseconds())/float64(n*benchChunks), "gw-cpu-ns/chunk")
}

// BenchmarkGatewayCPUPerChunk runs the gateway as a separate process (this
// test binary, re-executed) in front of a replay provider on loopback, streams
// b.N answers of 200 chunks through it on 32 concurrent clients, and reports
// the gateway process's CPU time per relayed chunk: gw-cpu-ns/chunk (user+
// system, from the kernel's nanosecond process CPU clock), its user and system
// shares (from /proc/PID/stat, whose 10 ms ticks only split that total), and
// the read and write system calls per chunk (from /proc/PID/io). Unlike the
// difference in BenchmarkThroughputC32, nothing but the gateway is counted.
// Per-stream work (request parsing, routing, the upstream request) is
// included, spread over the stream's 200 chunks.
func BenchmarkGatewayCPUPerChunk(b *testing.B) { benchChildCPU(b, false) }

// BenchmarkRelayCPUPerChunk is BenchmarkGatewayCPUPerChunk with the child
// running bareRelay instead of the gateway: the same net/http server and
// transport, the same 32 KiB reads each written and flushed at once, but no
// parsing, routing or timing. Its figures are the floor of any net/http proxy
// of these streams on this machine.
func BenchmarkRelayCPUPerChunk(b *testing.B) { benchChildCPU(b, true) }

func benchChildCPU(b *testing.B, relay bool) {
	up := replay.NewServer(map[string]replay.Script{"m-wire": &replay.Profile{OutputTokens: benchChunks}})
	defer up.Close()
	ch := startChild(b, up.URL(), relay)
	e := &benchEnv{
		client:  &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 128, DisableCompression: true}},
		gateway: ch.url,
		bodyGw:  `{"model":"m","stream":true,` + hi + `}`,
	}
	defer e.client.CloseIdleConnections()
	const c = 32
	pid := ch.pid
	e.load(b, e.gateway, e.bodyGw, 4*c, c) // warm connections and statistics
	n := max(b.N, c)
	b.ResetTimer()
	c0, t0, s0 := procClock(b, pid), procTicks(b, pid), procSyscalls(b, pid)
	wall, _ := e.load(b, e.gateway, e.bodyGw, n, c)
	c1, t1, s1 := procClock(b, pid), procTicks(b, pid), procSyscalls(b, pid)
	b.StopTimer()
	chunks := float64(n * benchChunks)
	cpu := float64((c1 - c0).Nanoseconds())
	b.ReportMetric(cpu/chunks, "gw-cpu-ns/chunk")
	if ticks := (t1.user - t0.user) + (t1.sys - t0.sys); ticks > 0 {
		// The ticks are coarse but sampled at the same moments: their ratio
		// splits the precise total.
		b.ReportMetric(cpu*float64(t1.user-t0.user)/float64(ticks)/chunks, "gw-user-ns/chunk")
		b.ReportMetric(cpu*float64(t1.sys-t0.sys)/float64(ticks)/chunks, "gw-sys-ns/chunk")
	}
	b.ReportMetric(float64(s1-s0)/chunks, "gw-syscalls/chunk")
	b.ReportMetric(cpu/1e3/float64(n), "gw-cpu-µs/stream")
	b.ReportMetric(float64(n)/wall.Seconds(), "streams/s")
}

// child is a gateway or bare relay process started by startChild.
type child struct {
	url string // its chat-completions URL
	pid int
}

// startChild re-executes this test binary as a gateway (or, with relay, a
// bare relay) in front of the provider at upstream, and stops it when b ends.
func startChild(b *testing.B, upstream string, relay bool) child {
	b.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childUpstreamEnv+"="+upstream)
	if relay {
		cmd.Env = append(cmd.Env, childRelayEnv+"=1")
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		stdin.Close()
		_ = cmd.Wait()
	})
	addr, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		b.Fatal(err)
	}
	return child{url: "http://" + strings.TrimSpace(addr) + "/v1/chat/completions", pid: cmd.Process.Pid}
}

// perEventGap is the pause perEventUpstream makes after each event in the
// per-event shape: long enough that a proxy in front, with 32 such streams
// at once, reads every event on its own (2 read or write system calls and
// more per chunk), far shorter than real providers' 10-50 ms between tokens.
const perEventGap = time.Millisecond

// burstGap is the pause of the burst shape: 32 streams then ask more of a
// proxy than one core gives, so it falls behind and reads 2-4 events at a
// time (0.5-0.9 system calls per chunk), how many depending on the load of
// the moment.
const burstGap = 100 * time.Microsecond

// perEventUpstream is a provider that writes every SSE event of its answer
// on its own, flushes it at once and pauses gap, as real providers
// do when they stream tokens as they are generated: a role chunk,
// benchChunks content chunks, a finish chunk, a usage chunk and [DONE],
// whatever the request.
func perEventUpstream(gap time.Duration) http.Handler {
	const head = `data: {"id":"chatcmpl-b","object":"chat.completion.chunk","created":1700000000,"model":"m-wire","choices":[`
	first := []byte(head + `{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}],"usage":null}` + "\n\n")
	tail := [][]byte{
		[]byte(head + `{"index":0,"delta":{},"finish_reason":"stop"}],"usage":null}` + "\n\n"),
		[]byte(head + `],"usage":{"prompt_tokens":8,"completion_tokens":` + strconv.Itoa(benchChunks) + `,"total_tokens":` + strconv.Itoa(benchChunks+8) + `}}` + "\n\n"),
		[]byte("data: [DONE]\n\n"),
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		rc := http.NewResponseController(w)
		send := func(ev []byte) bool {
			if _, err := w.Write(ev); err != nil || rc.Flush() != nil {
				return false
			}
			time.Sleep(gap)
			return true
		}
		if !send(first) {
			return
		}
		ev := make([]byte, 0, 256)
		for range benchChunks {
			// Each content chunk carries the moment it was written, so that
			// a client in this process can time its way through the proxy.
			ev = append(ev[:0], head+`{"index":0,"delta":{"content":"t`...)
			ev = strconv.AppendInt(ev, int64(time.Since(benchEpoch)), 10)
			ev = append(ev, ` "},"finish_reason":null}],"usage":null}`+"\n\n"...)
			if !send(ev) {
				return
			}
		}
		for _, ev := range tail {
			if !send(ev) {
				return
			}
		}
	})
}

// benchEpoch is the origin of the send times perEventUpstream writes.
var benchEpoch = time.Now()

// eventDelays streams one answer of perEventUpstream through url and returns,
// for every content chunk, how long it took from the upstream's write to
// this client's read.
func (e *benchEnv) eventDelays(b *testing.B, url, body string) []time.Duration {
	resp, err := e.client.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	r := bufio.NewReader(resp.Body)
	marker := []byte(`"content":"t`)
	var out []time.Duration
	for {
		line, err := r.ReadSlice('\n')
		now := time.Since(benchEpoch)
		if i := bytes.Index(line, marker); i >= 0 {
			digits := line[i+len(marker):]
			digits = digits[:bytes.IndexByte(digits, ' ')]
			sent, perr := strconv.ParseInt(string(digits), 10, 64)
			if perr != nil {
				b.Fatal(perr)
			}
			out = append(out, now-time.Duration(sent))
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			b.Fatal(err)
		}
	}
	if len(out) != benchChunks {
		b.Fatalf("%d timed chunks, want %d", len(out), benchChunks)
	}
	return out
}

// BenchmarkGatewayVsRelay measures the gateway against its floor, a bare
// net/http relay (bareRelay), in the same run, for three upstream shapes:
// batched (replay with no delays: the events already due go out in one
// write, so a 200-chunk answer arrives in a few reads); per-event (every
// event written and flushed on its own with perEventGap after it, as real
// providers stream, so that every event arrives in a read of its own); and
// burst (the same with burstGap, so short that the proxies fall behind and
// read a few events at once). Both proxies run as child processes in front
// of the same upstream. Each round streams 32 answers on 32 concurrent
// clients through one proxy, then through the other (which goes first
// alternates by round), then one answer at a time through each in
// alternation. It reports each proxy's process CPU per relayed chunk, the
// median over rounds of the round's CPU ratio (gw/relay-cpu) and the ratio
// of the totals (sum-gw/relay-cpu), the read and write system calls per
// chunk, and p50 latencies at concurrency 1 through each and their
// difference (added-p50-µs): with the batched upstream of a whole stream,
// otherwise of every chunk, from the upstream's write to the client's read.
func BenchmarkGatewayVsRelay(b *testing.B) {
	for _, shape := range []string{"batched", "burst", "per-event"} {
		b.Run("upstream="+shape, func(b *testing.B) {
			var upURL string
			if shape == "batched" {
				up := replay.NewServer(map[string]replay.Script{"m-wire": &replay.Profile{OutputTokens: benchChunks}})
				b.Cleanup(up.Close)
				upURL = up.URL()
			} else {
				gap := perEventGap
				if shape == "burst" {
					gap = burstGap
				}
				up := httptest.NewServer(perEventUpstream(gap))
				b.Cleanup(up.Close)
				upURL = up.URL + "/v1"
			}
			gw, relay := startChild(b, upURL, false), startChild(b, upURL, true)
			e := &benchEnv{
				client: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 128, DisableCompression: true}},
				bodyGw: `{"model":"m","stream":true,` + hi + `}`,
			}
			b.Cleanup(e.client.CloseIdleConnections)
			const c = 32
			procs := [2]child{gw, relay}
			for _, ch := range procs { // warm connections and statistics
				e.load(b, ch.url, e.bodyGw, 4*c, c)
			}
			var cpu [2]time.Duration
			var sys [2]int64
			var ratios []float64
			lat := [2][]time.Duration{}
			streams := 0
			b.ResetTimer()
			for round := 0; streams < max(b.N, c); round++ {
				// The two proxies take turns going first, so that neither
				// always follows the other's load or the latency streams.
				order := [2]int{0, 1}
				if round%2 == 1 {
					order = [2]int{1, 0}
				}
				var rc [2]time.Duration
				for _, i := range order {
					ch := procs[i]
					c0, s0 := procClock(b, ch.pid), procSyscalls(b, ch.pid)
					e.load(b, ch.url, e.bodyGw, c, c)
					rc[i] = procClock(b, ch.pid) - c0
					sys[i] += procSyscalls(b, ch.pid) - s0
				}
				cpu[0] += rc[0]
				cpu[1] += rc[1]
				ratios = append(ratios, float64(rc[0])/float64(rc[1]))
				for range 2 {
					for _, i := range order {
						ch := procs[i]
						if shape == "batched" {
							lat[i] = append(lat[i], e.one(b, ch.url, e.bodyGw))
						} else {
							lat[i] = append(lat[i], e.eventDelays(b, ch.url, e.bodyGw)...)
						}
					}
				}
				streams += c
			}
			b.StopTimer()
			chunks := float64(streams * benchChunks)
			b.ReportMetric(float64(cpu[0].Nanoseconds())/chunks, "gw-cpu-ns/chunk")
			b.ReportMetric(float64(cpu[1].Nanoseconds())/chunks, "relay-cpu-ns/chunk")
			slices.Sort(ratios)
			b.ReportMetric(ratios[len(ratios)/2], "gw/relay-cpu")
			b.ReportMetric(float64(cpu[0])/float64(cpu[1]), "sum-gw/relay-cpu")
			b.ReportMetric(float64(sys[0])/chunks, "gw-syscalls/chunk")
			b.ReportMetric(float64(sys[1])/chunks, "relay-syscalls/chunk")
			pg, pr := p50(lat[0]), p50(lat[1])
			b.ReportMetric(float64(pg.Microseconds()), "gw-p50-µs")
			b.ReportMetric(float64(pr.Microseconds()), "relay-p50-µs")
			b.ReportMetric(float64((pg - pr).Microseconds()), "added-p50-µs")
		})
	}
}

// procClock reads the CPU time (user+system, all threads, living and exited)
// of process pid from its kernel CPU clock, to the nanosecond: the clock ID
// of a process is (^pid)<<3 | CPUCLOCK_SCHED (2), as glibc's clock_getcpuclockid
// builds it, and Linux lets any process read it.
func procClock(b *testing.B, pid int) time.Duration {
	var ts syscall.Timespec
	id := (^pid)<<3 | 2
	if _, _, errno := syscall.Syscall(syscall.SYS_CLOCK_GETTIME, uintptr(id), uintptr(unsafe.Pointer(&ts)), 0); errno != 0 {
		b.Fatalf("clock_gettime(cpu clock of %d): %v", pid, errno)
	}
	return time.Duration(ts.Nano())
}

// ticks are the user and system CPU clock ticks (10 ms) of a process.
type ticks struct{ user, sys int64 }

// procTicks reads the user and system CPU ticks of process pid from /proc.
func procTicks(b *testing.B, pid int) ticks {
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		b.Fatal(err)
	}
	// Fields after the command name, which is in parentheses: utime is the
	// 12th and stime the 13th of them (fields 14 and 15 of the line).
	f := strings.Fields(string(raw[bytes.LastIndexByte(raw, ')')+1:]))
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		b.Fatalf("parse /proc/%d/stat: %v %v", pid, err1, err2)
	}
	return ticks{ut, st}
}

// procSyscalls reads the number of read and write system calls process pid
// has made (syscr + syscw of /proc/PID/io: read, readv, write, writev and
// friends on any file, sockets included).
func procSyscalls(b *testing.B, pid int) int64 {
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/io")
	if err != nil {
		b.Fatal(err)
	}
	var total int64
	for line := range strings.Lines(string(raw)) {
		k, v, _ := strings.Cut(strings.TrimSpace(line), ": ")
		if k == "syscr" || k == "syscw" {
			x, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				b.Fatalf("parse /proc/%d/io: %v", pid, err)
			}
			total += x
		}
	}
	return total
}
