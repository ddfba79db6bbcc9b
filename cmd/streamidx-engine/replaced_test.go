package main

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/apache/iceberg-go/table"

	"github.com/streamidx/streamidx/format"
	"github.com/streamidx/streamidx/indexcatalog"
	"github.com/streamidx/streamidx/internal/testtables"
	"github.com/streamidx/streamidx/internal/verify"
	"github.com/streamidx/streamidx/planner"
	"github.com/streamidx/streamidx/planner/reconcile"
	"github.com/streamidx/streamidx/staging"
	"github.com/streamidx/streamidx/updater"
)

// warehouseFiles lists every file under a warehouse but the catalog
// database, which readers touch too.
func warehouseFiles(t *testing.T, warehouse string) []string {
	t.Helper()
	var out []string
	root := strings.TrimPrefix(warehouse, "file://")
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && !strings.HasPrefix(d.Name(), "catalog.db") {
			out = append(out, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	return out
}

// openIndexCatalog opens the SQL index catalog of a test warehouse.
func openIndexCatalog(t *testing.T, warehouse string) indexcatalog.Catalog {
	t.Helper()
	ic := testtables.IndexCatalog(t, warehouse)
	return ic
}

func TestIndexOfAReplacedTableIsRefused(t *testing.T) {
	ctx := context.Background()
	cat, warehouse := testtables.NewCatalog(t)
	ident := table.Identifier{testtables.Namespace, "orders"}
	old := testtables.CreateTable(t, cat, testtables.TableConfig{Name: "orders", Schema: testtables.OrdersSchema, FormatVersion: 2})
	testtables.Append(t, old, testtables.OrderRows(0, 50, 0)...)
	c := newCLI(t, warehouse, "")
	createIndexes(t, c, "test.orders")
	c.ok("build", "--table", "test.orders", "--index", "pk")

	// The same name, another table: same schema, other rows.
	if err := cat.DropTable(ctx, ident); err != nil {
		t.Fatal(err)
	}
	tbl := testtables.CreateTable(t, cat, testtables.TableConfig{Name: "orders", Schema: testtables.OrdersSchema, FormatVersion: 2})
	tbl, _ = testtables.Append(t, tbl, testtables.OrderRows(100, 130, 1)...)
	oldUUID, newUUID := old.Metadata().TableUUID().String(), tbl.Metadata().TableUUID().String()

	ic := openIndexCatalog(t, warehouse)
	md, metaLoc, err := ic.Load(ctx, ident, "pk")
	if err != nil {
		t.Fatal(err)
	}
	before := warehouseFiles(t, warehouse)
	stageDir := t.TempDir()
	for _, args := range [][]string{
		{"lookup", "--table", "test.orders", "--index", "pk", "--where", "id = 110"},
		{"verify", "--table", "test.orders", "--index", "pk"},
		{"build", "--table", "test.orders", "--index", "pk"},
		{"inspect", "--table", "test.orders", "--index", "pk"},
		{"run", "--once", "--table", "test.orders", "--index", "pk", "--stage-dir", stageDir},
	} {
		code, out, errs := c.run(args...)
		if code != exitError {
			t.Errorf("%s on an index of a replaced table: exit %d, want %d\n%s%s", args[0], code, exitError, out, errs)
			continue
		}
		for _, want := range []string{oldUUID, newUUID, "test.orders", "dropped and re-created", "drop the index and create it again"} {
			if !strings.Contains(errs, want) {
				t.Errorf("%s: the message should say %q:\n%s", args[0], want, errs)
			}
		}
	}
	if after := warehouseFiles(t, warehouse); !slices.Equal(before, after) {
		t.Errorf("refused commands wrote files:\nbefore %q\nafter  %q", before, after)
	}
	if _, loc, err := ic.Load(ctx, ident, "pk"); err != nil || loc != metaLoc {
		t.Errorf("the index moved: %s %v, want %s", loc, err, metaLoc)
	}

	// The Go APIs refuse the same pair with the sentinel.
	if _, err := planner.New(planner.Options{}).Lookup(ctx, reconcile.Table(tbl), md, planner.Query{Where: "id = 110"}); !errors.Is(err, format.ErrTableReplaced) {
		t.Errorf("planner.Lookup: %v, want ErrTableReplaced", err)
	}
	if _, err := verify.Verify(ctx, tbl, md, md.CurrentSnapshot(), verify.Options{}); !errors.Is(err, format.ErrTableReplaced) {
		t.Errorf("verify.Verify: %v, want ErrTableReplaced", err)
	}
	store, err := staging.OpenStore(t.TempDir(), staging.StoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	if st, err := updater.New(cat, ic, store, ident, "pk", updater.Options{}).Step(ctx, nil); st.Published != nil || !errors.Is(err, format.ErrTableReplaced) {
		t.Errorf("updater.Step: published %+v, %v; want none and ErrTableReplaced", st.Published, err)
	}

	// What the message says to do works.
	c.ok("drop", "--table", "test.orders", "--index", "pk")
	path := filepath.Join(t.TempDir(), "pk.json")
	if err := os.WriteFile(path, []byte(definitions["pk"]), 0o644); err != nil {
		t.Fatal(err)
	}
	c.ok("create", "--table", "test.orders", "--def", path)
	c.ok("build", "--table", "test.orders", "--index", "pk")
	c.ok("verify", "--table", "test.orders", "--index", "pk")
	if out := c.ok("lookup", "--table", "test.orders", "--index", "pk", "--where", "id = 110"); !strings.Contains(out, "(1 row)") {
		t.Errorf("lookup on the new index:\n%s", out)
	}
}
