package main

import (
	"context"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/streamidx/streamidx/flush"
	"github.com/streamidx/streamidx/format"
	"github.com/streamidx/streamidx/internal/testtables"
)

// brokenIndex builds pk on a small table, then rewrites text in its
// current metadata file in place. It returns the CLI, the file and what
// the warehouse held afterwards.
func brokenIndex(t *testing.T, old, new string) (c *cli, metaLoc string, files []string, warehouse string) {
	t.Helper()
	warehouse, tbl := ordersTable(t, 50)
	c = newCLI(t, warehouse, "")
	createIndexes(t, c, "test.orders")
	c.ok("build", "--table", "test.orders", "--index", "pk")
	testtables.Append(t, tbl, testtables.OrderRows(50, 60, 0)...) // something for build and run to do
	_, metaLoc, err := openIndexCatalog(t, warehouse).Load(context.Background(), []string{"test", "orders"}, "pk")
	if err != nil {
		t.Fatal(err)
	}
	path := strings.TrimPrefix(metaLoc, "file://")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), old) {
		t.Fatalf("%s does not hold %s", path, old)
	}
	if err := os.WriteFile(path, []byte(strings.Replace(string(data), old, new, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	return c, metaLoc, warehouseFiles(t, warehouse), warehouse
}

// refusedEverywhere runs every command that reads or updates the index and
// checks that each fails with a message holding want, and that nothing was
// written.
func refusedEverywhere(t *testing.T, c *cli, metaLoc string, files []string, warehouse string, want ...string) {
	t.Helper()
	data, err := os.ReadFile(strings.TrimPrefix(metaLoc, "file://"))
	if err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"lookup", "--table", "test.orders", "--index", "pk", "--where", "id = 3"},
		{"verify", "--table", "test.orders", "--index", "pk"},
		{"build", "--table", "test.orders", "--index", "pk"},
		{"inspect", "--table", "test.orders", "--index", "pk"},
		{"list", "--table", "test.orders"},
		{"run", "--once", "--table", "test.orders", "--index", "pk", "--stage-dir", t.TempDir()},
	} {
		code, out, errs := c.run(args...)
		wantCode := exitError
		if args[0] == "list" {
			wantCode = exitDifferent // lists the others and reports the broken one
		}
		if code != wantCode {
			t.Errorf("%s: exit %d, want %d\n%s%s", args[0], code, wantCode, out, errs)
			continue
		}
		for _, w := range append([]string{metaLoc}, want...) {
			if !strings.Contains(errs, w) {
				t.Errorf("%s: the message should say %q:\n%s", args[0], w, errs)
			}
		}
	}
	if after := warehouseFiles(t, warehouse); !slices.Equal(files, after) {
		t.Errorf("refused commands wrote files:\nbefore %q\nafter  %q", files, after)
	}
	if now, err := os.ReadFile(strings.TrimPrefix(metaLoc, "file://")); err != nil || string(now) != string(data) {
		t.Errorf("the refused metadata file changed: %v", err)
	}
}

func TestNewerIndexFormatIsRefusedEverywhere(t *testing.T) {
	c, metaLoc, files, warehouse := brokenIndex(t, `"format-version":1`, `"format-version":2`)
	refusedEverywhere(t, c, metaLoc, files, warehouse, "format-version 2", "upgrade streamidx")

	// Expiry, which rewrites the metadata without a table, refuses too.
	ic := openIndexCatalog(t, warehouse)
	_, err := flush.Expire(context.Background(), ic, []string{"test", "orders"}, "pk",
		func(*format.Metadata) (*format.IndexSchema, error) { return nil, errors.New("not reached") },
		flush.ExpireOptions{RetainLast: 1})
	if !errors.Is(err, format.ErrUnknownFormatVersion) {
		t.Errorf("expire: %v, want ErrUnknownFormatVersion", err)
	}
	if after := warehouseFiles(t, warehouse); !slices.Equal(files, after) {
		t.Errorf("expire wrote or deleted files:\nbefore %q\nafter  %q", files, after)
	}
}

func TestInvalidIndexMetadataIsACorruption(t *testing.T) {
	// A cluster-spec that repeats a field breaks a rule of the spec.
	c, metaLoc, files, warehouse := brokenIndex(t, `"cluster-spec":[1]`, `"cluster-spec":[1,1]`)
	refusedEverywhere(t, c, metaLoc, files, warehouse, "corrupt index metadata file", "cluster-spec must not repeat a field")
	_, _, err := openIndexCatalog(t, warehouse).Load(context.Background(), []string{"test", "orders"}, "pk")
	if !format.IsCorruption(err) || errors.Is(err, format.ErrUnknownFormatVersion) {
		t.Errorf("load: %v, want a corruption", err)
	}
}
