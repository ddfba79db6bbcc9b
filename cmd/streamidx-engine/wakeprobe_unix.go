//go:build unix

package main

import (
	"time"

	"golang.org/x/sys/unix"
)

// sleepThread sleeps d in the kernel, holding the calling thread.
func sleepThread(d time.Duration) {
	ts := unix.NsecToTimespec(d.Nanoseconds())
	_ = unix.Nanosleep(&ts, nil)
}
