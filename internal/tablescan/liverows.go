package tablescan

import (
	"context"
	"fmt"

	"github.com/RoaringBitmap/roaring/v2/roaring64"
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/iceberg-go"
	iceio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"

	"github.com/streamidx/streamidx/format"
)

// LiveRows returns, for each delete state of file, the positions of the
// rows live under it: the _pos a ScanFile under that state would give, from
// one read of the columns the states' equality sets test (no read at all
// when none has any), and no output rows built. A state's Within limits
// its answer as in ScanFile; row groups that no state's Within reaches are
// not read. Comparing two states this way (the table delta of a file whose
// deletes changed) reads the file once instead of twice.
func LiveRows(ctx context.Context, fs iceio.IO, schema *iceberg.Schema, file iceberg.DataFile, states []*FileDeletes, opts Options) ([]*roaring64.Bitmap, error) {
	opts.EnsureDefaults()
	if err := checkDataFile(file); err != nil {
		return nil, err
	}
	for i := range states {
		if states[i] == nil {
			states[i] = &FileDeletes{}
		}
	}
	var eqIDs []int
	for _, st := range states {
		for _, set := range st.Equality {
			if _, err := equalityFields(schema, set.FieldIDs); err != nil {
				return nil, fmt.Errorf("scan %s: %w", file.FilePath(), err)
			}
			eqIDs = append(eqIDs, set.FieldIDs...)
		}
	}
	out := make([]*roaring64.Bitmap, len(states))
	for i := range out {
		out[i] = roaring64.New()
	}
	if len(eqIDs) == 0 {
		// Positions alone decide: the file need not be read.
		for i, st := range states {
			out[i].AddRange(0, uint64(file.Count()))
			if st.Within != nil {
				out[i].And(st.Within)
			}
			if st.Positions != nil {
				del, err := FromDV(st.Positions)
				if err != nil {
					return nil, fmt.Errorf("scan %s: %w", file.FilePath(), err)
				}
				out[i].AndNot(del)
			}
		}
		return out, nil
	}
	readSchema := (&projection{schema: schema}).readSchema(eqIDs)
	colOf := map[int]int{}
	for i, f := range readSchema.Fields() {
		colOf[f.ID] = i
	}
	groups := make([][]eqGroup, len(states))
	for i, st := range states {
		tested := file.Count()
		if st.Within != nil {
			tested = min(tested, int64(st.Within.GetCardinality()))
		}
		groups[i] = groupEquality(st.Equality, colOf, tested)
	}
	p, err := openParquet(fs, file.FilePath(), opts.NameMapping, opts.BatchRows, opts.Allocator)
	if err != nil {
		return nil, err
	}
	if p.numRows() != file.Count() {
		return nil, errJoinClose(format.MarkCorruption(file.FilePath(), fmt.Errorf("has %d rows, its manifest entry says %d", p.numRows(), file.Count())), p)
	}
	wanted := func(start, n int64) bool {
		for _, st := range states {
			if st.within(start, n) {
				return true
			}
		}
		return false
	}
	var key []byte
	live := make([]uint64, 0, opts.BatchRows)
	so := table.SchemaOptions{IncludeFieldIDs: true, FormatVersion: opts.FormatVersion}
	err = p.read(ctx, readSchema, so, wanted, func(rec arrow.RecordBatch, start int64) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		n := int64(rec.NumRows())
		for s, st := range states {
			live = live[:0]
			for i := range n {
				pos := start + i
				if st.Within != nil && !st.Within.Contains(uint64(pos)) ||
					st.Positions != nil && st.Positions.Contains(uint64(pos)) {
					continue
				}
				deleted, err := deletedByEquality(groups[s], rec, int(i), &key)
				if err != nil {
					return fmt.Errorf("scan %s: %w", file.FilePath(), err)
				}
				if !deleted {
					live = append(live, uint64(pos))
				}
			}
			out[s].AddMany(live)
		}
		return nil
	})
	return out, errJoinClose(err, p)
}

// deletedByEquality reports whether row i of rec matches a set of groups;
// key is scratch space.
func deletedByEquality(groups []eqGroup, rec arrow.RecordBatch, i int, key *[]byte) (bool, error) {
	var err error
	for _, g := range groups {
		*key = (*key)[:0]
		for _, c := range g.cols {
			if *key, err = appendColumnKey(*key, rec.Column(c), i); err != nil {
				return false, err
			}
		}
		for _, set := range g.sets {
			if set.containsKey(*key) {
				return true, nil
			}
		}
	}
	return false, nil
}
