package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime/pprof"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"
	"go.uber.org/goleak"

	"github.com/tpsroute/tpsroute"
	"github.com/tpsroute/tpsroute/replay"
	"github.com/tpsroute/tpsroute/route"
)

func TestMain(m *testing.M) {
	if os.Getenv(fleetChildEnv) != "" {
		fleetChild()
		return
	}
	if up := os.Getenv(childUpstreamEnv); up != "" {
		benchChild(up)
		return
	}
	goleak.VerifyTestMain(m)
}

// childUpstreamEnv, when set to a provider URL, makes the test binary a
// gateway process in front of it, for the CPU benchmark: it prints its
// address and serves until its stdin closes.
const childUpstreamEnv = "GATEWAY_BENCH_UPSTREAM"

func benchChild(upstream string) {
	d := dep("p", "us", "m")
	d.ProviderModel, d.BaseURL = "m-wire", upstream
	c, err := newClient(testConfig(d), nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	var h http.Handler = newGateway(c, options{})
	if os.Getenv(childRelayEnv) != "" {
		h = bareRelay(upstream+"/chat/completions", upstreamTransport())
	}
	srv := &http.Server{Handler: h}
	go func() { _ = srv.Serve(ln) }()
	if path := os.Getenv("GATEWAY_BENCH_CPUPROFILE"); path != "" {
		if os.Getenv(childRelayEnv) != "" {
			path += ".relay" // the relay's own profile beside the gateway's
		}
		if f, err := os.Create(path); err == nil {
			_ = pprof.StartCPUProfile(f)
			defer pprof.StopCPUProfile()
		}
	}
	fmt.Println(ln.Addr().String())
	_, _ = io.Copy(io.Discard, os.Stdin)
	_ = srv.Close()
}

// childRelayEnv, set with childUpstreamEnv, makes the child a bare relay
// instead of the gateway: the CPU floor of any net/http proxy of these streams.
const childRelayEnv = "GATEWAY_BENCH_RELAY"

// bareRelay is the least a net/http streaming proxy can do: for every request
// it posts one fixed streaming body to url (the one the gateway would send,
// without parsing the client's) and relays the answer read by read, flushing
// after each, with no parsing, routing or timing. It is the floor the
// gateway's CPU per chunk is compared with; it is not a usable proxy.
func bareRelay(url string, tr http.RoundTripper) http.Handler {
	body := []byte(`{"model":"m-wire","stream":true,"stream_options":{"include_usage":true},` + hi + `}`)
	bufs := sync.Pool{New: func() any { b := make([]byte, copyBufSize); return &b }}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		up, err := http.NewRequestWithContext(r.Context(), http.MethodPost, url, bytes.NewReader(body))
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		up.Header.Set("Content-Type", "application/json")
		resp, err := tr.RoundTrip(up)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(resp.StatusCode)
		rc := http.NewResponseController(w)
		bp := bufs.Get().(*[]byte)
		defer bufs.Put(bp)
		for {
			n, err := resp.Body.Read(*bp)
			if n > 0 {
				if _, werr := w.Write((*bp)[:n]); werr != nil {
					return
				}
				if rc.Flush() != nil {
					return
				}
			}
			if err != nil {
				return
			}
		}
	})
}

// dep is a deployment of logical model model by provider in region, served
// by the test handler under the wire model "provider-model".
func dep(provider, region, model string) route.Deployment {
	return route.Deployment{
		Provider: provider, Region: region, Model: model, ProviderModel: provider + "-" + model,
		BaseURL: "http://" + provider + ".test/v1", APIKey: "sk-" + provider + "-secret-key",
	}
}

// prof is a synthetic provider answering n tokens at once.
func prof(n int) *replay.Profile { return &replay.Profile{OutputTokens: n} }

// testConfig is a Config over ds with the randomness of routing turned off:
// no exploration, no band, no cold probes, quick backoff, no waiting.
func testConfig(ds ...route.Deployment) tpsroute.Config {
	cfg := tpsroute.Config{Deployments: ds}
	cfg.Route.Exploration = -1
	cfg.Route.Band = -1
	cfg.Route.ColdProbes = -1
	cfg.Route.Seed = 1
	cfg.Fallback.BackoffBase = time.Millisecond
	cfg.Fallback.BackoffMax = 2 * time.Millisecond
	cfg.Fallback.MaxWait = -1
	cfg.Fallback.Seed = 1
	return cfg
}

// env is a gateway in front of one replay handler.
type env struct {
	h   *replay.Handler
	cap *capture
	g   *gateway
	c   *tpsroute.Client
}

func newEnv(t testing.TB, scripts map[string]replay.Script, cfg tpsroute.Config, opts options) *env {
	t.Helper()
	h := replay.NewHandler(scripts)
	c := &capture{next: h.Transport()}
	client, err := newClient(cfg, c)
	require.NoError(t, err)
	return &env{h: h, cap: c, g: newGateway(client, opts), c: client}
}

// serve starts the gateway on loopback for an end-to-end test.
func (e *env) serve(t testing.TB) string {
	t.Helper()
	srv := httptest.NewServer(e.g)
	t.Cleanup(srv.Close)
	return srv.URL
}

// capture records the body and headers of every upstream request.
type capture struct {
	next http.RoundTripper
	mu   sync.Mutex
	reqs []captured
}

type captured struct {
	host   string
	header http.Header
	body   []byte
}

func (c *capture) RoundTrip(req *http.Request) (*http.Response, error) {
	body, err := io.ReadAll(req.Body)
	if err != nil {
		return nil, err
	}
	req.Body.Close()
	req.Body = io.NopCloser(bytes.NewReader(body))
	c.mu.Lock()
	c.reqs = append(c.reqs, captured{host: req.URL.Host, header: req.Header.Clone(), body: body})
	c.mu.Unlock()
	return c.next.RoundTrip(req)
}

func (c *capture) all() []captured {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]captured(nil), c.reqs...)
}

// hosts lists the hosts upstream requests went to, in order.
func (c *capture) hosts() []string {
	var out []string
	for _, r := range c.all() {
		out = append(out, strings.TrimSuffix(r.host, ".test"))
	}
	return out
}

// sse is what an HTTP client read from a streaming answer.
type sse struct {
	status  int
	header  http.Header
	text    string   // concatenated delta.content
	events  []string // data payloads, [DONE] included
	done    bool     // the last event was [DONE]
	errEv   string   // the data of an error event, if any
	rawBody string
}

// readSSE parses a response body as an SSE client would.
func readSSE(t testing.TB, status int, h http.Header, body io.Reader) sse {
	t.Helper()
	raw, err := io.ReadAll(body)
	require.NoError(t, err)
	s := sse{status: status, header: h, rawBody: string(raw)}
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	var text strings.Builder
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data:")
		if !ok {
			continue
		}
		data = strings.TrimPrefix(data, " ")
		s.events = append(s.events, data)
		if data == "[DONE]" {
			continue
		}
		if gjson.Get(data, "error").Exists() {
			s.errEv = data
		}
		gjson.Get(data, "choices").ForEach(func(_, c gjson.Result) bool {
			text.WriteString(c.Get("delta.content").Str)
			return true
		})
	}
	s.text = text.String()
	s.done = len(s.events) > 0 && s.events[len(s.events)-1] == "[DONE]"
	return s
}

// post sends body to the gateway at base with extra headers.
func post(t testing.TB, base, body string, hdr ...string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, base+"/v1/chat/completions", strings.NewReader(body))
	require.NoError(t, err)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	return resp
}

// stream posts a streaming request and reads the whole answer.
func stream(t testing.TB, base, body string, hdr ...string) sse {
	t.Helper()
	resp := post(t, base, body, hdr...)
	defer resp.Body.Close()
	return readSSE(t, resp.StatusCode, resp.Header, resp.Body)
}

// serveRecorded runs one request through the gateway's handler in memory
// (for synctest bubbles, where no socket may be used).
func serveRecorded(g *gateway, body string, hdr ...string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", strings.NewReader(body))
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	w := httptest.NewRecorder()
	g.ServeHTTP(w, req)
	return w
}

// errorOf returns the error object of an OpenAI-shaped error body.
func errorOf(t testing.TB, body []byte) gjson.Result {
	t.Helper()
	e := gjson.GetBytes(body, "error")
	require.True(t, e.IsObject(), "an OpenAI-shaped error body: %s", body)
	require.NotEmpty(t, e.Get("message").Str)
	return e
}

const hi = `"messages":[{"role":"user","content":"hi"}]`

func req(model string, stream bool, extra string) string {
	s := `{"model":"` + model + `",` + hi
	if stream {
		s += `,"stream":true`
	}
	if extra != "" {
		s += "," + extra
	}
	return s + "}"
}
