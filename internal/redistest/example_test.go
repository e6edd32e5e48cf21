package redistest_test

import (
	"fmt"
	"testing"

	"github.com/tpsroute/tpsroute/internal/redistest"
)

// A test reaches the shared redis-server with Addr. Without one it is
// skipped on a developer's machine and fails in CI, so that CI never passes
// by skipping the Redis tests. testing.Benchmark gives each case here a
// *testing.B of its own, whose Setenv is undone when the case ends.
func ExampleAddr() {
	for _, env := range []struct{ ci, addr string }{
		{"", ""},                // a developer's machine without Redis
		{"1", ""},               // CI without Redis
		{"1", "127.0.0.1:6390"}, // CI, with the server .ci/run started
	} {
		var outcome string
		testing.Benchmark(func(b *testing.B) {
			b.Setenv(redistest.CIEnv, env.ci)
			b.Setenv(redistest.AddrEnv, env.addr)
			defer func() {
				switch {
				case b.Skipped():
					outcome = "skipped"
				case b.Failed():
					outcome = "failed"
				}
			}()
			outcome = "redis://" + redistest.Addr(b) + "/0"
		})
		fmt.Printf("%s=%q %s=%q: %s\n", redistest.CIEnv, env.ci, redistest.AddrEnv, env.addr, outcome)
	}
	// Output:
	// TPSROUTE_CI="" TPSROUTE_REDIS_ADDR="": skipped
	// TPSROUTE_CI="1" TPSROUTE_REDIS_ADDR="": failed
	// TPSROUTE_CI="1" TPSROUTE_REDIS_ADDR="127.0.0.1:6390": redis://127.0.0.1:6390/0
}
