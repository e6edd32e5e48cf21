package telemetry_test

import (
	"errors"
	"fmt"

	"github.com/tpsroute/tpsroute/internal/telemetry"
	"github.com/tpsroute/tpsroute/route"
)

// Attribute values come from the configuration only: a model that no
// deployment names, served through a wildcard deployment, is reported as
// _OTHER.
func ExampleTelemetry_Model() {
	t, err := telemetry.New(telemetry.Options{Deployments: []route.Deployment{
		{Provider: "groq", Region: "us", Model: "llama-3.3-70b", BaseURL: "https://api.groq.com/openai/v1"},
		{Provider: "vllm", Region: "eu", Model: route.Wildcard, BaseURL: "http://vllm:8000/v1"},
	}})
	if err != nil {
		panic(err)
	}
	fmt.Println(t.Model("llama-3.3-70b"), t.Model("made-up-by-a-caller"))
	// Output: llama-3.3-70b _OTHER
}

func ExampleErrorType() {
	fmt.Println(telemetry.ErrorType(fmt.Errorf("pick: %w", route.ErrNoDeployment)))
	fmt.Println(telemetry.ErrorType(errors.New("something else")))
	// Output:
	// no_deployment
	// _OTHER
}
