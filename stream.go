package tpsroute

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/ssestream"

	"github.com/tpsroute/tpsroute/fallback"
	"github.com/tpsroute/tpsroute/route"
	"github.com/tpsroute/tpsroute/tps"
)

// NewStreaming starts a routed streaming chat completion, as openai-go's
// NewStreaming does. params.Model is the logical model, optionally
// "model@revision"; each attempt sends the chosen deployment's own model id,
// URL, key and headers. Usage (include_usage) is asked for unless the
// deployment declares NoStreamOptions. Failover happens before the first output chunk (the commit
// point); after it, a failure ends the stream with a *fallback.Error from Err,
// never a clean end. openai-go's own retries are off: the fallback rules own
// them.
//
// NewStreaming returns once the commit point is reached or the call failed;
// errors surface from the Stream's Err. The caller must Close the Stream or
// read it to the end. Cancelling ctx ends the upstream request at once.
func (s ChatCompletionService) NewStreaming(ctx context.Context, params openai.ChatCompletionNewParams, opts ...CallOption) *Stream {
	return s.c.newStream(ctx, params, opts, true)
}

// New creates a routed chat completion and returns it whole, as openai-go's
// New does. It streams underneath and accumulates the chunks, so every call
// feeds the TPS statistics, and since nothing reaches the caller before the
// end, a failure at any point (even mid-stream) fails over invisibly to the
// next deployment. Use WithReport to learn which deployment answered, its
// tps.Sample (usage, timing) and the attempts.
func (s ChatCompletionService) New(ctx context.Context, params openai.ChatCompletionNewParams, opts ...CallOption) (*openai.ChatCompletion, error) {
	st := s.c.newStream(ctx, params, opts, false)
	defer st.Close()
	var acc openai.ChatCompletionAccumulator
	for st.Next() {
		if !acc.AddChunk(st.Current()) {
			st.fail(fmt.Errorf("tpsroute: chunk %q could not be accumulated", st.Current().ID))
			break
		}
	}
	if err := st.Err(); err != nil {
		return nil, err
	}
	out := acc.ChatCompletion
	out.Object = "chat.completion"
	return &out, nil
}

// Stream is a routed streaming chat completion, a pull iterator like
// openai-go's ssestream.Stream: call Next until it returns false, read each
// chunk with Current, then check Err. A Stream is for one goroutine, except
// Close, which may be called from another goroutine to abort the stream.
type Stream struct {
	c      *Client
	st     *callState
	raw    *ssestream.Stream[openai.ChatCompletionChunk]
	cancel context.CancelFunc

	mu        sync.Mutex // guards err: Close may run on another goroutine
	err       error
	done      atomic.Bool // no more chunks: ended, failed or closed
	ended     atomic.Bool // the upstream stream ended (cleanly or not) before Close
	closeOnce sync.Once
}

// callState carries one call's options from NewStreaming through openai-go to
// the internal transport, and the outcome back.
type callState struct {
	cfg    callConfig
	stream bool
	call   *call
	res    *fallback.Result
	err    error // a routing or pre-commit failure
}

type callStateKey struct{}

func (c *Client) newStream(ctx context.Context, params openai.ChatCompletionNewParams, opts []CallOption, stream bool) *Stream {
	ctx, cancel := context.WithCancel(ctx)
	st := &callState{cfg: buildCallConfig(opts), stream: stream}
	reqOpts := c.oaiOpts
	if len(st.cfg.reqOpts) > 0 {
		// The caller's options first; the routing options win over any base
		// URL, HTTP client or retry count among them.
		reqOpts = append(append([]option.RequestOption(nil), st.cfg.reqOpts...), c.oaiOpts...)
	}
	raw := c.oai.NewStreaming(context.WithValue(ctx, callStateKey{}, st), params, reqOpts...)
	s := &Stream{c: c, st: st, raw: raw, cancel: cancel}
	if st.err != nil || st.res == nil {
		s.ended.Store(true)
		err := st.err
		if err == nil {
			err = raw.Err()
		}
		if err == nil {
			err = errors.New("tpsroute: no response")
		}
		s.fail(err)
	}
	return s
}

// Next advances to the next chunk and reports whether there is one. It
// returns false at the end of the stream, after a failure and after Close.
func (s *Stream) Next() bool {
	if s.done.Load() {
		return false
	}
	if s.raw.Next() {
		return true
	}
	if s.done.Load() {
		return false // closed by Close
	}
	s.ended.Store(true)
	if err := s.raw.Err(); err != nil {
		s.fail(err)
		return false
	}
	s.finish()
	return false
}

// Current returns the chunk Next advanced to.
func (s *Stream) Current() openai.ChatCompletionChunk { return s.raw.Current() }

// Err returns the error that ended the stream, or nil after a clean end or an
// early Close. Routing errors wrap route.ErrNoDeployment; failover failures
// and mid-stream failures are *fallback.Error, whose attempts unwrap to each
// provider's *openai.Error. A caller's cancellation matches context.Canceled.
func (s *Stream) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// Close ends the stream. Before the end it cancels the upstream request at
// once; the attempt counts as cancelled, not as a provider failure. Close is
// idempotent and returns nil.
func (s *Stream) Close() error {
	s.closeOnce.Do(func() {
		s.done.Store(true)
		// Closing the body before the end cancels the upstream request at
		// once; fallback records it as the caller's cancellation (ErrClosed).
		_ = s.raw.Close()
		s.cancel()
		endCall(&s.st.cfg, s.st.res, s.Err())
	})
	return nil
}

// fail ends the stream with err, preferring the executor's own error over
// openai-go's wrapping of it.
func (s *Stream) fail(err error) {
	if s.st.err != nil {
		err = s.st.err
	} else {
		var fe *fallback.Error
		if errors.As(err, &fe) {
			err = fe
		}
	}
	s.mu.Lock()
	s.err = err
	s.mu.Unlock()
	_ = s.Close()
}

// finish ends a stream that completed cleanly.
func (s *Stream) finish() { _ = s.Close() }

// Sample returns the timing and usage of the answering attempt: TTFT,
// generation TPS, tokens, cache state, cost inputs. It is complete once Next
// has returned false or the Stream was closed. Zero if no attempt answered.
func (s *Stream) Sample() tps.Sample {
	if s.st.res == nil {
		return tps.Sample{}
	}
	return s.st.res.Sample()
}

// Deployment returns the deployment that answered (after a mid-stream
// continuation, the one that continued), or the zero Deployment if none did.
// For a wildcard deployment, Model is the model requested. It carries no
// credential: APIKey is empty and credential headers read "[REDACTED]".
func (s *Stream) Deployment() route.Deployment {
	if s.st.res == nil {
		return route.Deployment{}
	}
	return publicDeployment(s.st.res.Deployment())
}

// Attempts returns every attempt of the call, in order: failed ones,
// deployments skipped for an open breaker or a cooldown, and the one that
// answered.
func (s *Stream) Attempts() []fallback.Attempt {
	if s.st.res != nil {
		return s.st.res.Attempts()
	}
	var fe *fallback.Error
	if errors.As(s.st.err, &fe) {
		return append([]fallback.Attempt(nil), fe.Attempts...)
	}
	return nil
}

// AttemptCount returns how many attempts reached a provider, skipped
// deployments not counted and the answering one included from the start: the
// count that the call's *fallback.Error message gives.
func (s *Stream) AttemptCount() int {
	if s.st.res != nil {
		return s.st.res.AttemptCount()
	}
	n := 0
	for _, a := range s.Attempts() {
		if a.Class != fallback.ClassSkipped {
			n++
		}
	}
	return n
}

// internalTransport is the http.RoundTripper under the Client's internal
// openai-go service: it takes the serialised request, routes it and returns
// the committed stream.
type internalTransport struct {
	c *Client
}

func (t *internalTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	st, ok := req.Context().Value(callStateKey{}).(*callState)
	if !ok {
		return nil, errors.New("tpsroute: internal transport used outside a call")
	}
	body, err := readAll(req)
	if err != nil {
		st.err = err
		return nil, err
	}
	info, err := readRequest(body)
	if err != nil {
		st.err = err
		return nil, err
	}
	res, cl, err := t.c.do(req.Context(), body, info, req.Header, &st.cfg, st.stream)
	st.call = cl
	if err != nil {
		st.err = err
		return nil, err
	}
	st.res = res
	return committedResponse(req, res), nil
}

// committedResponse wraps the committed attempt as an SSE response.
func committedResponse(req *http.Request, res *fallback.Result) *http.Response {
	h := res.Header.Clone()
	if h == nil {
		h = make(http.Header)
	}
	h.Set("Content-Type", "text/event-stream")
	h.Del("Content-Length")
	return &http.Response{
		Status: "200 OK", StatusCode: http.StatusOK,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: h, Body: res.Body, ContentLength: -1, Request: req,
	}
}

// readAll reads and closes a request body.
func readAll(req *http.Request) ([]byte, error) {
	if req.Body == nil || req.Body == http.NoBody {
		return nil, &RequestError{Reason: "request has no body"}
	}
	defer req.Body.Close()
	b, err := io.ReadAll(req.Body)
	if err != nil {
		return nil, &RequestError{Reason: "read request body: " + err.Error()}
	}
	return b, nil
}
