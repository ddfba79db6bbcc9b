// Package testtables builds real Iceberg tables for tests: an iceberg-go SQL
// catalog on SQLite in a temporary directory, the warehouse on local disk, and
// commits made with iceberg-go's own writers (appends, position deletes,
// deletion vectors, equality deletes, rewrites, schema and spec evolution).
//
// Every helper takes the testing.TB, fails the test on error and returns the
// table as committed, so a test reads as a list of commits. Helpers are not
// safe for concurrent use on one table: each commit builds on the table value
// it is given.
package testtables

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	sqlcat "github.com/apache/iceberg-go/catalog/sql"
	iceio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"
	"github.com/apache/iceberg-go/table/dv"
	"github.com/google/uuid"
	"github.com/uptrace/bun/driver/sqliteshim"

	"github.com/streamidx/streamidx/format"
)

// Namespace is the namespace NewCatalog creates and CreateTable puts tables in.
const Namespace = "test"

// NewCatalog opens an iceberg-go SQL catalog named "default" on a SQLite
// database in a fresh temporary directory, with the warehouse in the same
// directory, and creates Namespace. It returns the catalog and the warehouse
// location (a file:// URI). The catalog is closed when the test ends.
func NewCatalog(t testing.TB) (catalog.Catalog, string) {
	t.Helper()
	dir := t.TempDir()
	warehouse := "file://" + filepath.ToSlash(dir)
	ctx := context.Background()
	cat, err := catalog.Load(ctx, "default", iceberg.Properties{
		"type": "sql",
		// Tests run daemons against this database: wait for locks, as
		// indexcatalog.OpenSQLite does, instead of failing with SQLITE_BUSY.
		"uri":             "file://" + filepath.ToSlash(filepath.Join(dir, "catalog.db")) + "?_busy_timeout=30000&_journal_mode=WAL",
		sqlcat.DriverKey:  sqliteshim.ShimName,
		sqlcat.DialectKey: string(sqlcat.SQLite),
		"warehouse":       warehouse,
	})
	if err != nil {
		t.Fatalf("load sql catalog: %v", err)
	}
	t.Cleanup(func() {
		if err := cat.(*sqlcat.Catalog).Close(); err != nil {
			t.Errorf("close sql catalog: %v", err)
		}
	})
	if err := cat.CreateNamespace(ctx, table.Identifier{Namespace}, nil); err != nil {
		t.Fatalf("create namespace %s: %v", Namespace, err)
	}
	return cat, warehouse
}

// TableConfig describes a table for CreateTable.
type TableConfig struct {
	// Name is the table name inside Namespace.
	Name string
	// Schema is the table schema; its field IDs are kept.
	Schema *iceberg.Schema
	// FormatVersion is the Iceberg format version, 2 or 3.
	FormatVersion int
	// Spec partitions the table; nil leaves it unpartitioned.
	Spec *iceberg.PartitionSpec
	// RowGroupRows caps the rows per Parquet row group of data files, so small
	// tables get files with several row groups; 0 keeps iceberg-go's default.
	RowGroupRows int
}

// CreateTable creates the table that cfg describes in cat.
func CreateTable(t testing.TB, cat catalog.Catalog, cfg TableConfig) *table.Table {
	t.Helper()
	props := iceberg.Properties{table.PropertyFormatVersion: fmt.Sprint(cfg.FormatVersion)}
	if cfg.RowGroupRows > 0 {
		props[table.ParquetRowGroupLimitKey] = fmt.Sprint(cfg.RowGroupRows)
	}
	opts := []catalog.CreateTableOpt{catalog.WithProperties(props)}
	if cfg.Spec != nil {
		opts = append(opts, catalog.WithPartitionSpec(cfg.Spec))
	}
	tbl, err := cat.CreateTable(context.Background(), table.Identifier{Namespace, cfg.Name}, cfg.Schema, opts...)
	if err != nil {
		t.Fatalf("create table %s: %v", cfg.Name, err)
	}
	return tbl
}

// Record builds an Arrow record batch of schema from rows of canonical Go
// values (see format.Key), one value per top-level field in schema order;
// nil is null. The Arrow schema is iceberg-go's mapping with field IDs.
func Record(t testing.TB, schema *iceberg.Schema, rows ...[]any) arrow.RecordBatch {
	t.Helper()
	sc, err := table.SchemaToArrowSchema(schema, nil, true, false)
	if err != nil {
		t.Fatalf("arrow schema: %v", err)
	}
	b := array.NewRecordBuilder(memory.DefaultAllocator, sc)
	defer b.Release()
	for r, row := range rows {
		if len(row) != len(sc.Fields()) {
			t.Fatalf("row %d has %d values, schema has %d fields", r, len(row), len(sc.Fields()))
		}
		for i, v := range row {
			if err := format.CheckValue(schema.Field(i).Type, v); err != nil {
				t.Fatalf("row %d field %s: %v", r, sc.Field(i).Name, err)
			}
			if err := format.AppendValue(b.Field(i), v); err != nil {
				t.Fatalf("row %d field %s: %v", r, sc.Field(i).Name, err)
			}
		}
	}
	return b.NewRecordBatch()
}

// Append writes rows (in the order of the table's current schema) with
// table.WriteRecords and commits the resulting data files in one snapshot.
// It returns the committed table and the data files in the order
// WriteRecords produced them; an unpartitioned append of a few rows makes one
// file whose row i is rows[i].
func Append(t testing.TB, tbl *table.Table, rows ...[]any) (*table.Table, []iceberg.DataFile) {
	t.Helper()
	return AppendWithProperties(t, tbl, nil, rows...)
}

// AppendWithProperties is Append with snapshot summary properties.
func AppendWithProperties(t testing.TB, tbl *table.Table, props iceberg.Properties, rows ...[]any) (*table.Table, []iceberg.DataFile) {
	t.Helper()
	files := writeDataFiles(t, tbl, rows)
	tx := tbl.NewTransaction()
	if err := tx.NewRowDelta(props).AddRows(files...).Commit(context.Background()); err != nil {
		t.Fatalf("stage append: %v", err)
	}
	return commit(t, tx, "append"), files
}

// AppendWithTransaction appends rows through Transaction.Append (iceberg-go's
// own path from Arrow to a commit) and returns the committed table and the
// data files the new snapshot added, found in its manifests.
func AppendWithTransaction(t testing.TB, tbl *table.Table, rows ...[]any) (*table.Table, []iceberg.DataFile) {
	t.Helper()
	rec := Record(t, tbl.Schema(), rows...)
	defer rec.Release()
	rdr, err := array.NewRecordReader(rec.Schema(), []arrow.RecordBatch{rec})
	if err != nil {
		t.Fatalf("record reader: %v", err)
	}
	defer rdr.Release()
	tx := tbl.NewTransaction()
	if err := tx.Append(context.Background(), rdr, nil); err != nil {
		t.Fatalf("append: %v", err)
	}
	tbl = commit(t, tx, "append")
	return tbl, AddedFiles(t, tbl, iceberg.EntryContentData)
}

// AddFiles writes rows (in the order of the table's current schema) as a
// Parquet file without field IDs, the shape of a file another tool wrote,
// and adds it with Transaction.AddFiles, which sets the table's name mapping
// so readers match its columns by name. It returns the committed table and
// the added data file.
func AddFiles(t testing.TB, tbl *table.Table, rows ...[]any) (*table.Table, iceberg.DataFile) {
	t.Helper()
	rec := Record(t, tbl.Schema(), rows...)
	defer rec.Release()
	fields := make([]arrow.Field, len(rec.Schema().Fields()))
	for i, f := range rec.Schema().Fields() {
		fields[i] = arrow.Field{Name: f.Name, Type: f.Type, Nullable: f.Nullable}
	}
	bare := array.NewRecordBatch(arrow.NewSchema(fields, nil), rec.Columns(), rec.NumRows())
	defer bare.Release()
	path, _ := writeRecord(t, tbl, "added", bare)
	tx := tbl.NewTransaction()
	if err := tx.AddFiles(context.Background(), []string{path}, nil, false); err != nil {
		t.Fatalf("add files: %v", err)
	}
	tbl = commit(t, tx, "add files")
	added := AddedFiles(t, tbl, iceberg.EntryContentData)
	if len(added) != 1 {
		t.Fatalf("add files added %d files, want 1", len(added))
	}
	return tbl, added[0]
}

func writeDataFiles(t testing.TB, tbl *table.Table, rows [][]any) []iceberg.DataFile {
	t.Helper()
	rec := Record(t, tbl.Schema(), rows...)
	var files []iceberg.DataFile
	batches := func(yield func(arrow.RecordBatch, error) bool) { yield(rec, nil) }
	for df, err := range table.WriteRecords(context.Background(), tbl, rec.Schema(), batches) {
		if err != nil {
			t.Fatalf("write data files: %v", err)
		}
		files = append(files, df)
	}
	return files
}

// Positions names rows of one data file by position.
type Positions struct {
	File iceberg.DataFile
	Pos  []int64
}

// AddPositionDeletes writes one position delete Parquet file (columns
// file_path and pos with their reserved field IDs, rows sorted by file and
// position) for the given rows and commits it with a row delta. All data
// files must share a partition spec and partition, which the delete file
// takes. When every row names one data file, referenced_data_file is set, as
// Java writers do.
func AddPositionDeletes(t testing.TB, tbl *table.Table, deletes ...Positions) (*table.Table, iceberg.DataFile) {
	t.Helper()
	if len(deletes) == 0 {
		t.Fatal("add position deletes: no rows")
	}
	first := deletes[0].File
	type row struct {
		path string
		pos  int64
	}
	var rows []row
	for _, d := range deletes {
		if d.File.SpecID() != first.SpecID() || !samePartition(d.File.Partition(), first.Partition()) {
			t.Fatalf("position deletes for %s and %s are in different partitions", first.FilePath(), d.File.FilePath())
		}
		for _, p := range d.Pos {
			rows = append(rows, row{d.File.FilePath(), p})
		}
	}
	slices.SortFunc(rows, func(a, b row) int {
		if c := strings.Compare(a.path, b.path); c != 0 {
			return c
		}
		return int(a.pos - b.pos)
	})
	schema := iceberg.NewSchema(0,
		iceberg.NestedField{ID: format.FieldIDDeleteFilePath, Name: "file_path", Type: iceberg.PrimitiveTypes.String, Required: true},
		iceberg.NestedField{ID: format.FieldIDDeletePos, Name: "pos", Type: iceberg.PrimitiveTypes.Int64, Required: true},
	)
	values := make([][]any, len(rows))
	for i, r := range rows {
		values[i] = []any{r.path, r.pos}
	}
	path, size := writeParquet(t, tbl, "pos-deletes", schema, values)
	spec := specByID(t, tbl, int(first.SpecID()))
	b, err := iceberg.NewDataFileBuilder(spec, iceberg.EntryContentPosDeletes, path, iceberg.ParquetFile,
		first.Partition(), nil, nil, int64(len(rows)), size)
	if err != nil {
		t.Fatalf("position delete file entry: %v", err)
	}
	if rows[0].path == rows[len(rows)-1].path {
		b.ReferencedDataFile(rows[0].path)
	}
	df := b.Build()
	return CommitDeletes(t, tbl, df), df
}

// AddDV commits a deletion vector (a Puffin file written by dv.DVWriter) that
// deletes positions of file. When file already has a live deletion vector,
// the new one holds the old positions too and replaces it in the same commit,
// as the v3 spec requires of writers.
func AddDV(t testing.TB, tbl *table.Table, file iceberg.DataFile, positions ...int64) (*table.Table, iceberg.DataFile) {
	t.Helper()
	ctx := context.Background()
	fs := writeFS(t, tbl)
	meta := tbl.Metadata()
	w := dv.NewDVWriter(fs, func(id int32) *iceberg.PartitionSpec { return meta.PartitionSpecByID(int(id)) })
	old := LiveDV(t, tbl, file.FilePath())
	if old != nil {
		bm, err := dv.ReadDV(fs, old)
		if err != nil {
			t.Fatalf("read deletion vector of %s: %v", file.FilePath(), err)
		}
		w.Load(file.FilePath(), bm, file.SpecID(), file.Partition())
	}
	if err := w.Add(file.FilePath(), positions, file.SpecID(), file.Partition()); err != nil {
		t.Fatalf("add deletion vector positions: %v", err)
	}
	lp, err := tbl.LocationProvider()
	if err != nil {
		t.Fatalf("location provider: %v", err)
	}
	dvs, err := w.Flush(ctx, lp.NewDataLocation("dv-"+uuid.NewString()+".puffin"))
	if err != nil {
		t.Fatalf("write deletion vector: %v", err)
	}
	tx := tbl.NewTransaction()
	rd := tx.NewRowDelta(nil).AddDeletes(dvs...)
	if old != nil {
		rd.RemoveDeletes(old)
	}
	if err := rd.Commit(ctx); err != nil {
		t.Fatalf("stage deletion vector: %v", err)
	}
	return commit(t, tx, "deletion vector"), dvs[0]
}

// LiveDV returns the live deletion vector of the data file at path in the
// table's current snapshot, or nil.
func LiveDV(t testing.TB, tbl *table.Table, path string) iceberg.DataFile {
	t.Helper()
	for _, df := range LiveFiles(t, tbl, iceberg.EntryContentPosDeletes) {
		if df.FileFormat() == iceberg.PuffinFile && df.ReferencedDataFile() != nil && *df.ReferencedDataFile() == path {
			return df
		}
	}
	return nil
}

// AddEqualityDeletes writes an equality delete file with iceberg-go's
// Transaction.WriteEqualityDeletes and commits it. Each row holds the values
// of fieldIDs, in that order. For a partitioned table, fieldIDs must include
// the partition source columns (iceberg-go routes rows by them).
func AddEqualityDeletes(t testing.TB, tbl *table.Table, fieldIDs []int, rows ...[]any) *table.Table {
	t.Helper()
	ctx := context.Background()
	schema := selectFields(t, tbl.Schema(), fieldIDs)
	rec := Record(t, schema, rows...)
	tx := tbl.NewTransaction()
	batches := func(yield func(arrow.RecordBatch, error) bool) { yield(rec, nil) }
	files, err := tx.WriteEqualityDeletes(ctx, fieldIDs, batches)
	if err != nil {
		t.Fatalf("write equality deletes: %v", err)
	}
	if err := tx.NewRowDelta(nil).AddDeletes(files...).Commit(ctx); err != nil {
		t.Fatalf("stage equality deletes: %v", err)
	}
	return commit(t, tx, "equality deletes")
}

// WriteEqualityDeleteFile writes an equality delete Parquet file of the
// columns fieldIDs (in that order, field IDs from the table schema) under the
// partition spec specID and partition (partition field ID -> value), without
// committing it. It lets a test place a delete in a spec iceberg-go's writer
// would not choose, such as an unpartitioned spec of a partitioned table.
func WriteEqualityDeleteFile(t testing.TB, tbl *table.Table, specID int, partition map[int]any, fieldIDs []int, rows ...[]any) iceberg.DataFile {
	t.Helper()
	schema := selectFields(t, tbl.Schema(), fieldIDs)
	path, size := writeParquet(t, tbl, "eq-deletes", schema, rows)
	b, err := iceberg.NewDataFileBuilder(specByID(t, tbl, specID), iceberg.EntryContentEqDeletes, path,
		iceberg.ParquetFile, partition, nil, nil, int64(len(rows)), size)
	if err != nil {
		t.Fatalf("equality delete file entry: %v", err)
	}
	return b.EqualityFieldIDs(fieldIDs).Build()
}

// CommitDeletes commits delete files in one row delta.
func CommitDeletes(t testing.TB, tbl *table.Table, files ...iceberg.DataFile) *table.Table {
	t.Helper()
	tx := tbl.NewTransaction()
	if err := tx.NewRowDelta(nil).AddDeletes(files...).Commit(context.Background()); err != nil {
		t.Fatalf("stage deletes: %v", err)
	}
	return commit(t, tx, "deletes")
}

// AppendAndDelete commits, in one snapshot, new rows and delete files: the
// shape of an upsert, where the equality delete of a key and the row that
// re-inserts it share a sequence number.
func AppendAndDelete(t testing.TB, tbl *table.Table, deletes []iceberg.DataFile, rows ...[]any) (*table.Table, []iceberg.DataFile) {
	t.Helper()
	files := writeDataFiles(t, tbl, rows)
	tx := tbl.NewTransaction()
	if err := tx.NewRowDelta(nil).AddRows(files...).AddDeletes(deletes...).Commit(context.Background()); err != nil {
		t.Fatalf("stage row delta: %v", err)
	}
	return commit(t, tx, "row delta"), files
}

// Rewrite replaces the data files remove with new files holding rows, in a
// rewrite (replace) snapshot made by Transaction.NewRewrite. The new files
// get the snapshot's sequence number. It returns the committed table and the
// new data files.
func Rewrite(t testing.TB, tbl *table.Table, remove []iceberg.DataFile, rows ...[]any) (*table.Table, []iceberg.DataFile) {
	t.Helper()
	files := writeDataFiles(t, tbl, rows)
	tx := tbl.NewTransaction()
	rw := tx.NewRewrite(nil)
	for _, df := range remove {
		rw.DeleteFile(df)
	}
	for _, df := range files {
		rw.AddDataFile(df)
	}
	if err := rw.Commit(context.Background()); err != nil {
		t.Fatalf("stage rewrite: %v", err)
	}
	return commit(t, tx, "rewrite"), files
}

// UpdateSchema applies the schema changes fn stages and commits them.
func UpdateSchema(t testing.TB, tbl *table.Table, fn func(*table.UpdateSchema)) *table.Table {
	t.Helper()
	tx := tbl.NewTransaction()
	u := tx.UpdateSchema(true, false)
	fn(u)
	if err := u.Commit(); err != nil {
		t.Fatalf("stage schema update: %v", err)
	}
	return commit(t, tx, "schema update")
}

// UpdateSpec applies the partition spec changes fn stages and commits them;
// the new spec becomes the default for later writes.
func UpdateSpec(t testing.TB, tbl *table.Table, fn func(*table.UpdateSpec)) *table.Table {
	t.Helper()
	tx := tbl.NewTransaction()
	u := tx.UpdateSpec(true)
	fn(u)
	if err := u.Commit(); err != nil {
		t.Fatalf("stage spec update: %v", err)
	}
	return commit(t, tx, "spec update")
}

// LiveFiles lists the live files of the given content (data, position
// deletes or equality deletes) in the table's current snapshot.
func LiveFiles(t testing.TB, tbl *table.Table, content iceberg.ManifestEntryContent) []iceberg.DataFile {
	t.Helper()
	return files(t, tbl, content, false)
}

// AddedFiles lists the files of the given content that the current snapshot
// added.
func AddedFiles(t testing.TB, tbl *table.Table, content iceberg.ManifestEntryContent) []iceberg.DataFile {
	t.Helper()
	return files(t, tbl, content, true)
}

func files(t testing.TB, tbl *table.Table, content iceberg.ManifestEntryContent, addedOnly bool) []iceberg.DataFile {
	t.Helper()
	snap := tbl.CurrentSnapshot()
	if snap == nil {
		return nil
	}
	fs, err := tbl.FS(context.Background())
	if err != nil {
		t.Fatalf("table io: %v", err)
	}
	manifests, err := snap.Manifests(fs)
	if err != nil {
		t.Fatalf("read manifest list: %v", err)
	}
	var out []iceberg.DataFile
	for _, m := range manifests {
		for e, err := range m.Entries(fs, true) {
			if err != nil {
				t.Fatalf("read manifest %s: %v", m.FilePath(), err)
			}
			if e.DataFile().ContentType() != content {
				continue
			}
			if addedOnly && (e.Status() != iceberg.EntryStatusADDED || e.SnapshotID() != snap.SnapshotID) {
				continue
			}
			out = append(out, e.DataFile())
		}
	}
	return out
}

// writeParquet writes rows of schema (canonical Go values, schema field
// order) as one Parquet file in the table's data location, with Parquet field
// IDs, and returns its location and size.
func writeParquet(t testing.TB, tbl *table.Table, prefix string, schema *iceberg.Schema, rows [][]any) (string, int64) {
	t.Helper()
	rec := Record(t, schema, rows...)
	defer rec.Release()
	return writeRecord(t, tbl, prefix, rec)
}

// writeRecord writes rec as one Parquet file in the table's data location;
// Arrow fields with PARQUET:field_id metadata get Parquet field IDs.
func writeRecord(t testing.TB, tbl *table.Table, prefix string, rec arrow.RecordBatch) (string, int64) {
	t.Helper()
	var buf bytes.Buffer
	w, err := pqarrow.NewFileWriter(rec.Schema(), &buf, parquet.NewWriterProperties(),
		pqarrow.NewArrowWriterProperties(pqarrow.WithStoreSchema()))
	if err != nil {
		t.Fatalf("parquet writer: %v", err)
	}
	if err := w.Write(rec); err != nil {
		t.Fatalf("write parquet: %v", err)
	}
	if err := w.Close(); err != nil {
		t.Fatalf("close parquet writer: %v", err)
	}
	lp, err := tbl.LocationProvider()
	if err != nil {
		t.Fatalf("location provider: %v", err)
	}
	path := lp.NewDataLocation(prefix + "-" + uuid.NewString() + ".parquet")
	if err := writeFS(t, tbl).WriteFile(path, buf.Bytes()); err != nil {
		t.Fatalf("write %s: %v", path, err)
	}
	return path, int64(buf.Len())
}

func writeFS(t testing.TB, tbl *table.Table) iceio.WriteFileIO {
	t.Helper()
	fs, err := tbl.FS(context.Background())
	if err != nil {
		t.Fatalf("table io: %v", err)
	}
	wfs, ok := fs.(iceio.WriteFileIO)
	if !ok {
		t.Fatalf("table io %T cannot write files", fs)
	}
	return wfs
}

func selectFields(t testing.TB, schema *iceberg.Schema, ids []int) *iceberg.Schema {
	t.Helper()
	fields := make([]iceberg.NestedField, len(ids))
	for i, id := range ids {
		f, ok := schema.FindFieldByID(id)
		if !ok {
			t.Fatalf("field id %d is not in the table schema", id)
		}
		fields[i] = f
	}
	return iceberg.NewSchema(0, fields...)
}

func specByID(t testing.TB, tbl *table.Table, id int) iceberg.PartitionSpec {
	t.Helper()
	spec := tbl.Metadata().PartitionSpecByID(id)
	if spec == nil {
		t.Fatalf("table has no partition spec %d", id)
	}
	return *spec
}

func samePartition(a, b map[int]any) bool {
	return fmt.Sprintf("%#v", a) == fmt.Sprintf("%#v", b)
}

func commit(t testing.TB, tx *table.Transaction, what string) *table.Table {
	t.Helper()
	tbl, err := tx.Commit(context.Background())
	if err != nil {
		t.Fatalf("commit %s: %v", what, err)
	}
	return tbl
}
