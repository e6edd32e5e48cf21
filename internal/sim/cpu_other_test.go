//go:build !linux

package sim

import "time"

func processCPU() (time.Duration, bool) { return 0, false }
