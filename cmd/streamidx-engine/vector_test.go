package main

import (
	"strings"
	"testing"
)

// TestLookupOnAnUnimplementedIndexTypeScansTheTable: a VECTOR index is not
// implemented; lookup ignores it and answers from the table, as the spec
// requires of such a reader, and --explain says so.
func TestLookupOnAnUnimplementedIndexTypeScansTheTable(t *testing.T) {
	c, _, _, _ := brokenIndex(t, `"type":"SCALAR"`, `"type":"VECTOR"`)
	code, out, errs := c.run("lookup", "--table", "test.orders", "--index", "pk", "--where", "id = 55", "--explain")
	if code != exitOK {
		t.Fatalf("lookup: exit %d\n%s%s", code, out, errs)
	}
	for _, want := range []string{"(1 row)", "table scan of table snapshot", `index type "VECTOR" is not implemented`, "data files scanned 2"} {
		if !strings.Contains(out, want) {
			t.Errorf("lookup --explain should say %q:\n%s", want, out)
		}
	}
	rows, x := jsonRows(t, c.ok("lookup", "--table", "test.orders", "--index", "pk", "--where", "id = 55", "--json", "--explain"))
	if len(rows) != 1 || rows[0]["id"] != float64(55) || rows[0]["name"] == nil || x == nil || x.Explain.Plan.TableScan == "" {
		t.Errorf("lookup --json: rows %v, explain %+v", rows, x)
	}
}
