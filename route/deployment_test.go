package route

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"
)

func TestDeploymentValidate(t *testing.T) {
	tests := []struct {
		name  string
		edit  func(*Deployment)
		field string
	}{
		{"valid", func(*Deployment) {}, ""},
		{"empty provider", func(d *Deployment) { d.Provider = " " }, "Provider"},
		{"empty model", func(d *Deployment) { d.Model = "" }, "Model"},
		{"model with revision", func(d *Deployment) { d.Model = "m@1" }, "Model"},
		{"revision with at", func(d *Deployment) { d.Revision = "a@b" }, "Revision"},
		{"empty base url", func(d *Deployment) { d.BaseURL = "" }, "BaseURL"},
		{"relative base url", func(d *Deployment) { d.BaseURL = "/v1" }, "BaseURL"},
		{"ftp base url", func(d *Deployment) { d.BaseURL = "ftp://x/v1" }, "BaseURL"},
		{"unparsable base url", func(d *Deployment) { d.BaseURL = "http://[::1" }, "BaseURL"},
		{"unparsable base url with a password", func(d *Deployment) { d.BaseURL = "http://u:pw@[::1" }, "BaseURL"},
		{"ftp base url with a password", func(d *Deployment) { d.BaseURL = "ftp://u:pw@x/v1" }, "BaseURL"},
		{"base url with user info", func(d *Deployment) { d.BaseURL = "https://user:pw@x/v1" }, "BaseURL"},
		{"base url with user only", func(d *Deployment) { d.BaseURL = "https://user@x/v1" }, "BaseURL"},
		{"base url with a key in the query", func(d *Deployment) { d.BaseURL = "https://x/v1?key=sk-1" }, "BaseURL"},
		{"base url with an api_key in the query", func(d *Deployment) { d.BaseURL = "https://x/v1?api-version=1&API_KEY=sk-1" }, "BaseURL"},
		{"base url with a bad query", func(d *Deployment) { d.BaseURL = "https://x/v1?a=%zz" }, "BaseURL"},
		{"base url with a fragment", func(d *Deployment) { d.BaseURL = "https://x/v1#frag" }, "BaseURL"},
		{"base url with an empty fragment", func(d *Deployment) { d.BaseURL = "https://x/v1#" }, "BaseURL"},
		{"base url with a plain query", func(d *Deployment) { d.BaseURL = "https://x/openai/v1?api-version=2024-10-21" }, ""},
		{"negative input price", func(d *Deployment) { d.Price.Input = -1 }, "Price.Input"},
		{"negative cached price", func(d *Deployment) { d.Price.CachedInput = -0.1 }, "Price.CachedInput"},
		{"NaN output price", func(d *Deployment) { d.Price.Output = math.NaN() }, "Price.Output"},
		{"infinite weight", func(d *Deployment) { d.Weight = math.Inf(1) }, "Weight"},
		{"negative weight", func(d *Deployment) { d.Weight = -2 }, "Weight"},
		{"negative rpm", func(d *Deployment) { d.Limits.RPM = -1 }, "Limits.RPM"},
		{"negative tpm", func(d *Deployment) { d.Limits.TPM = -1 }, "Limits.TPM"},
		{"negative in-flight", func(d *Deployment) { d.Limits.MaxInFlight = -1 }, "Limits.MaxInFlight"},
		{"negative context window", func(d *Deployment) { d.ContextWindow = -1 }, "ContextWindow"},
		{"negative expected tps", func(d *Deployment) { d.Expected.TPS = -120 }, "Expected.TPS"},
		{"NaN expected tps", func(d *Deployment) { d.Expected.TPS = math.NaN() }, "Expected.TPS"},
		{"negative expected ttft", func(d *Deployment) { d.Expected.TTFT = -time.Second }, "Expected.TTFT"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := dep("groq", "us", "llama")
			tt.edit(&d)
			err := d.Validate()
			if tt.field == "" {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			var de *DeploymentError
			if !errors.As(err, &de) {
				t.Fatalf("Validate() = %v, want *DeploymentError", err)
			}
			equal(t, de.Field, tt.field, "Field")
			if !errors.Is(err, ErrInvalidDeployment) {
				t.Errorf("errors.Is(%v, ErrInvalidDeployment) = false", err)
			}
			containsAll(t, err.Error(), "route: invalid deployment", tt.field)
			for _, secret := range []string{"pw", "sk-1"} {
				if strings.Contains(err.Error(), secret) {
					t.Errorf("Validate() = %q, repeats the credential %q", err, secret)
				}
			}
		})
	}
}

func TestDeploymentKeyWireModelForModel(t *testing.T) {
	d := dep("vllm", "eu", "llama")
	equal(t, d.Key(), key("vllm", "eu", "llama"), "Key")
	equal(t, d.WireModel(), "llama", "WireModel")
	d.ProviderModel = "meta-llama/Llama-3.1-8B"
	d.Revision = "2024-07"
	equal(t, d.Key(), key("vllm", "eu", "llama@2024-07"), "Key with revision")
	equal(t, d.WireModel(), "meta-llama/Llama-3.1-8B", "WireModel with ProviderModel")
	equal(t, d.ForModel("other"), d, "ForModel on a concrete deployment")

	w := dep("router", "", Wildcard)
	if !w.IsWildcard() {
		t.Fatal("IsWildcard() = false")
	}
	c := w.ForModel("gpt-4o")
	equal(t, c.Key(), key("router", "", "gpt-4o"), "wildcard Key")
	equal(t, c.WireModel(), "gpt-4o", "wildcard WireModel")
	equal(t, w.Model, Wildcard, "original wildcard unchanged")

	m, r := ParseModel("gpt-4o@2024-08-06")
	equal(t, [2]string{m, r}, [2]string{"gpt-4o", "2024-08-06"}, "ParseModel")
	m, r = ParseModel("gpt-4o")
	equal(t, [2]string{m, r}, [2]string{"gpt-4o", ""}, "ParseModel without revision")
}

// TestWildcardModelCapabilities: a wildcard deployment declares capabilities
// per model; ForModel applies them (issue 13 point 7; internal/picker's
// TestWildcardPlanCapabilities checks its plans).
func TestWildcardModelCapabilities(t *testing.T) {
	w := dep("router", "", Wildcard)
	w.Capabilities = Capabilities{CacheControl: true, AssistantPrefill: true}
	w.ModelCapabilities = map[string]Capabilities{"r1": {CacheControl: true}}
	equal(t, w.ForModel("r1").Capabilities, Capabilities{CacheControl: true}, "ForModel with an entry")
	equal(t, w.ForModel("llama").Capabilities, w.Capabilities, "ForModel without an entry")

	named := dep("vllm", "", "llama")
	named.ModelCapabilities = map[string]Capabilities{"llama": {}}
	if err := named.Validate(); err == nil || !strings.Contains(err.Error(), "ModelCapabilities") {
		t.Errorf("Validate on a named deployment with ModelCapabilities = %v", err)
	}
}
