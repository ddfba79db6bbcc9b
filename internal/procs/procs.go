// Package procs decides how many goroutines streamidx's CPU-bound work
// (builds, merges, the planner's wide reads, decoding change events) runs on
// at once, apart from GOMAXPROCS, the number of goroutines Go runs at once.
//
// A process that answers lookups while it updates indexes (`streamidx run
// --serve`) runs with more Ps than its work uses: Go's scheduler has no
// priorities, and while an update's goroutines hold every P, a lookup whose
// request has arrived waits for one of them to block or be preempted (up to
// 10 ms each), and the network is not even polled until one does. With Ps
// to spare, an idle P waits on the network, picks the request up at once
// and runs it on a thread of its own, which the kernel's scheduler shares
// the CPUs with the update's threads, favouring the one that ran least.
package procs

import (
	"os"
	"runtime"
	"sync/atomic"
)

var work atomic.Int64

// Work is how many goroutines CPU-bound work runs on at once: GOMAXPROCS as
// it was before ReserveForServing raised it, or GOMAXPROCS.
func Work() int {
	if n := work.Load(); n > 0 {
		return int(n)
	}
	return max(runtime.GOMAXPROCS(0), 1)
}

// ReserveForServing doubles GOMAXPROCS, keeping Work at its former value,
// so that the Ps beyond Work are free for the goroutines that answer
// requests. It does nothing when the GOMAXPROCS environment variable is set
// (the operator's choice stands) or when it has already run. It returns
// GOMAXPROCS before and after.
func ReserveForServing() (before, after int) {
	before = runtime.GOMAXPROCS(0)
	if os.Getenv("GOMAXPROCS") != "" || !work.CompareAndSwap(0, int64(before)) {
		return before, before
	}
	runtime.GOMAXPROCS(2 * before)
	return before, 2 * before
}
