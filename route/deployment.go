package route

import "github.com/tpsroute/tpsroute/measure"

// Deployment is one provider, region and model, with everything needed to call it.
// A Deployment is a value; once handed to NewPicker it must not be modified.
type Deployment struct {
	Provider      string            // e.g. "openai", "groq", "vllm-eu"
	Region        string            // e.g. "us-east-1"; may be empty
	Model         string            // the logical model name callers use; "*" serves any model
	ProviderModel string            // the model id sent to the provider; empty means Model
	Revision      string            // model revision, pinned with "model@revision"
	BaseURL       string            // e.g. "https://api.openai.com/v1"
	APIKey        string            // sent only to this deployment, as a bearer token
	Headers       map[string]string // extra headers sent only to this deployment, e.g. X-Route-Region

	Price         Price
	Limits        Limits
	ContextWindow int64 // in tokens; 0 means unknown
	Capabilities  Capabilities
	Weight        float64 // optional static weight; 0 means 1
}

// Price is in US dollars per million tokens. A zero Price means free or unknown.
type Price struct {
	Input       float64
	CachedInput float64
	Output      float64
}

// Limits are the provider's rate limits for this deployment. Zero means unlimited.
type Limits struct {
	RPM         int // requests per minute
	TPM         int // tokens per minute
	MaxInFlight int // concurrent requests
}

// Capabilities says what the deployment supports.
type Capabilities struct {
	IncludeUsage     bool // honours stream_options.include_usage
	AssistantPrefill bool // continues a final assistant message
	CacheControl     bool // accepts cache_control and prompt_cache_key
}

// Key returns the measure.Key statistics are kept under.
func (d Deployment) Key() measure.Key {
	return measure.Key{Provider: d.Provider, Region: d.Region, Model: d.Model}
}

// WireModel returns the model id to send to the provider.
func (d Deployment) WireModel() string {
	if d.ProviderModel != "" {
		return d.ProviderModel
	}
	return d.Model
}
