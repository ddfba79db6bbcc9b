package main

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

// TestMain lets the test binary act as the streamidx command, so the crash
// and two-daemon tests can run the daemon as a real process and kill it
// with SIGKILL; otherwise it runs the tests and checks that none leaves a
// goroutine behind.
func TestMain(m *testing.M) {
	if os.Getenv("STREAMIDX_TEST_AS_COMMAND") == "1" {
		os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
	}
	goleak.VerifyTestMain(m)
}
