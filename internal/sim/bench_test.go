package sim

import (
	"context"
	"testing"
	"testing/synctest"
	"time"
)

// tenThousand is a scenario of 10,000 calls: 50 calls/s for 200 s (the last
// at 200 s, inside the 10 ms margin) over three
// deployments, with noise and a degradation, routed by the defaults.
func tenThousand() *Scenario {
	return &Scenario{Name: "10k", Duration: Duration(200*time.Second + 10*time.Millisecond),
		Workload: Workload{Rate: 50, OutputTokens: []int{200}},
		Deployments: []Deployment{
			{Provider: "a", TTFT: Duration(200 * time.Millisecond), TPS: 1500, Sigma: 0.1,
				Phases: []Phase{{From: Duration(100 * time.Second), TPSFactor: 0.1}}},
			{Provider: "b", TTFT: Duration(200 * time.Millisecond), TPS: 800, Sigma: 0.1},
			{Provider: "c", TTFT: Duration(200 * time.Millisecond), TPS: 400, Sigma: 0.1},
		}}
}

// BenchmarkRun10k runs the 10,000-call scenario in a synctest bubble and
// reports the process CPU seconds per run (cpu-s/op) and per call, which
// other processes on a shared machine do not inflate.
func BenchmarkRun10k(b *testing.B) {
	sc := tenThousand()
	b.ReportAllocs()
	cpu0, ok := processCPU()
	calls := 0
	for b.Loop() {
		synctest.Test(&testing.T{}, func(*testing.T) {
			res, err := Run(context.Background(), sc, Defaults())
			if err != nil {
				b.Fatal(err)
			}
			calls = res.Summary.Calls
		})
	}
	if calls != 10000 {
		b.Fatalf("%d calls, want 10000", calls)
	}
	if cpu1, ok1 := processCPU(); ok && ok1 {
		cpu := (cpu1 - cpu0).Seconds() / float64(b.N)
		b.ReportMetric(cpu, "cpu-s/op")
		b.ReportMetric(cpu/float64(calls)*1e6, "cpu-µs/call")
	}
}
