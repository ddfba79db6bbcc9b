// Package tablescan reads the live rows of an Iceberg table snapshot with
// their row locations: _file, the data file's location, and _pos, the row's
// ordinal in that file. iceberg-go's scans do not project these columns, so
// this package walks the snapshot's manifests itself (iceberg-go reads the
// metadata and manifests), applies position deletes, deletion vectors and
// equality deletes by the spec's rules, and reads data files with arrow-go's
// Parquet reader row group by row group, counting positions.
//
// It is the reference reader of streamidx: the table delta of a commit and
// `streamidx verify` both rest on it. Scan and ScanFile call fn from the
// calling goroutine, one batch at a time; a DeleteIndex may be shared by
// goroutines, and the files of a Plan may be scanned from several at once
// (a full build does).
package tablescan

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/iceberg-go"
	iceio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"

	"github.com/streamidx/streamidx/format"
)

// DefaultBatchRows is the default of Options.BatchRows.
const DefaultBatchRows = 8192

// Options control a scan.
type Options struct {
	// Columns are the field IDs to project, in output order: top-level
	// columns of the schema, format.FieldIDFile and format.FieldIDPos.
	// Default: every top-level column of the schema, then _file and _pos.
	Columns []int
	// BatchRows is how many rows are read from a data file at a time; a
	// batch passed to fn holds at most this many. Default DefaultBatchRows.
	BatchRows int
	// NameMapping matches the columns of data files written without Parquet
	// field IDs by name. Default (Scan): the table's schema.name-mapping.default
	// property; (ScanFile) none.
	NameMapping iceberg.NameMapping
	// FormatVersion is the table's format version; 3 allows the v3 read
	// promotions (date to timestamp). Default (Scan): the table's; (ScanFile) 2.
	FormatVersion int
	// Allocator allocates the Arrow buffers. Default memory.DefaultAllocator.
	Allocator memory.Allocator
}

// EnsureDefaults fills unset fields with their defaults.
func (o *Options) EnsureDefaults() {
	if o.BatchRows <= 0 {
		o.BatchRows = DefaultBatchRows
	}
	if o.FormatVersion == 0 {
		o.FormatVersion = 2
	}
	if o.Allocator == nil {
		o.Allocator = memory.DefaultAllocator
	}
}

// Validate reports options that cannot work with schema.
func (o *Options) Validate(schema *iceberg.Schema) error {
	_, err := newProjection(schema, o.Columns)
	return err
}

// Stats count what a scan read and dropped.
type Stats struct {
	DataFiles    int64 // data files read
	RowsRead     int64 // rows in those files
	RowsLive     int64 // rows passed to fn
	DeletedByPos int64 // rows dropped by position deletes and deletion vectors
	DeletedByEq  int64 // rows dropped by equality deletes (and not by position)
	DeleteFiles  int64 // live delete files of the snapshot
}

// Add adds the counts of o to s, as for scans of parts of a snapshot.
func (s *Stats) Add(o Stats) {
	s.DataFiles += o.DataFiles
	s.RowsRead += o.RowsRead
	s.RowsLive += o.RowsLive
	s.DeletedByPos += o.DeletedByPos
	s.DeletedByEq += o.DeletedByEq
	s.DeleteFiles += o.DeleteFiles
}

// Scan calls fn with Arrow record batches of the live rows of snapshot snap
// of tbl, projected to opts.Columns with the types of the table's current
// schema (iceberg-go's Arrow mapping; fields carry PARQUET:field_id; _file is
// a string, _pos an int64). A batch is valid only during the call; fn must
// Retain what it keeps. Data files are read in manifest order and rows in
// file order. A nil snap (a table without snapshots) scans nothing.
func Scan(ctx context.Context, tbl *table.Table, snap *table.Snapshot, opts Options, fn func(arrow.RecordBatch) error) (Stats, error) {
	plan, err := NewPlan(ctx, tbl, snap, opts)
	if err != nil {
		return Stats{}, err
	}
	stats := Stats{DeleteFiles: plan.DeleteFiles()}
	for i := range plan.Files {
		fst, err := plan.ScanFile(ctx, i, fn)
		stats.Add(fst)
		if err != nil {
			return stats, err
		}
	}
	return stats, nil
}

// Plan is a scan of a snapshot split into its data files, which may be
// scanned in any order and from several goroutines at once: a full build
// reads them in parallel. The live rows of the snapshot are the union of
// the live rows of its files.
type Plan struct {
	// Files are the snapshot's data files in manifest order.
	Files []PlannedFile

	fs      iceio.IO
	schema  *iceberg.Schema
	proj    *projection
	deletes *DeleteIndex
	opts    Options
}

// PlannedFile is a data file of a snapshot with its data sequence number,
// which decides the delete files that apply to it.
type PlannedFile struct {
	File iceberg.DataFile
	Seq  int64
}

// NewPlan reads the manifests of snapshot snap of tbl and indexes its
// delete files; the options are those of Scan. A nil snap (a table
// without snapshots) plans no files.
func NewPlan(ctx context.Context, tbl *table.Table, snap *table.Snapshot, opts Options) (*Plan, error) {
	if opts.NameMapping == nil {
		opts.NameMapping = tbl.NameMapping()
	}
	if opts.FormatVersion == 0 {
		opts.FormatVersion = tbl.Metadata().Version()
	}
	opts.EnsureDefaults()
	schema := tbl.Schema()
	proj, err := newProjection(schema, opts.Columns)
	if err != nil {
		return nil, err
	}
	p := &Plan{schema: schema, proj: proj, opts: opts, deletes: &DeleteIndex{}}
	if snap == nil {
		return p, nil
	}
	if p.fs, err = tbl.FS(ctx); err != nil {
		return nil, fmt.Errorf("open table io: %w", err)
	}
	// Through the process's caches of manifest lists and manifests, which
	// the table delta reads too: the first update after a build then reads
	// only the manifests of the commits since.
	manifests, err := ManifestList(p.fs, snap)
	if err != nil {
		return nil, err
	}
	if p.deletes, err = planDeletes(ctx, p.fs, tbl.Metadata(), manifests); err != nil {
		return nil, err
	}
	for _, m := range manifests {
		if m.ManifestContent() != iceberg.ManifestContentData {
			continue
		}
		entries, err := LiveEntries(ctx, p.fs, m) // its error names the manifest
		if err != nil {
			return nil, err
		}
		for _, e := range entries {
			if e.File.ContentType() != iceberg.EntryContentData {
				return nil, fmt.Errorf("data manifest %s lists %s with content %s", m.FilePath(), e.File.FilePath(), e.File.ContentType())
			}
			p.Files = append(p.Files, PlannedFile{File: e.File, Seq: e.Seq})
		}
	}
	return p, nil
}

// DeleteFiles is the number of live delete files of the snapshot.
func (p *Plan) DeleteFiles() int64 { return int64(p.deletes.Len()) }

// ScanFile calls fn with the live rows of p.Files[i], as Scan does. It is
// safe to call from several goroutines at once, each with its own fn: the
// delete files they share are read once.
func (p *Plan) ScanFile(ctx context.Context, i int, fn func(arrow.RecordBatch) error) (Stats, error) {
	f := p.Files[i]
	deletes, err := p.deletes.Load(ctx, p.fs, p.schema, f.File, f.Seq, p.opts)
	if err != nil {
		return Stats{}, err
	}
	return scanFile(ctx, p.fs, p.proj, f.File, deletes, p.opts, fn)
}

// ScanFile calls fn with the live rows of one data file under the delete
// state deletes (nil: none), projected as Scan projects them with schema.
// It is the entry point for callers that plan files themselves, such as the
// table delta of a commit.
func ScanFile(ctx context.Context, fs iceio.IO, schema *iceberg.Schema, file iceberg.DataFile, deletes *FileDeletes, opts Options, fn func(arrow.RecordBatch) error) error {
	opts.EnsureDefaults()
	proj, err := newProjection(schema, opts.Columns)
	if err != nil {
		return err
	}
	_, err = scanFile(ctx, fs, proj, file, deletes, opts, fn)
	return err
}

// projection is the output of a scan: data columns and row locations in the
// requested order.
type projection struct {
	schema *iceberg.Schema // the schema the data is read with
	data   []int           // requested data field IDs
	out    []int           // output columns: data field IDs, format.FieldIDFile, format.FieldIDPos
	arrow  *arrow.Schema
}

func newProjection(schema *iceberg.Schema, columns []int) (*projection, error) {
	if columns == nil {
		for _, f := range schema.Fields() {
			columns = append(columns, f.ID)
		}
		columns = append(columns, format.FieldIDFile, format.FieldIDPos)
	}
	p := &projection{schema: schema}
	var fields []iceberg.NestedField
	for _, id := range columns {
		if slices.Contains(p.out, id) {
			return nil, fmt.Errorf("project column %d twice", id)
		}
		p.out = append(p.out, id)
		if format.IsLocationField(id) {
			name, typ, _ := format.MetadataColumn(id)
			fields = append(fields, iceberg.NestedField{ID: id, Name: name, Type: typ, Required: true})
			continue
		}
		if format.IsReservedFieldID(id) {
			return nil, fmt.Errorf("project metadata column %d: only _file and _pos are supported", id)
		}
		if !isTopLevel(schema, id) {
			return nil, fmt.Errorf("project field %d: not a top-level column of schema %d", id, schema.ID)
		}
		f, _ := schema.FindFieldByID(id)
		fields = append(fields, f)
		p.data = append(p.data, id)
	}
	sc, err := table.SchemaToArrowSchema(iceberg.NewSchema(schema.ID, fields...), nil, true, false)
	if err != nil {
		return nil, fmt.Errorf("arrow schema of the projection: %w", err)
	}
	p.arrow = sc
	return p, nil
}

// readSchema is the schema a data file is read with: the projected data
// fields and the equality fields of the deletes, in schema order.
func (p *projection) readSchema(eqIDs []int) *iceberg.Schema {
	var fields []iceberg.NestedField
	for _, f := range p.schema.Fields() {
		if slices.Contains(p.data, f.ID) || slices.Contains(eqIDs, f.ID) {
			fields = append(fields, f)
		}
	}
	return iceberg.NewSchema(p.schema.ID, fields...)
}

// eqGroup gathers the equality delete sets that share equality fields, so a
// row's key is built once per group.
type eqGroup struct {
	cols []int // column index of each field in the read batch
	sets []*EqualityDeletes
}

func scanFile(ctx context.Context, fs iceio.IO, proj *projection, file iceberg.DataFile, deletes *FileDeletes, opts Options, fn func(arrow.RecordBatch) error) (Stats, error) {
	var stats Stats
	if err := checkDataFile(file); err != nil {
		return stats, err
	}
	if deletes == nil {
		deletes = &FileDeletes{}
	}
	var eqIDs []int
	for _, set := range deletes.Equality {
		if _, err := equalityFields(proj.schema, set.FieldIDs); err != nil {
			return stats, fmt.Errorf("scan %s: %w", file.FilePath(), err)
		}
		eqIDs = append(eqIDs, set.FieldIDs...)
	}
	readSchema := proj.readSchema(eqIDs)
	colOf := map[int]int{}
	for i, f := range readSchema.Fields() {
		colOf[f.ID] = i
	}
	tested := file.Count() // rows tested against the equality deletes
	if deletes.Within != nil {
		tested = min(tested, int64(deletes.Within.GetCardinality()))
	}
	groups := groupEquality(deletes.Equality, colOf, tested)

	p, err := openParquet(fs, file.FilePath(), opts.NameMapping, opts.BatchRows, opts.Allocator)
	if err != nil {
		return stats, err
	}
	if p.numRows() != file.Count() {
		return stats, errJoinClose(format.MarkCorruption(file.FilePath(), fmt.Errorf("has %d rows, its manifest entry says %d", p.numRows(), file.Count())), p)
	}
	stats.DataFiles = 1
	f := fileReader{proj: proj, path: file.FilePath(), deletes: deletes, groups: groups, colOf: colOf, stats: &stats, fn: fn,
		batchRows: int(min(int64(opts.BatchRows), file.Count()))}
	ctx = compute.WithAllocator(ctx, opts.Allocator)
	so := table.SchemaOptions{IncludeFieldIDs: true, FormatVersion: opts.FormatVersion}
	err = p.read(ctx, readSchema, so, deletes.within, func(rec arrow.RecordBatch, start int64) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		return f.batch(ctx, rec, start)
	})
	if f.fileCol != nil {
		f.fileCol.Release()
	}
	return stats, errJoinClose(err, p)
}

// checkDataFile refuses what a scan cannot read: delete files, formats
// other than Parquet, encrypted files.
func checkDataFile(file iceberg.DataFile) error {
	switch {
	case file.ContentType() != iceberg.EntryContentData:
		return fmt.Errorf("scan %s: content is %s, not data", file.FilePath(), file.ContentType())
	case file.FileFormat() != iceberg.ParquetFile:
		return fmt.Errorf("scan %s: format %s is not supported", file.FilePath(), file.FileFormat())
	case file.KeyMetadata() != nil:
		return fmt.Errorf("scan %s: encrypted files are not supported", file.FilePath())
	}
	return nil
}

// groupEquality groups the equality delete sets of a data file of rows
// rows by their fields. The sets of a group are merged into one when
// testing every row against each set would cost more than the merge (see
// mergeWorth): a CDC table's oldest file meets every upsert's delete, and
// one lookup per row beats one per row and delete file.
func groupEquality(sets []*EqualityDeletes, colOf map[int]int, rows int64) []eqGroup {
	var groups []eqGroup
	byFields := map[string]int{}
	for _, set := range sets {
		k := fmt.Sprint(set.FieldIDs)
		i, ok := byFields[k]
		if !ok {
			i = len(groups)
			byFields[k] = i
			cols := make([]int, len(set.FieldIDs))
			for j, id := range set.FieldIDs {
				cols[j] = colOf[id]
			}
			groups = append(groups, eqGroup{cols: cols})
		}
		groups[i].sets = append(groups[i].sets, set)
	}
	for i, g := range groups {
		if mergeWorth(g.sets, rows) {
			groups[i].sets = []*EqualityDeletes{mergeSets(g.sets)}
		}
	}
	return groups
}

// fileReader turns the batches of one data file into output batches.
type fileReader struct {
	proj    *projection
	path    string
	deletes *FileDeletes
	groups  []eqGroup
	colOf   map[int]int
	stats   *Stats
	fn      func(arrow.RecordBatch) error
	// fileCol holds the file's path in every row, built once for the
	// file: each batch's _file column is a slice of it.
	fileCol   arrow.Array
	batchRows int // the most rows a batch of the file can have
}

func (f *fileReader) batch(ctx context.Context, rec arrow.RecordBatch, start int64) error {
	n := int(rec.NumRows())
	f.stats.RowsRead += int64(n)
	keep := make([]bool, n)
	var livePos []int64
	var key []byte
	var err error
	rows := func(yield func(int) bool) {
		for i := range n {
			if !yield(i) {
				return
			}
		}
	}
	if w := f.deletes.Within; w != nil {
		// Only the rows at Within's positions: found by its iterator, not
		// tested one by one.
		rows = func(yield func(int) bool) {
			it := w.Iterator()
			it.AdvanceIfNeeded(uint64(start))
			for it.HasNext() {
				pos := int64(it.Next())
				if pos >= start+int64(n) || !yield(int(pos-start)) {
					return
				}
			}
		}
	}
	for i := range rows {
		pos := start + int64(i)
		if f.deletes.Positions != nil && f.deletes.Positions.Contains(uint64(pos)) {
			f.stats.DeletedByPos++
			continue
		}
		deleted, err := deletedByEquality(f.groups, rec, i, &key)
		if err != nil {
			return fmt.Errorf("scan %s: %w", f.path, err)
		}
		if deleted {
			f.stats.DeletedByEq++
			continue
		}
		keep[i] = true
		livePos = append(livePos, pos)
	}
	if len(livePos) == 0 {
		return nil
	}
	out, err := f.output(ctx, rec, keep, livePos)
	if err != nil {
		return err
	}
	defer out.Release()
	f.stats.RowsLive += int64(len(livePos))
	return f.fn(out)
}

// output builds the output batch of the kept rows of rec.
func (f *fileReader) output(ctx context.Context, rec arrow.RecordBatch, keep []bool, livePos []int64) (arrow.RecordBatch, error) {
	mem := compute.GetAllocator(ctx)
	var mask arrow.Array
	if len(livePos) < len(keep) {
		b := array.NewBooleanBuilder(mem)
		b.AppendValues(keep, nil)
		mask = b.NewArray()
		b.Release()
		defer mask.Release()
	}
	cols := make([]arrow.Array, len(f.proj.out))
	defer func() {
		for _, c := range cols {
			if c != nil {
				c.Release()
			}
		}
	}()
	for i, id := range f.proj.out {
		switch id {
		case format.FieldIDFile:
			cols[i] = f.pathColumn(len(livePos))
		case format.FieldIDPos:
			b := array.NewInt64Builder(mem)
			b.AppendValues(livePos, nil)
			cols[i] = b.NewArray()
			b.Release()
		default:
			col := rec.Column(f.colOf[id])
			if mask == nil {
				col.Retain()
				cols[i] = col
				continue
			}
			filtered, err := compute.FilterArray(ctx, col, mask, *compute.DefaultFilterOptions())
			if err != nil {
				return nil, fmt.Errorf("filter rows of %s: %w", f.path, err)
			}
			cols[i] = filtered
		}
	}
	for i, c := range cols {
		if want := f.proj.arrow.Field(i).Type; !arrow.TypeEqual(c.DataType(), want) {
			return nil, fmt.Errorf("scan %s: column %s read as %s, want %s", f.path, f.proj.arrow.Field(i).Name, c.DataType(), want)
		}
	}
	return array.NewRecordBatch(f.proj.arrow, cols, int64(len(livePos))), nil
}

// pathColumn returns a string column of n rows that all hold the file's
// path, as a slice of one column kept for the file.
func (f *fileReader) pathColumn(n int) arrow.Array {
	if f.fileCol == nil || f.fileCol.Len() < n {
		if f.fileCol != nil {
			f.fileCol.Release()
		}
		rows := n
		if int64(f.batchRows)*int64(len(f.path)) <= math.MaxInt32/2 {
			rows = max(n, f.batchRows)
		}
		offsets := make([]int32, rows+1)
		data := make([]byte, rows*len(f.path))
		for i := range rows {
			offsets[i+1] = int32((i + 1) * len(f.path))
			copy(data[i*len(f.path):], f.path)
		}
		col := array.NewData(arrow.BinaryTypes.String, rows,
			[]*memory.Buffer{nil, memory.NewBufferBytes(arrow.Int32Traits.CastToBytes(offsets)), memory.NewBufferBytes(data)}, nil, 0, 0)
		f.fileCol = array.NewStringData(col)
		col.Release()
	}
	return array.NewSlice(f.fileCol, 0, int64(n))
}

func errJoinClose(err error, c io.Closer) error {
	return errors.Join(err, c.Close())
}
