package executor_test

import (
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/tpsroute/tpsroute/internal/payload"
	"github.com/tpsroute/tpsroute/replay"
	"github.com/tpsroute/tpsroute/route"
	"github.com/tpsroute/tpsroute/tps"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

const reqBody = `{"model":"m","messages":[{"role":"user","content":"hi"}]}`

// dep returns a deployment of logical model "m" served as wire model name by
// provider on host.
func dep(provider, wire string) route.Deployment {
	return route.Deployment{
		Provider: provider, Model: "m", ProviderModel: wire,
		BaseURL: "http://" + provider + ".test/v1", APIKey: "sk-" + provider + "-secret",
	}
}

func planOf(ds ...route.Deployment) route.Plan {
	var p route.Plan
	for _, d := range ds {
		p.Deployments = append(p.Deployments, route.Candidate{Deployment: &d})
	}
	return p
}

// drained is what a caller read from a Result body.
type drained struct {
	text   string // concatenated output text
	chunks int    // data events
	done   bool   // saw [DONE]
	err    error  // the error Read returned, nil on a clean io.EOF
}

// drain reads body to the end and decodes the SSE text with a tps.Tap.
func drain(t testing.TB, body io.ReadCloser) drained {
	t.Helper()
	var d drained
	var text []byte
	tap := tps.NewTap(io.NopCloser(body), time.Now(), nil, withObserver(func(_ time.Time, c *payload.Chunk) {
		if c.Done {
			d.done = true
			return
		}
		d.chunks++
		text = c.AppendText(text)
	}))
	_, err := io.Copy(io.Discard, tap)
	d.err = err
	require.NoError(t, body.Close())
	require.NoError(t, tap.Close())
	d.text = string(text)
	return d
}

// attemptsFor returns the handler's log entries for wire model m.
func attemptsFor(h *replay.Handler, m string) []replay.Attempt {
	var out []replay.Attempt
	for _, a := range h.Attempts() {
		if a.Model == m {
			out = append(out, a)
		}
	}
	return out
}

// recorder is a RoundTripper that records what each host was sent.
type recorder struct {
	next http.RoundTripper
	mu   sync.Mutex
	seen map[string][]string // host -> headers and bodies, flattened
}

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	var b strings.Builder
	for k, vs := range req.Header {
		b.WriteString(k + ": " + strings.Join(vs, ",") + "\n")
	}
	if req.Body != nil {
		body, err := io.ReadAll(req.Body)
		if err != nil {
			return nil, err
		}
		req.Body.Close()
		b.Write(body)
		req.Body = io.NopCloser(strings.NewReader(string(body)))
	}
	r.mu.Lock()
	if r.seen == nil {
		r.seen = map[string][]string{}
	}
	r.seen[req.URL.Host] = append(r.seen[req.URL.Host], b.String())
	r.mu.Unlock()
	return r.next.RoundTrip(req)
}
