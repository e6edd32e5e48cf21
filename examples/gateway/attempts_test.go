package main

import (
	"bytes"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tpsroute/tpsroute/fallback"
	"github.com/tpsroute/tpsroute/replay"
)

// lockedBuffer is a bytes.Buffer safe for the handler's goroutine.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestAttemptCountsAgree is issue 13 point 9 at the gateway: a stream cut
// after the commit point is one attempt in the response header, in the log
// and in the error, not "attempts=2" for "1 attempt".
func TestAttemptCountsAgree(t *testing.T) {
	e := pair(t, fallback.MidStreamError, midStall(), replay.CutAfter(6))
	var logs lockedBuffer
	e.g.logger = slog.New(slog.NewTextHandler(&logs, nil))
	srv := httptest.NewServer(e.g)
	s := stream(t, srv.URL, req("m", true, orderAB))
	srv.Close() // waits for the handler, and so for its log record
	require.Equal(t, http.StatusOK, s.status)
	require.NotEmpty(t, s.errEv)
	assert.Equal(t, "1", s.header.Get("X-Tpsroute-Attempts"))
	assert.Contains(t, logs.String(), "attempts=1 ")
	assert.NotContains(t, logs.String(), "attempts=2")
	assert.Contains(t, s.errEv, "1 attempt")
}

// TestLogNamesWhyNotContinued is issue 29 item 2 at the gateway: the log
// record of a stream that failed after its first bytes names why it was not
// continued.
func TestLogNamesWhyNotContinued(t *testing.T) {
	for _, tt := range []struct {
		name    string
		mid     fallback.MidStreamPolicy
		prefill bool // b declares assistant prefill
		want    string
	}{
		{"error_policy", fallback.MidStreamError, true, "no_continuation=off"},
		{"same_model_without_prefill", fallback.MidStreamDefault, false, "no_continuation=no-target"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			a, b := dep("a", "us", "m"), dep("b", "us", "m")
			b.Capabilities.AssistantPrefill = tt.prefill
			cfg := testConfig(a, b)
			cfg.Fallback.MidStream = tt.mid
			e := newEnv(t, map[string]replay.Script{
				"a-m": replay.WithFaults(prof(answer), midStall(), replay.CutAfter(6)),
				"b-m": prof(answer),
			}, cfg, options{})
			var logs lockedBuffer
			e.g.logger = slog.New(slog.NewTextHandler(&logs, nil))
			srv := httptest.NewServer(e.g)
			s := stream(t, srv.URL, req("m", true, orderAB))
			srv.Close() // waits for the handler, and so for its log record
			require.NotEmpty(t, s.errEv)
			assert.Contains(t, logs.String(), tt.want)
		})
	}
}
