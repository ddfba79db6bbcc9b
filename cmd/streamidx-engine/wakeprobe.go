package main

import (
	"runtime"
	"time"
)

// wakeReport is what a wake probe saw: how often a thread that only sleeps
// woke late, and by how much at worst.
type wakeReport struct {
	Wakeups int
	Late    int           // wakeups later than wakeLate
	Worst   time.Duration // the latest wakeup's delay past its due time
}

// wakeLate is the delay past its due time from which a probe's wakeup
// counts as late: above what the scheduler of an idle machine takes here.
const wakeLate = 4 * time.Millisecond

// runWakeProbe sleeps 1 ms at a time on an OS thread of its own until stop
// is closed, sleeping in the kernel (nanosleep) rather than on Go's timers
// where the system allows, so that what it measures is how long the
// machine kept a runnable thread waiting: the pauses that no program on it
// escapes, beside which a service's latency is to be read.
func runWakeProbe(stop <-chan struct{}) wakeReport {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var r wakeReport
	for {
		select {
		case <-stop:
			return r
		default:
		}
		began := time.Now()
		sleepThread(time.Millisecond)
		late := time.Since(began) - time.Millisecond
		r.Wakeups++
		if late > wakeLate {
			r.Late++
		}
		r.Worst = max(r.Worst, late)
	}
}
