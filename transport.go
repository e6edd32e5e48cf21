package tpsroute

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/packages/ssestream"

	"github.com/tpsroute/tpsroute/fallback"
	"github.com/tpsroute/tpsroute/route"
)

// Transport returns an http.RoundTripper that routes OpenAI-style chat
// completions through the Client, for code that only accepts an
// *http.Client: openai-go (option.WithHTTPClient), go-openai, langchaingo or
// plain net/http. The caller's base URL and API key do not matter; each
// attempt gets the chosen deployment's URL, key, headers and model id, and
// the caller's own credentials are never forwarded.
//
//   - POST .../chat/completions: the body's "model" (optionally
//     "model@revision") and "stream" are read, the call is planned and run with
//     failover before the commit point, and the response body is timed.
//     Streaming callers get the SSE stream; a failure after the first output
//     chunk surfaces as an error from the body's Read, never as a clean EOF.
//     Non-streaming callers get a chat.completion JSON body: the call streams
//     underneath (so it feeds the statistics) and fails over invisibly until
//     the end, then the chunks are accumulated.
//   - GET .../models: the configured logical models, as an OpenAI model list.
//   - Anything else is refused with 404 and an OpenAI-shaped error body: only
//     chat completions are routed, so no credential goes to an endpoint it
//     was not configured for.
//
// A call that fails is answered with the last attempt's HTTP status (or 502
// when no attempt got one, 404 when no deployment serves the model) and an
// OpenAI-shaped error body whose message lists every attempt, with
// "x-should-retry: false", because failover has already happened. A caller's
// cancellation is returned as the context's error. Call options can be given
// per request with ContextWithOptions. The RoundTripper is safe for
// concurrent use.
func (c *Client) Transport() http.RoundTripper { return &transport{c: c} }

// transport is the http.RoundTripper returned by Client.Transport.
type transport struct {
	c *Client
}

type optionsKey struct{}

// ContextWithOptions returns a context that carries call options for
// requests sent through Client.Transport, for example a region restriction
// or a pin: req = req.WithContext(tpsroute.ContextWithOptions(ctx,
// tpsroute.WithRegion("eu-west"))). WithRequestOptions has no effect there.
// Options already in ctx are kept and applied first.
func ContextWithOptions(ctx context.Context, opts ...CallOption) context.Context {
	prev, _ := ctx.Value(optionsKey{}).([]CallOption)
	all := make([]CallOption, 0, len(prev)+len(opts))
	all = append(append(all, prev...), opts...)
	return context.WithValue(ctx, optionsKey{}, all)
}

func (t *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	path := strings.TrimSuffix(req.URL.Path, "/")
	switch {
	case req.Method == http.MethodPost && strings.HasSuffix(path, "/chat/completions"):
		return t.chat(req)
	case req.Method == http.MethodGet && strings.HasSuffix(path, "/models"):
		if req.Body != nil {
			req.Body.Close()
		}
		return t.models(req), nil
	}
	if req.Body != nil {
		req.Body.Close()
	}
	return errorResponse(req, http.StatusNotFound, "invalid_request_error", "not_routed",
		"tpsroute: the Transport routes only POST .../chat/completions and GET .../models, not "+req.Method+" "+req.URL.Path), nil
}

func (t *transport) chat(req *http.Request) (*http.Response, error) {
	body, err := readAll(req)
	if err != nil {
		return errorResponse(req, http.StatusBadRequest, "invalid_request_error", "", err.Error()), nil
	}
	opts, _ := req.Context().Value(optionsKey{}).([]CallOption)
	cc := buildCallConfig(opts)
	info, err := readRequest(body)
	if err != nil {
		return errorResponse(req, http.StatusBadRequest, "invalid_request_error", "", err.Error()), nil
	}
	// The call's own context lets an early Close end the upstream request as
	// the caller's cancellation.
	ctx, cancel := context.WithCancel(req.Context())
	res, cl, err := t.c.do(ctx, body, req.Header, &cc, info.Stream)
	if err != nil {
		cancel()
		fillReport(cc.report, nil, err)
		return t.failure(req, err)
	}
	if info.Stream {
		resp := committedResponse(req, res)
		resp.Body = &servedBody{rc: res.Body, cancel: cancel, end: func(complete bool, err error) {
			if complete {
				t.c.served(cl, res.Deployment())
			}
			fillReport(cc.report, res, err)
		}}
		return resp, nil
	}
	defer cancel()
	resp, err := t.accumulate(req, res, cl)
	fillReport(cc.report, res, err)
	return resp, err
}

// accumulate reads a non-streaming call's whole stream (already buffered by
// the executor) and answers with a chat.completion body.
func (t *transport) accumulate(req *http.Request, res *fallback.Result, cl *call) (*http.Response, error) {
	s := ssestream.NewStream[openai.ChatCompletionChunk](ssestream.NewDecoder(committedResponse(req, res)), nil)
	defer s.Close()
	var acc openai.ChatCompletionAccumulator
	for s.Next() {
		if !acc.AddChunk(s.Current()) {
			return errorResponse(req, http.StatusBadGateway, "upstream_error", "", "tpsroute: a chunk could not be accumulated"), nil
		}
	}
	if err := s.Err(); err != nil {
		return t.failure(req, err)
	}
	t.c.served(cl, res.Deployment())
	out := acc.ChatCompletion
	out.Object = "chat.completion"
	b, err := json.Marshal(completionJSON(&out))
	if err != nil {
		return errorResponse(req, http.StatusInternalServerError, "server_error", "", "tpsroute: encode completion: "+err.Error()), nil
	}
	h := res.Header.Clone()
	if h == nil {
		h = make(http.Header)
	}
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(b)))
	return &http.Response{
		Status: "200 OK", StatusCode: http.StatusOK, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: h, Body: io.NopCloser(bytes.NewReader(b)), ContentLength: int64(len(b)), Request: req,
	}, nil
}

// failure turns a routing or failover error into an HTTP answer. A caller's
// cancellation stays a Go error: nobody is left to read a response.
func (t *transport) failure(req *http.Request, err error) (*http.Response, error) {
	if ctxErr := req.Context().Err(); ctxErr != nil {
		return nil, err
	}
	if errors.Is(err, route.ErrNoDeployment) {
		return errorResponse(req, http.StatusNotFound, "invalid_request_error", "model_not_found", err.Error()), nil
	}
	status, typ, code := http.StatusBadGateway, "upstream_error", ""
	var fe *fallback.Error
	if errors.As(err, &fe) {
		for i := len(fe.Attempts) - 1; i >= 0; i-- {
			if s := fe.Attempts[i].Status; s >= 400 {
				status = s
				break
			}
		}
	}
	var oe *openai.Error
	if errors.As(err, &oe) {
		if oe.Type != "" {
			typ = oe.Type
		}
		code = oe.Code
	}
	return errorResponse(req, status, typ, code, err.Error()), nil
}

// models lists the configured logical models (wildcards excluded).
func (t *transport) models(req *http.Request) *http.Response {
	type model struct {
		ID      string `json:"id"`
		Object  string `json:"object"`
		Created int64  `json:"created"`
		OwnedBy string `json:"owned_by"`
	}
	list := struct {
		Object string  `json:"object"`
		Data   []model `json:"data"`
	}{Object: "list", Data: []model{}}
	seen := map[string]bool{}
	for _, d := range t.c.picker.Deployments() {
		if d.IsWildcard() || seen[d.Model] {
			continue
		}
		seen[d.Model] = true
		list.Data = append(list.Data, model{ID: d.Model, Object: "model", OwnedBy: "tpsroute"})
	}
	b, _ := json.Marshal(list)
	return jsonResponse(req, http.StatusOK, b)
}

// errorResponse is an OpenAI-shaped error answer that clients must not retry.
func errorResponse(req *http.Request, status int, typ, code, msg string) *http.Response {
	var e struct {
		Error struct {
			Message string  `json:"message"`
			Type    string  `json:"type"`
			Code    *string `json:"code"`
		} `json:"error"`
	}
	e.Error.Message, e.Error.Type = msg, typ
	if code != "" {
		e.Error.Code = &code
	}
	b, _ := json.Marshal(e)
	resp := jsonResponse(req, status, b)
	resp.Header.Set("X-Should-Retry", "false")
	return resp
}

func jsonResponse(req *http.Request, status int, b []byte) *http.Response {
	return &http.Response{
		Status: strconv.Itoa(status) + " " + http.StatusText(status), StatusCode: status,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header:        http.Header{"Content-Type": {"application/json"}, "Content-Length": {strconv.Itoa(len(b))}},
		Body:          io.NopCloser(bytes.NewReader(b)),
		ContentLength: int64(len(b)), Request: req,
	}
}

// servedBody is a routed SSE body: it calls end once: complete at a clean
// EOF, with the error of a failed read, or neither at a Close before the end,
// which aborts the call as the caller's cancellation.
type servedBody struct {
	rc      io.ReadCloser
	cancel  context.CancelFunc
	end     func(complete bool, err error)
	ended   atomic.Bool
	endOnce sync.Once
	once    sync.Once
}

func (b *servedBody) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	if err != nil {
		b.ended.Store(true)
		if err == io.EOF {
			b.endOnce.Do(func() { b.end(true, nil) })
		} else {
			b.endOnce.Do(func() { b.end(false, err) })
		}
	}
	return n, err
}

func (b *servedBody) Close() error {
	b.once.Do(func() {
		if b.ended.Load() {
			_ = b.rc.Close()
		} else {
			abort(b.rc, b.cancel)
		}
		b.cancel()
		b.endOnce.Do(func() { b.end(false, nil) })
	})
	return nil
}

// completionJSON is the wire form of an accumulated completion. openai-go's
// response types carry decoding metadata, so the body is rebuilt from the
// fields a chat.completion has.
func completionJSON(c *openai.ChatCompletion) any {
	type toolCall struct {
		ID       string `json:"id"`
		Type     string `json:"type"`
		Function struct {
			Name      string `json:"name"`
			Arguments string `json:"arguments"`
		} `json:"function"`
	}
	type message struct {
		Role      string     `json:"role"`
		Content   *string    `json:"content"`
		Refusal   *string    `json:"refusal"`
		ToolCalls []toolCall `json:"tool_calls,omitempty"`
	}
	type choice struct {
		Index        int64   `json:"index"`
		Message      message `json:"message"`
		FinishReason string  `json:"finish_reason"`
	}
	type usage struct {
		PromptTokens        int64 `json:"prompt_tokens"`
		CompletionTokens    int64 `json:"completion_tokens"`
		TotalTokens         int64 `json:"total_tokens"`
		PromptTokensDetails struct {
			CachedTokens int64 `json:"cached_tokens"`
		} `json:"prompt_tokens_details"`
		CompletionTokensDetails struct {
			ReasoningTokens int64 `json:"reasoning_tokens"`
		} `json:"completion_tokens_details"`
	}
	out := struct {
		ID      string   `json:"id"`
		Object  string   `json:"object"`
		Created int64    `json:"created"`
		Model   string   `json:"model"`
		Choices []choice `json:"choices"`
		Usage   *usage   `json:"usage,omitempty"`
	}{ID: c.ID, Object: "chat.completion", Created: c.Created, Model: c.Model, Choices: []choice{}}
	for _, ch := range c.Choices {
		m := message{Role: "assistant"}
		if ch.Message.Content != "" || len(ch.Message.ToolCalls) == 0 {
			content := ch.Message.Content
			m.Content = &content
		}
		if ch.Message.Refusal != "" {
			refusal := ch.Message.Refusal
			m.Refusal = &refusal
		}
		for _, tc := range ch.Message.ToolCalls {
			var t toolCall
			t.ID, t.Type = tc.ID, "function"
			t.Function.Name, t.Function.Arguments = tc.Function.Name, tc.Function.Arguments
			m.ToolCalls = append(m.ToolCalls, t)
		}
		out.Choices = append(out.Choices, choice{Index: ch.Index, Message: m, FinishReason: ch.FinishReason})
	}
	if u := c.Usage; u.TotalTokens > 0 || u.CompletionTokens > 0 || u.PromptTokens > 0 {
		w := &usage{PromptTokens: u.PromptTokens, CompletionTokens: u.CompletionTokens, TotalTokens: u.TotalTokens}
		w.PromptTokensDetails.CachedTokens = u.PromptTokensDetails.CachedTokens
		w.CompletionTokensDetails.ReasoningTokens = u.CompletionTokensDetails.ReasoningTokens
		out.Usage = w
	}
	return out
}
