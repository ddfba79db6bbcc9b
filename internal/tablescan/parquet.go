package tablescan

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/apache/iceberg-go"
	iceio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"

	"github.com/streamidx/streamidx/format"
)

// parquetFile is an open Parquet file whose top-level columns are matched to
// Iceberg field IDs: by the Parquet field IDs, or by the table's name mapping
// for files written without them.
type parquetFile struct {
	path    string
	rdr     *file.Reader
	fr      *pqarrow.FileReader
	mapping iceberg.NameMapping
	topIDs  []int // field ID of each top-level field; -1 when unknown
}

func openParquet(fs iceio.IO, path string, mapping iceberg.NameMapping, batchRows int, mem memory.Allocator) (*parquetFile, error) {
	f, err := fs.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	rdr, err := file.NewParquetReader(f)
	if err != nil {
		return nil, errors.Join(format.MarkCorruption(path, fmt.Errorf("not a readable Parquet file: %w", err)), f.Close())
	}
	fr, err := pqarrow.NewFileReader(rdr, pqarrow.ArrowReadProperties{BatchSize: int64(batchRows)}, mem)
	if err != nil {
		return nil, errors.Join(format.MarkCorruption(path, fmt.Errorf("Parquet schema: %w", err)), rdr.Close())
	}
	p := &parquetFile{path: path, rdr: rdr, fr: fr, mapping: mapping}
	for _, sf := range fr.Manifest.Fields {
		p.topIDs = append(p.topIDs, p.fieldID(sf.Field))
	}
	return p, nil
}

func (p *parquetFile) Close() error {
	if err := p.rdr.Close(); err != nil {
		return fmt.Errorf("close %s: %w", p.path, err)
	}
	return nil
}

// fieldID is the Iceberg field ID of a top-level column: the Parquet field
// ID when the writer set one (pqarrow reports an unset ID as -1), otherwise
// the name mapping's, otherwise -1.
func (p *parquetFile) fieldID(f *arrow.Field) int {
	if s, ok := f.Metadata.GetValue("PARQUET:field_id"); ok {
		if id, err := strconv.Atoi(s); err == nil && id >= 0 {
			return id
		}
	}
	for _, m := range p.mapping {
		if m.FieldID != nil && contains(m.Names, f.Name) {
			return *m.FieldID
		}
	}
	return -1
}

func contains(names []string, name string) bool {
	for _, n := range names {
		if n == name {
			return true
		}
	}
	return false
}

func (p *parquetFile) numRows() int64 { return p.rdr.NumRows() }

// read streams the rows of the file converted to schema: its top-level
// fields are matched by field ID, cast to schema's types by iceberg-go's
// rules, and a field the file lacks reads as its initial default or null.
// Row groups are read in order, so fn gets each batch with the position of
// its first row in the file. The batch is released when fn returns.
func (p *parquetFile) read(ctx context.Context, schema *iceberg.Schema, so table.SchemaOptions, wanted func(start, n int64) bool,
	fn func(rec arrow.RecordBatch, start int64) error) error {
	r := rowGroupReader{p: p, leaves: p.leaves(schema), schema: schema, so: so, fn: fn}
	var start int64
	md := p.rdr.MetaData()
	for rg := range p.rdr.NumRowGroups() {
		n := md.RowGroup(rg).NumRows()
		if n == 0 {
			continue
		}
		if wanted != nil && !wanted(start, n) {
			start += n
			continue
		}
		got, err := r.readRowGroup(ctx, rg, start)
		if err != nil {
			return err
		}
		if got != n {
			return format.MarkCorruption(p.path, fmt.Errorf("row group %d has %d rows, its metadata says %d", rg, got, n))
		}
		start += n
	}
	return nil
}

// rowGroupReader carries the state of one read across row groups.
type rowGroupReader struct {
	p          *parquetFile
	leaves     []int
	schema     *iceberg.Schema
	fileSchema *iceberg.Schema // of the columns read; known after the first batch
	so         table.SchemaOptions
	fn         func(rec arrow.RecordBatch, start int64) error
}

// readRowGroup passes the rows of row group rg, whose first row is at
// position start, to fn and returns how many it read.
func (r *rowGroupReader) readRowGroup(ctx context.Context, rg int, start int64) (int64, error) {
	rr, err := r.p.fr.GetRecordReader(ctx, r.leaves, []int{rg})
	if err != nil {
		return 0, fmt.Errorf("read row group %d of %s: %w", rg, r.p.path, err)
	}
	defer rr.Release()
	pos := start
	for rr.Next() {
		raw := rr.RecordBatch()
		if r.fileSchema == nil {
			if r.fileSchema, err = table.ArrowSchemaToIceberg(raw.Schema(), false, r.p.mapping); err != nil {
				return 0, fmt.Errorf("match columns of %s to field IDs: %w", r.p.path, err)
			}
		}
		rec, err := table.ToRequestedSchema(ctx, r.schema, r.fileSchema, raw, r.so)
		if err != nil {
			return 0, fmt.Errorf("convert rows of %s: %w", r.p.path, err)
		}
		err = r.fn(rec, pos)
		pos += rec.NumRows()
		rec.Release()
		if err != nil {
			return 0, err
		}
	}
	if err := rr.Err(); err != nil {
		return 0, fmt.Errorf("read row group %d of %s: %w", rg, r.p.path, err)
	}
	return pos - start, nil
}

// leaves lists the Parquet leaf columns to read for schema: every leaf of
// each top-level column whose field ID is a top-level field of schema. When
// none matches (a projection of columns the file predates, or of nothing),
// the first column with a known ID is read anyway, because the row counts of
// batches come from the columns read.
func (p *parquetFile) leaves(schema *iceberg.Schema) []int {
	var out []int
	fallback := -1
	for i, sf := range p.fr.Manifest.Fields {
		id := p.topIDs[i]
		if id < 0 {
			continue
		}
		if fallback < 0 {
			fallback = i
		}
		if isTopLevel(schema, id) {
			out = appendLeaves(out, sf)
		}
	}
	if len(out) == 0 && fallback >= 0 {
		out = appendLeaves(out, p.fr.Manifest.Fields[fallback])
	}
	return out
}

func isTopLevel(schema *iceberg.Schema, id int) bool {
	for _, f := range schema.Fields() {
		if f.ID == id {
			return true
		}
	}
	return false
}

func appendLeaves(dst []int, sf pqarrow.SchemaField) []int {
	if sf.IsLeaf() {
		return append(dst, sf.ColIndex)
	}
	for _, c := range sf.Children {
		dst = appendLeaves(dst, c)
	}
	return dst
}
