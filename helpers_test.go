package tpsroute

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/tpsroute/tpsroute/replay"
	"github.com/tpsroute/tpsroute/route"
)

func TestMain(m *testing.M) {
	if os.Getenv(benchServerEnv) == "1" {
		serveBench()
		return
	}
	goleak.VerifyTestMain(m)
}

// seen is one request as a provider received it, unredacted, for credential
// isolation checks.
type seen struct {
	Header http.Header
	Body   string
}

// provider is one fake deployment: a replay.Handler behind a recorder that
// keeps every raw request.
type provider struct {
	name string
	h    *replay.Handler
	mu   sync.Mutex
	reqs []seen
}

func (p *provider) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	p.mu.Lock()
	p.reqs = append(p.reqs, seen{Header: r.Header.Clone(), Body: string(b)})
	p.mu.Unlock()
	r.Body = io.NopCloser(bytes.NewReader(b))
	p.h.ServeHTTP(w, r)
}

func (p *provider) requests() []seen {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]seen(nil), p.reqs...)
}

func (p *provider) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.reqs)
}

// memFleet is a set of in-memory providers, one per host, for synctest
// bubbles: the transport dispatches on the request's host.
type memFleet struct {
	providers map[string]*provider
	rts       map[string]http.RoundTripper
}

func newMemFleet() *memFleet {
	return &memFleet{providers: map[string]*provider{}, rts: map[string]http.RoundTripper{}}
}

// add registers provider name serving scripts and returns its base URL.
func (f *memFleet) add(name string, scripts map[string]replay.Script) string {
	p := &provider{name: name, h: replay.NewHandler(scripts)}
	f.providers[name] = p
	// Run the recorder in front of the handler's in-memory transport.
	inner := p.h.Transport()
	f.rts[name] = rtFunc(func(r *http.Request) (*http.Response, error) {
		b, _ := io.ReadAll(r.Body)
		p.mu.Lock()
		p.reqs = append(p.reqs, seen{Header: r.Header.Clone(), Body: string(b)})
		p.mu.Unlock()
		r.Body = io.NopCloser(bytes.NewReader(b))
		return inner.RoundTrip(r)
	})
	return "http://" + name + ".test/v1"
}

func (f *memFleet) RoundTrip(r *http.Request) (*http.Response, error) {
	name, _, _ := strings.Cut(r.URL.Host, ".")
	rt, ok := f.rts[name]
	if !ok {
		return nil, io.ErrUnexpectedEOF
	}
	return rt.RoundTrip(r)
}

type rtFunc func(*http.Request) (*http.Response, error)

func (f rtFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// tcpFleet is a set of providers on real loopback servers, with a client
// transport of its own so that no idle connection outlives the test.
type tcpFleet struct {
	providers map[string]*provider
	servers   []*httptest.Server
	client    *http.Client
}

func newTCPFleet(t testing.TB) *tcpFleet {
	tr := &http.Transport{MaxIdleConnsPerHost: 64}
	f := &tcpFleet{providers: map[string]*provider{}, client: &http.Client{Transport: tr}}
	t.Cleanup(func() {
		tr.CloseIdleConnections()
		for _, s := range f.servers {
			s.CloseClientConnections()
			s.Close()
		}
		tr.CloseIdleConnections()
	})
	return f
}

func (f *tcpFleet) add(name string, scripts map[string]replay.Script) string {
	p := &provider{name: name, h: replay.NewHandler(scripts)}
	f.providers[name] = p
	s := httptest.NewServer(p)
	f.servers = append(f.servers, s)
	return s.URL + "/v1"
}

func dep(provider, region, model, baseURL string) route.Deployment {
	return route.Deployment{Provider: provider, Region: region, Model: model, BaseURL: baseURL,
		APIKey: "key-" + provider + "-" + region}
}

func userParams(model, text string) openai.ChatCompletionNewParams {
	return openai.ChatCompletionNewParams{
		Model:    model,
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(text)},
	}
}

// drain reads a stream to its end and returns the concatenated content.
func drain(t testing.TB, s *Stream) (string, error) {
	t.Helper()
	var b strings.Builder
	for s.Next() {
		for _, c := range s.Current().Choices {
			b.WriteString(c.Delta.Content)
		}
	}
	return b.String(), s.Err()
}

func mustNew(t testing.TB, cfg Config) *Client {
	t.Helper()
	c, err := New(cfg)
	require.NoError(t, err)
	return c
}

func streamOnce(t testing.TB, c *Client, model string, opts ...CallOption) (*Stream, string, error) {
	t.Helper()
	s := c.Chat.Completions.NewStreaming(context.Background(), userParams(model, "hello"), opts...)
	text, err := drain(t, s)
	require.NoError(t, s.Close())
	return s, text, err
}
