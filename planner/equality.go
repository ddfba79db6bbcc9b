package planner

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"sync/atomic"

	"github.com/RoaringBitmap/roaring/v2/roaring64"
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/iceberg-go"
	"golang.org/x/sync/errgroup"

	"github.com/streamidx/streamidx/format"
	"github.com/streamidx/streamidx/internal/objstore"
	"github.com/streamidx/streamidx/internal/procs"
)

// SnapshotReader answers the questions that turn deletes into row
// positions, through one index snapshot: which live rows hold given key
// values (ResolveEquality) and which positions of given data files are
// live (LivePositions). The answers describe the source snapshot the index
// snapshot was built for. It is safe for concurrent use.
type SnapshotReader struct {
	store   *objstore.Store
	is      *format.IndexSchema
	entries []format.TrackingEntry
	// fileField and posField are the index fields holding _file and _pos;
	// 0 when the index stores no row locations. filePos and posPos are
	// their places in an entry.
	fileField, posField int
	filePos, posPos     int
	// rowGroupsRead counts the row groups ResolveEquality read, rowsRead
	// the entries whose keys it decoded.
	rowGroupsRead, rowsRead atomic.Int64
}

// RowGroupsRead is the number of row groups of range files that
// ResolveEquality has read so far.
func (r *SnapshotReader) RowGroupsRead() int64 { return r.rowGroupsRead.Load() }

// RowsRead is the number of entries whose keys ResolveEquality has decoded
// so far: those of the pages that may hold its keys.
func (r *SnapshotReader) RowsRead() int64 { return r.rowsRead.Load() }

// NewSnapshotReader reads the index snapshot whose range files are entries
// (its tracking file's, in cluster order) through store; a nil store reads
// local files.
func NewSnapshotReader(store *objstore.Store, is *format.IndexSchema, entries []format.TrackingEntry) *SnapshotReader {
	if store == nil {
		store = objstore.Local()
	}
	r := &SnapshotReader{store: store, is: is, entries: entries}
	for i, f := range is.Fields() {
		if ref, ok := f.Expr.(format.Ref); ok && f.Kind == format.KindMaterialized {
			switch ref.ID {
			case format.FieldIDFile:
				r.fileField, r.filePos = f.ID, i
			case format.FieldIDPos:
				r.posField, r.posPos = f.ID, i
			}
		}
	}
	return r
}

// HasLocation reports whether the index stores _file and _pos, without which
// neither question can be answered.
func (r *SnapshotReader) HasLocation() bool { return r.fileField != 0 && r.posField != 0 }

// ResolveEquality returns, by data file location, the positions of every
// row live in the index's source snapshot whose values of fieldIDs equal
// one of tuples (each holds the values of fieldIDs in that order, as
// canonical Go values; nil is null, and null equals null). ok is false when
// this index cannot answer: it stores no row locations, its leading cluster
// fields are not fieldIDs (as a set, identity fields), or the fields are
// floating point, whose equality-delete semantics (every NaN equal) differ
// from the index's order.
//
// The tuples are encoded and sorted once; the range files they can fall
// into are found by one merge of the sorted keys with the tracking file's
// group_max_value keys, and each such file is read once, sequentially,
// merge-joined with the keys in its range. A batch of keys costs one pass
// over the range files it touches, never a lookup per key; the files are
// read in parallel, up to procs.Work() at a time. This implements
// ingest.EqualityResolver, the table delta's fast path.
func (r *SnapshotReader) ResolveEquality(ctx context.Context, fieldIDs []int, tuples []format.Key) (map[string][]int64, bool, error) {
	found, ok, err := r.resolve(ctx, fieldIDs, tuples, false)
	if !ok || err != nil {
		return nil, ok, err
	}
	out := map[string][]int64{}
	for _, j := range found {
		for path, pos := range j.positions {
			out[path] = append(out[path], pos...)
		}
	}
	return out, true, nil
}

// ResolveEqualityEntries is ResolveEquality answered with the index entries
// of those rows, every field in EntrySchema order (_file and _pos among
// them), so that a table delta can delete them from the index without
// reading the data files they point at. ok is also false when the index
// does not store every field of its entries. This implements
// ingest.EqualityEntryResolver.
func (r *SnapshotReader) ResolveEqualityEntries(ctx context.Context, fieldIDs []int, tuples []format.Key) ([]format.Key, bool, error) {
	for _, f := range r.is.Fields() {
		if !f.Stored() {
			return nil, false, nil
		}
	}
	found, ok, err := r.resolve(ctx, fieldIDs, tuples, true)
	if !ok || err != nil {
		return nil, ok, err
	}
	var out []format.Key
	for _, j := range found {
		out = append(out, j.entries...)
	}
	return out, true, nil
}

// joined is what the join of one range file found: positions by data file,
// or whole entries.
type joined struct {
	positions map[string][]int64
	entries   []format.Key
}

// resolve finds the rows of ResolveEquality, as entries when entries is set,
// one result per range file read.
func (r *SnapshotReader) resolve(ctx context.Context, fieldIDs []int, tuples []format.Key, entries bool) ([]*joined, bool, error) {
	cluster := r.is.ClusterFields()
	if !r.HasLocation() || len(fieldIDs) == 0 || len(cluster) < len(fieldIDs) {
		return nil, false, nil
	}
	// perm[i] is the position in a delete tuple of cluster field i.
	perm := make([]int, len(fieldIDs))
	types := make([]iceberg.Type, len(fieldIDs))
	for i := range fieldIDs {
		f := cluster[i]
		j := slices.Index(fieldIDs, f.ID)
		if f.Kind != format.KindIdentity || j < 0 || slices.Contains(perm[:i], j) {
			return nil, false, nil
		}
		switch f.Type.(type) {
		case iceberg.Float32Type, iceberg.Float64Type:
			return nil, false, nil
		}
		perm[i], types[i] = j, f.Type
	}
	keys := make([][]byte, 0, len(tuples))
	prefix := make(format.Key, len(perm))
	for _, t := range tuples {
		for i, j := range perm {
			prefix[i] = t[j]
		}
		enc, err := format.AppendKey(nil, types, prefix)
		if err != nil {
			// A value of another type than the index holds: let the
			// caller read the data files instead of guessing.
			return nil, false, nil
		}
		keys = append(keys, enc)
	}
	slices.SortFunc(keys, bytes.Compare)
	keys = slices.CompactFunc(keys, func(a, b []byte) bool { return bytes.Equal(a, b) })
	if len(keys) == 0 {
		return nil, true, nil
	}
	maxes, err := r.groupMaxPrefixes(types)
	if err != nil {
		return nil, false, err
	}
	// File i holds keys in [max of file i-1, max of file i]: both ends
	// inclusive, since a run of equal prefixes may span files. A missing
	// group_max_value (nil) bounds nothing.
	type join struct {
		file int
		keys [][]byte
	}
	var joins []join
	k := 0
	for i := range r.entries {
		var lo, hi []byte
		if i > 0 {
			lo = maxes[i-1]
		}
		hi = maxes[i]
		for k < len(keys) && lo != nil && bytes.Compare(keys[k], lo) < 0 {
			k++
		}
		if k == len(keys) {
			break
		}
		end := len(keys)
		if hi != nil {
			end = k + sortSearchBytes(keys[k:], hi)
		}
		if end == k {
			continue
		}
		joins = append(joins, join{i, keys[k:end]})
	}
	// The files are joined at the same time, each into its own result.
	found := make([]*joined, len(joins))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(procs.Work())
	for j, jn := range joins {
		found[j] = &joined{positions: map[string][]int64{}}
		g.Go(func() error { return r.joinFile(gctx, &r.entries[jn.file], types, jn.keys, entries, found[j]) })
	}
	if err := g.Wait(); err != nil {
		return nil, false, err
	}
	return found, true, nil
}

// sortSearchBytes is the number of keys (sorted) at or below hi.
func sortSearchBytes(keys [][]byte, hi []byte) int {
	n, _ := slices.BinarySearchFunc(keys, hi, func(k, hi []byte) int {
		if bytes.Compare(k, hi) <= 0 {
			return -1
		}
		return 1
	})
	return n
}

// groupMaxPrefixes encodes the leading len(types) fields of each range
// file's group_max_value; nil where a file has none.
func (r *SnapshotReader) groupMaxPrefixes(types []iceberg.Type) ([][]byte, error) {
	out := make([][]byte, len(r.entries))
	for i := range r.entries {
		k, ok := r.entries[i].GroupMaxKey(r.is)
		if !ok {
			continue
		}
		enc, err := format.AppendKey(nil, types, k[:len(types)])
		if err != nil {
			return nil, fmt.Errorf("group_max_value of range file %s: %w", r.entries[i].FilePath, err)
		}
		out[i] = enc
	}
	return out, nil
}

// joinFile merge-joins keys (sorted) with one range file and adds the
// locations of the matches to out. Only the row groups, and within them the
// pages, whose bounds of the leading cluster field may hold a key are read,
// and in two passes: the key columns find the matching rows, then _file
// and _pos are read for those rows alone, _file as dictionary indices
// turned into strings only for the matches (format.RangeFileReader.ReadRows).
// A few keys at the key tail read the last pages of one file; keys spread
// over the index never decode its _file strings.
func (r *SnapshotReader) joinFile(ctx context.Context, te *format.TrackingEntry, types []iceberg.Type, keys [][]byte, entries bool, out *joined) error {
	rf, err := r.store.OpenRange(ctx, te, r.is, format.RangeFileReadOptions{})
	if err != nil {
		return err
	}
	defer rf.Close()
	ids := make([]int, 0, len(types))
	for _, cf := range r.is.ClusterFields()[:len(types)] {
		ids = append(ids, cf.ID)
	}
	firsts, nulls, ok := leadingValues(types[0], keys)
	var enc []byte
	k := 0
	for g := range rf.NumRowGroups() {
		_, stats := rf.RowGroupStats(g)
		if ok && !mayHold(types[0], firsts, nulls, stats[ids[0]]) {
			continue
		}
		r.rowGroupsRead.Add(1)
		candidates, all, err := r.pagesHolding(rf.RangeFileReader, g, ids[0], types[0], firsts, nulls, ok)
		if err != nil {
			return fmt.Errorf("resolve equality deletes in range file %s: %w", te.FilePath, err)
		}
		var rows []int64
		var off int64
		collect := func(rec arrow.RecordBatch) error {
			for row := 0; row < int(rec.NumRows()) && k < len(keys); row++ {
				if enc, err = format.AppendColumnsKey(enc[:0], types, rec, row); err != nil {
					return err
				}
				for k < len(keys) && bytes.Compare(keys[k], enc) < 0 {
					k++
				}
				if k < len(keys) && bytes.Equal(keys[k], enc) {
					if all {
						rows = append(rows, off+int64(row))
					} else {
						rows = append(rows, candidates[off+int64(row)])
					}
				}
			}
			off += rec.NumRows()
			r.rowsRead.Add(rec.NumRows())
			return nil
		}
		if all {
			err = rf.Read(ctx, ids, []int{g}, collect)
		} else {
			err = rf.ReadRows(ctx, ids, g, candidates, collect)
		}
		if err == nil && len(rows) > 0 {
			if entries {
				err = r.readEntries(ctx, rf.RangeFileReader, te, g, rows, out)
			} else {
				err = r.readPositions(ctx, rf.RangeFileReader, te, g, rows, out)
			}
		}
		if err != nil {
			return fmt.Errorf("resolve equality deletes in range file %s: %w", te.FilePath, err)
		}
		if k == len(keys) {
			break
		}
	}
	return nil
}

// readPositions adds the _file and _pos of the given rows of row group g of
// a range file to out.positions.
func (r *SnapshotReader) readPositions(ctx context.Context, rf *format.RangeFileReader, te *format.TrackingEntry, g int, rows []int64, out *joined) error {
	return rf.ReadRows(ctx, []int{r.fileField, r.posField}, g, rows, func(rec arrow.RecordBatch) error {
		files, pos, err := locationColumns(rec, 0, te.FilePath)
		if err != nil {
			return err
		}
		for row := range int(rec.NumRows()) {
			if files.IsNull(row) || pos.IsNull(row) {
				return format.MarkCorruption(te.FilePath, fmt.Errorf("entry %d has no row location", row))
			}
			path := files.Value(row)
			out.positions[path] = append(out.positions[path], pos.Value(row))
		}
		return nil
	})
}

// readEntries adds the entries (every field, all stored) of the given rows
// of row group g of a range file to out.entries.
func (r *SnapshotReader) readEntries(ctx context.Context, rf *format.RangeFileReader, te *format.TrackingEntry, g int, rows []int64, out *joined) error {
	fields := r.is.Fields()
	ids := make([]int, len(fields))
	for i, f := range fields {
		ids[i] = f.ID
	}
	return rf.ReadRows(ctx, ids, g, rows, func(rec arrow.RecordBatch) error {
		n := len(fields)
		values := make([]any, int(rec.NumRows())*n) // the batch's entries in one allocation
		for row := range int(rec.NumRows()) {
			e := format.Key(values[row*n : (row+1)*n : (row+1)*n])
			for i, f := range fields {
				e[i] = format.ValueAtAs(f.Type, rec.Column(i), row)
			}
			if e[r.filePos] == nil || e[r.posPos] == nil {
				return format.MarkCorruption(te.FilePath, fmt.Errorf("entry %d has no row location", row))
			}
			out.entries = append(out.entries, e)
		}
		return nil
	})
}

// leadingValues decodes the first field (of type t) of keys (sorted
// encodings of key prefixes): its distinct non-null values, sorted, and
// whether some key's is null. ok is false when a key does not decode: then
// no row group or page can be pruned.
func leadingValues(t iceberg.Type, keys [][]byte) (firsts []any, nulls, ok bool) {
	for _, enc := range keys {
		k, _, err := format.DecodeKey(enc, []iceberg.Type{t})
		if err != nil {
			return nil, false, false
		}
		if k[0] == nil {
			nulls = true
			continue
		}
		firsts = append(firsts, k[0])
	}
	slices.SortFunc(firsts, func(a, b any) int { return format.Compare(t, a, b) })
	return firsts, nulls, true
}

// mayHold reports whether a row group or page whose statistics of the
// leading cluster field (of type t) are st may hold one of firsts (sorted),
// or a null when nulls. Without bounds it may.
func mayHold(t iceberg.Type, firsts []any, nulls bool, st *format.FieldStats) bool {
	if st == nil || st.LowerBound == nil || st.UpperBound == nil {
		return true
	}
	i, _ := slices.BinarySearchFunc(firsts, st.LowerBound, func(v, lo any) int { return format.Compare(t, v, lo) })
	inRange := i < len(firsts) && format.Compare(t, firsts[i], st.UpperBound) <= 0
	mayHoldNull := st.NullValueCount == nil || *st.NullValueCount > 0
	return inRange || nulls && mayHoldNull
}

// pagesHolding returns the rows of the pages of row group g that may hold
// one of firsts (see mayHold) by the page index of field; all is true when
// no page can be pruned (or the file has no page index, or pruning is off),
// and the row group is read whole.
func (r *SnapshotReader) pagesHolding(rf *format.RangeFileReader, g, field int, t iceberg.Type, firsts []any, nulls, prune bool) (rows []int64, all bool, err error) {
	if !prune {
		return nil, true, nil
	}
	pages, err := rf.PageStats(g, field)
	if err != nil || len(pages) == 0 {
		return nil, true, err
	}
	var kept []format.PageStats
	for _, p := range pages {
		if p.OnlyNulls && nulls || !p.OnlyNulls && mayHold(t, firsts, nulls, p.Stats) {
			kept = append(kept, p)
		}
	}
	if len(kept) == len(pages) {
		return nil, true, nil
	}
	for _, p := range kept {
		for row := p.FirstRow; row < p.FirstRow+p.Rows; row++ {
			rows = append(rows, row)
		}
	}
	return rows, false, nil
}

// locationColumns returns the _file and _pos columns of a batch read with
// them at columns at and at+1.
func locationColumns(rec arrow.RecordBatch, at int, name string) (*array.String, *array.Int64, error) {
	files, ok1 := rec.Column(at).(*array.String)
	pos, ok2 := rec.Column(at + 1).(*array.Int64)
	if !ok1 || !ok2 {
		return nil, nil, format.MarkCorruption(name, fmt.Errorf("_file and _pos are %s and %s", rec.Column(at).DataType(), rec.Column(at+1).DataType()))
	}
	return files, pos, nil
}

// KeyBounds bounds the leading cluster value of the rows of one data file:
// canonical values of the leading cluster field's type (see
// DataFileKeyBounds).
type KeyBounds struct{ Lower, Upper any }

// LivePositions returns, for each data file location in files, the
// positions of its rows live in the index's source snapshot (an empty
// bitmap for a file with none). Entries are clustered by key, not by data
// file, so this reads the _file and _pos columns of the range files, up to
// procs.Work() range files at a time, _file as a dictionary: each distinct
// path of a row group is looked up once, not once an entry. A file's
// bounds (nil: unknown) let it skip the range files and row groups whose
// leading cluster values cannot be those of its rows; a single file of
// unknown bounds makes it read every entry.
func (r *SnapshotReader) LivePositions(ctx context.Context, files map[string]*KeyBounds) (map[string]*roaring64.Bitmap, error) {
	if !r.HasLocation() {
		return nil, fmt.Errorf("live positions: %w", ErrCannotReconcile)
	}
	within := r.keyIntervals(files)
	entries := make([]*format.TrackingEntry, 0, len(r.entries))
	for i := range r.entries {
		if te := &r.entries[i]; within.mayHold(te.Stats[r.leading()]) {
			entries = append(entries, te)
		}
	}
	workers := min(procs.Work(), max(len(entries), 1))
	parts := make([]map[string]*roaring64.Bitmap, workers)
	for w := range parts {
		parts[w] = make(map[string]*roaring64.Bitmap, len(files))
		for f := range files {
			parts[w][f] = roaring64.New()
		}
	}
	var next atomic.Int64
	g, gctx := errgroup.WithContext(ctx)
	for w := range workers {
		g.Go(func() error {
			for {
				i := int(next.Add(1) - 1)
				if i >= len(entries) {
					return nil
				}
				te := entries[i]
				if err := r.livePositionsOf(gctx, te, within, parts[w]); err != nil {
					return fmt.Errorf("live positions in range file %s: %w", te.FilePath, err)
				}
			}
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	out := parts[0]
	for _, part := range parts[1:] {
		for f, bm := range part {
			out[f].Or(bm)
		}
	}
	return out, nil
}

func (r *SnapshotReader) livePositionsOf(ctx context.Context, te *format.TrackingEntry, within keyIntervals, out map[string]*roaring64.Bitmap) error {
	rf, err := r.store.OpenRange(ctx, te, r.is, format.RangeFileReadOptions{DictionaryFields: []int{r.fileField}})
	if err != nil {
		return err
	}
	defer rf.Close()
	var groups []int // nil: all
	if within != nil {
		for g := range rf.NumRowGroups() {
			if _, stats := rf.RowGroupStats(g); within.mayHold(stats[r.leading()]) {
				groups = append(groups, g)
			}
		}
		if len(groups) == 0 {
			return nil
		}
	}
	read := len(groups)
	if groups == nil {
		read = rf.NumRowGroups()
	}
	r.rowGroupsRead.Add(int64(read))
	var bitmaps []*roaring64.Bitmap // by dictionary index: nil for a path not asked for
	var dict arrow.Array            // the dictionary bitmaps was made for
	return rf.Read(ctx, []int{r.fileField, r.posField}, groups, func(rec arrow.RecordBatch) error {
		r.rowsRead.Add(rec.NumRows())
		pos, ok := rec.Column(1).(*array.Int64)
		if !ok {
			return format.MarkCorruption(te.FilePath, fmt.Errorf("_pos is %s", rec.Column(1).DataType()))
		}
		valid := func(row int) error {
			if rec.Column(0).IsNull(row) || pos.IsNull(row) || pos.Value(row) < 0 {
				return format.MarkCorruption(te.FilePath, fmt.Errorf("entry has no valid row location"))
			}
			return nil
		}
		switch files := rec.Column(0).(type) {
		case *array.Dictionary:
			paths, ok := files.Dictionary().(*array.String)
			if !ok {
				return format.MarkCorruption(te.FilePath, fmt.Errorf("_file is a dictionary of %s", files.Dictionary().DataType()))
			}
			if d := files.Dictionary(); d != dict {
				// A new row group: its paths are looked up once each.
				dict = d
				bitmaps = bitmaps[:0]
				for i := range paths.Len() {
					var bm *roaring64.Bitmap
					if paths.IsValid(i) {
						bm = out[paths.Value(i)]
					}
					bitmaps = append(bitmaps, bm)
				}
			}
			for row := range int(rec.NumRows()) {
				if err := valid(row); err != nil {
					return err
				}
				if bm := bitmaps[files.GetValueIndex(row)]; bm != nil {
					bm.Add(uint64(pos.Value(row)))
				}
			}
		case *array.String:
			var lastPath string
			var last *roaring64.Bitmap
			for row := range int(rec.NumRows()) {
				if err := valid(row); err != nil {
					return err
				}
				path := files.Value(row)
				if last == nil || path != lastPath {
					bm, ok := out[path]
					if !ok {
						last = nil
						continue
					}
					lastPath, last = string([]byte(path)), bm
				}
				last.Add(uint64(pos.Value(row)))
			}
		default:
			return format.MarkCorruption(te.FilePath, fmt.Errorf("_file is %s", rec.Column(0).DataType()))
		}
		return nil
	})
}

// leading is the index field ID of the leading cluster field.
func (r *SnapshotReader) leading() int { return r.is.ClusterFields()[0].ID }

// keyIntervals are disjoint closed intervals of leading cluster values,
// sorted, of type t; nil means every value.
type keyIntervals []keyInterval

type keyInterval struct {
	t      iceberg.Type
	lo, hi any
}

// keyIntervals merges the bounds of files into intervals: nil when a file's
// bounds are unknown.
func (r *SnapshotReader) keyIntervals(files map[string]*KeyBounds) keyIntervals {
	t := r.is.ClusterFields()[0].Type
	var out keyIntervals
	for _, b := range files {
		if b == nil || b.Lower == nil || b.Upper == nil || format.CheckValue(t, b.Lower) != nil || format.CheckValue(t, b.Upper) != nil {
			return nil
		}
		out = append(out, keyInterval{t: t, lo: b.Lower, hi: b.Upper})
	}
	if len(out) == 0 {
		return nil
	}
	slices.SortFunc(out, func(a, b keyInterval) int { return format.Compare(t, a.lo, b.lo) })
	merged := out[:1]
	for _, iv := range out[1:] {
		last := &merged[len(merged)-1]
		if format.Compare(t, iv.lo, last.hi) <= 0 {
			if format.Compare(t, iv.hi, last.hi) > 0 {
				last.hi = iv.hi
			}
			continue
		}
		merged = append(merged, iv)
	}
	return merged
}

// mayHold reports whether values whose statistics are st (nil or without
// bounds: unknown) may fall in one of the intervals. Nulls never do: a data
// file whose key column may hold nulls has no bounds (DataFileKeyBounds).
func (ks keyIntervals) mayHold(st *format.FieldStats) bool {
	if ks == nil || st == nil || st.LowerBound == nil || st.UpperBound == nil {
		return true
	}
	t := ks[0].t
	// The first interval that does not end before the statistics begin.
	i, _ := slices.BinarySearchFunc(ks, st.LowerBound, func(iv keyInterval, lo any) int {
		if format.Compare(t, iv.hi, lo) < 0 {
			return -1
		}
		return 1
	})
	return i < len(ks) && format.Compare(t, ks[i].lo, st.UpperBound) <= 0
}
