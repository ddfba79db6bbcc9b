package main

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"

	"github.com/streamidx/streamidx/internal/testtables"
)

func TestGenTableRefusesImpossibleUpserts(t *testing.T) {
	cat, warehouse := testtables.NewCatalog(t)
	c := newCLI(t, warehouse, "")
	for _, args := range [][]string{
		{"--rows", "0", "--upsert", "5"},
		{"--rows", "100", "--upsert", "-1"},
	} {
		code, out, errs := c.run(append([]string{"gen-table", "--table", "test.orders"}, args...)...)
		if code != exitError || !strings.Contains(errs, "--upsert") {
			t.Errorf("gen-table %s: exit %d, want %d with a message about --upsert\n%s%s", strings.Join(args, " "), code, exitError, out, errs)
		}
	}
	// Refused before anything was written: not even the table exists.
	if _, err := cat.LoadTable(context.Background(), table.Identifier{testtables.Namespace, "orders"}); !errors.Is(err, catalog.ErrNoSuchTable) {
		t.Errorf("a refused gen-table left a table behind: %v", err)
	}
}

// gen-table --every streams upsert commits: each a new snapshot with an
// equality delete file, the last version of every order live once.
func TestGenTableStreamsUpserts(t *testing.T) {
	cat, warehouse := testtables.NewCatalog(t)
	c := newCLI(t, warehouse, "")
	if code, out, errs := c.run("gen-table", "--table", "test.orders", "--rows", "500"); code != exitOK {
		t.Fatalf("gen-table: exit %d\n%s%s", code, out, errs)
	}
	code, out, errs := c.run("gen-table", "--table", "test.orders", "--rows", "500", "--upsert", "20", "--pattern", "tail", "--every", "10ms", "--commits", "3")
	if code != exitOK || strings.Count(out, "upserted 20 orders (tail)") != 3 || !strings.Contains(out, "3 commits in") {
		t.Fatalf("gen-table --every: exit %d, want 3 commits of 20 orders\n%s%s", code, out, errs)
	}
	tbl, err := cat.LoadTable(context.Background(), table.Identifier{testtables.Namespace, "orders"})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(tbl.Metadata().Snapshots()); n != 4 {
		t.Errorf("%d snapshots, want the append and 3 upserts", n)
	}
	for _, s := range tbl.Metadata().Snapshots()[1:] {
		if s.Summary == nil || s.Summary.Properties["added-equality-delete-files"] != "1" {
			t.Errorf("snapshot %d: summary %v, want one equality delete file added", s.SnapshotID, s.Summary)
		}
	}
	res, err := tbl.Scan().ToArrowTable(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if n := res.NumRows(); n != 500 {
		t.Errorf("%d live rows after the upserts, want 500", n)
	}
	res.Release()
	code, out, errs = c.run("gen-table", "--table", "test.orders", "--rows", "500", "--every", "1s")
	if code != exitError || !strings.Contains(errs, "--every") {
		t.Errorf("gen-table --every without --upsert: exit %d, want %d with a message about --every\n%s%s", code, exitError, out, errs)
	}
}
