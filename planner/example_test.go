package planner_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	sqlcat "github.com/apache/iceberg-go/catalog/sql"
	"github.com/apache/iceberg-go/table"
	"github.com/uptrace/bun/driver/sqliteshim"

	"github.com/streamidx/streamidx/compactor"
	"github.com/streamidx/streamidx/format"
	"github.com/streamidx/streamidx/internal/indexdef"
	"github.com/streamidx/streamidx/internal/objstore"
	"github.com/streamidx/streamidx/planner"
	"github.com/streamidx/streamidx/planner/reconcile"
)

// A lookup through an index clustered by bucket(8, customer_id), then
// customer_id and id: the planner reads only the range files of the two
// customers' buckets and returns the matching entries with their row
// locations.
func ExamplePlanner_Lookup() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "planner-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	tbl, md := exampleIndexedTable(ctx, dir)

	p := planner.New(planner.Options{})
	res, err := p.Lookup(ctx, reconcile.Table(tbl), md, planner.Query{Where: "customer_id IN (3, 5) AND id < 40"})
	if err != nil {
		log.Fatal(err)
	}
	defer res.Release()

	var ids []int64
	for _, b := range res.Batches {
		id := b.Column(b.Schema().FieldIndices("id")[0]).(*array.Int64)
		ids = append(ids, id.Int64Values()...)
	}
	slices.Sort(ids)
	fmt.Println("ids:", ids)
	for _, positions := range res.Locations() {
		fmt.Println("positions in the data file:", positions.ToArray())
	}
	fmt.Printf("read %d of %d range files\n", res.Stats.RangeFilesRead, res.Stats.RangeFilesTotal)
	// Output:
	// ids: [3 5 10 12 17 19 24 26 31 33 38]
	// positions in the data file: [3 5 10 12 17 19 24 26 31 33 38]
	// read 3 of 7 range files
}

// exampleIndexedTable creates a table of 100 orders, customer_id = id % 7,
// in an SQL catalog under dir, and builds an index snapshot of it.
func exampleIndexedTable(ctx context.Context, dir string) (*table.Table, *format.Metadata) {
	cat, err := catalog.Load(ctx, "default", iceberg.Properties{
		"type": "sql", "uri": "file://" + filepath.Join(dir, "catalog.db"),
		sqlcat.DriverKey: sqliteshim.ShimName, sqlcat.DialectKey: string(sqlcat.SQLite),
		"warehouse": "file://" + dir,
	})
	if err != nil {
		log.Fatal(err)
	}
	// Lookups read the table's files, not the catalog: it closes once the
	// table is written.
	defer cat.(*sqlcat.Catalog).Close()
	if err := cat.CreateNamespace(ctx, table.Identifier{"shop"}, nil); err != nil {
		log.Fatal(err)
	}
	schema := iceberg.NewSchema(0,
		iceberg.NestedField{ID: 1, Name: "id", Type: iceberg.PrimitiveTypes.Int64, Required: true},
		iceberg.NestedField{ID: 2, Name: "customer_id", Type: iceberg.PrimitiveTypes.Int64, Required: true},
	)
	tbl, err := cat.CreateTable(ctx, table.Identifier{"shop", "orders"}, schema)
	if err != nil {
		log.Fatal(err)
	}
	arrowSchema, err := table.SchemaToArrowSchema(schema, nil, true, false)
	if err != nil {
		log.Fatal(err)
	}
	b := array.NewRecordBuilder(memory.DefaultAllocator, arrowSchema)
	for i := range int64(100) {
		b.Field(0).(*array.Int64Builder).Append(i)
		b.Field(1).(*array.Int64Builder).Append(i % 7)
	}
	rec := b.NewRecordBatch()
	rdr, err := array.NewRecordReader(arrowSchema, []arrow.RecordBatch{rec})
	if err != nil {
		log.Fatal(err)
	}
	tx := tbl.NewTransaction()
	if err := tx.Append(ctx, rdr, nil); err != nil {
		log.Fatal(err)
	}
	if tbl, err = tx.Commit(ctx); err != nil {
		log.Fatal(err)
	}

	def, err := indexdef.Parse([]byte(`{"name": "by_customer", "identity": ["customer_id", "id"],
		"materialized": ["_file", "_pos"], "cluster": ["bucket(8, customer_id)", "customer_id", "id"]}`))
	if err != nil {
		log.Fatal(err)
	}
	md, err := def.Resolve(tbl.Schema(), tbl.Metadata().TableUUID().String(), "file://"+filepath.Join(dir, "index"))
	if err != nil {
		log.Fatal(err)
	}
	snap := tbl.CurrentSnapshot()
	built, err := compactor.FullBuild(ctx, tbl, snap, md, objstore.Join(md.Location, "data"), compactor.BuildOptions{
		RangeWriterOptions: compactor.RangeWriterOptions{TargetFileSize: 1, RowGroupRows: 16},
	})
	if err != nil {
		log.Fatal(err)
	}
	is, err := format.NewIndexSchema(md, tbl.Schema())
	if err != nil {
		log.Fatal(err)
	}
	trackingFile := objstore.Join(md.Location, "metadata", "snap-1.avro")
	w, err := objstore.Local().Create(ctx, trackingFile, objstore.CreateOptions{})
	if err != nil {
		log.Fatal(err)
	}
	if err := format.WriteTrackingFile(w, is, built.Entries, format.TrackingWriteOptions{IndexUUID: md.IndexUUID, SnapshotID: 1}); err != nil {
		log.Fatal(err)
	}
	if err := w.Close(); err != nil {
		log.Fatal(err)
	}
	md.Snapshots = append(md.Snapshots, format.Snapshot{SnapshotID: 1, SourceTableSnapshotID: snap.SnapshotID, TrackingFile: trackingFile})
	return tbl, md
}
