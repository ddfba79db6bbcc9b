package updater

import (
	"context"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/iceberg-go"

	"github.com/streamidx/streamidx/format"
	"github.com/streamidx/streamidx/internal/objstore"
)

// indexResolver answers the table delta's equality-delete question through
// the index snapshot of the old source snapshot: when the index's leading
// cluster fields are the equality fields and it stores row locations, the
// rows a delete may remove are found by binary search on the tracking
// file's group_max_value keys and a read of the range files that can hold
// them, instead of reading every older data file: the fast path that makes
// equality deletes cheap for an index on the table's key.
type indexResolver struct {
	is      *format.IndexSchema
	entries []format.TrackingEntry
	store   *objstore.Store
	// filesRead and rowGroupsRead count what the resolver read.
	filesRead, rowGroupsRead int
}

// ResolveEquality implements ingest.EqualityResolver.
func (r *indexResolver) ResolveEquality(ctx context.Context, fieldIDs []int, tuples []format.Key) (map[string][]int64, bool, error) {
	cluster := r.is.ClusterFields()
	if !r.is.HasLocation() || len(cluster) < len(fieldIDs) {
		return nil, false, nil
	}
	// perm[i] is the position in a delete tuple of cluster field i.
	perm := make([]int, len(fieldIDs))
	for i := range fieldIDs {
		f := cluster[i]
		j := slices.Index(fieldIDs, f.ID)
		if f.Kind != format.KindIdentity || j < 0 || slices.Contains(perm[:i], j) {
			return nil, false, nil
		}
		perm[i] = j
	}
	types := make([]iceberg.Type, len(fieldIDs))
	for i := range types {
		types[i] = cluster[i].Type
	}
	want := map[string]bool{}
	prefixes := make([]format.Key, 0, len(tuples))
	for _, t := range tuples {
		p := make(format.Key, len(perm))
		for i, j := range perm {
			p[i] = t[j]
		}
		enc, err := format.AppendKey(nil, types, p)
		if err != nil {
			return nil, false, nil // a value of another type: let the slow path decide
		}
		if !want[string(enc)] {
			want[string(enc)] = true
			prefixes = append(prefixes, p)
		}
	}
	files := r.candidateFiles(types, prefixes)
	out := map[string][]int64{}
	for _, i := range files {
		if err := r.scanFile(ctx, r.entries[i], types, want, out); err != nil {
			return nil, false, err
		}
	}
	return out, true, nil
}

// candidateFiles returns the range files whose key range can hold a key
// starting with one of prefixes: from the first file whose group_max_value
// prefix is at or above the prefix, through the first one above it (equal
// prefixes may continue into the next file).
func (r *indexResolver) candidateFiles(types []iceberg.Type, prefixes []format.Key) []int {
	maxes := make([]format.Key, len(r.entries))
	for i := range r.entries {
		k, _ := r.entries[i].GroupMaxKey(r.is)
		maxes[i] = k[:len(types)]
	}
	set := map[int]bool{}
	for _, p := range prefixes {
		i, _ := slices.BinarySearchFunc(maxes, p, func(gm, p format.Key) int { return format.CompareKeys(types, gm, p) })
		for ; i < len(maxes); i++ {
			set[i] = true
			if format.CompareKeys(types, maxes[i], p) > 0 {
				break
			}
		}
	}
	out := make([]int, 0, len(set))
	for i := range set {
		out = append(out, i)
	}
	slices.Sort(out)
	return out
}

func (r *indexResolver) scanFile(ctx context.Context, te format.TrackingEntry, types []iceberg.Type, want map[string]bool, out map[string][]int64) error {
	rf, err := r.store.OpenRange(ctx, &te, r.is, format.RangeFileReadOptions{})
	if err != nil {
		return err
	}
	defer rf.Close()
	r.filesRead++
	var ids []int
	for _, cf := range r.is.ClusterFields()[:len(types)] {
		ids = append(ids, cf.ID)
	}
	var fileCol, posCol int = -1, -1
	for _, f := range r.is.Fields() {
		if ref, ok := f.Expr.(format.Ref); ok && f.Kind == format.KindMaterialized {
			switch ref.ID {
			case format.FieldIDFile:
				fileCol = len(ids)
				ids = append(ids, f.ID)
			case format.FieldIDPos:
				posCol = len(ids)
				ids = append(ids, f.ID)
			}
		}
	}
	key := make(format.Key, len(types))
	var enc []byte
	groups := r.rowGroups(rf.RangeFileReader, types[0], want)
	r.rowGroupsRead += len(groups)
	return rf.Read(ctx, ids, groups, func(rec arrow.RecordBatch) error {
		for row := 0; row < int(rec.NumRows()); row++ {
			for i, t := range types {
				key[i] = format.ValueAtAs(t, rec.Column(i), row)
			}
			enc, err = format.AppendKey(enc[:0], types, key)
			if err != nil {
				return err
			}
			if !want[string(enc)] {
				continue
			}
			path, _ := format.ValueAt(rec.Column(fileCol), row).(string)
			pos, _ := format.ValueAt(rec.Column(posCol), row).(int64)
			out[path] = append(out[path], pos)
		}
		return nil
	})
}

// rowGroups returns the row groups of rf whose statistics of the leading
// cluster field (of type t) may hold the first value of a wanted key (keys
// of want are encodings of key prefixes), so that a few keys read a few
// row groups, not the whole file.
func (r *indexResolver) rowGroups(rf *format.RangeFileReader, t iceberg.Type, want map[string]bool) []int {
	var firsts []any // the distinct first values, sorted
	nulls := false
	for enc := range want {
		k, _, err := format.DecodeKey([]byte(enc), []iceberg.Type{t})
		if err != nil {
			return nil // cannot tell: read every row group
		}
		if k[0] == nil {
			nulls = true
			continue
		}
		firsts = append(firsts, k[0])
	}
	slices.SortFunc(firsts, func(a, b any) int { return format.Compare(t, a, b) })
	id := r.is.ClusterFields()[0].ID
	groups := []int{}
	for g := range rf.NumRowGroups() {
		_, stats := rf.RowGroupStats(g)
		st := stats[id]
		if st == nil || st.LowerBound == nil || st.UpperBound == nil {
			groups = append(groups, g) // no usable bounds
			continue
		}
		i, _ := slices.BinarySearchFunc(firsts, st.LowerBound, func(v, lo any) int { return format.Compare(t, v, lo) })
		inRange := i < len(firsts) && format.Compare(t, firsts[i], st.UpperBound) <= 0
		mayHoldNull := st.NullValueCount == nil || *st.NullValueCount > 0
		if inRange || nulls && mayHoldNull {
			groups = append(groups, g)
		}
	}
	return groups
}
