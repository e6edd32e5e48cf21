//go:build !unix

package tps_test

import "time"

// cpuTime is not measured on this platform; BenchmarkWrap1000 then reports
// only its wall-clock ratio.
func cpuTime() time.Duration { return 0 }
