package config

import (
	"bytes"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/tpsroute/tpsroute"
)

// FuzzParseLookup: whatever the file holds, ParseLookup returns a File whose
// deployments and SLO pass their own validation, or a *tpsroute.ConfigError
// ("tpsroute: config ...") that never quotes a variable's value; it never
// panics. Every variable is set, to a value that must not leak.
func FuzzParseLookup(f *testing.F) {
	const secret = "sk-fuzz-secret-value"
	example, err := os.ReadFile("../docs/config.example.json")
	if err != nil {
		f.Fatal(err)
	}
	const dep = `{"provider":"a","model":"m","base_url":"http://127.0.0.1:1/v1","api_key_env":"K"}`
	for _, s := range []string{
		string(example),
		`{"deployments":[` + dep + `]}`,
		`{"deployments":[` + dep + `,{"provider":"w","model":"*","models":["x"],"base_url":"https://x/v1?api-version=1"}],"max_wildcard_models":3}`,
		`{"deployments":[` + dep + `],"policy":"cost","slo":{"min_tps":10,"max_error_rate":0.5,"strict":true}}`,
		`{"deployments":[` + dep + `],"route":{"exploration":"off","affinity_ttl":"0s","cold_probes":3},"fallback":{"ttft":"2s","breaker":{"probe_share":"off"}}}`,
		`{"deployments":[` + dep + `],"fleet":{"redis_url":"redis://127.0.0.1:6379/0","sync":"1s"},"state":{"interval":"1m"}}`,
		`{"deployments":[{"provider":"a","model":"m","base_url":"https://u:p@x/v1"}]}`,
		`{"deployments":[{"provider":"a","model":"m","base_url":"http://x/v1","headers":{"Authorization":"Bearer x"}}]}`,
		`{"deployments":[` + dep + `],"polcy":"cost"}`,
		`{"deployments":[`,
		strings.Repeat("[", 200),
		`{"deployments":[` + dep + `]}{}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if bytes.Contains(data, []byte(`"file"`)) {
			t.Skip("a state file path is not parsed here: New would write it")
		}
		file, err := ParseLookup(bytes.NewReader(data), func(string) (string, bool) { return secret, true })
		if err != nil {
			var ce *tpsroute.ConfigError
			if !errors.As(err, &ce) && !strings.HasPrefix(err.Error(), "tpsroute: ") {
				t.Fatalf("error %T %q: want a *tpsroute.ConfigError", err, err)
			}
			if !strings.HasPrefix(err.Error(), "tpsroute: ") {
				t.Fatalf("error %q lacks the package prefix", err)
			}
			if strings.Contains(err.Error(), secret) {
				t.Fatalf("error %q quotes a variable's value", err)
			}
			return
		}
		if len(file.Client.Deployments) == 0 {
			t.Fatal("a File without deployments")
		}
		for i, d := range file.Client.Deployments {
			if err := d.Validate(); err != nil {
				t.Fatalf("deployment %d accepted but invalid: %v", i, err)
			}
		}
		if err := file.Client.Route.SLO.Validate(); err != nil {
			t.Fatalf("SLO accepted but invalid: %v", err)
		}
	})
}
