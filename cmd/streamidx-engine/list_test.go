package main

import (
	"slices"
	"strings"
	"testing"

	"github.com/streamidx/streamidx/internal/testtables"
)

// TestListReportsABrokenIndexAndListsTheOthers: one index whose current
// metadata file is corrupt does not hide the others; list names it with
// the reason and exits 1. A table that does not exist is an error (exit 2).
func TestListReportsABrokenIndexAndListsTheOthers(t *testing.T) {
	c, metaLoc, _, _ := brokenIndex(t, `"cluster-spec":[1]`, `"cluster-spec":[1,1]`)
	code, out, errs := c.run("list", "--table", "test.orders")
	if code != exitDifferent {
		t.Errorf("list with a broken index: exit %d, want %d\n%s%s", code, exitDifferent, out, errs)
	}
	for name := range definitions {
		if !strings.Contains(out, name) {
			t.Errorf("list does not show %s:\n%s", name, out)
		}
	}
	for _, want := range []string{"pk", metaLoc, "cluster-spec must not repeat a field"} {
		if !strings.Contains(errs, want) {
			t.Errorf("list should report %q about the broken index:\n%s", want, errs)
		}
	}
	if !strings.Contains(out, "BROKEN") {
		t.Errorf("the broken index's row should say so:\n%s", out)
	}

	code, out, errs = c.run("list", "--table", "test.nope")
	if code != exitError || !strings.Contains(errs, "test.nope") {
		t.Errorf("list of a table that does not exist: exit %d, want %d naming it\n%s%s", code, exitError, out, errs)
	}
}

// TestListSaysHowFarBehind: list's BEHIND column counts the table's
// commits since an index's snapshot: - before the first build, 0 when
// current, 2 after two commits, 0 again once the index catches up.
func TestListSaysHowFarBehind(t *testing.T) {
	warehouse, tbl := ordersTable(t, 20)
	c := newCLI(t, warehouse, "")
	createIndex(t, c, "pk")
	behind := func() string {
		t.Helper()
		out := c.ok("list", "--table", "test.orders")
		lines := strings.Split(strings.TrimSpace(out), "\n")
		header, row := strings.Fields(lines[0]), strings.Fields(lines[1])
		col := slices.Index(header, "BEHIND") - 1 // "SOURCE SNAPSHOT" is two words of the header, one of a row
		if col < 0 || len(row) <= col {
			t.Fatalf("no BEHIND column:\n%s", out)
		}
		return row[col]
	}
	if got := behind(); got != "-" {
		t.Errorf("before the first build: %s, want -", got)
	}
	c.ok("build", "--table", "test.orders", "--index", "pk")
	if got := behind(); got != "0" {
		t.Errorf("after the build: %s, want 0", got)
	}
	tbl, _ = testtables.Append(t, tbl, testtables.OrderRows(20, 30, 0)...)
	testtables.Append(t, tbl, testtables.OrderRows(30, 40, 0)...)
	if got := behind(); got != "2" {
		t.Errorf("two commits later: %s, want 2", got)
	}
	c.ok("run", "--once", "--table", "test.orders", "--index", "pk", "--stage-dir", t.TempDir())
	if got := behind(); got != "0" {
		t.Errorf("after run --once: %s, want 0", got)
	}
}

// TestDropRemovesABrokenIndex: an index whose current metadata file is
// corrupt (not even JSON) is dropped all the same, the others stay, and a
// new index of that name can then be created and built.
func TestDropRemovesABrokenIndex(t *testing.T) {
	c, metaLoc, _, _ := brokenIndex(t, `"format-version"`, `"format-version`)
	if code, out, errs := c.run("verify", "--table", "test.orders", "--index", "pk"); code == 0 || !strings.Contains(errs, metaLoc) {
		t.Fatalf("verify of the broken index: exit %d, want an error naming %s\n%s%s", code, metaLoc, out, errs)
	}
	if out := c.ok("drop", "--table", "test.orders", "--index", "pk"); !strings.Contains(out, "dropped index pk") {
		t.Errorf("drop: %s", out)
	}
	out := c.ok("list", "--table", "test.orders")
	for name := range definitions {
		if listed := strings.Contains(out, name+" ") || strings.Contains(out, name+"\n"); listed != (name != "pk") {
			t.Errorf("after dropping pk, list shows %s: %t\n%s", name, listed, out)
		}
	}
	createIndex(t, c, "pk")
	c.ok("build", "--table", "test.orders", "--index", "pk")
	if out := c.ok("verify", "--table", "test.orders", "--index", "pk"); !strings.Contains(out, "exact") {
		t.Errorf("verify of the re-created index: %s", out)
	}
}
