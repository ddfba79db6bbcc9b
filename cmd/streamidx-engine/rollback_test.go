package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/streamidx/streamidx/internal/testtables"
)

// TestRollback: rollback makes an earlier index snapshot, or an earlier
// metadata file of the metadata log, current again through the index
// catalog's compare-and-swap, also when the current metadata file is
// corrupt, which is how an operator repairs an index that nothing else
// can load.
func TestRollback(t *testing.T) {
	ctx := context.Background()
	warehouse, tbl := ordersTable(t, 30)
	c := newCLI(t, warehouse, "")
	createIndexes(t, c, "test.orders")
	c.ok("build", "--table", "test.orders", "--index", "pk")
	for i := range 2 {
		tbl, _ = testtables.Append(t, tbl, testtables.OrderRows(30+10*i, 40+10*i, 0)...)
		c.ok("run", "--once", "--table", "test.orders", "--index", "pk", "--stage-dir", t.TempDir())
	}
	ic := openIndexCatalog(t, warehouse)
	md, loc3, err := ic.Load(ctx, []string{"test", "orders"}, "pk")
	if err != nil || len(md.Snapshots) != 3 || len(md.MetadataLog) < 2 {
		t.Fatalf("want 3 snapshots and a metadata log: %v %v", md, err)
	}
	first := md.Snapshots[0]

	// To an index snapshot: it becomes the current one.
	out := c.ok("rollback", "--table", "test.orders", "--index", "pk", "--to", fmt.Sprint(first.SnapshotID))
	if !strings.Contains(out, fmt.Sprint(first.SnapshotID)) {
		t.Errorf("rollback output: %s", out)
	}
	md, _, err = ic.Load(ctx, []string{"test", "orders"}, "pk")
	if err != nil || md.CurrentSnapshot().SnapshotID != first.SnapshotID || len(md.Snapshots) != 1 {
		t.Fatalf("after rollback to snapshot %d: %+v, %v", first.SnapshotID, md, err)
	}
	if md.MetadataLog[len(md.MetadataLog)-1].MetadataFile != loc3 {
		t.Errorf("the replaced metadata file %s is not the last of the log: %+v", loc3, md.MetadataLog)
	}
	if code, vo, ve := c.run("verify", "--table", "test.orders", "--index", "pk"); code != 0 {
		t.Errorf("verify after rollback: exit %d\n%s%s", code, vo, ve)
	}
	// The daemon brings the rolled-back index up to date again.
	c.ok("run", "--once", "--table", "test.orders", "--index", "pk", "--stage-dir", t.TempDir())
	if code, vo, ve := c.run("verify", "--table", "test.orders", "--index", "pk"); code != 0 {
		t.Errorf("verify after rollback and update: exit %d\n%s%s", code, vo, ve)
	}

	// A corrupt current metadata file: nothing loads the index, and
	// rollback to the previous metadata file repairs it.
	md, good, err := ic.Load(ctx, []string{"test", "orders"}, "pk")
	if err != nil {
		t.Fatal(err)
	}
	c.ok("run", "--once", "--table", "test.orders", "--index", "pk", "--stage-dir", t.TempDir()) // nothing new: no commit
	tbl, _ = testtables.Append(t, tbl, testtables.OrderRows(60, 70, 0)...)
	c.ok("run", "--once", "--table", "test.orders", "--index", "pk", "--stage-dir", t.TempDir())
	_, bad, err := ic.Load(ctx, []string{"test", "orders"}, "pk")
	if err != nil || bad == good {
		t.Fatalf("a new metadata file: %s %v", bad, err)
	}
	if err := os.WriteFile(strings.TrimPrefix(bad, "file://"), []byte(`{"format-version": 1, "index-uu`), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, _ := c.run("lookup", "--table", "test.orders", "--index", "pk", "--where", "id = 1"); code == 0 {
		t.Fatal("lookup on a corrupt metadata file succeeded")
	}
	code, out, errs := c.run("rollback", "--table", "test.orders", "--index", "pk", "--to", "12345")
	if code != exitError || !strings.Contains(errs, "no metadata file of index pk holds snapshot 12345") || !strings.Contains(errs, good) {
		t.Errorf("rollback to an unknown snapshot: exit %d, want an error listing the metadata files\n%s%s", code, out, errs)
	}
	out = c.ok("rollback", "--table", "test.orders", "--index", "pk", "--to", good)
	if !strings.Contains(out, good) {
		t.Errorf("rollback output: %s", out)
	}
	if code, vo, ve := c.run("verify", "--table", "test.orders", "--index", "pk"); code != 0 {
		t.Errorf("verify after repairing the corrupt metadata: exit %d\n%s%s", code, vo, ve)
	}
	if code, lo, le := c.run("list", "--table", "test.orders"); code != 0 {
		t.Errorf("list after the repair: exit %d\n%s%s", code, lo, le)
	}

	// Corrupt again, and roll back to a snapshot id: the metadata files
	// beside the corrupt one are searched for it.
	c.ok("run", "--once", "--table", "test.orders", "--index", "pk", "--stage-dir", t.TempDir())
	_, bad, _ = ic.Load(ctx, []string{"test", "orders"}, "pk")
	if err := os.WriteFile(strings.TrimPrefix(bad, "file://"), []byte("garbage"), 0o644); err != nil {
		t.Fatal(err)
	}
	c.ok("rollback", "--table", "test.orders", "--index", "pk", "--to", fmt.Sprint(first.SnapshotID))
	if md, _, err = ic.Load(ctx, []string{"test", "orders"}, "pk"); err != nil || md.CurrentSnapshot().SnapshotID != first.SnapshotID {
		t.Errorf("rollback to a snapshot over a corrupt metadata file: %v", err)
	}

	// A metadata file of another index is refused.
	_, otherLoc, err := ic.Load(ctx, []string{"test", "orders"}, "by_name")
	if err != nil {
		t.Fatal(err)
	}
	code, out, errs = c.run("rollback", "--table", "test.orders", "--index", "pk", "--to", otherLoc)
	if code != exitError || !strings.Contains(errs, "another index") {
		t.Errorf("rollback to another index's metadata: exit %d\n%s%s", code, out, errs)
	}
}

// TestRollbackRefusesAnExpiredSnapshot: expire deletes the files of the
// snapshots it expires and leaves the earlier metadata files that still
// name them; a rollback to such a snapshot is refused, naming the missing
// file, and the index stays as it was (its lookups and verify go on).
func TestRollbackRefusesAnExpiredSnapshot(t *testing.T) {
	ctx := context.Background()
	warehouse, tbl := ordersTable(t, 30)
	c := newCLI(t, warehouse, "")
	createIndex(t, c, "pk")
	c.ok("build", "--table", "test.orders", "--index", "pk")
	ic := openIndexCatalog(t, warehouse)
	md, _, err := ic.Load(ctx, []string{"test", "orders"}, "pk")
	if err != nil {
		t.Fatal(err)
	}
	first := md.CurrentSnapshot().SnapshotID
	for i := range 2 {
		tbl, _ = testtables.Append(t, tbl, testtables.OrderRows(30+10*i, 40+10*i, 0)...)
		c.ok("run", "--once", "--table", "test.orders", "--index", "pk", "--stage-dir", t.TempDir())
	}
	time.Sleep(5 * time.Millisecond) // past the grace below
	c.ok("expire", "--table", "test.orders", "--index", "pk", "--retain-last", "1", "--grace", "1ms")
	_, before, err := ic.Load(ctx, []string{"test", "orders"}, "pk")
	if err != nil {
		t.Fatal(err)
	}
	code, out, errs := c.run("rollback", "--table", "test.orders", "--index", "pk", "--to", fmt.Sprint(first))
	if code != exitError || !strings.Contains(errs, "cannot be rolled back to") || !strings.Contains(errs, "is gone") {
		t.Fatalf("rollback to an expired snapshot: exit %d\n%s%s", code, out, errs)
	}
	if _, after, err := ic.Load(ctx, []string{"test", "orders"}, "pk"); err != nil || after != before {
		t.Fatalf("the refused rollback moved the index from %s to %s (%v)", before, after, err)
	}
	if out := c.ok("verify", "--table", "test.orders", "--index", "pk"); !strings.Contains(out, "exact") {
		t.Errorf("verify after the refused rollback: %s", out)
	}
}
