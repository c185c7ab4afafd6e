package testkit

import (
	"syscall"
	"testing"
	"time"
)

// CPUTime returns the CPU time the process has used, user and system.
func CPUTime(tb testing.TB) time.Duration {
	tb.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatalf("getrusage: %v", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// ReportCPU reports the CPU time the process spent per iteration of b
// since start, a CPUTime, as cpu-ns/op.
func ReportCPU(b *testing.B, start time.Duration) {
	b.Helper()
	b.ReportMetric(float64(CPUTime(b)-start)/float64(b.N), "cpu-ns/op")
}
