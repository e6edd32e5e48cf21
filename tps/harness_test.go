package tps_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/stretchr/testify/require"

	"github.com/tpsroute/tpsroute/tps"
)

const ms = time.Millisecond

// step is one write of a scripted SSE body: data becomes readable at offset
// at from the request start.
type step struct {
	at   time.Duration
	data string
}

// ev is one data event at ms milliseconds.
func ev(at int, json string) step {
	return step{at: time.Duration(at) * ms, data: "data: " + json + "\n\n"}
}

// raw is raw SSE bytes at ms milliseconds.
func raw(at int, s string) step { return step{at: time.Duration(at) * ms, data: s} }

// done is "data: [DONE]" at ms milliseconds.
func done(at int) step { return raw(at, "data: [DONE]\n\n") }

// scriptBody replays steps on the bubble's fake clock: each Read returns the
// next step's bytes once its time has come, then EOF (or err).
type scriptBody struct {
	start  time.Time
	steps  []step
	err    error
	closed bool
}

func (b *scriptBody) Read(p []byte) (int, error) {
	if b.closed {
		return 0, errors.New("read on closed body")
	}
	if len(b.steps) == 0 {
		if b.err != nil {
			return 0, b.err
		}
		return 0, io.EOF
	}
	st := &b.steps[0]
	if d := time.Until(b.start.Add(st.at)); d > 0 {
		time.Sleep(d)
	}
	n := copy(p, st.data)
	st.data = st.data[n:]
	if len(st.data) == 0 {
		b.steps = b.steps[1:]
	}
	return n, nil
}

func (b *scriptBody) Close() error {
	b.closed = true
	return nil
}

func body(steps []step) string {
	var sb strings.Builder
	for _, s := range steps {
		sb.WriteString(s.data)
	}
	return sb.String()
}

// headersAt is when the scripted response headers arrive.
const headersAt = 100 * ms

// runTap reads the scripted body through a Tap in a synctest bubble and
// returns the Sample done received and the bytes read.
func runTap(t *testing.T, steps []step, readErr error, opts ...tps.Option) (tps.Sample, string) {
	t.Helper()
	var got tps.Sample
	var out []byte
	calls := 0
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		b := &scriptBody{start: start, steps: append([]step(nil), steps...), err: readErr}
		time.Sleep(headersAt)
		r := tps.NewTap(b, start, func(s tps.Sample) { got = s; calls++ }, opts...)
		out, _ = io.ReadAll(r)
		require.NoError(t, r.Close())
		got.Start = time.Time{}
	})
	require.Equal(t, 1, calls, "done must be called exactly once")
	return got, string(out)
}

// roundTripper serves one scripted SSE response from memory.
type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// scriptClient is an openai-go client whose every call gets the scripted
// body, headers arriving at headersAt.
func scriptClient(start time.Time, steps []step, readErr error) openai.Client {
	rt := roundTripper(func(r *http.Request) (*http.Response, error) {
		time.Sleep(time.Until(start.Add(headersAt)))
		return &http.Response{
			StatusCode: http.StatusOK,
			Header:     http.Header{"Content-Type": []string{"text/event-stream"}},
			Body:       &scriptBody{start: start, steps: append([]step(nil), steps...), err: readErr},
			Request:    r,
		}, nil
	})
	return openai.NewClient(
		option.WithBaseURL("http://127.0.0.1:1/v1/"),
		option.WithAPIKey("test"),
		option.WithMaxRetries(0),
		option.WithHTTPClient(&http.Client{Transport: rt}),
	)
}

// runWrap reads the scripted body through openai-go and tps.Wrap in a
// synctest bubble and returns the final Sample and the chunks' RawJSON count.
func runWrap(t *testing.T, steps []step, readErr error, opts ...tps.Option) (tps.Sample, int) {
	t.Helper()
	var got tps.Sample
	n := 0
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		client := scriptClient(start, steps, readErr)
		params := openai.ChatCompletionNewParams{Model: "m", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}}
		params.StreamOptions.IncludeUsage = openai.Bool(true)
		s := tps.Wrap(client.Chat.Completions.NewStreaming(context.Background(), params), start, opts...)
		for s.Next() {
			n++
		}
		got = s.Sample()
		require.NoError(t, s.Close())
		require.NoError(t, s.Close(), "Close is idempotent")
		got.Start = time.Time{}
	})
	return got, n
}
