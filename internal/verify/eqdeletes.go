package verify

import (
	"fmt"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
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
	// files are the delete files read so far, by path.
	files map[string]loadedDeletes
	// sets holds the fingerprints of the files read, by equality field IDs
	// (setName).
	sets map[string]*deleteSet
}

// loadedDeletes is a delete file read: its ordinal (in the order read) and
// the set its rows went into.
type loadedDeletes struct {
	ord int32
	set *deleteSet
}

// deleteSet holds the fingerprinted rows of the delete files with one set
// of equality field IDs.
type deleteSet struct {
	ids   []int            // equality field IDs, ascending
	types []arrow.DataType // of ids, in the source schema
	// first maps a fingerprint to the first delete file (ordinal) that
	// holds it; more to the others, for the rare key deleted again by a
	// later commit.
	first map[contentHash]int32
	more  map[contentHash][]int32
	// filter has bit filterBit(h) set for every fingerprint h the set
	// holds. Most rows of a data file are deleted by no file, and one bit
	// of a mebibyte answers them without a probe of the map (a 10M-row CDC
	// verify: 10.1 s against 11.0 s).
	filter []uint64
}

// filterBits is the size of a deleteSet's filter: with the 500,000 keys
// of 50 upsert commits, 6% of the rows deleted by none still probe the map.
const filterBits = 1 << 23

func filterBit(h contentHash) uint64 { return h[1] & (filterBits - 1) }

// add records that delete file ord holds fingerprint h.
func (s *deleteSet) add(h contentHash, ord int32) {
	if s.filter == nil {
		s.filter = make([]uint64, filterBits/64)
	}
	b := filterBit(h)
	s.filter[b/64] |= 1 << (b % 64)
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
	if b := filterBit(h); s.filter == nil || s.filter[b/64]&(1<<(b%64)) == 0 {
		return false
	}
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
	return &equalityDeletes{v: v, arrowTypes: types, files: map[string]loadedDeletes{}, sets: map[string]*deleteSet{}}, nil
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
			if e.arrowTypes[id] == nil || !slices.ContainsFunc(e.v.schema.Fields(), func(f iceberg.NestedField) bool { return f.ID == id }) {
				return false
			}
		}
	}
	return true
}

// taskDeletes are the equality deletes of one data file: the sets that
// hold their rows and which files (ordinals) apply.
type taskDeletes struct {
	e       *equalityDeletes
	sets    []*deleteSet
	applies []bool
	sums    []contentHash
	cols    []arrow.Array
}

// forTask reads the delete files dfs (a file scan task's equality deletes)
// that were not read before, and returns what marks the rows they delete.
func (e *equalityDeletes) forTask(dfs []iceberg.DataFile) (*taskDeletes, error) {
	t := &taskDeletes{e: e}
	var ords []int32
	for _, df := range dfs {
		l, err := e.load(df)
		if err != nil {
			return nil, err
		}
		ords = append(ords, l.ord)
		if !slices.Contains(t.sets, l.set) {
			t.sets = append(t.sets, l.set)
		}
	}
	t.applies = make([]bool, len(e.files))
	for _, o := range ords {
		t.applies[o] = true
	}
	return t, nil
}

// mark sets deleted[i] for every row of rec, a batch of the data file's
// live rows before its equality deletes, that an applicable file deletes.
func (t *taskDeletes) mark(rec arrow.RecordBatch, deleted []bool) error {
	n := int(rec.NumRows())
	ids := t.e.v.fieldIDs(rec.Schema())
	for _, set := range t.sets {
		t.cols = t.cols[:0]
		for _, id := range set.ids {
			col := slices.Index(ids, id)
			if col < 0 {
				return fmt.Errorf("iceberg-go returned no column of equality field ID %d", id)
			}
			t.cols = append(t.cols, rec.Column(col))
		}
		t.sums = slices.Grow(t.sums[:0], n)[:n]
		t.e.v.hasher.hashRows(t.cols, t.sums)
		for i, h := range t.sums {
			if !deleted[i] && set.holds(h, t.applies) {
				deleted[i] = true
			}
		}
	}
	return nil
}

// load reads a delete file the first time it is asked for: the
// fingerprints of its equality columns, cast to the source schema's types,
// go into the set of its equality field IDs.
func (e *equalityDeletes) load(df iceberg.DataFile) (loadedDeletes, error) {
	if l, ok := e.files[df.FilePath()]; ok {
		return l, nil
	}
	ids := slices.Clone(df.EqualityFieldIDs())
	slices.Sort(ids)
	ids = slices.Compact(ids)
	name := fmt.Sprint(ids)
	set := e.sets[name]
	if set == nil {
		set = &deleteSet{ids: ids, first: map[contentHash]int32{}, more: map[contentHash][]int32{}}
		for _, id := range ids {
			set.types = append(set.types, e.arrowTypes[id]) // handles checked they exist
		}
		e.sets[name] = set
	}
	l := loadedDeletes{ord: int32(len(e.files)), set: set}
	if _, err := e.v.hashColumns(df.FilePath(), set.ids, set.types, true, 64<<10, func(sums []contentHash) {
		for _, h := range sums {
			set.add(h, l.ord)
		}
	}); err != nil {
		return l, fmt.Errorf("equality delete file %s: %w", df.FilePath(), err)
	}
	e.files[df.FilePath()] = l
	return l, nil
}
