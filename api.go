package tpsroute

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/tpsroute/tpsroute/internal/answer"
	"github.com/tpsroute/tpsroute/internal/executor"
	"github.com/tpsroute/tpsroute/internal/picker"
	"github.com/tpsroute/tpsroute/internal/sse"
	"github.com/tpsroute/tpsroute/internal/telemetry"
	"github.com/tpsroute/tpsroute/measure"
	"github.com/tpsroute/tpsroute/route"
	"github.com/tpsroute/tpsroute/tps"
)

// This file routes the APIs beside Chat Completions: OpenAI's Responses API
// and Anthropic's Messages API. Each is one adapter on the one call path: the
// body is read for what routing needs (readAPIRequest), the API's own Picker
// plans the call over the deployments that serve it, the Executor walks the
// plan with the tap timing each attempt by the API's events
// (executor.Call.Protocol), and build makes each attempt's request for the
// API. Nothing is translated between APIs.

// anthropicVersion is the anthropic-version header a Messages call carries
// when neither the deployment's Headers nor the caller set one.
const anthropicVersion = "2023-06-01"

// DoAPI is Do for a call of the given API: route.APIChat is Do itself;
// route.APIResponses takes an OpenAI Responses request body (POST
// /v1/responses), route.APIMessages an Anthropic Messages request body (POST
// /v1/messages). The call goes only to deployments that declare the API
// (route.Deployment.APIs), is routed, failed over and measured as a chat call
// is, by that API's events (docs/METRICS.md, "Responses and Messages
// streams"), and answers in the API's own shape: the SSE stream with
// "stream": true, otherwise the Responses API's response object (the one
// response.completed carries) or the Messages API's message. The body passes
// through byte for byte except "model" (the deployment's id) and "stream":
// true, and cache_control and prompt_cache_key where the deployment does not
// declare Capabilities.CacheControl; nothing chat-only (stream_options) is
// added. A Messages stream that fails after its first output delta is
// continued as a chat stream is (Config.Fallback.MidStream), by assistant
// prefill on a deployment that declares Capabilities.AssistantPrefill, and
// the caller reads one Messages stream (docs/STREAM_QUIRKS.md Q37); a
// Responses stream is not continued (that API has no assistant prefill): the
// failure is a mid-stream error.
//
// route.APIEmbeddings takes an OpenAI embeddings request body (POST
// /v1/embeddings; "input" a string or an array, kept whole: a batch is one
// request and one answer). It never streams: each attempt is a plain call
// whose answer, as the provider sent it (base64 vectors untouched), is
// Body; errors fail over as a chat call's do; usage.prompt_tokens is
// metered, and the statistics, kept under the embeddings key, time the
// answer's latency (as TTFT). It goes to the deployment expected to answer
// its input tokens soonest (the default policy; Throughput means Latency
// for embeddings) or, with the Cost policy, to the cheapest input price.
//
// A model that has deployments, none serving api, is a *route.APIError (404;
// tpsroute does not translate between APIs). Everything else is as for Do.
func (c *Client) DoAPI(ctx context.Context, api route.API, body []byte, opts ...CallOption) (*Response, error) {
	cc := buildCallConfig(opts)
	return c.sendAPI(ctx, api, body, nil, &cc)
}

// sendAPI runs one call of api given as a serialised body: the path of DoAPI
// and of the Transport's Responses and Messages routes.
func (c *Client) sendAPI(ctx context.Context, api route.API, body []byte, hdr http.Header, cc *callConfig) (*Response, error) {
	if api == route.APIChat || api == "" {
		return c.send(ctx, body, hdr, cc)
	}
	info, err := readAPIRequest(body, api)
	if err != nil {
		endCall(cc, nil, err)
		return nil, err
	}
	return c.respond(ctx, body, info, hdr, cc)
}

// readAPIRequest reads the fields routing needs from a Responses or Messages
// body, as readRequest does for chat: "model" (required), "stream", the output
// cap (max_output_tokens, max_tokens) and prompt_cache_key; Messages requires
// "messages".
func readAPIRequest(body []byte, api route.API) (requestInfo, error) {
	if !api.Known() || api == route.APIChat {
		return requestInfo{}, &RequestError{Reason: fmt.Sprintf("the %q API is not routed here", api)}
	}
	js, info, err := openRequest(body)
	if err != nil {
		return requestInfo{}, err
	}
	info.API = api
	r := func(path string) gjson.Result { return gjson.Get(js, path) }
	if api == route.APIEmbeddings {
		// Never streamed; a batch is one request and one answer, kept whole.
		in := r("input")
		if !(in.Type == gjson.String || in.IsArray()) {
			return requestInfo{}, &RequestError{Param: "input", Reason: "required: a string or an array"}
		}
		info.InputTokens = embeddingsTokens(in)
		return info, nil
	}
	switch s := r("stream"); s.Type {
	case gjson.True:
		info.Stream = true
	case gjson.False, gjson.Null:
	default:
		return requestInfo{}, &RequestError{Param: "stream", Reason: "must be a boolean"}
	}
	capField := "max_output_tokens"
	if api == route.APIMessages {
		capField = "max_tokens"
		if !r("messages").IsArray() {
			return requestInfo{}, &RequestError{Param: "messages", Reason: "required: an array of messages"}
		}
	}
	if v := r(capField); v.Type != gjson.Null {
		if v.Type != gjson.Number || v.Num < 1 || v.Num != math.Trunc(v.Num) {
			return requestInfo{}, &RequestError{Param: capField, Reason: "must be a positive integer"}
		}
		info.MaxTokens = int64(v.Num)
	}
	switch k := r("prompt_cache_key"); k.Type {
	case gjson.Null:
	case gjson.String:
		info.CacheKey = strings.Clone(k.Str)
	default:
		return requestInfo{}, &RequestError{Param: "prompt_cache_key", Reason: "must be a string"}
	}
	if api == route.APIResponses {
		if err := readState(r, &info); err != nil {
			return requestInfo{}, err
		}
	}
	return info, nil
}

// embeddingsTokens returns the expected input tokens of an embeddings
// "input", which routing fits the answer's latency to: a token array's
// length, a string's length / 4 (as for any other body), summed over a
// batch; at least 1.
func embeddingsTokens(in gjson.Result) int64 {
	n := int64(0)
	count := func(v gjson.Result) {
		switch {
		case v.Type == gjson.String:
			n += int64(len(v.Str) / 4)
		case v.Type == gjson.Number:
			n++
		case v.IsArray():
			v.ForEach(func(_, t gjson.Result) bool { n++; return true })
		}
	}
	if in.IsArray() {
		in.ForEach(func(_, v gjson.Result) bool { count(v); return true })
	} else {
		count(in)
	}
	return max(n, 1)
}

// readState reads a Responses body's previous_response_id, conversation (an
// id, or an object with one) and store into info.
func readState(r func(string) gjson.Result, info *requestInfo) error {
	switch v := r("previous_response_id"); v.Type {
	case gjson.Null:
	case gjson.String:
		info.PrevID = strings.Clone(v.Str)
	default:
		return &RequestError{Param: "previous_response_id", Reason: "must be a string"}
	}
	switch v := r("conversation"); {
	case v.Type == gjson.Null:
	case v.Type == gjson.String:
		info.ConvID = strings.Clone(v.Str)
	case v.IsObject() && v.Get("id").Type == gjson.String:
		info.ConvID = strings.Clone(v.Get("id").Str)
	default:
		return &RequestError{Param: "conversation", Reason: "must be a conversation id or an object with one"}
	}
	switch v := r("store"); v.Type {
	case gjson.Null, gjson.True:
	case gjson.False:
		info.NoStore = true
	default:
		return &RequestError{Param: "store", Reason: "must be a boolean"}
	}
	return nil
}

// operation returns the gen_ai.operation.name of a call of api.
func operation(api route.API) string {
	if api == route.APIEmbeddings {
		return telemetry.OperationEmbeddings
	}
	return telemetry.OperationChat
}

// protocol returns the tps.Protocol of a call of api.
func protocol(api route.API) tps.Protocol {
	switch api {
	case route.APIResponses:
		return tps.ProtocolResponses
	case route.APIMessages:
		return tps.ProtocolMessages
	case route.APIEmbeddings:
		return tps.ProtocolEmbeddings
	}
	return tps.ProtocolChat
}

// newPickers builds one Picker per API that some deployment serves, over
// those deployments narrowed to it (route.Deployment.ForAPI, so that
// statistics, breakers and limits are kept per API). The chat Picker is
// c.picker, nil when no deployment serves chat.
func (c *Client) newPickers(ds []route.Deployment, opts route.Options) error {
	for i := range ds {
		if err := ds[i].Validate(); err != nil {
			var de *route.DeploymentError
			if errors.As(err, &de) {
				de.Index = i
			}
			return err
		}
	}
	c.pickers = make(map[route.API]*picker.Picker)
	for _, a := range []route.API{route.APIChat, route.APIResponses, route.APIMessages, route.APIEmbeddings} {
		var serving []route.Deployment
		for _, d := range ds {
			if d.Serves(a) {
				serving = append(serving, d.ForAPI(a))
			}
		}
		if len(serving) == 0 {
			continue
		}
		if len(serving) == len(ds) && a == route.APIChat && !slices.ContainsFunc(ds, func(d route.Deployment) bool { return len(d.APIs) > 0 }) {
			serving = ds // every deployment serves only chat, as configured: keep the Picker's indexes
		}
		p, err := picker.New(serving, c.reg, c.exec, opts)
		if err != nil {
			return err
		}
		c.pickers[a] = p
	}
	c.picker = c.pickers[route.APIChat]
	c.deps = slices.Clone(ds)
	c.owners = newOwners(MaxResponseIDs)
	c.Responses.c, c.Embeddings.c = c, c
	return nil
}

// pickerFor returns the Picker of info's API, or a *route.APIError when no
// deployment serves it.
func (c *Client) pickerFor(info *requestInfo) (*picker.Picker, error) {
	if p := c.pickers[info.api()]; p != nil {
		return p, nil
	}
	return nil, &route.APIError{API: info.api(), Model: info.RawModel, Served: route.ServedAPIs(c.deps, info.Model)}
}

// apiError returns a *route.APIError for a pick that found no deployment of
// info's model on its API while other APIs serve it, else err.
func (c *Client) apiError(err error, info *requestInfo) error {
	var ne *route.NameError
	if !errors.As(err, &ne) || ne.Field != "Model" || ne.Name != info.Model {
		return err
	}
	served := route.ServedAPIs(c.deps, info.Model)
	if len(served) == 0 || slices.Contains(served, info.api()) {
		return err
	}
	return &route.APIError{API: info.api(), Model: info.RawModel, Served: served}
}

// pickerOf returns the Picker whose deployments are kept under keys of api
// (measure.Key.API), or nil.
func (c *Client) pickerOf(api string) *picker.Picker {
	if api == "" {
		return c.picker
	}
	return c.pickers[route.API(api)]
}

// buildAPI makes one attempt's request of a Responses or Messages call from
// deployment d only: POST {BaseURL}/responses or /messages with d's model id,
// and d's credentials in the API's form: "Authorization: Bearer" for
// Responses; "x-api-key" and "anthropic-version" (d's Headers, else the
// caller's, else anthropicVersion, 2023-06-01) for Messages. The caller's headers
// are forwarded without credentials, as for chat.
func (cl *call) buildAPI(ctx context.Context, d route.Deployment, body []byte) (*http.Request, error) {
	unbuildable := func(err error) error {
		return &RequestError{Reason: "the request body cannot be sent: " + err.Error()}
	}
	api := cl.info.api()
	d = d.ForModel(cl.info.Model)
	u, err := url.Parse(d.BaseURL)
	if err != nil || u.User != nil {
		return nil, errors.New("tpsroute: BaseURL cannot be used") // Validate refused both already
	}
	b, err := attemptBody(body, d)
	if err != nil {
		return nil, unbuildable(err)
	}
	if cl.cfg.req.CacheKey != "" && d.Capabilities.CacheControl && cl.info.CacheKey == "" && api == route.APIResponses {
		if b, err = setCacheKey(b, cl.cfg.req.CacheKey); err != nil {
			return nil, unbuildable(err)
		}
	}
	if b, err = sjson.SetBytes(b, "model", d.WireModel()); err != nil {
		return nil, unbuildable(err)
	}
	if api == route.APIEmbeddings {
		// The executor's "stream" (false for a plain call) is no field of
		// the embeddings API.
		if b, err = sjson.DeleteBytes(b, "stream"); err != nil {
			return nil, unbuildable(err)
		}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.JoinPath(api.Path()).String(), bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	if api == route.APIEmbeddings {
		req.Header.Set("Accept", "application/json")
	}
	if api == route.APIMessages {
		if d.APIKey != "" {
			req.Header.Set("X-Api-Key", d.APIKey)
		}
		v := cl.hdr.Get("Anthropic-Version")
		if v == "" {
			v = anthropicVersion
		}
		req.Header.Set("Anthropic-Version", v)
	} else if d.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+d.APIKey)
	}
	for k, v := range d.Headers { // the deployment's own anthropic-version wins
		req.Header.Set(k, v)
	}
	for k, vs := range cl.hdr {
		if forwardable(k) && req.Header.Get(k) == "" {
			req.Header[k] = vs
		}
	}
	req.Header.Set("Accept-Encoding", "identity") // as for chat: see build
	return req, nil
}

// api returns the call's API, chat when not set.
func (info *requestInfo) api() route.API {
	if info.API == "" {
		return route.APIChat
	}
	return info.API
}

// apiDeployments returns ds with each deployment that serves another API
// than chat also narrowed to each API it serves (route.Deployment.ForAPI),
// so that telemetry knows every key statistics are kept under.
func apiDeployments(ds []route.Deployment) []route.Deployment {
	out := slices.Clone(ds)
	for _, d := range ds {
		for _, a := range d.APIs {
			if a != route.APIChat {
				out = append(out, d.ForAPI(a))
			}
		}
	}
	return out
}

// apiAnswer makes r, the Response of a non-streaming Messages or embeddings
// call, answer in the API's shape: the stream the executor buffered (the
// call streams underneath, and fails over invisibly to its end) becomes the
// message, or the provider's embeddings answer. A call whose answer the
// executor assembled (executor.Assembles) never comes here.
func apiAnswer(r *Response, res *executor.Result, api route.API) error {
	raw, err := io.ReadAll(res.Body)
	_ = res.Body.Close()
	if err != nil {
		return err
	}
	var out []byte
	switch api {
	case route.APIMessages:
		out, err = answer.MessagesAnswer(raw)
	default: // embeddings: the provider's answer, which the executor framed as one event
		sse.ForEachData(raw, func(data []byte) { out = append(out[:0], data...) })
		if out == nil {
			err = errNoAnswer
		}
	}
	if err != nil {
		return err
	}
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Content-Length", strconv.Itoa(len(out)))
	r.Body = io.NopCloser(bytes.NewReader(out))
	return nil
}

// errNoAnswer is returned for a buffered stream that holds no final answer;
// the executor ends a stream without one with an error, so it means a bug.
var errNoAnswer = errors.New("tpsroute: the stream holds no final answer")

// StateError reports a stateful Responses call (one that names a
// previous_response_id or a conversation) that the deployment holding that
// state could not serve. tpsroute never sends such a call to another
// deployment, which lacks the state (it would answer 400
// previous_response_not_found). Err is why: the deployment's failure (a
// *fallback.Error) or the routing error. It is a value and safe to share.
type StateError struct {
	ID         string      // the previous_response_id or conversation id
	Deployment measure.Key // the deployment that holds its state
	Err        error
}

// Error returns "tpsroute: previous response or conversation ID is held by
// DEPLOYMENT only, which could not serve the call: ERR".
func (e *StateError) Error() string {
	return "tpsroute: previous response or conversation " + strconv.Quote(e.ID) + " is held by " + e.Deployment.String() +
		" only, which could not serve the call (no other deployment has its state): " + e.Err.Error()
}

// Unwrap returns Err.
func (e *StateError) Unwrap() error { return e.Err }

// bindState restricts a stateful Responses call (previous_response_id or a
// conversation id) to the deployment that holds its state, when the Client
// knows it (it served the response, or an earlier call of the
// conversation) or, in fleet mode, another replica shared it (Fleet.Owner,
// a bounded wait): a pin without fallbacks. A call naming an id nobody
// knows (made elsewhere, or forgotten: MaxResponseIDs) goes to the one
// deployment the Picker chooses, without fallbacks, so that the id is never
// sent round every deployment. It reports the owner's key.
func (c *Client) bindState(ctx context.Context, req *route.Request, info *requestInfo) (measure.Key, bool) {
	id := cmp.Or(info.PrevID, info.ConvID)
	if id == "" {
		return measure.Key{}, false
	}
	req.NoFallbacks = true
	k, ok := c.owners.get(id)
	if !ok && c.fleet != nil && len(id) <= maxOwnedID {
		if k, ok = c.fleet.Owner(ctx, id); ok {
			if !c.holdsState(k) {
				c.logger.Warn("tpsroute: the fleet names a deployment this Client does not have for a Responses id; routed as unknown",
					"deployment", k.String())
				return measure.Key{}, false
			}
			c.owners.put(id, k)
		}
	}
	if !ok {
		return measure.Key{}, false
	}
	req.Pin = route.Pin{Provider: k.Provider, Region: k.Region}
	return k, true
}

// holdsState reports whether k, an owner another replica shared, names a
// configured deployment that serves Responses: the provider and region a
// pin selects, and the Responses API.
func (c *Client) holdsState(k measure.Key) bool {
	if k.API != string(route.APIResponses) {
		return false
	}
	return slices.ContainsFunc(c.deps, func(d route.Deployment) bool {
		return d.Serves(route.APIResponses) && d.Provider == k.Provider && d.Region == k.Region
	})
}

// stateError wraps err, the failure of a call bound to owner, as a
// *StateError.
func stateError(err error, info *requestInfo, owner measure.Key, bound bool) error {
	if !bound {
		return err
	}
	return &StateError{ID: cmp.Or(info.PrevID, info.ConvID), Deployment: owner, Err: err}
}

// ownResponse records that the deployment with key k holds the state of the
// response id a successful Responses call created (unless it asked for
// "store": false) and of the conversation it named, and shares it in fleet
// mode.
func (c *Client) ownResponse(info *requestInfo, id string, k measure.Key) {
	if id != "" && !info.NoStore {
		c.owners.put(id, k)
		if c.fleet != nil {
			c.fleet.Owned(id, k)
		}
	}
	if info.ConvID != "" {
		c.owners.put(info.ConvID, k)
		if c.fleet != nil {
			c.fleet.Owned(info.ConvID, k)
		}
	}
}
