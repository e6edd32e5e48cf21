package fallbackseam_test

import (
	"fmt"

	"github.com/tpsroute/tpsroute/fallback"
	"github.com/tpsroute/tpsroute/internal/fallbackseam"
)

// fallback sets the seam when it is initialized; the executor asserts each
// function's type once.
func Example() {
	count := fallbackseam.CountAttempts.(func([]fallback.Attempt) int)
	fmt.Println(count([]fallback.Attempt{{Class: fallback.ClassSkipped}, {Class: fallback.ClassNext}, {Class: fallback.ClassNone}}))
	// Output:
	// 2
}

func ExampleMessage() {
	fmt.Println(fallbackseam.Message(fallback.ErrStall))
	// Output:
	// stream stalled
}
