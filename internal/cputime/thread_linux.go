package cputime

import (
	"syscall"
	"time"
)

// threadCPU returns the CPU time the calling OS thread has used, so that a
// benchmark locked to its thread can report CPU per call regardless of other
// processes on a shared machine.
func threadCPU() (time.Duration, bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(1 /* RUSAGE_THREAD */, &ru); err != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}
