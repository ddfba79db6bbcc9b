package verify

import (
	"context"
	"crypto/sha256"
	"fmt"
	"strconv"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/apache/iceberg-go/table"

	"github.com/streamidx/streamidx/format"
	"github.com/streamidx/streamidx/internal/extsort"
)

const fieldIDKey = "PARQUET:field_id"

// expected adds the encoding of every entry the index must hold.
func (v *verifier) expected(out *extsort.Sorter) error {
	scan := v.tbl.Scan(table.WithSnapshotID(v.source.SnapshotID))
	defer scan.Close()
	tasks, err := scan.PlanFiles(v.ctx)
	if err != nil {
		return fmt.Errorf("plan scan of source snapshot %d: %w", v.source.SnapshotID, err)
	}
	for _, task := range tasks {
		if err := v.expectedFile(scan, task, out); err != nil {
			return fmt.Errorf("expected entries of data file %s: %w", task.File.FilePath(), err)
		}
	}
	return nil
}

func (v *verifier) expectedFile(scan *table.Scan, task table.FileScanTask, out *extsort.Sorter) error {
	_, recs, err := scan.ReadTasks(v.ctx, []table.FileScanTask{task})
	if err != nil {
		return err
	}
	var live []arrow.RecordBatch
	defer func() {
		for _, r := range live {
			r.Release()
		}
	}()
	for rec, err := range recs {
		if err != nil {
			return err
		}
		rec.Retain()
		live = append(live, rec)
	}
	path := task.File.FilePath()
	var positions []int64
	if v.posPos >= 0 {
		if positions, err = v.livePositions(path, live); err != nil {
			return err
		}
	}
	mem := memory.DefaultAllocator
	var enc []byte
	row := 0
	entry := make(format.Key, len(v.stored))
	for _, rec := range live {
		withLoc := addLocation(mem, rec, path, positions[min(row, len(positions)):min(row+int(rec.NumRows()), len(positions))])
		entries, err := format.Entries(mem, v.is, format.RecordColumns(withLoc, v.schema))
		withLoc.Release()
		if err != nil {
			return err
		}
		for i := 0; i < int(entries.NumRows()); i++ {
			si := 0
			for col, f := range v.is.Fields() {
				if f.Stored() {
					entry[si] = format.ValueAtAs(f.Type, entries.Column(col), i)
					si++
				}
			}
			if enc, err = v.encode(enc[:0], entry); err != nil {
				entries.Release()
				return err
			}
			if err := out.Add(enc, nil); err != nil {
				entries.Release()
				return err
			}
		}
		row += int(rec.NumRows())
		entries.Release()
	}
	return nil
}

// addLocation appends _file and _pos columns (positions may be nil when
// the index stores none) to a batch of live rows.
func addLocation(mem memory.Allocator, rec arrow.RecordBatch, path string, positions []int64) arrow.RecordBatch {
	n := int(rec.NumRows())
	fb := array.NewStringBuilder(mem)
	defer fb.Release()
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

// livePositions finds the position in the data file of every live row that
// iceberg-go returned, in order. The live rows of a file are the file's rows
// minus the deleted ones, in file order, so the k-th live row with a given
// content is at one of the positions of that content in the raw file. When
// all rows of a content are live, they map one to one; when some identical
// rows were deleted, no content tells which, and the rows get a placeholder
// position that stands for "any of these positions".
func (v *verifier) livePositions(path string, live []arrow.RecordBatch) ([]int64, error) {
	if len(live) == 0 {
		return nil, nil
	}
	liveSchema := live[0].Schema()
	rawHashes, liveCols, err := v.rawRowHashes(path, liveSchema)
	if err != nil {
		return nil, err
	}
	byHash := map[[16]byte][]int64{}
	for pos, h := range rawHashes {
		byHash[h] = append(byHash[h], int64(pos))
	}
	var liveHashes [][16]byte
	count := map[[16]byte]int{}
	for _, rec := range live {
		for i := 0; i < int(rec.NumRows()); i++ {
			h := rowHash(pick(rec.Columns(), liveCols), i)
			liveHashes = append(liveHashes, h)
			count[h]++
		}
	}
	placeholder := map[[16]byte]int64{}
	next := int64(-1)
	used := map[[16]byte]int{}
	out := make([]int64, len(liveHashes))
	for i, h := range liveHashes {
		cands := byHash[h]
		switch {
		case count[h] > len(cands):
			return nil, fmt.Errorf("iceberg-go returned a row (#%d) that the data file does not hold", i)
		case count[h] == len(cands):
			out[i] = cands[used[h]]
			used[h]++
		default:
			p, ok := placeholder[h]
			if !ok {
				p, next = next, next-1
				placeholder[h] = p
				amb := v.ambiguous[path]
				if amb == nil {
					amb = map[int64]int64{}
					v.ambiguous[path] = amb
				}
				for _, c := range cands {
					amb[c] = p
				}
			}
			out[i] = p
			v.report.AmbiguousRows++
		}
	}
	return out, nil
}

// rawRowHashes reads every row of a data file, as stored, and hashes the
// columns that the live rows also have (matched by field ID), converted to
// the live rows' types.
func (v *verifier) rawRowHashes(path string, liveSchema *arrow.Schema) (hashes [][16]byte, liveCols []int, err error) {
	f, err := v.opts.Store.Open(v.ctx, path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	pf, err := file.NewParquetReader(f)
	if err != nil {
		return nil, nil, fmt.Errorf("open parquet: %w", err)
	}
	defer pf.Close()
	fr, err := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{BatchSize: 8192}, memory.DefaultAllocator)
	if err != nil {
		return nil, nil, fmt.Errorf("read parquet schema: %w", err)
	}
	rawSchema, err := fr.Schema()
	if err != nil {
		return nil, nil, err
	}
	// live column index -> raw column index
	liveIDs := v.fieldIDs(liveSchema)
	var rawCols []int
	for li, id := range liveIDs {
		for ri, rf := range rawSchema.Fields() {
			if rid, ok := metaID(rf); ok && rid == id && id >= 0 {
				rawCols = append(rawCols, ri)
				liveCols = append(liveCols, li)
			}
		}
	}
	// The reader takes Parquet leaf columns, not top-level fields: a struct,
	// list or map field spans several leaves. Asking for every leaf of the
	// chosen fields yields exactly those fields, in the order given.
	var leaves []int
	for _, ri := range rawCols {
		leaves = appendLeaves(leaves, &fr.Manifest.Fields[ri])
	}
	rr, err := fr.GetRecordReader(v.ctx, leaves, nil)
	if err != nil {
		return nil, nil, err
	}
	defer rr.Release()
	for rr.Next() {
		rec := rr.RecordBatch()
		cols := make([]arrow.Array, 0, len(liveCols))
		release := func() {
			for _, c := range cols {
				c.Release()
			}
		}
		for i := range liveCols {
			c, err := castLike(rec.Column(i), liveSchema.Field(liveCols[i]).Type)
			if err != nil {
				release()
				return nil, nil, fmt.Errorf("column %s: %w", liveSchema.Field(liveCols[i]).Name, err)
			}
			cols = append(cols, c)
		}
		for i := 0; i < int(rec.NumRows()); i++ {
			hashes = append(hashes, rowHash(cols, i))
		}
		release()
	}
	if err := rr.Err(); err != nil {
		return nil, nil, err
	}
	return hashes, liveCols, nil
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

// rowHash fingerprints one row over the given columns.
func rowHash(cols []arrow.Array, i int) [16]byte {
	h := sha256.New()
	for _, c := range cols {
		if c.IsNull(i) {
			h.Write([]byte{0})
			continue
		}
		h.Write([]byte{1})
		s := c.ValueStr(i)
		h.Write(strconv.AppendInt(nil, int64(len(s)), 10))
		h.Write([]byte(s))
	}
	var out [16]byte
	copy(out[:], h.Sum(nil))
	return out
}

func pick(cols []arrow.Array, idx []int) []arrow.Array {
	out := make([]arrow.Array, len(idx))
	for i, c := range idx {
		out[i] = cols[c]
	}
	return out
}
