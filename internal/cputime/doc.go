// Package cputime reports a benchmark's CPU time per operation, measured on
// its own OS thread, so that other load on a shared machine does not inflate
// the figure. It is the one home of that helper for the module's benchmarks.
//
// The benchmarks of internal/picker and internal/executor call PerOp, which
// adds a "cpu-ns/op" metric next to ns/op. The thread's CPU time is read with
// getrusage(RUSAGE_THREAD) on Linux; elsewhere PerOp reports nothing, and the
// benchmark's other figures are unchanged. The package is internal: it is a
// test helper of this module and imports only the standard library.
package cputime
