package fallback_test

import (
	"errors"
	"fmt"
	"time"

	"github.com/tpsroute/tpsroute/fallback"
	"github.com/tpsroute/tpsroute/measure"
	"github.com/tpsroute/tpsroute/tps"
)

// Options is what a program writes (tpsroute.Config.Fallback): a zero field
// means its documented default, a negative deadline turns that deadline off.
func Example() {
	opts := fallback.Options{
		Deadlines: fallback.Deadlines{TTFT: 5 * time.Second, FinishGrace: -1},
		MidStream: fallback.MidStreamContinue,
		Breaker:   fallback.BreakerSettings{ConsecutiveFailures: 3},
	}
	// Per-call deadlines override the configured ones field by field.
	call := fallback.Deadlines{Stall: 10 * time.Second}.Or(opts.Deadlines)
	fmt.Println(call.TTFT, call.Stall, call.Headers == 0, call.FinishGrace < 0)
	// Output:
	// 5s 10s true true
}

// A failed call returns a *Error listing every attempt: errors.Is finds the
// sentinels in any of them, Last is the attempt that decided the outcome,
// and each Attempt's Class says what was made of it.
func ExampleError() {
	var err error = &fallback.Error{Attempts: []fallback.Attempt{
		{Key: measure.Key{Provider: "primary", Model: "m"}, Class: fallback.ClassSkipped, Err: fallback.ErrOpen},
		{Key: measure.Key{Provider: "secondary", Model: "m"}, Class: fallback.ClassNext, Phase: tps.PhaseFirstToken, Err: fallback.ErrTTFTTimeout},
	}}
	var fe *fallback.Error
	if errors.As(err, &fe) {
		last, _ := fe.Last()
		fmt.Println(last.Key.Provider, last.Class, last.Timeout(), last.Class.CallerFault())
	}
	fmt.Println(errors.Is(err, fallback.ErrOpen), errors.Is(err, fallback.ErrMidStream))
	fmt.Println(err)
	// Output:
	// secondary next true false
	// true false
	// fallback: 1 attempt: primary//m: skipped (fallback: circuit breaker open); secondary//m: next at first-token (fallback: TTFT deadline exceeded)
}
