package main

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/tpsroute/tpsroute/fallback"
	"github.com/tpsroute/tpsroute/route"
)

// directives is what the gateway reads from one chat-completion request: the
// routing request for the Picker, the constraints it applies to the plan
// itself, and the body to forward, with the gateway-only fields removed.
type directives struct {
	req    route.Request // Model, Models, Providers, Only, Ignore, Regions, Policy, SLO, CacheKey, NoFallbacks
	stream bool          // the caller asked for an SSE stream
	body   []byte        // forwarded body: "models" and "provider" removed, "model" set

	pinProvider, pinRegion string // X-Route-Provider: "provider" or "provider/region"
	pinned                 bool

	maxPrompt, maxCompletion float64 // provider.max_price, USD per million tokens; 0 means no cap
}

// providerFieldList names the keys the "provider" object may hold.
const providerFieldList = "order, allow_fallbacks, only, ignore, sort, max_price, preferred_min_throughput, preferred_max_latency"

// isProviderField reports whether k is one of providerFieldList.
func isProviderField(k string) bool {
	switch k {
	case "order", "allow_fallbacks", "only", "ignore", "sort",
		"max_price", "preferred_min_throughput", "preferred_max_latency":
		return true
	}
	return false
}

// badRequest is a 400 answer naming the offending field.
func badRequest(param, format string, args ...any) *apiError {
	return &apiError{Status: http.StatusBadRequest, Type: "invalid_request_error", Param: param,
		Message: "gateway: " + param + ": " + fmt.Sprintf(format, args...)}
}

// parseDirectives reads body and the routing headers of h. It never modifies
// body; the forwarded copy is in directives.body.
func parseDirectives(body []byte, h http.Header) (*directives, *apiError) {
	if !gjson.ValidBytes(body) {
		return nil, &apiError{Status: http.StatusBadRequest, Type: "invalid_request_error",
			Message: "gateway: request body is not valid JSON"}
	}
	root := gjson.ParseBytes(body)
	if !root.IsObject() {
		return nil, &apiError{Status: http.StatusBadRequest, Type: "invalid_request_error",
			Message: "gateway: request body must be a JSON object"}
	}
	d := &directives{}
	f := root.Get
	model := f("model")
	switch model.Type {
	case gjson.Null:
	case gjson.String:
		d.req.Model = model.Str
	default:
		return nil, badRequest("model", "must be a string")
	}
	if ms := f("models"); ms.Exists() {
		list, err := stringList("models", ms)
		if err != nil {
			return nil, err
		}
		for _, m := range list {
			if m == d.req.Model {
				continue
			}
			if d.req.Model == "" {
				d.req.Model = m
				continue
			}
			d.req.Models = append(d.req.Models, m)
		}
	}
	if d.req.Model == "" {
		return nil, badRequest("model", "required: a model name, or a non-empty \"models\" array")
	}
	switch s := f("stream"); s.Type {
	case gjson.True:
		d.stream = true
	case gjson.False, gjson.Null:
	default:
		return nil, badRequest("stream", "must be a boolean")
	}
	if m := f("messages"); !m.IsArray() || len(m.Array()) == 0 {
		return nil, badRequest("messages", "required: a non-empty array")
	}
	switch k := f("prompt_cache_key"); k.Type {
	case gjson.Null:
	case gjson.String:
		d.req.CacheKey = k.Str
	default:
		return nil, badRequest("prompt_cache_key", "must be a string")
	}
	for _, name := range []string{"max_completion_tokens", "max_tokens"} {
		if v := f(name); v.Exists() && v.Type != gjson.Null {
			if v.Type != gjson.Number || v.Num < 1 || v.Num != math.Trunc(v.Num) {
				return nil, badRequest(name, "must be a positive integer")
			}
			if d.req.ExpectedOutputTokens == 0 {
				d.req.ExpectedOutputTokens = int64(v.Num)
			}
		}
	}
	d.req.ExpectedInputTokens = int64(len(body)/4) + 1

	if p := f("provider"); p.Exists() && p.Type != gjson.Null {
		if err := d.parseProvider(p); err != nil {
			return nil, err
		}
	}
	if err := d.parseHeaders(h); err != nil {
		return nil, err
	}

	// The forwarded body: the gateway-only fields go, the primary model is set.
	out := body
	var err error
	for _, k := range []string{"models", "provider"} {
		if root.Get(k).Exists() {
			if out, err = sjson.DeleteBytes(out, k); err != nil {
				return nil, &apiError{Status: http.StatusBadRequest, Type: "invalid_request_error", Param: k, Message: "gateway: " + k + ": " + err.Error()}
			}
		}
	}
	if model.Type != gjson.String {
		if out, err = sjson.SetBytes(out, "model", d.req.Model); err != nil {
			return nil, badRequest("model", "%v", err)
		}
	}
	d.body = out
	return d, nil
}

// parseProvider reads the "provider" object (OpenRouter's conventions).
func (d *directives) parseProvider(p gjson.Result) *apiError {
	if !p.IsObject() {
		return badRequest("provider", "must be an object")
	}
	var bad *apiError
	p.ForEach(func(k, _ gjson.Result) bool {
		if isProviderField(k.Str) {
			return true
		}
		bad = badRequest("provider."+k.Str, "unknown routing field; the gateway supports %s", providerFieldList)
		return false
	})
	if bad != nil {
		return bad
	}
	var err *apiError
	if v := p.Get("order"); v.Exists() {
		if d.req.Providers, err = stringList("provider.order", v); err != nil {
			return err
		}
	}
	if v := p.Get("only"); v.Exists() {
		if d.req.Only, err = stringList("provider.only", v); err != nil {
			return err
		}
	}
	if v := p.Get("ignore"); v.Exists() {
		if d.req.Ignore, err = stringList("provider.ignore", v); err != nil {
			return err
		}
	}
	if v := p.Get("allow_fallbacks"); v.Exists() {
		if v.Type != gjson.True && v.Type != gjson.False {
			return badRequest("provider.allow_fallbacks", "must be a boolean")
		}
		if !v.Bool() {
			if len(d.req.Providers) > 0 {
				// Only the providers in "order", in that order.
				d.req.Only = intersect(d.req.Providers, d.req.Only)
				if len(d.req.Only) == 0 {
					return badRequest("provider.only", "shares no provider with provider.order while allow_fallbacks is false")
				}
			} else {
				d.req.NoFallbacks = true
			}
		}
	}
	if v := p.Get("sort"); v.Exists() {
		switch v.Str {
		case "price":
			d.req.Policy = route.Cost
		case "throughput":
			d.req.Policy = route.Throughput
		case "latency":
			d.req.Policy = route.Latency
		default:
			return badRequest("provider.sort", "must be \"price\", \"throughput\" or \"latency\", not %s", v.Raw)
		}
	}
	if v := p.Get("max_price"); v.Exists() {
		switch {
		case v.Type == gjson.Number:
			if !(v.Num >= 0) || math.IsInf(v.Num, 0) {
				return badRequest("provider.max_price", "must be a non-negative number")
			}
			d.maxCompletion = v.Num
		case v.IsObject():
			var bad *apiError
			v.ForEach(func(k, x gjson.Result) bool {
				if x.Type != gjson.Number || !(x.Num >= 0) || math.IsInf(x.Num, 0) {
					bad = badRequest("provider.max_price."+k.Str, "must be a non-negative number (USD per million tokens)")
					return false
				}
				switch k.Str {
				case "prompt":
					d.maxPrompt = x.Num
				case "completion":
					d.maxCompletion = x.Num
				default:
					bad = badRequest("provider.max_price."+k.Str, "unknown price; the gateway supports prompt and completion")
					return false
				}
				return true
			})
			if bad != nil {
				return bad
			}
		default:
			return badRequest("provider.max_price", "must be a number (USD per million output tokens) or an object {prompt, completion}")
		}
		d.req.SLO.MaxPrice = d.maxCompletion
	}
	if v := p.Get("preferred_min_throughput"); v.Exists() {
		if v.Type != gjson.Number || !(v.Num > 0) || math.IsInf(v.Num, 0) {
			return badRequest("provider.preferred_min_throughput", "must be a positive number of tokens per second")
		}
		d.req.SLO.MinTPS = v.Num
	}
	if v := p.Get("preferred_max_latency"); v.Exists() {
		if v.Type != gjson.Number || !(v.Num > 0) || v.Num > 3600 {
			return badRequest("provider.preferred_max_latency", "must be a positive number of seconds (time to first token), at most 3600")
		}
		d.req.SLO.MaxTTFT = time.Duration(v.Num * float64(time.Second))
	}
	return nil
}

// parseHeaders reads X-Route-Region (a comma-separated list of regions) and
// X-Route-Provider ("provider" or "provider/region", a pin).
func (d *directives) parseHeaders(h http.Header) *apiError {
	if v := strings.TrimSpace(h.Get("X-Route-Region")); v != "" {
		for _, r := range strings.Split(v, ",") {
			if r = strings.TrimSpace(r); r == "" {
				return badRequest("X-Route-Region", "empty region in %q", v)
			}
			d.req.Regions = append(d.req.Regions, r)
		}
	}
	if v := strings.TrimSpace(h.Get("X-Route-Provider")); v != "" {
		p, r, _ := strings.Cut(v, "/")
		if p = strings.TrimSpace(p); p == "" || strings.Contains(r, "/") {
			return badRequest("X-Route-Provider", "want \"provider\" or \"provider/region\", not %q", v)
		}
		d.pinProvider, d.pinRegion, d.pinned = p, strings.TrimSpace(r), true
	}
	return nil
}

// stringList reads a JSON array of non-empty strings.
func stringList(name string, v gjson.Result) ([]string, *apiError) {
	if !v.IsArray() {
		return nil, badRequest(name, "must be an array of strings")
	}
	var out []string
	var bad *apiError
	v.ForEach(func(i, x gjson.Result) bool {
		if x.Type != gjson.String || x.Str == "" {
			bad = badRequest(name+"["+strconv.FormatInt(i.Int(), 10)+"]", "must be a non-empty string")
			return false
		}
		out = append(out, x.Str)
		return true
	})
	return out, bad
}

// intersect returns the elements of a that are in b, or a when b is empty.
func intersect(a, b []string) []string {
	if len(b) == 0 {
		return a
	}
	var out []string
	for _, x := range a {
		for _, y := range b {
			if x == y {
				out = append(out, x)
				break
			}
		}
	}
	return out
}

// shape applies what the Picker does not know to plan: the X-Route-Provider
// pin (moved first; alone with allow_fallbacks false) and provider.max_price
// (a hard cap, as in the ecosystem's convention). It reports an apiError when
// nothing is left.
func (d *directives) shape(plan route.Plan, noFallbacks bool) (route.Plan, *apiError) {
	if d.maxPrompt > 0 || d.maxCompletion > 0 {
		keep := plan.Deployments[:0:0]
		for _, c := range plan.Deployments {
			p := c.Deployment.Price
			if (d.maxCompletion > 0 && p.Output > d.maxCompletion) || (d.maxPrompt > 0 && p.Input > d.maxPrompt) {
				continue
			}
			keep = append(keep, c)
		}
		if len(keep) == 0 {
			return plan, &apiError{Status: http.StatusServiceUnavailable, Type: "service_unavailable", Param: "provider.max_price",
				Message: fmt.Sprintf("gateway: provider.max_price: no deployment of %q is within the price cap", d.req.Model)}
		}
		plan.Deployments = keep
	}
	if d.pinned {
		match := func(c *route.Candidate) bool {
			return c.Deployment.Provider == d.pinProvider && (d.pinRegion == "" || c.Deployment.Region == d.pinRegion)
		}
		var out []route.Candidate
		for i := range plan.Deployments {
			if match(&plan.Deployments[i]) {
				out = append(out, plan.Deployments[i])
			}
		}
		if len(out) == 0 {
			// A pinned deployment left out for an open breaker is still the
			// caller's explicit choice.
			for i := range plan.Excluded {
				if match(&plan.Excluded[i]) {
					out = append(out, plan.Excluded[i])
				}
			}
		}
		if len(out) == 0 {
			return plan, &apiError{Status: http.StatusBadRequest, Type: "invalid_request_error", Param: "X-Route-Provider",
				Message: fmt.Sprintf("gateway: X-Route-Provider: no deployment of %q serves the request within its other directives", d.pinProvider+suffix(d.pinRegion))}
		}
		if noFallbacks {
			out = out[:1]
		} else {
			for i := range plan.Deployments {
				if !match(&plan.Deployments[i]) {
					out = append(out, plan.Deployments[i])
				}
			}
		}
		plan.Deployments = out
	}
	return plan, nil
}

func suffix(region string) string {
	if region == "" {
		return ""
	}
	return "/" + region
}

// build makes one attempt's request for deployment d: fallback.DefaultBuild
// (d's URL, key, headers and model id, include_usage where declared), with
// the cache hints removed for a deployment that does not declare
// cache_control, and the attempt's key in the context for the in-flight gauge.
// No header of the caller is forwarded.
func build(ctx context.Context, d route.Deployment, body []byte) (*http.Request, error) {
	if !d.Capabilities.CacheControl {
		var err error
		if body, err = stripCacheHints(body); err != nil {
			return nil, err
		}
	}
	return fallback.DefaultBuild(context.WithValue(ctx, attemptKey{}, d.Key()), d, body)
}

// cacheControlKey is the JSON key of a cache hint, searched for before parsing.
const cacheControlKey = `"cache_control"`

// stripCacheHints removes prompt_cache_key and every cache_control field on
// messages, message content parts and tools. It copies body only when it
// holds a hint.
func stripCacheHints(body []byte) ([]byte, error) {
	var err error
	if gjson.GetBytes(body, "prompt_cache_key").Exists() {
		if body, err = sjson.DeleteBytes(body, "prompt_cache_key"); err != nil {
			return nil, fmt.Errorf("gateway: strip prompt_cache_key: %w", err)
		}
	}
	if !bytes.Contains(body, []byte(cacheControlKey)) {
		return body, nil
	}
	var paths []string
	for _, list := range []string{"messages", "tools"} {
		gjson.GetBytes(body, list).ForEach(func(i, item gjson.Result) bool {
			base := list + "." + strconv.FormatInt(i.Int(), 10)
			if item.Get("cache_control").Exists() {
				paths = append(paths, base+".cache_control")
			}
			if content := item.Get("content"); content.IsArray() {
				content.ForEach(func(j, part gjson.Result) bool {
					if part.Get("cache_control").Exists() {
						paths = append(paths, base+".content."+strconv.FormatInt(j.Int(), 10)+".cache_control")
					}
					return true
				})
			}
			return true
		})
	}
	// Delete from the last path back, so earlier indexes stay valid.
	for i := len(paths) - 1; i >= 0; i-- {
		if body, err = sjson.DeleteBytes(body, paths[i]); err != nil {
			return nil, fmt.Errorf("gateway: strip %s: %w", paths[i], err)
		}
	}
	return body, nil
}
