package workload

import (
	"context"
	"strings"

	"testing"

	"github.com/apache/iceberg-go/table"

	"github.com/streamidx/streamidx/internal/testtables"

	"github.com/apache/arrow-go/v18/arrow/memory"
)

func TestBatchesYieldEveryOrder(t *testing.T) {
	_, seq := Batches(memory.DefaultAllocator, Sequential, 5, 25, 0, 1, 8)
	var n, batches int64
	for rec, err := range seq {
		if err != nil {
			t.Fatal(err)
		}
		batches++
		n += rec.NumRows()
		rec.Release()
	}
	if n != 20 || batches != 3 {
		t.Fatalf("%d rows in %d batches", n, batches)
	}
}

func TestAppendWritesRows(t *testing.T) {
	cat, _ := testtables.NewCatalog(t)
	ctx := context.Background()
	tbl, err := CreateOrders(ctx, cat, table.Identifier{"w", "orders"}, 2)
	if err != nil {
		t.Fatal(err)
	}
	if tbl, err = Append(ctx, tbl, 0, 1000, 0, 1); err != nil {
		t.Fatal(err)
	}
	if got := tbl.CurrentSnapshot().Summary.Properties["total-records"]; got != "1000" {
		t.Fatalf("total-records %q, want 1000 (%v)", got, tbl.CurrentSnapshot().Summary)
	}
}

func TestUpsertReplacesRows(t *testing.T) {
	cat, _ := testtables.NewCatalog(t)
	ctx := context.Background()
	tbl, err := CreateOrders(ctx, cat, table.Identifier{"w", "orders"}, 2)
	if err != nil {
		t.Fatal(err)
	}
	if tbl, err = Append(ctx, tbl, 0, 1000, 0, 1); err != nil {
		t.Fatal(err)
	}
	ids, err := UpsertIDs(1000, 10, "uniform", 1)
	if err != nil || len(ids) != 10 {
		t.Fatalf("ids %v %v", ids, err)
	}
	if tbl, err = Upsert(ctx, tbl, ids, 1, 1); err != nil {
		t.Fatal(err)
	}
	p := tbl.CurrentSnapshot().Summary.Properties
	if p["added-records"] != "10" || p["added-equality-deletes"] != "10" {
		t.Errorf("upsert summary %v", p)
	}
	if tail, _ := UpsertIDs(1000, 3, "tail", 1); tail[0] != 997 || tail[2] != 999 {
		t.Errorf("tail ids %v", tail)
	}
}

func TestUpsertIDsRefusesImpossibleCounts(t *testing.T) {
	for _, c := range []struct {
		rows, n int64
		pattern string
		want    string
	}{
		{0, 5, "uniform", "no orders"},
		{0, 5, "tail", "no orders"},
		{-3, 5, "uniform", "no orders"},
		{100, 0, "uniform", "at least 1"},
		{100, -2, "tail", "at least 1"},
	} {
		ids, err := UpsertIDs(c.rows, c.n, c.pattern, 1)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("UpsertIDs(%d, %d, %s) = %v, %v; want an error saying %q", c.rows, c.n, c.pattern, ids, err, c.want)
		}
	}
	// More upserts than orders upsert every order once.
	ids, err := UpsertIDs(3, 10, "uniform", 1)
	if err != nil || len(ids) != 3 {
		t.Errorf("UpsertIDs(3, 10) = %v, %v; want the 3 orders", ids, err)
	}
}
