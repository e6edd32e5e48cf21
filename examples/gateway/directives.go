package main

import (
	"errors"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
	"unsafe"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/tpsroute/tpsroute"
	"github.com/tpsroute/tpsroute/internal/jsoncheck"
	"github.com/tpsroute/tpsroute/route"
)

// directives is what the gateway reads from one chat-completion request:
// the routing directives, as the route.Request they make (passed whole to
// the Client with tpsroute.WithRequest), and the body to forward, with the
// gateway-only fields removed. The body's own fields ("stream", "messages",
// max_tokens, ...) are checked by tpsroute.Client.Do.
type directives struct {
	// req holds Model, Models, Providers, Only, Ignore, Regions, Policy,
	// SLO (preferred_*: demote, not drop), PriceCap (max_price: drop), Pin
	// (X-Route-Provider) and NoFallbacks.
	req  route.Request
	body []byte // forwarded body: "models" and "provider" removed, "model" set
}

// providerFields are the keys the "provider" object may hold.
var providerFields = []string{"order", "allow_fallbacks", "only", "ignore", "sort",
	"max_price", "preferred_min_throughput", "preferred_max_latency"}

// sortPolicy returns the route policy of a provider.sort value, in
// OpenRouter's words: "price" for route.Cost, and route's own names
// (route.Policy.String) for throughput and latency.
func sortPolicy(v string) (route.Policy, bool) {
	switch v {
	case "price":
		return route.Cost, true
	case route.Throughput.String():
		return route.Throughput, true
	case route.Latency.String():
		return route.Latency, true
	}
	return 0, false
}

// badRequest is a 400 answer naming the offending field.
func badRequest(param, format string, args ...any) *tpsroute.HTTPError {
	return &tpsroute.HTTPError{Status: http.StatusBadRequest, Type: "invalid_request_error", Param: param,
		Message: "gateway: " + param + ": " + fmt.Sprintf(format, args...)}
}

// maxListEntries bounds each list directive: "models", provider.order,
// provider.only and provider.ignore hold at most this many distinct entries
// (a repeated entry is dropped as it is read). A longer list is a 400, found
// after reading at most maxListEntries+1 distinct entries, so that the work
// of a request's directives is linear in its size and bounded by this after
// parsing: a list longer than the configured providers, or than the
// attempts a call makes (at most 10), routes nothing more.
const maxListEntries = 128

// parseDirectives reads body and the routing headers of h. It never modifies
// body; the forwarded copy is in directives.body. body is checked by
// jsoncheck (iterative, at most jsoncheck.MaxDepth levels) before gjson, which
// recurses once per level, reads it in place; every string kept in
// directives.req is a copy, never a slice of body.
func parseDirectives(body []byte, h http.Header) (*directives, *tpsroute.HTTPError) {
	if err := jsoncheck.Valid(body); err != nil {
		msg := "gateway: request body is not valid JSON: " + strings.TrimPrefix(err.Error(), "jsoncheck: ")
		if errors.Is(err, jsoncheck.ErrTooDeep) {
			msg = "gateway: request body nests arrays and objects deeper than " + strconv.Itoa(jsoncheck.MaxDepth) + " levels"
		}
		return nil, &tpsroute.HTTPError{Status: http.StatusBadRequest, Type: "invalid_request_error", Message: msg}
	}
	root := gjson.Parse(unsafe.String(unsafe.SliceData(body), len(body))) // in place: no copy of body
	if !root.IsObject() {
		return nil, &tpsroute.HTTPError{Status: http.StatusBadRequest, Type: "invalid_request_error",
			Message: "gateway: request body must be a JSON object"}
	}
	d := &directives{}
	f := root.Get
	model := f("model")
	switch model.Type {
	case gjson.Null:
	case gjson.String:
		d.req.Model = strings.Clone(model.Str)
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
				return nil, &tpsroute.HTTPError{Status: http.StatusBadRequest, Type: "invalid_request_error", Param: k, Message: "gateway: " + k + ": " + err.Error()}
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
// Its complexity (about 25) is one check per field of the object, each
// naming the field in its error.
func (d *directives) parseProvider(p gjson.Result) *tpsroute.HTTPError {
	if !p.IsObject() {
		return badRequest("provider", "must be an object")
	}
	var bad *tpsroute.HTTPError
	p.ForEach(func(k, _ gjson.Result) bool {
		if slices.Contains(providerFields, k.Str) {
			return true
		}
		bad = badRequest("provider."+k.Str, "unknown routing field; the gateway supports %s", strings.Join(providerFields, ", "))
		return false
	})
	if bad != nil {
		return bad
	}
	for _, l := range []struct {
		key string
		dst *[]string
	}{{"order", &d.req.Providers}, {"only", &d.req.Only}, {"ignore", &d.req.Ignore}} {
		if v := p.Get(l.key); v.Exists() {
			if *l.dst, bad = stringList("provider."+l.key, v); bad != nil {
				return bad
			}
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
		policy, ok := sortPolicy(v.Str)
		if !ok {
			return badRequest("provider.sort", "must be \"price\", \"throughput\" or \"latency\", not %s", v.Raw)
		}
		d.req.Policy = policy
	}
	if v := p.Get("max_price"); v.Exists() {
		if bad := d.parseMaxPrice(v); bad != nil {
			return bad
		}
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

// parseMaxPrice reads provider.max_price, the hard price cap
// (route.Request.PriceCap): a number of USD per million output tokens, or an
// object {prompt, completion} of prices per million tokens.
func (d *directives) parseMaxPrice(v gjson.Result) *tpsroute.HTTPError {
	price := func(x gjson.Result) bool { return x.Type == gjson.Number && x.Num >= 0 && !math.IsInf(x.Num, 0) }
	switch {
	case v.Type == gjson.Number:
		if !price(v) {
			return badRequest("provider.max_price", "must be a non-negative number")
		}
		d.req.PriceCap.Output = v.Num
		return nil
	case !v.IsObject():
		return badRequest("provider.max_price", "must be a number (USD per million output tokens) or an object {prompt, completion}")
	}
	var bad *tpsroute.HTTPError
	v.ForEach(func(k, x gjson.Result) bool {
		if !price(x) {
			bad = badRequest("provider.max_price."+k.Str, "must be a non-negative number (USD per million tokens)")
			return false
		}
		switch k.Str {
		case "prompt":
			d.req.PriceCap.Input = x.Num
		case "completion":
			d.req.PriceCap.Output = x.Num
		default:
			bad = badRequest("provider.max_price."+k.Str, "unknown price; the gateway supports prompt and completion")
			return false
		}
		return true
	})
	return bad
}

// parseHeaders reads X-Route-Region (a comma-separated list of regions) and
// X-Route-Provider ("provider" or "provider/region", a pin).
func (d *directives) parseHeaders(h http.Header) *tpsroute.HTTPError {
	if v := strings.TrimSpace(h.Get("X-Route-Region")); v != "" {
		for r := range strings.SplitSeq(v, ",") {
			if r = strings.TrimSpace(r); r == "" {
				return badRequest("X-Route-Region", "empty region in %q", v)
			}
			if slices.Contains(d.req.Regions, r) {
				continue
			}
			if len(d.req.Regions) == maxListEntries {
				return badRequest("X-Route-Region", "holds more than %d distinct regions", maxListEntries)
			}
			d.req.Regions = append(d.req.Regions, r)
		}
	}
	if v := strings.TrimSpace(h.Get("X-Route-Provider")); v != "" {
		p, r, _ := strings.Cut(v, "/")
		if p = strings.TrimSpace(p); p == "" || strings.Contains(r, "/") {
			return badRequest("X-Route-Provider", "want \"provider\" or \"provider/region\", not %q", v)
		}
		d.req.Pin = route.Pin{Provider: p, Region: strings.TrimSpace(r)}
	}
	return nil
}

// stringList reads a JSON array of non-empty strings: each distinct string
// once, copied, in the order of its first occurrence; at most maxListEntries
// of them.
func stringList(name string, v gjson.Result) ([]string, *tpsroute.HTTPError) {
	if !v.IsArray() {
		return nil, badRequest(name, "must be an array of strings")
	}
	var out []string
	seen := make(map[string]struct{})
	var bad *tpsroute.HTTPError
	v.ForEach(func(i, x gjson.Result) bool {
		if x.Type != gjson.String || x.Str == "" {
			bad = badRequest(name+"["+strconv.FormatInt(i.Int(), 10)+"]", "must be a non-empty string")
			return false
		}
		if _, dup := seen[x.Str]; dup {
			return true
		}
		if len(out) == maxListEntries {
			bad = badRequest(name, "holds more than %d distinct entries", maxListEntries)
			return false
		}
		s := strings.Clone(x.Str)
		seen[s] = struct{}{}
		out = append(out, s)
		return true
	})
	return out, bad
}

// intersect returns the elements of a that are in b, or a when b is empty.
func intersect(a, b []string) []string {
	if len(b) == 0 {
		return a
	}
	in := make(map[string]struct{}, len(b))
	for _, x := range b {
		in[x] = struct{}{}
	}
	var out []string
	for _, x := range a {
		if _, ok := in[x]; ok {
			out = append(out, x)
		}
	}
	return out
}
