//go:build !linux

package cputime

import "time"

// threadCPU is only implemented on Linux.
func threadCPU() (time.Duration, bool) { return 0, false }
