package verify

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
)

// equalityDeletes is verify's own application of equality deletes, written
// for the judge alone (it shares nothing with the scanner the builder
// uses). Which delete files apply to which data file stays iceberg-go's
// planning: a file scan task names them (lower data sequence number, same
// partition unless the delete is global). verify takes them off the task,
// lets iceberg-go apply the position deletes and deletion vectors, and
// drops the rows that an applicable delete file names.
//
// Each delete file is read once for the whole verification: its rows'
// equality columns, cast to the source schema's types, are fingerprinted
// (contentHash, as the locator does) into one set per set of equality field
// IDs, each fingerprint remembering which delete files hold it. iceberg-go
// instead builds, for every data file, the union of the delete sets that
// apply to it; on a table after 50 upsert commits that union was a third of
// verify's time.
//
// Fingerprints make the types of one value agree across files written
// before and after a promotion: integers of any width hash by value, and
// float columns are cast to the schema's type first. A null equals a null,
// as the table spec has it for equality deletes.
type equalityDeletes struct {
	v *verifier
	// arrowTypes are the source schema's fields as Arrow types, by field ID.
	arrowTypes map[int]arrow.DataType
	// ordinals numbers the delete files loaded so far, by path.
	ordinals map[string]int32
	// sets holds the fingerprints of the loaded files, by equality field
	// IDs (setName).
	sets map[string]*deleteSet

	applies []bool // scratch: ordinal -> applies to the current task
	sums    []contentHash
	cols    []arrow.Array
}

// deleteSet holds the fingerprinted rows of the delete files with one set
// of equality field IDs.
type deleteSet struct {
	ids []int // equality field IDs, ascending
	// first maps a fingerprint to the first delete file (ordinal) that
	// holds it; more to the others, for the rare key deleted again by a
	// later commit.
	first map[contentHash]int32
	more  map[contentHash][]int32
}

// add records that delete file ord holds fingerprint h.
func (s *deleteSet) add(h contentHash, ord int32) {
	prev, ok := s.first[h]
	switch {
	case !ok:
		s.first[h] = ord
	case prev != ord && !slices.Contains(s.more[h], ord):
		s.more[h] = append(s.more[h], ord)
	}
}

// holds reports whether a delete file that applies (applies[ordinal])
// holds fingerprint h.
func (s *deleteSet) holds(h contentHash, applies []bool) bool {
	ord, ok := s.first[h]
	if !ok {
		return false
	}
	if applies[ord] {
		return true
	}
	for _, o := range s.more[h] {
		if applies[o] {
			return true
		}
	}
	return false
}

func newEqualityDeletes(v *verifier) (*equalityDeletes, error) {
	as, err := table.SchemaToArrowSchema(v.schema, nil, true, false)
	if err != nil {
		return nil, fmt.Errorf("source schema as Arrow: %w", err)
	}
	types := map[int]arrow.DataType{}
	for _, f := range as.Fields() {
		if id, ok := metaID(f); ok {
			types[id] = f.Type
		}
	}
	return &equalityDeletes{v: v, arrowTypes: types, ordinals: map[string]int32{}, sets: map[string]*deleteSet{}}, nil
}

func setName(ids []int) string {
	var b strings.Builder
	for i, id := range ids {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(id))
	}
	return b.String()
}

// handles reports whether verify applies the equality delete files dfs
// itself: Parquet files whose equality fields are top-level fields of the
// source schema. Others (nested equality fields, other formats) are left
// to iceberg-go's scan.
func (e *equalityDeletes) handles(dfs []iceberg.DataFile) bool {
	for _, df := range dfs {
		if df.FileFormat() != iceberg.ParquetFile || len(df.EqualityFieldIDs()) == 0 {
			return false
		}
		for _, id := range df.EqualityFieldIDs() {
			if !slices.ContainsFunc(e.v.schema.Fields(), func(f iceberg.NestedField) bool { return f.ID == id }) {
				return false
			}
		}
	}
	return true
}

// sortedIDs gives the equality field IDs of a delete file, ascending.
func sortedIDs(df iceberg.DataFile) ([]int, error) {
	ids := slices.Clone(df.EqualityFieldIDs())
	if len(ids) == 0 {
		return nil, fmt.Errorf("equality delete file %s names no equality field IDs", df.FilePath())
	}
	slices.Sort(ids)
	return slices.Compact(ids), nil
}

// mark sets deleted[i] for every row of rec, a batch of the live rows of
// a data file before its equality deletes, that one of the files dfs (the
// task's equality deletes) deletes.
func (e *equalityDeletes) mark(dfs []iceberg.DataFile, rec arrow.RecordBatch, deleted []bool) error {
	if cap(e.applies) < len(e.ordinals)+len(dfs) {
		e.applies = make([]bool, len(e.ordinals)+len(dfs))
	}
	e.applies = e.applies[:cap(e.applies)]
	clear(e.applies)
	var sets []*deleteSet
	for _, df := range dfs {
		ord, set, err := e.load(df)
		if err != nil {
			return err
		}
		if int(ord) >= len(e.applies) {
			e.applies = append(e.applies, make([]bool, int(ord)+1-len(e.applies))...)
		}
		e.applies[ord] = true
		if !slices.Contains(sets, set) {
			sets = append(sets, set)
		}
	}
	n := int(rec.NumRows())
	ids := e.v.fieldIDs(rec.Schema())
	for _, set := range sets {
		e.cols = e.cols[:0]
		for _, id := range set.ids {
			col := slices.Index(ids, id)
			if col < 0 {
				return fmt.Errorf("iceberg-go returned no column of equality field ID %d", id)
			}
			e.cols = append(e.cols, rec.Column(col))
		}
		e.sums = slices.Grow(e.sums[:0], n)[:n]
		e.v.hasher.hashRows(e.cols, e.sums)
		for i, h := range e.sums {
			if !deleted[i] && set.holds(h, e.applies) {
				deleted[i] = true
			}
		}
	}
	return nil
}

// load reads a delete file the first time it is asked for.
func (e *equalityDeletes) load(df iceberg.DataFile) (int32, *deleteSet, error) {
	ids, err := sortedIDs(df)
	if err != nil {
		return 0, nil, err
	}
	name := setName(ids)
	set := e.sets[name]
	if set == nil {
		set = &deleteSet{ids: ids, first: map[contentHash]int32{}, more: map[contentHash][]int32{}}
		e.sets[name] = set
	}
	if ord, ok := e.ordinals[df.FilePath()]; ok {
		return ord, set, nil
	}
	ord := int32(len(e.ordinals))
	if err := e.read(df, set, ord); err != nil {
		return 0, nil, fmt.Errorf("equality delete file %s: %w", df.FilePath(), err)
	}
	e.ordinals[df.FilePath()] = ord
	return ord, set, nil
}

// read fingerprints the equality columns of every row of one delete file
// into set.
func (e *equalityDeletes) read(df iceberg.DataFile, set *deleteSet, ord int32) error {
	if df.FileFormat() != iceberg.ParquetFile {
		return fmt.Errorf("verify reads Parquet delete files; this one is %s", df.FileFormat())
	}
	f, err := e.v.opts.Store.Open(e.v.ctx, df.FilePath())
	if err != nil {
		return err
	}
	defer f.Close()
	pf, err := file.NewParquetReader(f)
	if err != nil {
		return fmt.Errorf("open parquet: %w", err)
	}
	defer pf.Close()
	fr, err := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{BatchSize: 64 << 10}, memory.DefaultAllocator)
	if err != nil {
		return fmt.Errorf("read parquet schema: %w", err)
	}
	rawSchema, err := fr.Schema()
	if err != nil {
		return err
	}
	var leaves []int
	targets := make([]arrow.DataType, len(set.ids))
	for i, id := range set.ids {
		ri := slices.IndexFunc(rawSchema.Fields(), func(f arrow.Field) bool {
			rid, ok := metaID(f)
			return ok && rid == id
		})
		if ri < 0 {
			return fmt.Errorf("no column of equality field ID %d", id)
		}
		if targets[i] = e.arrowTypes[id]; targets[i] == nil {
			return fmt.Errorf("equality field ID %d is not in the source snapshot's schema", id)
		}
		leaves = appendLeaves(leaves, &fr.Manifest.Fields[ri])
	}
	rr, err := fr.GetRecordReader(e.v.ctx, leaves, nil)
	if err != nil {
		return err
	}
	defer rr.Release()
	// The reader returns the chosen fields in file order; put them in the
	// order of set.ids.
	order := make([]int, len(set.ids))
	var sums []contentHash
	cols := make([]arrow.Array, len(set.ids))
	for rr.Next() {
		rec := rr.RecordBatch()
		if rec.NumCols() != int64(len(set.ids)) {
			return fmt.Errorf("read %d columns for %d equality fields", rec.NumCols(), len(set.ids))
		}
		for c, f := range rec.Schema().Fields() {
			id, _ := metaID(f)
			order[slices.Index(set.ids, id)] = c
		}
		for i := range cols {
			if cols[i], err = castLike(rec.Column(order[i]), targets[i]); err != nil {
				releaseAll(cols[:i])
				return fmt.Errorf("equality field ID %d: %w", set.ids[i], err)
			}
		}
		n := int(rec.NumRows())
		sums = slices.Grow(sums[:0], n)[:n]
		e.v.hasher.hashRows(cols, sums)
		releaseAll(cols)
		for _, h := range sums {
			set.add(h, ord)
		}
	}
	return rr.Err()
}

func releaseAll(cols []arrow.Array) {
	for _, c := range cols {
		c.Release()
	}
}
