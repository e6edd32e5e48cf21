package tpsroute

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/tpsroute/tpsroute/internal/executor"
)

// Do sends one chat completion given as its serialised OpenAI request body
// and returns the answer as bytes, for code that relays it (a gateway, a
// proxy) rather than reading it as openai-go types. body is an OpenAI
// chat-completions request: "model" is the logical model (optionally
// "model@revision") and "messages" is required; every other field passes
// through to the provider byte for byte, except that each attempt gets the
// chosen deployment's model id, "stream": true, include_usage unless the
// deployment declares NoStreamOptions, and cache hints (prompt_cache_key, cache_control)
// only where it declares cache_control. Only WithHeader's headers are
// forwarded. The routing is that of NewStreaming, with the same CallOptions:
// both run the same core path.
//
// With "stream": true the Response's Body is the committed attempt's SSE
// stream, from its first byte: failover happened before the first output
// chunk, and a failure after it surfaces from Read as a *fallback.Error,
// never as a clean io.EOF. Otherwise the call streams underneath, fails over
// invisibly until the end, and Body is the chat.completion JSON assembled
// from the stream's chunks as they were timed, with a Content-Length.
//
// Do returns once the commit point is reached (the whole answer without
// "stream"), or with an error: a *RequestError for a bad body or an unknown
// provider or region in the options, a *ModelError for an unknown model, a
// *route.PinError, an error wrapping route.ErrNoDeployment when the options leave
// no deployment, or a *fallback.Error listing every attempt. Client.HTTPError
// turns any of them into the HTTP answer. The caller must read Body to
// io.EOF or Close it; Close before the end cancels the upstream request at
// once and counts as the caller's cancellation. Cancelling ctx does the same.
// body is not modified and may be reused once Do returned.
func (c *Client) Do(ctx context.Context, body []byte, opts ...CallOption) (*Response, error) {
	cc := buildCallConfig(opts)
	return c.send(ctx, body, nil, &cc)
}

// Response is the answer of Client.Do: a committed attempt's body with what
// routing made of the call. Its methods are safe for concurrent use with
// reading Body; Body itself is for one goroutine, except Close.
type Response struct {
	// StatusCode is the committed attempt's HTTP status: 200.
	StatusCode int
	// Header is the committed attempt's response header as
	// executor.Result.Header allows it through (the provider's request id
	// and rate-limit headers; nothing else, and no credential), with
	// Content-Type "text/event-stream" for a stream and "application/json"
	// otherwise.
	Header http.Header
	// Body is the SSE stream, or the chat.completion JSON without "stream".
	// Close is idempotent.
	Body io.ReadCloser
	// Stream reports whether the request asked for a stream, that is
	// whether Body is SSE.
	Stream bool

	res *executor.Result
	mu  sync.Mutex
	err error // the error that ended Body, if one did
}

// Outcome returns what became of the call so far: the deployment that
// answered, its tps.Sample (complete once Body returned io.EOF or an error,
// or was closed), every attempt (the answering attempt of a stream is listed
// when the stream ends) and the error that ended Body, if one did.
func (r *Response) Outcome() Outcome {
	r.mu.Lock()
	err := r.err
	r.mu.Unlock()
	return outcomeOf(r.res, err)
}

// send runs one call given as a serialised body: the path of Do and of the
// Transport. hdr, when not nil, is forwarded without credentials.
func (c *Client) send(ctx context.Context, body []byte, hdr http.Header, cc *callConfig) (*Response, error) {
	info, err := readRequest(body)
	if err != nil {
		endCall(cc, nil, err)
		return nil, err
	}
	return c.respond(ctx, body, info, hdr, cc)
}

// respond runs one call whose request was read as info. A streaming call's
// Body is the committed stream; a non-streaming call's is the answer that
// the executor assembled from the stream's chunks as the tap scanned them
// (executor.Call.Assemble), read from the executor's buffer without a copy:
// the call has ended when respond returns.
func (c *Client) respond(ctx context.Context, body []byte, info requestInfo, hdr http.Header, cc *callConfig) (*Response, error) {
	// The call's own context lets an early Close end the upstream request.
	ctx, cancel := context.WithCancel(ctx)
	res, err := c.do(ctx, body, info, hdr, cc, info.Stream)
	if err != nil {
		cancel()
		endCall(cc, nil, err)
		return nil, err
	}
	r := &Response{StatusCode: http.StatusOK, Header: res.Header.Clone(), Stream: info.Stream, res: res}
	if r.Header == nil {
		r.Header = make(http.Header)
	}
	r.Header.Del("Content-Length")
	if info.Stream {
		r.Header.Set("Content-Type", "text/event-stream")
		r.Body = &servedBody{rc: res.Body, cancel: cancel, end: func(err error) {
			r.mu.Lock()
			r.err = err
			r.mu.Unlock()
			endCall(cc, res, err)
		}}
		return r, nil
	}
	cancel() // the attempt has ended; Body reads what it left
	// A chat or Responses call's answer the executor assembled; another
	// API's is made from the buffered stream (api.go).
	if !executor.Assembles(protocol(info.api())) {
		if err := apiAnswer(r, res, info.api()); err != nil {
			endCall(cc, res, err)
			return nil, err
		}
		endCall(cc, res, nil)
		return r, nil
	}
	endCall(cc, res, nil)
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Content-Length", strconv.FormatInt(res.ContentLength, 10))
	r.Body = res.Body
	return r, nil
}

// servedBody is a routed SSE body: it calls end once: with nil at a clean
// EOF or a Close before the end (which the executor records as the caller's
// cancellation), or with the error of a failed read.
type servedBody struct {
	rc      io.ReadCloser
	cancel  context.CancelFunc
	end     func(err error)
	endOnce sync.Once
	closed  atomic.Bool
}

func (b *servedBody) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	if err != nil {
		if err == io.EOF {
			b.endOnce.Do(func() { b.end(nil) })
		} else if !b.closed.Load() {
			b.endOnce.Do(func() { b.end(err) })
		}
	}
	return n, err
}

func (b *servedBody) Close() error {
	if b.closed.Swap(true) {
		return nil
	}
	_ = b.rc.Close()
	b.cancel()
	b.endOnce.Do(func() { b.end(nil) })
	return nil
}

// bytesResponse is a complete answer to req.
func bytesResponse(req *http.Request, status int, h http.Header, body []byte) *http.Response {
	return &http.Response{
		Status: strconv.Itoa(status) + " " + http.StatusText(status), StatusCode: status,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: h, Body: io.NopCloser(bytes.NewReader(body)), ContentLength: int64(len(body)), Request: req,
	}
}
