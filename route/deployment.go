package route

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"math"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/tpsroute/tpsroute/measure"
)

// Wildcard is the Deployment.Model that serves any model the caller asks for.
// A wildcard deployment is turned into a concrete one per request with
// Deployment.ForModel, so statistics are kept per requested model.
const Wildcard = "*"

// Deployment is one provider, region and model, with everything needed to call it.
// A Deployment is a value; once handed to the Client (Config.Deployments) it must not be modified,
// and it is then safe for concurrent reads.
type Deployment struct {
	Provider      string            // e.g. "openai", "groq", "vllm-eu"; required
	Region        string            // e.g. "us-east-1"; may be empty
	Model         string            // the logical model name callers use; "*" (Wildcard) serves any model; required
	ProviderModel string            // the model id sent to the provider; empty means Model
	Revision      string            // model revision, pinned with "model@revision"; empty means unversioned
	BaseURL       string            // e.g. "https://api.openai.com/v1"; required, http or https, no credentials in it (see Validate)
	APIKey        string            // sent only to this deployment, as a bearer token
	Headers       map[string]string // extra headers sent only to this deployment, e.g. X-Route-Region

	Price         measure.Price // USD per million tokens; zero means free or unknown
	Limits        Limits
	ContextWindow int64 // in tokens; 0 means unknown
	Capabilities  Capabilities
	// ModelCapabilities, on a wildcard deployment, declares the capabilities
	// of individual models it serves, by logical model name: the entry for
	// the requested model replaces Capabilities (see ForModel). Models
	// without an entry have Capabilities. Nil means none; it is invalid on
	// a deployment that is not a wildcard.
	ModelCapabilities map[string]Capabilities
	Weight            float64 // static weight among near-equal candidates; 0 means 1, negative is invalid
	// Expected is what the deployment is expected to deliver before it is
	// measured (a published benchmark, a provider's figures): a prior worth
	// a few samples (3), shrunk toward the measurements as they arrive, so
	// a new deployment is ranked on it from its first pick instead of being
	// probed as cold. The zero Prior means none.
	Expected Prior

	// Models, for a wildcard deployment, lists the models it serves; a call
	// for any other model is not sent to it, and creates no statistics. Nil
	// means any model (bounded by the tpsroute Client's MaxWildcardModels).
	// It must be nil for a deployment that is not a wildcard.
	Models []string

	// APIs lists the HTTP APIs the deployment serves at BaseURL (APIChat,
	// APIResponses, APIMessages, APIEmbeddings); a call goes only to
	// deployments that serve its API. Nil means [APIChat]. Statistics are
	// kept per API (see ForAPI and Key).
	APIs []API
}

// Prior is a deployment's expected generation speed and time to first
// token, used until measurements outweigh it (see Deployment.Expected).
// Zero fields mean unknown; negative or non-finite ones are invalid. It is a
// value, safe for concurrent reads.
type Prior struct {
	TPS  float64       // generation-phase tokens/s of one stream
	TTFT time.Duration // time to first token
}

// Limits are the provider's rate limits for this deployment. Zero means unlimited.
// Route does not enforce them; the fallback package's limiters do, and report
// exhaustion through Health. It is a value, safe for concurrent reads.
type Limits struct {
	RPM         int // requests per minute
	TPM         int // tokens per minute
	MaxInFlight int // concurrent requests
}

// Capabilities says what the deployment supports. The zero value is an
// OpenAI-compatible deployment that honours stream_options and nothing more.
// It is a value, safe for concurrent reads.
type Capabilities struct {
	// NoStreamOptions marks a provider that rejects the "stream_options"
	// field. By default every call asks for usage
	// ("stream_options": {"include_usage": true}), so that input, cached and
	// output tokens, and their cost, are metered from the provider's own
	// count; with NoStreamOptions tpsroute adds no stream_options, and input
	// tokens stay unknown unless the provider sends usage anyway.
	NoStreamOptions bool
	// NoStream marks a deployment that cannot stream: every call to it is
	// sent with "stream": false and its one JSON answer is read whole, then
	// handed on as a stream of one chunk to a streaming caller. Such calls
	// are timed as total latency only: no TTFT, TPS or inter-token figure
	// is measured for the deployment (docs/CONFIG.md, "Plain upstream
	// calls").
	NoStream         bool
	AssistantPrefill bool // continues a final assistant message
	CacheControl     bool // accepts cache_control and prompt_cache_key
}

// ErrInvalidDeployment is the sentinel every *DeploymentError matches with errors.Is.
var ErrInvalidDeployment = errors.New("route: invalid deployment")

// DeploymentError says which deployment, and which of its fields, is invalid.
// It matches ErrInvalidDeployment with errors.Is. It is an immutable value and
// safe for concurrent use.
type DeploymentError struct {
	Index  int    // position in the slice configured (Config.Deployments); -1 from Deployment.Validate
	Key    string // the deployment's key as "provider/region/model", for the message
	Field  string // e.g. "BaseURL", "Price.Output", "Key"
	Reason string // e.g. "empty", "negative", "duplicate of deployment 2"
}

// Error returns "route: invalid deployment 3 (groq/us/llama): BaseURL: empty".
func (e *DeploymentError) Error() string {
	var b strings.Builder
	b.WriteString("route: invalid deployment")
	if e.Index >= 0 {
		fmt.Fprintf(&b, " %d", e.Index)
	}
	fmt.Fprintf(&b, " (%s): %s: %s", e.Key, e.Field, e.Reason)
	return b.String()
}

// Is reports whether target is ErrInvalidDeployment.
func (e *DeploymentError) Is(target error) bool { return target == ErrInvalidDeployment }

// Validate reports the first invalid field of d as a *DeploymentError, or nil.
// Provider, Model and BaseURL are required; BaseURL must be an absolute http or
// https URL without user info ("user:password@"), a fragment or a query
// parameter that names a credential (IsCredentialName: "key", "api_key",
// "token", ...): credentials go in APIKey or Headers, where they are redacted;
// other query parameters (Azure's "api-version") are kept on every request;
// prices, limits, ContextWindow and Weight must be finite and not
// negative, and so must Expected's figures; Model and Revision must not
// contain '@' (use Revision to pin); APIs must hold known APIs, each once.
func (d Deployment) Validate() error {
	bad := func(field, reason string) error {
		return &DeploymentError{Index: -1, Key: d.Key().String(), Field: field, Reason: reason}
	}
	switch {
	case strings.TrimSpace(d.Provider) == "":
		return bad("Provider", "empty")
	case strings.TrimSpace(d.Model) == "":
		return bad("Model", "empty")
	case strings.Contains(d.Model, "@"):
		return bad("Model", "contains '@'; set Revision instead")
	case strings.Contains(d.Revision, "@"):
		return bad("Revision", "contains '@'")
	case d.BaseURL == "":
		return bad("BaseURL", "empty")
	case len(d.ModelCapabilities) > 0 && !d.IsWildcard():
		return bad("ModelCapabilities", "only for a wildcard deployment (Model \"*\")")
	case len(d.Models) > 0 && !d.IsWildcard():
		return bad("Models", "only a wildcard deployment (Model \"*\") lists models")
	}
	if reason := d.validAPIs(); reason != "" {
		return bad("APIs", reason)
	}
	// The messages never quote the URL whole: it may hold a password.
	u, err := url.Parse(d.BaseURL)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return bad("BaseURL", "not a URL: "+err.Error())
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return bad("BaseURL", fmt.Sprintf("%q is not an absolute http(s) URL", u.Redacted()))
	}
	if reason := baseURLProblem(d.BaseURL, u); reason != "" {
		return bad("BaseURL", reason)
	}
	// The integer figures are checked as float64 too: only their sign matters.
	for _, f := range []struct {
		name string
		v    float64
	}{
		{"Price.Input", d.Price.Input},
		{"Price.CachedInput", d.Price.CachedInput},
		{"Price.Output", d.Price.Output},
		{"Weight", d.Weight},
		{"Expected.TPS", d.Expected.TPS},
		{"Limits.RPM", float64(d.Limits.RPM)},
		{"Limits.TPM", float64(d.Limits.TPM)},
		{"Limits.MaxInFlight", float64(d.Limits.MaxInFlight)},
		{"ContextWindow", float64(d.ContextWindow)},
		{"Expected.TTFT", float64(d.Expected.TTFT)},
	} {
		if math.IsNaN(f.v) || math.IsInf(f.v, 0) {
			return bad(f.name, "not finite")
		}
		if f.v < 0 {
			return bad(f.name, "negative")
		}
	}
	return nil
}

// baseURLProblem says why raw, an absolute http(s) BaseURL parsed as u,
// cannot be sent as it is, or returns "". User info would be dropped by the
// transport (and is a credential in the URL), a fragment is never sent, and
// a credential in the query would reach logs and errors unredacted.
func baseURLProblem(raw string, u *url.URL) string {
	if u.User != nil {
		return "has user info (user:password@): put a credential in the API key or a header"
	}
	if strings.Contains(raw, "#") {
		return "has a fragment (#...), which is never sent"
	}
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return "query: " + err.Error()
	}
	for _, k := range slices.Sorted(maps.Keys(q)) {
		if IsCredentialName(k) {
			return fmt.Sprintf("query parameter %q is a credential: put it in the API key or a header", k)
		}
	}
	return ""
}

// Key returns the measure.Key statistics are kept under: Provider, Region and
// Model, with "@Revision" appended to Model when Revision is set, so that two
// revisions of one model keep separate statistics, and API, the deployment's
// only API when that is not APIChat (ForAPI narrows APIs to one), "" otherwise.
// For a wildcard deployment call ForModel first; otherwise the key's Model is "*".
func (d Deployment) Key() measure.Key {
	m := d.Model
	if d.Revision != "" {
		m += "@" + d.Revision
	}
	return measure.Key{Provider: d.Provider, Region: d.Region, Model: m, API: d.api()}
}

// WireModel returns the model id to send to the provider: ProviderModel, or
// Model when ProviderModel is empty.
func (d Deployment) WireModel() string { return cmp.Or(d.ProviderModel, d.Model) }

// IsWildcard reports whether d serves any model (Model is "*").
func (d Deployment) IsWildcard() bool { return d.Model == Wildcard }

// admits reports whether wildcard deployment d may serve model: its Models
// list, when not nil, names it.
func (d *Deployment) admits(model string) bool {
	return d.Models == nil || slices.Contains(d.Models, model)
}

// ForModel returns the concrete deployment a wildcard deployment becomes for
// the requested logical model: a copy with Model set to model, so that Key and
// WireModel are per requested model, and with Capabilities replaced by
// ModelCapabilities[model] when there is such an entry. A ProviderModel that
// is set is kept. For a deployment that is not a wildcard, ForModel returns d
// unchanged.
func (d Deployment) ForModel(model string) Deployment {
	if d.Model == Wildcard {
		d.Model = model
		d.Capabilities = d.capabilitiesFor(model)
	}
	return d
}

// capabilitiesFor returns the capabilities of a wildcard deployment for model.
func (d *Deployment) capabilitiesFor(model string) Capabilities {
	if c, ok := d.ModelCapabilities[model]; ok {
		return c
	}
	return d.Capabilities
}

// ParseModel splits "model@revision" into its model and revision. A string
// without '@' is a model with an empty revision.
func ParseModel(s string) (model, revision string) {
	model, revision, _ = strings.Cut(s, "@")
	return model, revision
}
