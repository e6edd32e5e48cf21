package route

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// API names an HTTP API a deployment serves. A call is for one API and goes
// only to deployments that declare it (Deployment.APIs); tpsroute never
// translates a call from one API to another (Chat Completions to Messages,
// say): a call whose model no deployment serves on its API fails with an
// *APIError.
type API string

// The APIs a deployment may declare, as they are spelled in Go and in the
// config file's "apis" list.
const (
	// APIChat is OpenAI's Chat Completions API, POST {BaseURL}/chat/completions.
	APIChat API = "chat"
	// APIResponses is OpenAI's Responses API, POST {BaseURL}/responses.
	APIResponses API = "responses"
	// APIMessages is Anthropic's Messages API, POST {BaseURL}/messages.
	APIMessages API = "messages"
	// APIEmbeddings is OpenAI's Embeddings API, POST {BaseURL}/embeddings.
	APIEmbeddings API = "embeddings"
)

// apis lists every API tpsroute routes, in a fixed order.
var apis = [...]API{APIChat, APIResponses, APIMessages, APIEmbeddings}

// Path returns the path joined to a deployment's BaseURL for a, for example
// "chat/completions" for APIChat; "" for an unknown API.
func (a API) Path() string {
	switch a {
	case APIChat:
		return "chat/completions"
	case APIResponses, APIMessages, APIEmbeddings:
		return string(a)
	}
	return ""
}

// Known reports whether a is one of the APIs tpsroute routes.
func (a API) Known() bool { return a.Path() != "" }

// Serves reports whether d serves a: a is in d.APIs, or a is APIChat and
// d.APIs is empty (the default).
func (d Deployment) Serves(a API) bool {
	if len(d.APIs) == 0 {
		return a == APIChat
	}
	return slices.Contains(d.APIs, a)
}

// ForAPI returns d as it serves a: a copy whose APIs is exactly [a], so that
// its Key carries a (statistics, breakers and limits are kept per API: a
// deployment's Responses speed is not its Chat speed). It does not check
// that d serves a.
func (d Deployment) ForAPI(a API) Deployment {
	d.APIs = []API{a}
	return d
}

// api returns the API d's Key is kept under: its only API, "" for chat.
func (d *Deployment) api() string {
	if len(d.APIs) == 1 && d.APIs[0] != APIChat {
		return string(d.APIs[0])
	}
	return ""
}

// validAPIs returns why d.APIs is invalid, or "".
func (d *Deployment) validAPIs() string {
	for i, a := range d.APIs {
		if !a.Known() {
			return fmt.Sprintf("unknown API %q; known: %s", a, apiNames())
		}
		if slices.Contains(d.APIs[:i], a) {
			return fmt.Sprintf("%q twice", a)
		}
	}
	return ""
}

func apiNames() string {
	names := make([]string, len(apis))
	for i, a := range apis {
		names[i] = strconv.Quote(string(a))
	}
	return strings.Join(names, ", ")
}

// APIError reports a call for a model that has deployments, none of which
// serves the call's API. tpsroute does not translate between APIs. It
// matches ErrNoDeployment with errors.Is. It is a value and safe to share.
type APIError struct {
	API   API    // the call's API
	Model string // the model asked for
	// Served lists the APIs the model's deployments serve, in the order of
	// route's list (chat, responses, messages, embeddings).
	Served []API
}

// Error returns "route: no deployment: model "m" is not served on the
// responses API (served on: chat); tpsroute does not translate between APIs".
func (e *APIError) Error() string {
	served := make([]string, len(e.Served))
	for i, a := range e.Served {
		served[i] = string(a)
	}
	return fmt.Sprintf("%v: model %q is not served on the %s API (served on: %s); tpsroute does not translate between APIs",
		ErrNoDeployment, e.Model, e.API, strings.Join(served, ", "))
}

// Is reports whether target is ErrNoDeployment.
func (e *APIError) Is(target error) bool { return target == ErrNoDeployment }

// ServedAPIs returns the APIs that the deployments of ds serving model (or a
// wildcard deployment) declare, in route's order (chat, responses, messages,
// embeddings); model may carry "@revision", which is ignored.
func ServedAPIs(ds []Deployment, model string) []API {
	model, _ = ParseModel(model)
	var out []API
	for _, a := range apis {
		for i := range ds {
			if (ds[i].Model == model || ds[i].IsWildcard()) && ds[i].Serves(a) {
				out = append(out, a)
				break
			}
		}
	}
	return out
}
