package rewrite

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	sqlcat "github.com/apache/iceberg-go/catalog/sql"
	"github.com/apache/iceberg-go/table"

	"github.com/streamidx/streamidx/compactor"
	"github.com/streamidx/streamidx/format"
	"github.com/streamidx/streamidx/indexcatalog"
	"github.com/streamidx/streamidx/internal/testtables"
	"github.com/streamidx/streamidx/internal/verify"
	"github.com/streamidx/streamidx/staging"
	"github.com/streamidx/streamidx/updater"
)

// env is a table with two indexes (pk, which stores row locations, and
// by_customer, which does not), an index catalog and a staging store.
type env struct {
	t       *testing.T
	id      table.Identifier
	cat     *sqlcat.Catalog
	indexes indexcatalog.Catalog
	store   *staging.Store
	tbl     *table.Table
}

var definitions = []string{
	`{"name":"by_customer","identity":["customer_id","id"],"materialized":["name"],"cluster":["bucket(4, customer_id)","customer_id","id"]}`,
	`{"name":"pk","identity":["id"],"materialized":["_file","_pos"],"cluster":["id"]}`,
}

func newEnv(t *testing.T, formatVersion int) *env {
	t.Helper()
	cat, warehouse := testtables.NewCatalog(t)
	tbl := testtables.CreateTable(t, cat, testtables.TableConfig{Name: "orders", Schema: testtables.OrdersSchema, FormatVersion: formatVersion, RowGroupRows: 16})
	ic := testtables.IndexCatalog(t, warehouse)
	testtables.CreateIndexes(t, ic, tbl, definitions...)
	store, err := staging.OpenStore(t.TempDir(), staging.StoreOptions{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	return &env{t: t, id: tbl.Identifier(), cat: cat.(*sqlcat.Catalog), indexes: ic, store: store, tbl: tbl}
}

func (e *env) updater(index string) *updater.Updater {
	return updater.New(e.cat, e.indexes, e.store, e.id, index, updater.Options{
		Range: compactor.RangeWriterOptions{TargetFileSize: 4 << 10, RowGroupRows: 64},
	})
}

// align steps index until it covers the table's current snapshot and
// returns what each step published.
func (e *env) align(ctx context.Context, index string) ([]*updater.Publication, error) {
	u := e.updater(index)
	var pubs []*updater.Publication
	for {
		st, err := u.Step(ctx, nil)
		if st.Published != nil {
			pubs = append(pubs, st.Published)
		}
		if err != nil || st.Aligned {
			return pubs, err
		}
	}
}

// alignFunc is Options.Align over e's updaters.
func (e *env) alignFunc(ctx context.Context, index string) error {
	_, err := e.align(ctx, index)
	return err
}

func (e *env) reload() *table.Table {
	e.t.Helper()
	tbl, err := e.cat.LoadTable(context.Background(), e.id)
	if err != nil {
		e.t.Fatal(err)
	}
	e.tbl = tbl
	return tbl
}

// verifyIndex checks the index's current snapshot with the independent
// verifier, and that it covers the table's current snapshot.
func (e *env) verifyIndex(index string) {
	e.t.Helper()
	ctx := context.Background()
	md, _, err := e.indexes.Load(ctx, e.id, index)
	if err != nil {
		e.t.Fatal(err)
	}
	tbl := e.reload()
	cur := md.CurrentSnapshot()
	if cur == nil || cur.SourceTableSnapshotID != tbl.CurrentSnapshot().SnapshotID {
		e.t.Fatalf("index %s does not cover the table's current snapshot", index)
	}
	rep, err := verify.Verify(ctx, tbl, md, cur, verify.Options{})
	if err != nil {
		e.t.Fatalf("verify %s: %v", index, err)
	}
	if !rep.Exact() {
		e.t.Fatalf("index %s is not exact:\n%s", index, rep.Summary())
	}
}

// scanRows is the multiset of the rows iceberg-go's own scan returns, each
// printed as text, keyed by its text.
func scanRows(t *testing.T, tbl *table.Table) map[string]int {
	t.Helper()
	_, recs, err := tbl.Scan().ToArrowRecords(context.Background())
	if err != nil {
		t.Fatalf("scan: %v", err)
	}
	out := map[string]int{}
	for rec, err := range recs {
		if err != nil {
			t.Fatalf("scan: %v", err)
		}
		for i := range int(rec.NumRows()) {
			out[rowText(rec, i)]++
		}
		rec.Release()
	}
	return out
}

func rowText(rec arrow.RecordBatch, i int) string {
	var b strings.Builder
	for c := range int(rec.NumCols()) {
		fmt.Fprintf(&b, "%v|", format.ValueAt(rec.Column(c), i))
	}
	return b.String()
}

// sameRows fails the test when two scans differ, naming a few differences.
func sameRows(t *testing.T, what string, want, got map[string]int) {
	t.Helper()
	if maps.Equal(want, got) {
		return
	}
	var diff []string
	for k, n := range want {
		if got[k] != n {
			diff = append(diff, fmt.Sprintf("%s: want %d, got %d", k, n, got[k]))
		}
	}
	for k, n := range got {
		if _, ok := want[k]; !ok {
			diff = append(diff, fmt.Sprintf("%s: want 0, got %d", k, n))
		}
	}
	slices.Sort(diff)
	t.Fatalf("%s: the scans differ in %d rows, e.g.\n%s", what, len(diff), strings.Join(diff[:min(len(diff), 10)], "\n"))
}

// upsert commits, in one snapshot, an equality delete of ids on id
// (written by iceberg-go, one file per partition) and their new version.
func upsert(t *testing.T, tbl *table.Table, ids []int64, version int) *table.Table {
	t.Helper()
	tbl, err := testtables.TryUpsert(tbl, ids, version)
	if err != nil {
		t.Fatal(err)
	}
	return tbl
}
