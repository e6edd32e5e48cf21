package cputime_test

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/tpsroute/tpsroute/internal/cputime"
)

// A benchmark calls PerOp after its setup and runs the returned func when
// its timed loop ends; a deferred call does both. The metric appears where
// the thread's CPU time can be read, which is on Linux.
func ExamplePerOp() {
	r := testing.Benchmark(func(b *testing.B) {
		buf := make([]byte, 0, 64)
		defer cputime.PerOp(b)()
		for b.Loop() {
			buf = fmt.Appendf(buf[:0], "%d", b.N)
		}
	})
	cpu, reported := r.Extra["cpu-ns/op"]
	fmt.Println("reported where readable:", reported == (runtime.GOOS == "linux"))
	fmt.Println("positive where reported:", !reported || cpu > 0)
	// Output:
	// reported where readable: true
	// positive where reported: true
}
