package executor_test

import (
	"context"
	"encoding/json"
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
	"github.com/tpsroute/tpsroute/replay"
	"github.com/tpsroute/tpsroute/route"
	"github.com/tpsroute/tpsroute/tps"
)

// noStream returns dep(provider, wire) declaring Capabilities.NoStream.
func noStream(provider, wire string) route.Deployment {
	d := dep(provider, wire)
	d.Capabilities.NoStream = true
	return d
}

// TestPlainUpstream: an attempt on a deployment that declares NoStream, or
// of a non-streaming call with Call.Plain, is sent with "stream": false and
// no stream_options; its JSON answer is the call's answer as sent, timed
// as total latency (Sample.Unstreamed) with the provider's usage. A
// streaming call to a NoStream deployment gets the answer as a stream.
// Call.Plain changes nothing for a streaming call.
func TestPlainUpstream(t *testing.T) {
	for _, tc := range []struct {
		name      string
		d         route.Deployment
		call      executor.Call
		wantPlain bool
	}{
		{"no_stream deployment", noStream("a", "a-m"), executor.Call{Assemble: true}, true},
		{"no_stream deployment, buffered", noStream("a", "a-m"), executor.Call{}, true},
		{"Call.Plain", dep("a", "a-m"), executor.Call{Assemble: true, Plain: true}, true},
		{"no_stream deployment, streaming call", noStream("a", "a-m"), executor.Call{Stream: true}, true},
		{"Call.Plain, streaming call", dep("a", "a-m"), executor.Call{Stream: true, Plain: true}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := newEnv(map[string]replay.Script{"a-m": prof(40)}, fallback.Options{})
				var recorded []tps.Sample
				e.fb = observing(func(_ route.Deployment, s tps.Sample) { recorded = append(recorded, s) })
				start := time.Now()
				res, err := e.do(t, planOf(tc.d), tc.call)
				require.NoError(t, err)
				var streamed drained
				if tc.call.Stream {
					streamed = drain(t, res.Body)
				}
				at := attemptsFor(e.h, "a-m")
				require.Len(t, at, 1)
				assert.Equal(t, !tc.wantPlain, at[0].Stream)
				assert.Equal(t, !tc.wantPlain, at[0].IncludeUsage, "no stream_options on a plain call")
				if tc.wantPlain {
					assert.Equal(t, "application/json", at[0].Header.Get("Accept"))
				}
				s := res.Sample()
				assert.Equal(t, tc.wantPlain, s.Unstreamed)
				assert.EqualValues(t, 40, s.OutputTokens)
				assert.Equal(t, "stop", s.FinishReason)
				if tc.wantPlain {
					assert.Equal(t, tps.TokenSourceUsage, s.TokenSource)
					assert.False(t, s.TPSOK, "no speed is seen in one piece")
					assert.Equal(t, 590*time.Millisecond, s.TTFT, "the whole answer's latency: prof's last token")
				} else {
					assert.True(t, s.TPSOK)
				}
				require.Len(t, recorded, 1)
				assert.Equal(t, s.Unstreamed, recorded[0].Unstreamed, "the statistics are told")
				if tc.call.Stream {
					require.NoError(t, streamed.err)
					assert.Equal(t, replay.Text(40), streamed.text)
					assert.True(t, streamed.done)
					return
				}
				raw, err := io.ReadAll(res.Body)
				require.NoError(t, err)
				require.NoError(t, res.Body.Close())
				var answer struct {
					Object  string `json:"object"`
					Choices []struct {
						Message struct {
							Content string `json:"content"`
						} `json:"message"`
					} `json:"choices"`
				}
				if tc.call.Assemble {
					require.NoError(t, json.Unmarshal(raw, &answer), "%s", raw)
					assert.Equal(t, "chat.completion", answer.Object)
					assert.Equal(t, replay.Text(40), answer.Choices[0].Message.Content)
				} else {
					assert.Equal(t, replay.Text(40), drain(t, io.NopCloser(strings.NewReader(string(raw)))).text)
				}
				assert.Equal(t, 590*time.Millisecond, time.Since(start))
			})
		})
	}
}

// TestPlainUpstreamAnswerAsSent: a plain call's answer is the provider's
// JSON byte for byte (fields the stream's assembly does not know, such as
// annotations, included), scrubbed of the deployment's key.
func TestPlainUpstreamAnswerAsSent(t *testing.T) {
	const answer = `{"id":"c1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"hi sk-secret-key","annotations":[{"type":"url_citation"}]},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5}}`
	rt := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"application/json"}},
			Body: io.NopCloser(strings.NewReader(answer)), Request: r}, nil
	})
	e := executor.New(fallback.Options{}, executor.Hooks{Transport: rt})
	d := noStream("a", "m")
	d.APIKey = "sk-secret-key"
	res, err := e.Do(context.Background(), planOf(d), executor.Call{Body: []byte(reqBody), Assemble: true})
	require.NoError(t, err)
	raw, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	assert.Equal(t, strings.Replace(answer, "sk-secret-key", route.Redacted, 1), string(raw))
	assert.EqualValues(t, len(raw), res.ContentLength)
	assert.EqualValues(t, 2, res.Sample().OutputTokens)
}

// TestPlainUpstreamFailures: a plain answer that is not a JSON object, one
// past Limits.Answer, an error object with a 200 and an error status all
// fail the attempt, and the call fails over to the next deployment.
func TestPlainUpstreamFailures(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		status     int
		want       error
	}{
		{"not JSON", "<html>busy</html>", 200, fallback.ErrMalformed},
		{"too large", `{"choices":[{"message":{"content":"` + strings.Repeat("x", 2048) + `"}}]}`, 200, fallback.ErrTooLarge},
		{"error with 200", `{"error":{"message":"overloaded","type":"server_error"}}`, 200, fallback.ErrStreamError},
		{"502", `{"error":{"message":"bad gateway"}}`, 502, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rt := roundTripFunc(func(r *http.Request) (*http.Response, error) {
				if r.URL.Host == "b.test" {
					return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"application/json"}},
						Body: io.NopCloser(strings.NewReader(`{"choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}]}`)), Request: r}, nil
				}
				return &http.Response{StatusCode: tc.status, Header: http.Header{"Content-Type": {"application/json"}},
					Body: io.NopCloser(strings.NewReader(tc.body)), Request: r}, nil
			})
			e := executor.New(fallback.Options{Limits: fallback.Limits{Answer: 1024}}, executor.Hooks{Transport: rt})
			a, b := noStream("a", "m"), noStream("b", "m")
			a.BaseURL, b.BaseURL = "http://a.test/v1", "http://b.test/v1"
			res, err := e.Do(context.Background(), planOf(a, b), executor.Call{Body: []byte(reqBody), Assemble: true})
			require.NoError(t, err)
			assert.Equal(t, "b", res.Deployment().Provider)
			at := res.Attempts()
			require.GreaterOrEqual(t, len(at), 2)
			require.Error(t, at[0].Err)
			if tc.want != nil {
				assert.ErrorIs(t, at[0].Err, tc.want)
			}
			require.NoError(t, res.Body.Close())
		})
	}
}

// TestPlainUpstreamNoEarlyDeadline: a plain answer comes whole, headers
// and all, when it is done (590 ms for prof(40)), so the headers and TTFT
// deadlines, which bound the start of a stream, do not cut it, even with a
// deployment to fail over to.
func TestPlainUpstreamNoEarlyDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(map[string]replay.Script{"a-m": prof(40), "b-m": prof(40)}, fallback.Options{
			Deadlines: fallback.Deadlines{Headers: 300 * time.Millisecond, TTFT: 300 * time.Millisecond}})
		res, err := e.do(t, planOf(dep("a", "a-m"), dep("b", "b-m")), executor.Call{Assemble: true, Plain: true})
		require.NoError(t, err)
		require.NoError(t, res.Body.Close())
		assert.Equal(t, "a", res.Deployment().Provider)
		assert.Len(t, res.Attempts(), 1)
	})
}

// TestJSONAnswerToStream: a provider that answers a streaming request with
// one JSON body (it ignored "stream": true) is read as the stream that
// carries that answer, not failed as an empty stream.
func TestJSONAnswerToStream(t *testing.T) {
	rt := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"application/json; charset=utf-8"}},
			Body: io.NopCloser(strings.NewReader(`{"id":"c","choices":[{"index":0,"message":{"role":"assistant","content":"whole"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`)), Request: r}, nil
	})
	e := executor.New(fallback.Options{}, executor.Hooks{Transport: rt})
	res, err := e.Do(context.Background(), planOf(dep("a", "m")), executor.Call{Body: []byte(reqBody), Stream: true})
	require.NoError(t, err)
	d := drain(t, res.Body)
	require.NoError(t, d.err)
	assert.Equal(t, "whole", d.text)
	assert.True(t, d.done)
	assert.True(t, res.Sample().Unstreamed)
}
