package cputime

import (
	"runtime"
	"testing"
)

// PerOp locks the benchmark to its OS thread and, when the returned func
// runs, reports that thread's CPU time per op as "cpu-ns/op" (GC work on
// other threads is not included). Where the thread's CPU time cannot be read
// (outside Linux) it reports nothing. Call it after any setup, and the
// returned func when the timed loop ends; it is not safe for concurrent use.
func PerOp(b *testing.B) func() {
	runtime.LockOSThread()
	start, ok := threadCPU()
	return func() {
		end, ok2 := threadCPU()
		runtime.UnlockOSThread()
		if ok && ok2 && b.N > 0 {
			b.ReportMetric(float64(end-start)/float64(b.N), "cpu-ns/op")
		}
	}
}
