package route

import (
	"errors"
	"fmt"
	"strings"
)

// ErrNoDeployment means no configured deployment can serve the request: the
// model, a pinned provider, region or revision is unknown, the pins leave
// nothing, or a strict SLO drops everything. The error a pick returns wraps it
// with a message that lists what exists; test with errors.Is. It is the
// library's one "no deployment" sentinel: a *fallback.Error matches it too
// when the plan was empty or no deployment in it could be tried (all open,
// cooling down, without budget, or too small a context).
var ErrNoDeployment = errors.New("route: no deployment")

// NameError means a Request names a model, provider or region that no
// deployment has: a typo, which would otherwise look like an outage. The
// tpsroute Client answers an unknown model with 404 and an unknown provider
// or region with 400. It matches ErrNoDeployment with errors.Is. It is a
// value and safe to share.
type NameError struct {
	// Field is the Request field that names it: "Model", "Models",
	// "Providers", "Only" or "Regions".
	Field string
	// Name is the unknown name as requested ("model" or "model@revision" for
	// a model, with Request.Revision applied).
	Name string
	// Known lists what exists, sorted, for the message: the models served
	// (wildcard deployments add "*"), or the providers or regions.
	Known []string
}

// Error returns `route: no deployment: unknown KIND "NAME"; KINDs: KNOWN`.
func (e *NameError) Error() string {
	kind := "model"
	switch e.Field {
	case "Providers", "Only":
		kind = "provider"
	case "Regions":
		kind = "region"
	}
	return fmt.Sprintf("%v: unknown %s %q; %ss: %s", ErrNoDeployment, kind, e.Name, kind, strings.Join(e.Known, ", "))
}

// Is reports whether target is ErrNoDeployment.
func (e *NameError) Is(target error) bool { return target == ErrNoDeployment }

// PinError means Request.Pin matches none of the deployments left for the
// call (after the model, the other pins and the price cap). It matches
// ErrNoDeployment with errors.Is. It is a value and safe to share.
type PinError struct {
	Provider, Region string
}

// Error returns "route: pinned deployment PROVIDER/REGION serves none of the requested models: route: no deployment".
func (e *PinError) Error() string {
	return "route: pinned deployment " + e.Provider + "/" + e.Region + " serves none of the requested models: " + ErrNoDeployment.Error()
}

// Is reports whether target is ErrNoDeployment.
func (e *PinError) Is(target error) bool { return target == ErrNoDeployment }
