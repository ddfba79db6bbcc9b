package main

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestSecondDaemonOnAStagingDirectory: a second daemon given the staging
// directory of a running one is refused with a message saying another
// process holds it, and leaves it alone.
func TestSecondDaemonOnAStagingDirectory(t *testing.T) {
	warehouse, _ := ordersTable(t, 20)
	c := newCLI(t, warehouse, "")
	createIndexes(t, c, "test.orders")
	stageDir := t.TempDir()
	first := startDaemonProcess(t, c, stageDir)
	defer func() { _ = first.Process.Signal(syscall.SIGKILL); _ = first.Wait() }()
	// Wait for the first daemon to hold the directory, without taking the
	// lock (which would make it fail instead).
	deadline := time.Now().Add(60 * time.Second)
	for !lockedByAnotherProcess(t, filepath.Join(stageDir, "STREAMIDX-LOCK")) {
		if time.Now().After(deadline) {
			t.Fatal("the first daemon never locked its staging directory")
		}
		time.Sleep(20 * time.Millisecond)
	}
	code, out, errs := c.run("run", "--once", "--table", "test.orders", "--index", "pk", "--stage-dir", stageDir)
	if code != exitError || !strings.Contains(errs, "locked by another process") || !strings.Contains(errs, stageDir) {
		t.Fatalf("second daemon: exit %d, want a message that another process holds %s:\n%s%s", code, stageDir, out, errs)
	}
}

// lockedByAnotherProcess asks, with F_GETLK, whether another process holds
// a write lock on the file.
func lockedByAnotherProcess(t *testing.T, path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	lk := syscall.Flock_t{Type: syscall.F_WRLCK, Whence: 0}
	if err := syscall.FcntlFlock(f.Fd(), syscall.F_GETLK, &lk); err != nil {
		t.Fatal(err)
	}
	return lk.Type != syscall.F_UNLCK
}
