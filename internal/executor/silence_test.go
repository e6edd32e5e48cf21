package executor_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tpsroute/tpsroute/fallback"
	"github.com/tpsroute/tpsroute/internal/executor"
)

// emptyReads is a body whose reads, once r is read, return after a second
// with no bytes and no error until ctx ends: a Reader that is not life,
// however often it returns.
type emptyReads struct {
	io.Reader
	ctx context.Context
}

func (e *emptyReads) Read(p []byte) (int, error) {
	if n, err := e.Reader.Read(p); n > 0 || err != io.EOF {
		return n, err
	}
	time.Sleep(time.Second)
	if err := e.ctx.Err(); err != nil {
		return 0, err
	}
	return 0, nil
}

func (e *emptyReads) Close() error { return nil }

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestSilenceCountsBytesNotReads: alone in the plan, an upstream whose body
// sends a role chunk and then only empty reads is silent: it ends at
// Deadlines.Silence, not at MaxDuration.
func TestSilenceCountsBytesNotReads(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := roundTripFunc(func(r *http.Request) (*http.Response, error) {
			role := `data: {"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}` + "\n\n"
			return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"text/event-stream"}},
				Body: &emptyReads{strings.NewReader(role), r.Context()}, Request: r}, nil
		})
		e := executor.New(fallback.Options{}, executor.Hooks{Transport: rt})
		start := time.Now()
		_, err := e.Do(context.Background(), planOf(dep("a", "m")), executor.Call{Body: []byte(reqBody), Stream: true})
		require.ErrorIs(t, err, fallback.ErrSilent)
		assert.LessOrEqual(t, time.Since(start), executor.DefaultSilence+time.Second)
	})
}
