package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"

	"github.com/streamidx/streamidx/internal/testtables"
	"github.com/streamidx/streamidx/rewrite"
)

// cdcCommit makes commit c of a CDC-shaped history: mostly upserts (an
// equality delete on id and the new versions in one snapshot), now and then
// an equality delete on customer_id, a deletion vector or a position delete.
func cdcCommit(t *testing.T, tbl *table.Table, first iceberg.DataFile, c int) *table.Table {
	t.Helper()
	switch {
	case c%10 == 7:
		return testtables.AddEqualityDeletes(t, tbl, []int{2}, []any{int64(c % 7)})
	case c%10 == 4 && tbl.Metadata().Version() >= 3:
		tbl, _ = testtables.AddDV(t, tbl, first, int64(c))
		return tbl
	case c%10 == 4:
		tbl, _ = testtables.AddPositionDeletes(t, tbl, testtables.Positions{File: first, Pos: []int64{int64(c)}})
		return tbl
	}
	ids := []int64{int64(c), int64(c * 13 % 150), int64(150 + c)}
	var keys, rows [][]any
	for _, id := range ids {
		keys = append(keys, []any{id})
		rows = append(rows, testtables.OrderRow(int(id), c))
	}
	del := testtables.WriteEqualityDeleteFile(t, tbl, 0, nil, []int{1}, keys...)
	tbl, _ = testtables.AppendAndDelete(t, tbl, []iceberg.DataFile{del}, rows...)
	return tbl
}

func TestRunRewriteDeletesKeepsEveryIndexExact(t *testing.T) {
	for _, fv := range []int{2, 3} {
		t.Run(fmt.Sprintf("v%d", fv), func(t *testing.T) {
			cat, warehouse := testtables.NewCatalog(t)
			tbl := testtables.CreateTable(t, cat, testtables.TableConfig{Name: "orders", Schema: testtables.OrdersSchema, FormatVersion: fv, RowGroupRows: 16})
			tbl, files := testtables.Append(t, tbl, testtables.OrderRows(0, 150, 0)...)
			c := newCLI(t, warehouse, "")
			created := createIndexes(t, c, "test.orders")
			args := []string{"run", "--once", "--rewrite-deletes", "--stage-dir", t.TempDir(), "--http", "none"}
			for _, n := range created {
				args = append(args, "--table", "test.orders", "--index", n)
			}
			for commit := 1; commit <= 30; commit++ {
				tbl = cdcCommit(t, tbl, files[0], commit)
				if commit%10 == 0 {
					c.ok(args...)
					tbl = reload(t, cat, tbl)
					if live := testtables.LiveFiles(t, tbl, iceberg.EntryContentEqDeletes); len(live) != 0 {
						t.Fatalf("after commit %d: run --rewrite-deletes left %d equality delete files", commit, len(live))
					}
				}
			}
			for _, n := range created {
				if code, out, errs := c.run("verify", "--table", "test.orders", "--index", n); code != 0 {
					t.Errorf("verify %s after run --rewrite-deletes: exit %d\n%s%s", n, code, out, errs)
				}
			}
		})
	}
}

func TestRewriteDeletesCommand(t *testing.T) {
	cat, warehouse := testtables.NewCatalog(t)
	tbl := testtables.CreateTable(t, cat, testtables.TableConfig{Name: "orders", Schema: testtables.OrdersSchema, FormatVersion: 3, RowGroupRows: 16})
	tbl, files := testtables.Append(t, tbl, testtables.OrderRows(0, 150, 0)...)
	c := newCLI(t, warehouse, "")
	createIndexes(t, c, "test.orders")
	c.ok("build", "--table", "test.orders", "--index", "pk")
	for commit := 1; commit <= 6; commit++ {
		tbl = cdcCommit(t, tbl, files[0], commit)
	}
	eqFiles := len(testtables.LiveFiles(t, tbl, iceberg.EntryContentEqDeletes))

	// The index lags 6 snapshots: --no-align refuses and names the lag.
	code, _, errs := c.run("rewrite-deletes", "--table", "test.orders", "--index", "pk", "--no-align")
	if code != exitError || !strings.Contains(errs, "6 snapshots ahead") {
		t.Fatalf("rewrite-deletes --no-align through a lagging index: exit %d\n%s", code, errs)
	}
	code, _, errs = c.run("rewrite-deletes", "--table", "test.orders", "--index", "by_name")
	if code != exitError || !strings.Contains(errs, "no index with _file and _pos") {
		t.Fatalf("rewrite-deletes through an index without locations: exit %d\n%s", code, errs)
	}

	var dry rewrite.Result
	if err := json.Unmarshal([]byte(c.ok("rewrite-deletes", "--table", "test.orders", "--dry-run", "--json")), &dry); err != nil {
		t.Fatal(err)
	}
	if !dry.DryRun || dry.CommittedSnapshotID != 0 || len(dry.EqualityFiles) != eqFiles || dry.PositionsAdded == 0 || len(dry.DataFiles) == 0 || dry.IndexEntriesRead == 0 {
		t.Fatalf("dry run: %+v", dry)
	}
	if n := len(testtables.LiveFiles(t, reload(t, cat, tbl), iceberg.EntryContentEqDeletes)); n != eqFiles {
		t.Fatalf("the dry run changed the table: %d equality delete files, was %d", n, eqFiles)
	}
	text := c.ok("rewrite-deletes", "--table", "test.orders", "--dry-run")
	for _, want := range []string{"would rewrite", "rows resolved", "positions added", "index entries read", files[0].FilePath()} {
		if !strings.Contains(text, want) {
			t.Errorf("dry run output lacks %q:\n%s", want, text)
		}
	}

	out := c.ok("rewrite-deletes", "--table", "test.orders")
	if !strings.Contains(out, fmt.Sprintf("%d equality delete files and", eqFiles)) {
		t.Fatalf("rewrite-deletes: %s", out)
	}
	if n := len(testtables.LiveFiles(t, reload(t, cat, tbl), iceberg.EntryContentEqDeletes)); n != 0 {
		t.Fatalf("%d equality delete files are live after rewrite-deletes", n)
	}
	if code, out, errs := c.run("verify", "--table", "test.orders", "--index", "pk"); code != 0 {
		t.Fatalf("verify pk: exit %d\n%s%s", code, out, errs)
	}
	if out := c.ok("rewrite-deletes", "--table", "test.orders"); !strings.Contains(out, "no live equality delete files") {
		t.Fatalf("second rewrite-deletes: %s", out)
	}
}

func reload(t *testing.T, cat catalog.Catalog, tbl *table.Table) *table.Table {
	t.Helper()
	out, err := cat.LoadTable(context.Background(), tbl.Identifier())
	if err != nil {
		t.Fatal(err)
	}
	return out
}
