package tpsseam_test

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/tpsroute/tpsroute/internal/payload"
	"github.com/tpsroute/tpsroute/internal/tpsseam"
	"github.com/tpsroute/tpsroute/tps"
)

// tps sets the seam when it is initialized; its users assert the type once.
func Example() {
	withObserver := tpsseam.WithObserver.(func(func(time.Time, *payload.Chunk)) tps.Option)
	body := "data: {\"choices\":[{\"delta\":{\"content\":\"Hi\"}}]}\n\ndata: [DONE]\n\n"
	tap := tps.NewTap(io.NopCloser(strings.NewReader(body)), time.Now(), nil,
		withObserver(func(_ time.Time, c *payload.Chunk) { fmt.Println(c.Output, c.Done) }))
	_, _ = io.Copy(io.Discard, tap)
	_ = tap.Close()
	// Output:
	// true false
	// false true
}
