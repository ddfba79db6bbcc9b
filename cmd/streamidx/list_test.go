package main

import (
	"strings"
	"testing"
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
