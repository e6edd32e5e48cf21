package sim

import (
	"syscall"
	"time"
)

// processCPU returns the CPU time the whole process has used (user and
// system, every thread): a run in a synctest bubble spreads over threads.
func processCPU() (time.Duration, bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}
