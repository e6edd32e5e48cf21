package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"

	"github.com/openai/openai-go/v3"

	"github.com/tpsroute/tpsroute"
	"github.com/tpsroute/tpsroute/route"
)

// responses serves POST /v1/responses (OpenAI's Responses API), routed to
// the deployments that declare "responses", with the chat door's directives,
// limits, metrics and debug page.
func (g *gateway) responses(w http.ResponseWriter, r *http.Request) {
	g.serve(w, r, route.APIResponses)
}

// messages serves POST /v1/messages (Anthropic's Messages API), routed to
// the deployments that declare "messages"; the caller's anthropic-version
// and anthropic-beta headers go upstream (a deployment's own
// anthropic-version wins), its credentials never.
func (g *gateway) messages(w http.ResponseWriter, r *http.Request) {
	g.serve(w, r, route.APIMessages)
}

// embeddings serves POST /v1/embeddings, routed to the deployments that
// declare "embeddings": never streamed, a batch kept whole, the provider's
// answer relayed as sent.
func (g *gateway) embeddings(w http.ResponseWriter, r *http.Request) {
	g.serve(w, r, route.APIEmbeddings)
}

// apiOptions returns the call options a request of api carries beside its
// directives: for Messages, the caller's anthropic-version and
// anthropic-beta headers.
func apiOptions(api route.API, h http.Header) []tpsroute.CallOption {
	if api != route.APIMessages {
		return nil
	}
	var opts []tpsroute.CallOption
	for _, k := range []string{"Anthropic-Version", "Anthropic-Beta"} {
		for _, v := range h.Values(k) {
			opts = append(opts, tpsroute.WithHeader(k, v))
		}
	}
	return opts
}

// apiOf returns the API whose door path is: Messages for /v1/messages, whose
// errors take Anthropic's shape; chat (OpenAI's shape) for any other.
func apiOf(path string) route.API {
	if path == "/v1/messages" {
		return route.APIMessages
	}
	return route.APIChat
}

// streamErrorType is the error type of the event that ends a stream of api
// failed after it started: on Messages, the provider's own in-stream error
// type (a Messages deployment speaks Anthropic's: "overloaded_error"), else
// Anthropic's "api_error"; elsewhere "upstream_error".
func streamErrorType(api route.API, err error) string {
	if api != route.APIMessages {
		return "upstream_error"
	}
	if oe := (*openai.Error)(nil); errors.As(err, &oe) && oe.Type != "" {
		return oe.Type // the in-stream error, as fallback read it
	}
	return "api_error"
}

// streamError writes the SSE event that ends a stream of api failed after
// it started, in the shape the API's SDKs raise as an error: chat's
// OpenAI-shaped data event; the Responses API's flat error event (type,
// code, message, param); and the Messages API's "event: error" with
// Anthropic's body, {"type":"error","error":{type, message}} (HTTPError.ForAPI;
// anthropic-sdk-go raises an error only on that event name: data alone
// would read as a truncated success).
func streamError(b *bytes.Buffer, api route.API, e *tpsroute.HTTPError) {
	var data []byte
	switch api {
	case route.APIResponses:
		b.WriteString("event: error\n")
		data, _ = json.Marshal(struct {
			Type    string  `json:"type"`
			Code    string  `json:"code"`
			Message string  `json:"message"`
			Param   *string `json:"param"`
		}{"error", e.Code, e.Message, nil})
	case route.APIMessages:
		b.WriteString("event: error\n")
		data = e.ForAPI(api).JSON()
	default:
		data = e.JSON()
	}
	b.WriteString("data: ")
	b.Write(data)
	b.WriteString("\n\n")
}
