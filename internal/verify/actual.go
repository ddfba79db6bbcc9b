package verify

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/streamidx/streamidx/format"
	"github.com/streamidx/streamidx/internal/extsort"
)

func (v *verifier) problem(msg string, args ...any) {
	v.report.FileProblems = append(v.report.FileProblems, fmt.Sprintf(msg, args...))
}

// brokenFile reports whether err says that a file of the index is not what
// the index says it is: corrupt, truncated, another file put in its place,
// or missing. Such a file is a problem of the index (verify exits 1),
// whichever file it is; any other error stops verify from judging (exit 2).
func brokenFile(err error) bool {
	return format.IsCorruption(err) || errors.Is(err, fs.ErrNotExist)
}

// actual adds the encoding of every entry the index holds, and checks the
// index files against the spec on the way. A file that is broken (see
// brokenFile) is a problem of the index, reported with the file's name.
func (v *verifier) actual(snap *format.Snapshot, out *extsort.Sorter) error {
	t, _, err := v.opts.Store.ReadTracking(v.ctx, v.md, snap, v.is)
	if brokenFile(err) {
		v.problem("%v", err)
		return nil
	}
	if err != nil {
		return err
	}
	entries := t.Entries
	v.report.RangeFiles = len(entries)
	var prevMax format.Key
	for i, te := range entries {
		groupMax, ok := te.GroupMaxKey(v.is)
		if !ok {
			v.problem("tracking entry %d (%s) has no group_max_value for every cluster field", i, te.FilePath)
		}
		if err := v.rangeFile(i, te, prevMax, groupMax, out); err != nil {
			return err
		}
		if groupMax != nil {
			prevMax = groupMax
		}
	}
	return nil
}

// rangeFile reads one range file, checks it and adds its entries.
func (v *verifier) rangeFile(i int, te format.TrackingEntry, prevMax, groupMax format.Key, out *extsort.Sorter) error {
	// _file repeats a few long paths: read as a dictionary, no batch copies
	// every repeat.
	var dict []int
	if v.filePos >= 0 {
		dict = []int{v.stored[v.filePos].ID}
	}
	r, err := v.opts.Store.OpenRange(v.ctx, &te, v.is, format.RangeFileReadOptions{DictionaryFields: dict})
	if brokenFile(err) {
		v.problem("range file %d: %v", i, err)
		return nil
	}
	if err != nil {
		return err
	}
	defer r.Close()

	types := v.is.ClusterTypes()
	fields := v.is.Fields()
	clusterCols := v.clusterColumns()
	b := newBoundsCheck(v, te)
	var rows int64
	var first format.Key
	key, last := make(format.Key, len(clusterCols)), make(format.Key, len(clusterCols))
	orderOK := true
	entry := make(format.Key, len(v.stored))
	all := make(format.Key, len(fields))
	var enc []byte
	var files fileColumn
	err = r.Read(v.ctx, nil, nil, func(rec arrow.RecordBatch) error {
		cols, release, err := v.allColumns(rec)
		if err != nil {
			return err
		}
		defer release()
		if v.filePos >= 0 {
			files.reset(&v.files, rec.Column(v.filePos))
		}
		for row := 0; row < int(rec.NumRows()); row++ {
			si := 0
			for c, f := range fields {
				all[c] = format.ValueAtAs(f.Type, cols[c], row)
				if f.Stored() {
					entry[si] = all[c]
					si++
				}
			}
			if v.filePos >= 0 {
				entry[v.filePos] = files.number(row, entry[v.filePos])
			}
			for k, c := range clusterCols {
				key[k] = all[c]
			}
			if first == nil {
				first = slices.Clone(key)
			}
			if rows > 0 && orderOK && format.CompareKeys(types, last, key) > 0 {
				v.problem("range file %s is not in cluster order at row %d", te.FilePath, rows)
				orderOK = false
			}
			key, last = last, key
			b.observe(all)
			if enc, err = v.encode(enc[:0], entry); err != nil {
				return err
			}
			if err := out.Add(enc, nil); err != nil {
				return err
			}
			rows++
		}
		return nil
	})
	if format.IsCorruption(err) {
		v.problem("%v", err)
		return nil
	}
	if err != nil {
		return err
	}
	if rows != te.RecordCount {
		v.problem("range file %s holds %d entries, its tracking entry says %d", te.FilePath, rows, te.RecordCount)
	}
	if rows == 0 {
		v.problem("range file %s is empty", te.FilePath)
		return nil
	}
	if prevMax != nil && format.CompareKeys(types, first, prevMax) <= 0 {
		v.problem("range file %s overlaps the previous range: its first key is not above the previous group_max_value", te.FilePath)
	}
	if groupMax != nil && format.CompareKeys(types, last, groupMax) != 0 {
		v.problem("range file %s: group_max_value %s is not its last key %s", te.FilePath, keyString(v.is, groupMax), keyString(v.is, last))
	}
	return nil
}

// fileColumn numbers the _file values of a batch (see fileNumbers): once
// per dictionary value when the column is a dictionary, else per row.
type fileColumn struct {
	files   *fileNumbers
	dict    *array.Dictionary
	numbers []int64 // of the dictionary's values
}

func (c *fileColumn) reset(files *fileNumbers, col arrow.Array) {
	c.files, c.numbers = files, c.numbers[:0]
	c.dict, _ = col.(*array.Dictionary)
	if c.dict == nil {
		return
	}
	values := c.dict.Dictionary()
	for i := range values.Len() {
		path, _ := format.ValueAt(values, i).(string)
		c.numbers = append(c.numbers, files.number(path))
	}
}

// number gives the number of the row's _file, whose value is v (nil when
// null, which stays null).
func (c *fileColumn) number(row int, v any) any {
	path, ok := v.(string)
	switch {
	case !ok:
		return v
	case c.dict != nil:
		return c.numbers[c.dict.GetValueIndex(row)]
	}
	return c.files.number(path)
}

// clusterColumns gives the positions of the cluster fields among all index
// fields.
func (v *verifier) clusterColumns() []int {
	var cols []int
	for _, cf := range v.is.ClusterFields() {
		for c, f := range v.is.Fields() {
			if f.ID == cf.ID {
				cols = append(cols, c)
			}
		}
	}
	return cols
}

// allColumns gives a column for every index field of a range file batch:
// stored fields as read, non-materialized fields computed from the identity
// fields they are defined on (the spec requires cluster expressions to refer
// to identity fields only; others are evaluated when they can be).
func (v *verifier) allColumns(rec arrow.RecordBatch) ([]arrow.Array, func(), error) {
	fields := v.is.Fields()
	cols := make([]arrow.Array, len(fields))
	var computed []arrow.Array
	release := func() {
		for _, a := range computed {
			a.Release()
		}
	}
	src := format.RecordColumns(rec, v.schema)
	si := 0
	for c, f := range fields {
		if f.Stored() {
			cols[c] = rec.Column(si)
			si++
			continue
		}
		arr, err := format.Evaluate(memory.DefaultAllocator, f.Expr, f.Type, src)
		if err != nil {
			if v.is.IsCluster(f.ID) {
				release()
				return nil, nil, fmt.Errorf("compute cluster field %d (%s) from stored fields: %w", f.ID, f.Expr, err)
			}
			arr = nullArray(f, int(rec.NumRows())) // not computable here: its bounds go unchecked
		}
		computed = append(computed, arr)
		cols[c] = arr
	}
	return cols, release, nil
}

func nullArray(f format.IndexField, n int) arrow.Array {
	dt, _ := format.ArrowType(f.Type)
	return array.MakeArrayOfNull(memory.DefaultAllocator, dt, n)
}

func keyString(is *format.IndexSchema, k format.Key) string {
	var b bytes.Buffer
	b.WriteByte('(')
	for i, f := range is.ClusterFields() {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(format.FormatValue(f.Type, k[i]))
	}
	b.WriteByte(')')
	return b.String()
}

// boundsCheck checks the lower and upper bounds of a tracking entry against
// the values of the stored fields in the range file.
type boundsCheck struct {
	v   *verifier
	te  format.TrackingEntry
	bad map[int]bool
}

func newBoundsCheck(v *verifier, te format.TrackingEntry) *boundsCheck {
	for _, f := range v.is.ClusterFields() {
		if st := te.Stats[f.ID]; st == nil {
			v.problem("range file %s has no statistics for cluster field %d", te.FilePath, f.ID)
		}
	}
	return &boundsCheck{v: v, te: te, bad: map[int]bool{}}
}

func (b *boundsCheck) observe(all format.Key) {
	for c, f := range b.v.is.Fields() {
		st := b.te.Stats[f.ID]
		if c >= len(all) {
			continue
		}
		val := all[c]
		if st == nil || val == nil || b.bad[f.ID] || format.IsNaN(val) {
			continue
		}
		if st.LowerBound != nil && format.Compare(f.Type, val, st.LowerBound) < 0 ||
			st.UpperBound != nil && format.Compare(f.Type, val, st.UpperBound) > 0 {
			b.bad[f.ID] = true
			b.v.problem("range file %s: a value of field %d (%s) lies outside the bounds [%s, %s] of its tracking entry",
				b.te.FilePath, f.ID, format.FormatValue(f.Type, val), format.FormatValue(f.Type, st.LowerBound), format.FormatValue(f.Type, st.UpperBound))
		}
	}
}
