package picker

import (
	"errors"
	"testing"

	"github.com/tpsroute/tpsroute/measure"
	"github.com/tpsroute/tpsroute/route"
)

// TestNameError: a model, provider or region that no deployment has is a
// typed *NameError naming the Request field, so the caller can answer a typo
// (404 for a model, 400 for the rest) instead of an outage.
func TestNameError(t *testing.T) {
	ds, src := pinFleet()
	p := newPicker(t, ds, src, strictOrder())
	tests := []struct {
		name        string
		req         route.Request
		field, want string
	}{
		{"unknown model", route.Request{Model: "claude"}, "Model", "claude"},
		{"unknown fallback model", route.Request{Model: "gpt", Models: []string{"claude"}}, "Models", "claude"},
		{"fallback model only", route.Request{Models: []string{"claude"}}, "Models", "claude"},
		{"unknown revision", route.Request{Model: "gpt@1999"}, "Model", "gpt@1999"},
		{"revision field applied", route.Request{Model: "llama", Revision: "2024"}, "Model", "llama@2024"},
		{"unknown provider", route.Request{Model: "gpt", Only: []string{"x"}}, "Only", "x"},
		{"unknown provider order", route.Request{Model: "gpt", Providers: []string{"x"}}, "Providers", "x"},
		{"unknown region", route.Request{Model: "gpt", Regions: []string{"ap"}}, "Regions", "ap"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := p.PickAt(tt.req, t0)
			var ne *route.NameError
			if !errors.As(err, &ne) {
				t.Fatalf("err = %v, want a *NameError", err)
			}
			equal(t, ne.Field, tt.field, "Field")
			equal(t, ne.Name, tt.want, "Name")
			equal(t, errors.Is(err, route.ErrNoDeployment), true, "matches ErrNoDeployment")
		})
	}
	t.Run("bare name of a model configured only with a revision", func(t *testing.T) {
		d := dep("a", "us", "m")
		d.Revision = "v2"
		p := newPicker(t, []route.Deployment{d}, nil, strictOrder())
		_, err := p.PickAt(route.Request{Model: "m"}, t0)
		var ne *route.NameError
		if !errors.As(err, &ne) {
			t.Fatalf("err = %v, want a *NameError", err)
		}
		equal(t, ne.Known, []string{"m@v2"}, "Known")
		mustPick(t, p, route.Request{Model: "m@v2"}, t0)
	})
	t.Run("wildcard list that does not name the model", func(t *testing.T) {
		w := dep("gw", "us", route.Wildcard)
		w.Models = []string{"llama"}
		p := newPicker(t, []route.Deployment{w, dep("a", "us", "gpt")}, nil, strictOrder())
		_, err := p.PickAt(route.Request{Model: "mistral"}, t0)
		var ne *route.NameError
		if !errors.As(err, &ne) {
			t.Fatalf("err = %v, want a *NameError", err)
		}
		equal(t, order(mustPick(t, p, route.Request{Model: "llama"}, t0)), []string{"gw/us/llama"}, "listed model")
		equal(t, order(mustPick(t, p, route.Request{Model: "gpt", Models: []string{"llama"}}, t0)), []string{"a/us/gpt", "gw/us/llama"}, "wildcard only for its list")
	})
}

// TestPin: Request.Pin puts its deployments first and keeps the rest behind
// for failover, or only the first of them with NoFallbacks; a pin that
// matches nothing is a *PinError.
func TestPin(t *testing.T) {
	ds, src := pinFleet()
	p := newPicker(t, ds, src, strictOrder())
	equal(t, order(mustPick(t, p, route.Request{Model: "gpt", Pin: route.Pin{Provider: "azure"}}, t0)),
		[]string{"azure/eu/gpt", "azure/us/gpt", "openai/us/gpt"}, "pinned provider first")
	equal(t, order(mustPick(t, p, route.Request{Model: "gpt", Pin: route.Pin{Provider: "azure", Region: "us"}}, t0)),
		[]string{"azure/us/gpt", "openai/us/gpt", "azure/eu/gpt"}, "pinned region first")
	equal(t, order(mustPick(t, p, route.Request{Model: "gpt", Pin: route.Pin{Provider: "azure"}, NoFallbacks: true}, t0)),
		[]string{"azure/eu/gpt"}, "no fallbacks keeps the first pinned")
	_, err := p.PickAt(route.Request{Model: "gpt", Pin: route.Pin{Provider: "groq"}}, t0)
	var pe *route.PinError
	if !errors.As(err, &pe) || !errors.Is(err, route.ErrNoDeployment) {
		t.Fatalf("err = %v, want a *PinError matching ErrNoDeployment", err)
	}
	equal(t, pe.Provider, "groq", "PinError.Provider")

	t.Run("honours an excluded deployment", func(t *testing.T) {
		ds, src := pinFleet()
		ds[0].Price.Output = 9 // openai/us/gpt: off a strict SLO
		p := newPicker(t, ds, src, strictOrder())
		plan := mustPick(t, p, route.Request{Model: "gpt", SLO: route.SLO{MaxPrice: 1, Strict: true}, Pin: route.Pin{Provider: "openai"}}, t0)
		equal(t, order(plan)[0], "openai/us/gpt", "the pin is the caller's explicit choice")
	})
}

// TestPriceCap: Request.PriceCap drops (SLO.MaxPrice only demotes) every
// deployment priced above it, field by field; zero fields cap nothing.
func TestPriceCap(t *testing.T) {
	ds, src := pinFleet()
	ds[0].Price = measure.Price{Input: 2, Output: 8}                   // openai/us/gpt
	ds[1].Price = measure.Price{Input: 1, CachedInput: 0.5, Output: 4} // azure/eu/gpt
	ds[2].Price = measure.Price{Input: 1, Output: 4}                   // azure/us/gpt: cached at Input
	p := newPicker(t, ds, src, strictOrder())
	tests := []struct {
		name string
		cap  measure.Price
		want []string
	}{
		{"output", measure.Price{Output: 5}, []string{"azure/eu/gpt", "azure/us/gpt"}},
		{"input", measure.Price{Input: 1.5}, []string{"azure/eu/gpt", "azure/us/gpt"}},
		{"cached input as charged", measure.Price{CachedInput: 0.6}, []string{"azure/eu/gpt"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			equal(t, order(mustPick(t, p, route.Request{Model: "gpt", PriceCap: tt.cap}, t0)), tt.want, "order")
		})
	}
	t.Run("demote versus drop", func(t *testing.T) {
		plan := mustPick(t, p, route.Request{Model: "gpt", SLO: route.SLO{MaxPrice: 5}}, t0)
		equal(t, len(plan.Deployments), 3, "MaxPrice keeps every deployment")
		equal(t, plan.Deployments[2].Violations, route.ViolatesPrice, "the one above MaxPrice goes last")
	})
	t.Run("leaves nothing", func(t *testing.T) {
		_, err := p.PickAt(route.Request{Model: "gpt", PriceCap: measure.Price{Output: 1}}, t0)
		if !errors.Is(err, route.ErrNoDeployment) {
			t.Fatalf("err = %v, want ErrNoDeployment", err)
		}
		containsAll(t, err.Error(), "within the price cap")
	})
}
