package cputime

import (
	"runtime"
	"testing"
)

func TestThreadCPUAdvances(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("thread CPU time is read on Linux only")
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	start, ok := threadCPU()
	if !ok {
		t.Fatal("threadCPU not available on Linux")
	}
	x := 0
	for i := range 50_000_000 {
		x += i
	}
	end, _ := threadCPU()
	if end <= start {
		t.Fatalf("thread CPU did not advance over a busy loop (%d): %v -> %v", x, start, end)
	}
}
