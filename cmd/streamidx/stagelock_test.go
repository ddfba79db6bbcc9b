package main

import (
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/streamidx/streamidx/internal/testtables"
)

// TestSecondDaemonOnAStagingDirectory: a second daemon given the staging
// directory of a running one is refused with a message saying another
// process holds it, and leaves it alone.
func TestSecondDaemonOnAStagingDirectory(t *testing.T) {
	cat, warehouse := testtables.NewCatalog(t)
	tbl := testtables.CreateTable(t, cat, testtables.TableConfig{Name: "orders", Schema: testtables.OrdersSchema, FormatVersion: 2})
	testtables.Append(t, tbl, testtables.OrderRows(0, 20, 0)...)
	c := newCLI(t, warehouse, "")
	createIndexes(t, c, "test.orders")
	stageDir := t.TempDir()
	first := startDaemonProcess(t, c, stageDir)
	defer func() { _ = first.Process.Signal(syscall.SIGKILL); _ = first.Wait() }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		code, out, errs := c.run("run", "--once", "--table", "test.orders", "--index", "pk", "--stage-dir", stageDir)
		if code != exitOK {
			if !strings.Contains(errs, "locked by another process") || !strings.Contains(errs, stageDir) {
				t.Fatalf("second daemon: exit %d, want a message that another process holds %s:\n%s%s", code, stageDir, out, errs)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the second daemon was never refused")
		}
		time.Sleep(50 * time.Millisecond) // the first one has not opened the directory yet
	}
}
