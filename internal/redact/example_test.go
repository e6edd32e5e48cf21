package redact_test

import (
	"fmt"
	"net/http"

	"github.com/tpsroute/tpsroute/internal/redact"
	"github.com/tpsroute/tpsroute/route"
)

func ExampleScrubber() {
	d := route.Deployment{APIKey: "sk-live-123456"}
	sc := redact.NewScrubber(d)
	fmt.Println(sc.Scrub(`invalid key "sk\u002dlive-123456"`))
	fmt.Println(sc.Contains([]byte("nothing here")))
	// Output:
	// invalid key "REDACTED"
	// false
}

func ExampleHeader() {
	h := redact.Header(http.Header{"Authorization": {"Bearer sk-1"}, "X-Route-Region": {"eu"}})
	fmt.Println(h.Get("Authorization"), h.Get("X-Route-Region"))
	// Output:
	// REDACTED eu
}
