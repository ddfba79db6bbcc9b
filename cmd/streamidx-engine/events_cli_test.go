package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCreateRefusesEventsWithLocation: create refuses source: events for an
// index that stores row locations, says why, and registers nothing; the
// same index fed by the table is created.
func TestCreateRefusesEventsWithLocation(t *testing.T) {
	warehouse, _ := ordersTable(t, 10)
	c := newCLI(t, warehouse, "")
	path := filepath.Join(t.TempDir(), "pk.yaml")
	def := "name: pk\nsource: events\nidentity: [id]\nmaterialized: [_file, _pos]\ncluster: [id]\n"
	if err := os.WriteFile(path, []byte(def), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errs := c.run("create", "--table", "test.orders", "--def", path)
	if code == 0 || !strings.Contains(errs, "source: events cannot feed _file") || !strings.Contains(errs, "not where the row lives") {
		t.Fatalf("create: exit %d\n%s%s", code, out, errs)
	}
	if list := c.ok("list", "--table", "test.orders"); strings.Contains(list, "pk") {
		t.Errorf("the refused index was registered:\n%s", list)
	}
	if err := os.WriteFile(path, []byte(strings.Replace(def, "source: events", "source: table", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	c.ok("create", "--table", "test.orders", "--def", path)
}
