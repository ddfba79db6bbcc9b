package procs

import (
	"runtime"
	"testing"
)

// reset puts GOMAXPROCS and Work back as they were when the test ends.
func reset(t *testing.T) {
	gomaxprocs := runtime.GOMAXPROCS(0)
	t.Cleanup(func() {
		runtime.GOMAXPROCS(gomaxprocs)
		work.Store(0)
	})
	work.Store(0)
}

func TestReserveForServingDoublesGOMAXPROCSAndKeepsWork(t *testing.T) {
	t.Setenv("GOMAXPROCS", "") // not the operator's choice
	reset(t)
	runtime.GOMAXPROCS(3)
	if got := Work(); got != 3 {
		t.Fatalf("Work before: %d, want GOMAXPROCS (3)", got)
	}
	before, after := ReserveForServing()
	if before != 3 || after != 6 || runtime.GOMAXPROCS(0) != 6 {
		t.Fatalf("ReserveForServing: %d -> %d, GOMAXPROCS now %d; want 3 -> 6", before, after, runtime.GOMAXPROCS(0))
	}
	if got := Work(); got != 3 {
		t.Fatalf("Work after: %d, want the former GOMAXPROCS (3): the work must not take the Ps kept for serving", got)
	}
	// Once is enough: a second call (a process that both serves and runs)
	// does not double again.
	if before, after := ReserveForServing(); before != 6 || after != 6 || runtime.GOMAXPROCS(0) != 6 || Work() != 3 {
		t.Fatalf("second ReserveForServing: %d -> %d, GOMAXPROCS %d, Work %d; want nothing changed", before, after, runtime.GOMAXPROCS(0), Work())
	}
}

func TestReserveForServingLeavesTheOperatorsGOMAXPROCS(t *testing.T) {
	reset(t)
	runtime.GOMAXPROCS(2)
	t.Setenv("GOMAXPROCS", "2")
	if before, after := ReserveForServing(); before != 2 || after != 2 || runtime.GOMAXPROCS(0) != 2 || Work() != 2 {
		t.Fatalf("with GOMAXPROCS set: %d -> %d, GOMAXPROCS %d, Work %d; want nothing changed", before, after, runtime.GOMAXPROCS(0), Work())
	}
}
