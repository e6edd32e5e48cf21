package main

import (
	"fmt"
	"net/http"

	"github.com/tidwall/gjson"
)

// Example_directives shows what the gateway makes of a request with routing
// directives: the route.Request it plans with, and the body it forwards.
func Example_directives() {
	body := []byte(`{"models":["llama-3.3-70b","gpt-4.1-mini"],"stream":true,` +
		`"messages":[{"role":"user","content":"hi"}],"x_vendor":{"a":1},` +
		`"provider":{"order":["groq","together"],"sort":"throughput","max_price":1,"preferred_max_latency":0.8}}`)
	h := http.Header{}
	h.Set("X-Route-Region", "us-east-1, us-west-2")
	d, err := parseDirectives(body, h)
	if err != nil {
		fmt.Println(err.Message)
		return
	}
	fmt.Println("model:", d.req.Model, "then", d.req.Models)
	fmt.Println("providers:", d.req.Providers, "regions:", d.req.Regions)
	fmt.Println("policy:", d.req.Policy, "max ttft:", d.req.SLO.MaxTTFT, "max price:", d.req.PriceCap.Output)
	fmt.Println("forwarded:", gjson.GetBytes(d.body, "@this").Get("@keys"))
	// Output:
	// model: llama-3.3-70b then [gpt-4.1-mini]
	// providers: [groq together] regions: [us-east-1 us-west-2]
	// policy: throughput max ttft: 800ms max price: 1
	// forwarded: ["stream","messages","x_vendor","model"]
}

// Example_badRequest shows a 400 naming the field.
func Example_badRequest() {
	_, err := parseDirectives([]byte(`{"model":"m","messages":[{"role":"user","content":"hi"}],"provider":{"sort":"fastest"}}`), http.Header{})
	fmt.Println(err.Status, err.Param)
	fmt.Println(err.Message)
	// Output:
	// 400 provider.sort
	// gateway: provider.sort: must be "price", "throughput" or "latency", not "fastest"
}
