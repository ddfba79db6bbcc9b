//go:build !unix

package main

import "time"

// sleepThread sleeps d; without nanosleep, on Go's timers.
func sleepThread(d time.Duration) { time.Sleep(d) }
