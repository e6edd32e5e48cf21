package tpsroute

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"

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
//   - POST .../responses (OpenAI's Responses API), POST .../messages
//     (Anthropic's Messages API) and POST .../embeddings: the same, as
//     Client.DoAPI describes, to the deployments that declare the API
//     (route.Deployment.APIs), each answered in its API's shape. A Messages
//     attempt carries the deployment's key as "x-api-key" and an
//     "anthropic-version"; the caller's x-api-key or Authorization is never
//     forwarded.
//   - GET .../models: the configured logical models, as an OpenAI model list.
//   - Anything else is refused with 404 and an OpenAI-shaped error body, so
//     no credential goes to an endpoint it was not configured for.
//
// The path is that of Client.Do, with the caller's headers forwarded minus
// credentials. A call that fails is answered as Client.HTTPError says: the
// last attempt's HTTP status, or 503 when no deployment was usable; 400
// naming the field for a bad request or an unknown provider or region; 404
// for an unknown model. The error body is in the API's own shape
// (HTTPError.ForAPI: OpenAI's, or Anthropic's on .../messages, where 503 is
// Anthropic's 529 overloaded_error); its message lists every attempt, with
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
// tpsroute.WithRegion("eu-west"))). WithHeader's headers join the request's own.
// Options already in ctx are kept and applied first.
func ContextWithOptions(ctx context.Context, opts ...CallOption) context.Context {
	prev, _ := ctx.Value(optionsKey{}).([]CallOption)
	all := make([]CallOption, 0, len(prev)+len(opts))
	all = append(append(all, prev...), opts...)
	return context.WithValue(ctx, optionsKey{}, all)
}

func (t *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	path := strings.TrimSuffix(req.URL.Path, "/")
	if req.Method == http.MethodPost {
		for _, a := range [...]route.API{route.APIChat, route.APIResponses, route.APIMessages, route.APIEmbeddings} {
			if strings.HasSuffix(path, "/"+a.Path()) {
				return t.chat(req, a)
			}
		}
	}
	if req.Body != nil {
		req.Body.Close()
	}
	if req.Method == http.MethodGet && strings.HasSuffix(path, "/models") {
		return t.models(req), nil
	}
	e := &HTTPError{Status: http.StatusNotFound, Type: "invalid_request_error", Code: "not_routed",
		Message: "tpsroute: the Transport routes only POST .../chat/completions, .../responses, .../messages and .../embeddings and GET .../models, not " + req.Method + " " + req.URL.Path}
	return e.response(req), nil
}

// chat routes one call of api (chat completions, Responses or Messages).
func (t *transport) chat(req *http.Request, api route.API) (*http.Response, error) {
	opts, _ := req.Context().Value(optionsKey{}).([]CallOption)
	cc := buildCallConfig(opts)
	body, err := readAll(req)
	if err != nil {
		endCall(&cc, nil, err)
		return t.c.HTTPError(err).ForAPI(api).response(req), nil
	}
	r, err := t.c.sendAPI(req.Context(), api, body, req.Header, &cc)
	if err != nil {
		if req.Context().Err() != nil {
			return nil, err // a caller's cancellation: nobody is left to read an answer
		}
		return t.c.HTTPError(err).ForAPI(api).response(req), nil
	}
	resp := &http.Response{
		Status: "200 OK", StatusCode: r.StatusCode, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: r.Header, Body: r.Body, ContentLength: -1, Request: req,
	}
	if !r.Stream {
		resp.ContentLength, _ = strconv.ParseInt(r.Header.Get("Content-Length"), 10, 64)
	}
	return resp, nil
}

// models lists Client.ModelIDs as an OpenAI model list.
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
	for _, id := range t.c.ModelIDs() {
		list.Data = append(list.Data, model{ID: id, Object: "model", OwnedBy: "tpsroute"})
	}
	b, _ := json.Marshal(list)
	return bytesResponse(req, http.StatusOK, http.Header{"Content-Type": {"application/json"}, "Content-Length": {strconv.Itoa(len(b))}}, b)
}
