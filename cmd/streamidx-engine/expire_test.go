package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/streamidx/streamidx/internal/testtables"
)

// TestExpire: `expire` keeps the newest --retain-last index snapshots and
// deletes the range and tracking files only the expired ones referenced,
// and unreferenced files older than --grace (a crashed writer's orphan);
// --dry-run names the same files and changes nothing; what remains
// verifies and answers lookups.
func TestExpire(t *testing.T) {
	ctx := context.Background()
	warehouse, tbl := ordersTable(t, 30)
	c := newCLI(t, warehouse, "")
	createIndex(t, c, "pk")
	for i := range 4 {
		if i > 0 {
			tbl, _ = testtables.Append(t, tbl, testtables.OrderRows(30+10*i, 40+10*i, 0)...)
		}
		c.ok("build", "--table", "test.orders", "--index", "pk")
	}
	ic := openIndexCatalog(t, warehouse)
	md, _, err := ic.Load(ctx, []string{"test", "orders"}, "pk")
	if err != nil || len(md.Snapshots) != 4 {
		t.Fatalf("want 4 snapshots: %v", err)
	}
	dataDir := filepath.Join(strings.TrimPrefix(md.Location, "file://"), "data")
	ranges, _ := filepath.Glob(filepath.Join(dataDir, "*.parquet"))
	// An orphan: a range file no snapshot lists, as a writer that crashed
	// before its commit leaves, an hour and a half old.
	orphan := filepath.Join(dataDir, "orphan.parquet")
	body, err := os.ReadFile(ranges[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(orphan, body, 0o644); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-90 * time.Minute)
	if err := os.Chtimes(orphan, old, old); err != nil {
		t.Fatal(err)
	}
	// The builds' files are younger than the grace unless it is short.
	time.Sleep(20 * time.Millisecond)

	dry := c.ok("expire", "--table", "test.orders", "--index", "pk", "--retain-last", "2", "--grace", "10ms", "--dry-run")
	if !strings.Contains(dry, "would expire 2 index snapshots") || !strings.Contains(dry, "orphan.parquet") {
		t.Fatalf("dry run:\n%s", dry)
	}
	var named []string
	for _, line := range strings.Split(dry, "\n") {
		if f, ok := strings.CutPrefix(line, "would delete "); ok {
			named = append(named, strings.TrimPrefix(f, "file://"))
		}
	}
	if md2, _, _ := ic.Load(ctx, []string{"test", "orders"}, "pk"); len(md2.Snapshots) != 4 {
		t.Fatalf("the dry run changed the index: %d snapshots", len(md2.Snapshots))
	}
	for _, f := range named {
		if _, err := os.Stat(f); err != nil {
			t.Fatalf("the dry run deleted %s", f)
		}
	}

	out := c.ok("expire", "--table", "test.orders", "--index", "pk", "--retain-last", "2", "--grace", "10ms")
	if !strings.Contains(out, "expired 2 index snapshots") {
		t.Fatalf("expire: %s", out)
	}
	md, _, err = ic.Load(ctx, []string{"test", "orders"}, "pk")
	if err != nil || len(md.Snapshots) != 2 {
		t.Fatalf("after expire: %d snapshots, %v", len(md.Snapshots), err)
	}
	for _, f := range named {
		if _, err := os.Stat(f); !os.IsNotExist(err) {
			t.Errorf("%s is still there (%v)", f, err)
		}
	}
	if code, vo, ve := c.run("verify", "--table", "test.orders", "--index", "pk"); code != 0 {
		t.Errorf("verify after expire: exit %d\n%s%s", code, vo, ve)
	}
	if rows := cliRows(t, c, "pk", "id = 65", tbl.CurrentSnapshot().SnapshotID); len(rows) != 1 {
		t.Errorf("lookup after expire: %q", rows)
	}

	// With the default grace of an hour, a fresh orphan stays.
	young := filepath.Join(dataDir, "young.parquet")
	if err := os.WriteFile(young, body, 0o644); err != nil {
		t.Fatal(err)
	}
	c.ok("expire", "--table", "test.orders", "--index", "pk", "--retain-last", "1")
	if _, err := os.Stat(young); err != nil {
		t.Errorf("an orphan younger than the grace was deleted: %v", err)
	}
}
