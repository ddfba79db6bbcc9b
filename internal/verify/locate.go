package verify

import (
	"fmt"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
)

// locator finds the position in its data file of every live row iceberg-go
// returns for one file scan task, batch by batch as they come.
//
// On a v3 table (byRowID), iceberg-go gives each live row its _row_id:
// the file's first_row_id plus the row's position when the file stores no
// row IDs of its own (rowIDsArePositions), so the position is read off
// the row.
//
// A task without delete files of any kind loses no rows: its live rows are
// the file's rows in order, and their count must be the file's. Otherwise
// the live rows are the file's rows minus the deleted ones, still in file
// order, so each live row is matched with the first row of the same content
// (by contentHash) at or after the previous match in a plain read of the
// data file; the rows passed over are the deleted ones. When a deleted row
// has the content of a live row, no content tells which of the identical
// rows were deleted: all rows of that content get one placeholder position
// that stands for "any of these positions" (see verifier.ambiguous), and
// the index may point at any of them.
type locator struct {
	v    *verifier
	task table.FileScanTask
	// sequential is true when the task has no delete files.
	sequential bool
	// byRowID: positions are the rows' _row_id less the file's first_row_id.
	byRowID bool
	lastPos int64 // the position of the previous live row (byRowID)
	seen    int64 // live rows located so far

	raw      []contentHash // of every row of the data file; nil until the first batch
	liveCols []int         // live columns that the data file stores (by field ID)
	next     int           // raw position the next live row is looked for from
	skipped  []int         // raw positions passed over: deleted rows, ascending
	scratch  []contentHash
}

func (v *verifier) newLocator(task table.FileScanTask) *locator {
	return &locator{v: v, task: task,
		sequential: len(task.DeleteFiles) == 0 && len(task.EqualityDeleteFiles) == 0 && len(task.DeletionVectorFiles) == 0}
}

// positions appends the position of each row of rec, the next batch of the
// task's live rows, to dst.
func (l *locator) positions(rec arrow.RecordBatch, dst []int64) ([]int64, error) {
	n := int(rec.NumRows())
	if l.sequential {
		for i := range int64(n) {
			dst = append(dst, l.seen+i)
		}
		l.seen += int64(n)
		return dst, nil
	}
	if l.byRowID {
		return l.rowIDPositions(rec, dst)
	}
	if l.raw == nil {
		var err error
		if l.raw, l.liveCols, err = l.v.rawHashes(l.task.File.FilePath(), l.task.File.Count(), rec.Schema()); err != nil {
			return nil, err
		}
	}
	l.scratch = slices.Grow(l.scratch[:0], n)[:n]
	l.v.hasher.hashRows(pick(rec.Columns(), l.liveCols), l.scratch)
	for i, h := range l.scratch {
		j := l.next
		for j < len(l.raw) && l.raw[j] != h {
			j++
		}
		if j == len(l.raw) {
			return nil, fmt.Errorf("iceberg-go returned a row (#%d) that the data file does not hold after position %d", l.seen+int64(i), l.next)
		}
		for k := l.next; k < j; k++ {
			l.skipped = append(l.skipped, k)
		}
		dst = append(dst, int64(j))
		l.next = j + 1
	}
	l.seen += int64(n)
	return dst, nil
}

// rowIDPositions appends the positions of a batch of live rows that carry
// their _row_id. They must lie in the file and ascend: a live row comes
// once, in file order.
func (l *locator) rowIDPositions(rec arrow.RecordBatch, dst []int64) ([]int64, error) {
	var ids *array.Int64
	for i, f := range rec.Schema().Fields() {
		if id, ok := metaID(f); (ok && id == iceberg.RowIDFieldID) || (!ok && f.Name == iceberg.RowIDColumnName) {
			ids, _ = rec.Column(i).(*array.Int64)
		}
	}
	if ids == nil {
		return nil, fmt.Errorf("iceberg-go returned no %s column of type long", iceberg.RowIDColumnName)
	}
	first, count := *l.task.FirstRowID, l.task.File.Count()
	for i := range ids.Len() {
		if ids.IsNull(i) {
			return nil, fmt.Errorf("iceberg-go returned a row (#%d) without %s", l.seen+int64(i), iceberg.RowIDColumnName)
		}
		pos := ids.Value(i) - first
		if pos < 0 || pos >= count || (l.seen+int64(i) > 0 && pos <= l.lastPos) {
			return nil, fmt.Errorf("iceberg-go returned a row (#%d) with %s %d: position %d, not after %d in a file of %d rows from row ID %d",
				l.seen+int64(i), iceberg.RowIDColumnName, ids.Value(i), pos, l.lastPos, count, first)
		}
		l.lastPos = pos
		dst = append(dst, pos)
	}
	l.seen += int64(ids.Len())
	return dst, nil
}

// rowIDsArePositions tells whether the live rows of task carry their
// position in the form of a _row_id: the task has a first_row_id and the
// data file stores no row IDs (a file that does, rewritten with its rows'
// lineage, keeps theirs).
func (v *verifier) rowIDsArePositions(task table.FileScanTask) (bool, error) {
	if task.FirstRowID == nil {
		return false, nil
	}
	f, err := v.opts.Store.Open(v.ctx, task.File.FilePath())
	if err != nil {
		return false, err
	}
	defer f.Close()
	pf, err := file.NewParquetReader(f)
	if err != nil {
		return false, fmt.Errorf("open parquet: %w", err)
	}
	defer pf.Close()
	root := pf.MetaData().Schema.Root()
	for i := range root.NumFields() {
		if root.Field(i).FieldID() == iceberg.RowIDFieldID {
			return false, nil
		}
	}
	return true, nil
}

// finish checks the count of a task without deletes, and gives the rows of
// contents that a deleted row shares with a live one their placeholder.
func (l *locator) finish() error {
	if l.byRowID {
		return nil
	}
	if l.sequential {
		if l.seen != l.task.File.Count() {
			return fmt.Errorf("iceberg-go returned %d rows of a data file without deletes that holds %d", l.seen, l.task.File.Count())
		}
		return nil
	}
	for k := l.next; k < len(l.raw); k++ {
		l.skipped = append(l.skipped, k)
	}
	if len(l.skipped) == 0 {
		return nil
	}
	deleted := make(map[contentHash]bool, len(l.skipped))
	for _, k := range l.skipped {
		deleted[l.raw[k]] = true
	}
	// A content is ambiguous when a live row (one not skipped) shares it.
	placeholder := map[contentHash]int64{}
	next := int64(-1)
	var rows int64
	s := 0
	for j, h := range l.raw {
		if s < len(l.skipped) && l.skipped[s] == j {
			s++
			continue
		}
		if !deleted[h] {
			continue
		}
		if _, ok := placeholder[h]; !ok {
			placeholder[h], next = next, next-1
		}
		rows++
	}
	if len(placeholder) == 0 {
		return nil
	}
	amb := map[int64]int64{}
	for j, h := range l.raw {
		if p, ok := placeholder[h]; ok {
			amb[int64(j)] = p
		}
	}
	l.v.report.AmbiguousRows += rows
	l.v.ambiguous[l.task.File.FilePath()] = amb
	return nil
}

// rawHashes reads every row of a data file, as stored, and fingerprints the
// columns that the live rows also have (matched by field ID), converted to
// the live rows' types.
// rows, the file's record count, sizes the result.
func (v *verifier) rawHashes(path string, rows int64, liveSchema *arrow.Schema) (hashes []contentHash, liveCols []int, err error) {
	liveIDs := v.fieldIDs(liveSchema)
	types := make([]arrow.DataType, len(liveIDs))
	for i := range types {
		types[i] = liveSchema.Field(i).Type
	}
	hashes = make([]contentHash, 0, rows)
	liveCols, err = v.hashColumns(path, liveIDs, types, false, 8192, func(sums []contentHash) {
		hashes = append(hashes, sums...)
	})
	return hashes, liveCols, err
}

// hashColumns reads the Parquet file at path, as stored, and calls each
// with the fingerprints of each batch of its rows over the columns of
// field IDs ids that the file holds (matched by field ID, in the order of
// ids), each cast to types[i] first. It returns the indices into ids of the
// columns the file holds; with all, a column the file lacks is an error.
// sums is valid only during the call.
func (v *verifier) hashColumns(path string, ids []int, types []arrow.DataType, all bool, batchRows int, each func(sums []contentHash)) (held []int, err error) {
	f, err := v.opts.Store.Open(v.ctx, path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	pf, err := file.NewParquetReader(f)
	if err != nil {
		return nil, fmt.Errorf("open parquet: %w", err)
	}
	defer pf.Close()
	fr, err := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{BatchSize: int64(batchRows)}, memory.DefaultAllocator)
	if err != nil {
		return nil, fmt.Errorf("read parquet schema: %w", err)
	}
	rawSchema, err := fr.Schema()
	if err != nil {
		return nil, err
	}
	// The reader takes Parquet leaf columns, not top-level fields: a struct,
	// list or map field spans several leaves. Asking for every leaf of the
	// chosen fields yields exactly those fields, in the order given.
	var leaves []int
	for i, id := range ids {
		ri := slices.IndexFunc(rawSchema.Fields(), func(rf arrow.Field) bool {
			rid, ok := metaID(rf)
			return ok && rid == id && id >= 0
		})
		if ri < 0 {
			if all {
				return nil, fmt.Errorf("no column of field ID %d", id)
			}
			continue
		}
		held = append(held, i)
		leaves = appendLeaves(leaves, &fr.Manifest.Fields[ri])
	}
	rr, err := fr.GetRecordReader(v.ctx, leaves, nil)
	if err != nil {
		return nil, err
	}
	defer rr.Release()
	var sums []contentHash
	cols := make([]arrow.Array, len(held))
	for rr.Next() {
		rec := rr.RecordBatch()
		for c, i := range held {
			if cols[c], err = castLike(rec.Column(c), types[i]); err != nil {
				releaseAll(cols[:c])
				return nil, fmt.Errorf("column of field ID %d: %w", ids[i], err)
			}
		}
		n := int(rec.NumRows())
		sums = slices.Grow(sums[:0], n)[:n]
		v.hasher.hashRows(cols, sums)
		releaseAll(cols)
		each(sums)
	}
	if err := rr.Err(); err != nil {
		return nil, err
	}
	return held, nil
}

func releaseAll(cols []arrow.Array) {
	for _, c := range cols {
		c.Release()
	}
}

func pick(cols []arrow.Array, idx []int) []arrow.Array {
	out := make([]arrow.Array, len(idx))
	for i, c := range idx {
		out[i] = cols[c]
	}
	return out
}
