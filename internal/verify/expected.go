package verify

import (
	"context"
	"fmt"
	"slices"
	"strconv"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/apache/iceberg-go/table"

	"github.com/streamidx/streamidx/format"
	"github.com/streamidx/streamidx/internal/extsort"
)

const fieldIDKey = "PARQUET:field_id"

// scanBatchRows caps the rows of a batch of live rows: unbounded, a batch
// is a whole row group, and with the entries made of it held hundreds of
// megabytes beside the two sorts.
const scanBatchRows = 64 << 10

// expected adds the encoding of every entry the index must hold.
func (v *verifier) expected(out *extsort.Sorter) error {
	scan := v.tbl.Scan(table.WithSnapshotID(v.source.SnapshotID), table.WithArrowBatchSize(scanBatchRows))
	defer scan.Close()
	tasks, err := scan.PlanFiles(v.ctx)
	if err != nil {
		return fmt.Errorf("plan scan of source snapshot %d: %w", v.source.SnapshotID, err)
	}
	// On a v3 table iceberg-go gives each live row its _row_id, the data
	// file's first_row_id plus the row's position: the positions of the
	// rows of a file with deletes, without reading it a second time.
	var lineage *table.Scan
	if v.posPos >= 0 && v.tbl.Metadata().Version() >= 3 {
		lineage = v.tbl.Scan(table.WithSnapshotID(v.source.SnapshotID), table.WithArrowBatchSize(scanBatchRows), table.WithRowLineage())
		defer lineage.Close()
	}
	eq, err := newEqualityDeletes(v)
	if err != nil {
		return err
	}
	s := &entryScratch{entry: make(format.Key, len(v.stored))}
	for _, task := range tasks {
		if err := v.expectedFile(scan, lineage, eq, task, s, out); err != nil {
			return fmt.Errorf("expected entries of data file %s: %w", task.File.FilePath(), err)
		}
	}
	return nil
}

func (v *verifier) expectedFile(scan, lineage *table.Scan, eq *equalityDeletes, task table.FileScanTask, s *entryScratch, out *extsort.Sorter) error {
	// The task's equality deletes are applied here, after iceberg-go has
	// read the rows and applied the other deletes (see equalityDeletes).
	var deletes *taskDeletes
	if len(task.EqualityDeleteFiles) > 0 && eq.handles(task.EqualityDeleteFiles) {
		var err error
		if deletes, err = eq.forTask(task.EqualityDeleteFiles); err != nil {
			return err
		}
		task.EqualityDeleteFiles = nil
	}
	var loc *locator // nil when the index stores no positions
	if v.posPos >= 0 {
		loc = v.newLocator(task)
		if !loc.sequential && lineage != nil {
			byRowID, err := v.rowIDsArePositions(task)
			if err != nil {
				return err
			}
			if byRowID {
				loc.byRowID, scan = true, lineage
			}
		}
	}
	_, recs, err := scan.ReadTasks(v.ctx, []table.FileScanTask{task})
	if err != nil {
		return err
	}
	path := task.File.FilePath()
	for rec, err := range recs {
		if err != nil {
			return err
		}
		s.deleted = slices.Grow(s.deleted[:0], int(rec.NumRows()))[:rec.NumRows()]
		clear(s.deleted)
		if deletes != nil {
			err = deletes.mark(rec, s.deleted)
		}
		if err == nil {
			err = v.expectedBatch(rec, path, loc, s, out)
		}
		rec.Release()
		if err != nil {
			return err
		}
	}
	if loc != nil {
		return loc.finish()
	}
	return nil
}

// entryScratch is the scratch space of expectedBatch, kept across batches.
type entryScratch struct {
	positions []int64
	deleted   []bool // rows of the batch that an equality delete removes
	entry     format.Key
	enc       []byte
}

// expectedBatch adds the entries of one batch of live rows, but for those
// s.deleted marks.
func (v *verifier) expectedBatch(rec arrow.RecordBatch, path string, loc *locator, s *entryScratch, out *extsort.Sorter) error {
	mem := memory.DefaultAllocator
	s.positions = s.positions[:0]
	if loc != nil {
		var err error
		if s.positions, err = loc.positions(rec, s.positions); err != nil {
			return err
		}
	}
	withLoc := addLocation(mem, rec, path, s.positions)
	entries, err := format.Entries(mem, v.is, format.RecordColumns(withLoc, v.schema))
	withLoc.Release()
	if err != nil {
		return err
	}
	defer entries.Release()
	file := v.files.number(path)
	for i := 0; i < int(entries.NumRows()); i++ {
		if s.deleted[i] {
			continue
		}
		si := 0
		for col, f := range v.is.Fields() {
			if !f.Stored() {
				continue
			}
			if si == v.filePos {
				s.entry[si] = file
			} else {
				s.entry[si] = format.ValueAtAs(f.Type, entries.Column(col), i)
			}
			si++
		}
		if s.enc, err = v.encode(s.enc[:0], s.entry); err != nil {
			return err
		}
		if err := out.Add(s.enc, nil); err != nil {
			return err
		}
	}
	return nil
}

// addLocation appends _file and _pos columns (positions may be nil when
// the index stores none) to a batch of live rows.
func addLocation(mem memory.Allocator, rec arrow.RecordBatch, path string, positions []int64) arrow.RecordBatch {
	n := int(rec.NumRows())
	fb := array.NewStringBuilder(mem)
	defer fb.Release()
	fb.Reserve(n)
	fb.ReserveData(n * len(path))
	for range n {
		fb.Append(path)
	}
	pb := array.NewInt64Builder(mem)
	defer pb.Release()
	if len(positions) == n {
		pb.AppendValues(positions, nil)
	} else {
		for range n {
			pb.AppendNull()
		}
	}
	fileArr, posArr := fb.NewArray(), pb.NewArray()
	defer fileArr.Release()
	defer posArr.Release()
	fields := append(append([]arrow.Field{}, rec.Schema().Fields()...),
		arrow.Field{Name: format.NameFile, Type: arrow.BinaryTypes.String, Metadata: idMeta(format.FieldIDFile)},
		arrow.Field{Name: format.NamePos, Type: arrow.PrimitiveTypes.Int64, Nullable: true, Metadata: idMeta(format.FieldIDPos)})
	cols := append(append([]arrow.Array{}, rec.Columns()...), fileArr, posArr)
	return array.NewRecordBatch(arrow.NewSchema(fields, nil), cols, rec.NumRows())
}

func idMeta(id int) arrow.Metadata {
	return arrow.NewMetadata([]string{fieldIDKey}, []string{strconv.Itoa(id)})
}

// appendLeaves appends the Parquet leaf column indices under f.
func appendLeaves(dst []int, f *pqarrow.SchemaField) []int {
	if f.IsLeaf() {
		return append(dst, f.ColIndex)
	}
	for i := range f.Children {
		dst = appendLeaves(dst, &f.Children[i])
	}
	return dst
}

// fieldIDs gives the field ID of each top-level live column: from its
// metadata, else from the schema by name (-1 when unknown).
func (v *verifier) fieldIDs(s *arrow.Schema) []int {
	ids := make([]int, s.NumFields())
	for i, f := range s.Fields() {
		if id, ok := metaID(f); ok {
			ids[i] = id
			continue
		}
		ids[i] = -1
		if nf, ok := v.schema.FindFieldByName(f.Name); ok {
			ids[i] = nf.ID
		}
	}
	return ids
}

func metaID(f arrow.Field) (int, bool) {
	s, ok := f.Metadata.GetValue(fieldIDKey)
	if !ok {
		return 0, false
	}
	id, err := strconv.Atoi(s)
	return id, err == nil
}

func castLike(arr arrow.Array, dt arrow.DataType) (arrow.Array, error) {
	if arrow.TypeEqual(arr.DataType(), dt) {
		arr.Retain()
		return arr, nil
	}
	if ext, ok := dt.(arrow.ExtensionType); ok && arrow.TypeEqual(arr.DataType(), ext.StorageType()) {
		return array.NewExtensionArrayWithStorage(ext, arr), nil
	}
	out, err := compute.CastArray(compute.WithAllocator(context.Background(), memory.DefaultAllocator), arr, compute.SafeCastOptions(dt))
	if err != nil {
		return nil, fmt.Errorf("convert raw column %s to %s: %w", arr.DataType(), dt, err)
	}
	return out, nil
}
