package main

import (
	"bytes"
	"net/http"
	"slices"
	"strings"
	"testing"
	"unsafe"

	"github.com/tidwall/gjson"

	"github.com/tpsroute/tpsroute/internal/jsoncheck"
)

// FuzzParseDirectives: whatever the body and routing headers, parseDirectives
// never panics and leaves the body as it was; it returns a 400 naming the
// problem, or directives whose forwarded body is valid JSON without the
// gateway's fields, whose lists hold distinct entries within maxListEntries,
// and whose strings are copies, not slices of the body.
func FuzzParseDirectives(f *testing.F) {
	for _, s := range []struct{ body, region, provider string }{
		{req("m", true, ""), "", ""},
		{`{"models":["m","n","m"],` + hi + `,"provider":{"order":["a","b"],"only":["b"],"allow_fallbacks":false}}`, "us, eu", "a/us"},
		{req("m", false, `"provider":{"sort":"price","max_price":{"prompt":1,"completion":2},"preferred_min_throughput":50,"preferred_max_latency":2}`), "", "b"},
		{req("m", false, `"provider":{"ignore":["x"],"max_price":0.5}`), "eu", ""},
		{`{"model":3}`, "", ""},
		{`{"models":[]}`, ",", "a/b/c"},
		{`[1]`, "", ""},
		{strings.Repeat("[", 200), "", ""},
		{`{"model":"m\u00e9","provider":{"quantizations":[]}}`, "", ""},
	} {
		f.Add([]byte(s.body), s.region, s.provider)
	}
	f.Fuzz(func(t *testing.T, body []byte, region, provider string) {
		h := http.Header{}
		h.Set("X-Route-Region", region)
		h.Set("X-Route-Provider", provider)
		orig := bytes.Clone(body)
		d, herr := parseDirectives(body, h)
		if !bytes.Equal(body, orig) {
			t.Fatal("the body was modified")
		}
		if herr != nil {
			if herr.Status != http.StatusBadRequest || !strings.HasPrefix(herr.Message, "gateway: ") {
				t.Fatalf("error %d %q: want a 400 with the gateway's prefix", herr.Status, herr.Message)
			}
			return
		}
		if err := jsoncheck.Valid(d.body); err != nil {
			t.Fatalf("forwarded body %q is not valid JSON: %v", d.body, err)
		}
		fwd := gjson.ParseBytes(d.body)
		if fwd.Get("models").Exists() || fwd.Get("provider").Exists() {
			t.Fatalf("forwarded body %q keeps the gateway's fields", d.body)
		}
		if d.req.Model == "" {
			t.Fatal("no model")
		}
		lo := uintptr(unsafe.Pointer(unsafe.SliceData(body)))
		hi := lo + uintptr(len(body))
		strs := append([]string{d.req.Model}, d.req.Models...)
		for _, l := range [][]string{d.req.Models, d.req.Providers, d.req.Only, d.req.Ignore, d.req.Regions} {
			if len(l) > maxListEntries {
				t.Fatalf("a list of %d entries", len(l))
			}
			s := slices.Clone(l)
			slices.Sort(s)
			if len(slices.Compact(s)) != len(l) {
				t.Fatalf("a list with repeated entries: %q", l)
			}
			strs = append(strs, l...)
		}
		for _, s := range strs {
			if p := uintptr(unsafe.Pointer(unsafe.StringData(s))); len(s) > 0 && p >= lo && p < hi {
				t.Fatalf("%q is a slice of the body", s)
			}
		}
	})
}
