package main

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/streamidx/streamidx/internal/testtables"
)

// killedSpill makes, under dir, what a build killed with SIGKILL leaves:
// a spill directory with a run and an unlocked lock file, an hour old.
func killedSpill(t *testing.T, dir string) string {
	t.Helper()
	d := filepath.Join(dir, "streamidx-sort-killed")
	if err := os.MkdirAll(d, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"LOCK", "run-000000"} {
		if err := os.WriteFile(filepath.Join(d, f), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	old := time.Now().Add(-time.Hour)
	if err := os.Chtimes(d, old, old); err != nil {
		t.Fatal(err)
	}
	return d
}

// TestBuildRemovesStaleSpillsAtStart: a build removes the spill directory
// a killed build left in build.spill-dir, though its own sort never
// spills (a small table).
func TestBuildRemovesStaleSpillsAtStart(t *testing.T) {
	cat, warehouse := testtables.NewCatalog(t)
	tbl := testtables.CreateTable(t, cat, testtables.TableConfig{Name: "orders", Schema: testtables.OrdersSchema, FormatVersion: 2, RowGroupRows: 16})
	testtables.Append(t, tbl, testtables.OrderRows(0, 40, 0)...)
	spill := t.TempDir()
	dead := killedSpill(t, spill)
	c := newCLI(t, warehouse, "  spill-dir: "+spill+"\n")
	createIndexes(t, c, "test.orders")
	c.ok("build", "--table", "test.orders", "--index", "pk")
	if _, err := os.Stat(dead); !os.IsNotExist(err) {
		t.Fatalf("the killed build's spill directory is still there after a build: %v", err)
	}
}
