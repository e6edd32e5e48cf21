package config_test

import (
	"fmt"
	"log"
	"strings"

	"github.com/tpsroute/tpsroute/config"
)

// ParseLookup reads the JSON schema of docs/CONFIG.md. Keys come from the
// environment variables the file names; here from a map.
func ExampleParseLookup() {
	const file = `{
	  "deployments": [{
	    "provider": "groq", "region": "us", "model": "llama-3.3-70b",
	    "provider_model": "llama-3.3-70b-versatile",
	    "base_url": "https://api.groq.com/openai/v1",
	    "api_key_env": "GROQ_API_KEY",
	    "price": {"input": 0.59, "output": 0.79}
	  }],
	  "policy": "cost",
	  "fallback": {"ttft": "10s", "mid_stream": "error"}
	}`
	env := map[string]string{"GROQ_API_KEY": "gsk-example"}
	f, err := config.ParseLookup(strings.NewReader(file), func(k string) (string, bool) {
		v, ok := env[k]
		return v, ok
	})
	if err != nil {
		log.Fatal(err)
	}
	cfg := f.Client
	d := cfg.Deployments[0]
	fmt.Println(d.Key(), "sends", d.WireModel(), "with a key:", d.APIKey != "")
	fmt.Println("policy:", cfg.Route.Policy, "ttft deadline:", cfg.Fallback.Deadlines.TTFT)

	_, err = config.ParseLookup(strings.NewReader(`{"deployments": [{"provider": "x",
	  "api_key": "sk-live-123"}]}`), nil)
	fmt.Println(err)
	// Output:
	// groq/us/llama-3.3-70b sends llama-3.3-70b-versatile with a key: true
	// policy: cost ttft deadline: 10s
	// tpsroute: config line 2: deployments[0].api_key: literal API keys are refused in config files; put the key in an environment variable and name it with "api_key_env"
}
