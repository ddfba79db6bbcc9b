package main

import (
	"context"
	"runtime"
	"syscall"
	"testing"
	"time"
)

// A child's peak RSS in the bench's figures is its own: a parent that holds
// far more memory than the child ever uses does not show in it (wait4's
// ru_maxrss would report at least the parent's).
func TestChildPeakRSSIsTheChildsOwn(t *testing.T) {
	t.Setenv("STREAMIDX_TEST_AS_COMMAND", "1") // the test binary acts as streamidx
	const held = 512 << 20
	ballast := make([]byte, held)
	for i := 0; i < len(ballast); i += 4096 {
		ballast[i] = 1 // resident, not just reserved
	}
	b := &bench{g: &globals{}}
	r, err := b.child(context.Background(), t.TempDir(), "gen-table", "--table", "bench.orders", "--rows", "1000")
	runtime.KeepAlive(ballast)
	if err != nil {
		t.Fatal(err)
	}
	if r.maxRSS <= 0 || r.maxRSS >= held/2 {
		t.Fatalf("peak RSS of streamidx gen-table reported as %d MiB with the parent holding %d MiB: want the child's own, above 0 and well under the parent's", r.maxRSS>>20, held>>20)
	}
	t.Logf("streamidx gen-table: peak RSS %d MiB", r.maxRSS>>20)
}

// procCPU reads a process's CPU time as getrusage counts it: after some
// CPU is burned (until getrusage says 200 ms more), the two agree on how
// much, within a few ticks of /proc's 10 ms unit.
func TestProcCPUReadsTheProcessCPUTime(t *testing.T) {
	rusage := func() time.Duration {
		var ru syscall.Rusage
		if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
			t.Fatal(err)
		}
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	before, err := procCPU("/proc/self/stat")
	if err != nil {
		t.Fatal(err)
	}
	ruBefore := rusage()
	x := uint64(1)
	for rusage()-ruBefore < 200*time.Millisecond {
		for range 1 << 16 {
			x = x*6364136223846793005 + 1442695040888963407
		}
	}
	after, err := procCPU("/proc/self/stat")
	if err != nil {
		t.Fatal(err)
	}
	burned := rusage() - ruBefore
	if got := after - before; (got - burned).Abs() > 50*time.Millisecond {
		t.Errorf("procCPU counted %s of CPU where getrusage counted %s (%d)", got, burned, x)
	}
	if _, err := procCPU("/proc/self/status"); err == nil {
		t.Error("a status file read as a stat file")
	}
}
