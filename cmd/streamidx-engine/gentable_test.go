package main

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"

	"github.com/streamidx/streamidx/internal/testtables"
	"github.com/streamidx/streamidx/internal/workload"
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

// TestGenTableStreamsBesideAnotherWriter: while another writer commits to
// the table as fast as it can (as a daemon's rewrite-deletes does), every
// upsert of gen-table --every lands: one that lost the race is made again
// on the newer table.
func TestGenTableStreamsBesideAnotherWriter(t *testing.T) {
	cat, warehouse := testtables.NewCatalog(t)
	c := newCLI(t, warehouse, "")
	if code, out, errs := c.run("gen-table", "--table", "test.orders", "--rows", "500"); code != exitOK {
		t.Fatalf("gen-table: exit %d\n%s%s", code, out, errs)
	}
	id := table.Identifier{testtables.Namespace, "orders"}
	ctx := context.Background()
	stop, other := make(chan struct{}), make(chan int, 1)
	go func() {
		n := 0
		defer func() { other <- n }()
		for version := 100; ; version++ {
			select {
			case <-stop:
				return
			default:
			}
			tbl, err := cat.LoadTable(ctx, id)
			if err != nil {
				t.Error(err)
				return
			}
			// The lowest orders, which gen-table's tail upserts never
			// touch; a lost race is tried again at once. A pause after each commit
			// leaves gen-table's retry a free window: one conflict per
			// retry at the most.
			if _, err := workload.Upsert(ctx, tbl, []int64{0, 1, 2}, version, 1); err == nil {
				n++
				time.Sleep(40 * time.Millisecond)
			}
		}
	}()
	code, out, errs := c.run("gen-table", "--table", "test.orders", "--rows", "500", "--upsert", "20", "--pattern", "tail", "--every", "10ms", "--commits", "30")
	close(stop)
	others := <-other
	if code != exitOK || strings.Count(out, "upserted 20 orders (tail)") != 30 {
		t.Fatalf("gen-table --every beside another writer (%d commits of its own): exit %d, want 30 commits of 20 orders\n%s%s", others, code, out, errs)
	}
	if others == 0 {
		t.Fatal("the other writer made no commit: the test raced nothing")
	}
	tbl, err := cat.LoadTable(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(tbl.Metadata().Snapshots()); n != 1+30+others {
		t.Errorf("%d snapshots, want the append, 30 upserts of gen-table and the other writer's %d", n, others)
	}
	res, err := tbl.Scan().ToArrowTable(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Release()
	if n := res.NumRows(); n != 500 {
		t.Errorf("%d live rows after the upserts, want 500", n)
	}
}
