package compactor

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/url"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/iceberg-go"

	"github.com/streamidx/streamidx/format"
	"github.com/streamidx/streamidx/internal/objstore"
)

// mergeFixture is an index schema and a directory of range files built
// directly with RangeWriter, for merges without a table.
type mergeFixture struct {
	t     *testing.T
	is    *format.IndexSchema
	codec *format.EntryCodec
	dir   string // file:// URI
	path  string // dir as a local path
	opts  MergeOptions
}

func newMergeFixture(t *testing.T, is *format.IndexSchema) *mergeFixture {
	dir := t.TempDir()
	return &mergeFixture{t: t, is: is, codec: format.NewEntryCodec(is), dir: (&url.URL{Scheme: "file", Path: filepath.ToSlash(dir)}).String(), path: dir,
		opts: MergeOptions{RangeWriterOptions: RangeWriterOptions{TargetFileSize: 512, RowGroupRows: 16, BatchRows: 16}, MinFileSize: 1, ReadBatchRows: 5}}
}

// ttlSchema is (k long, payload string, ts long) indexed by identity k with
// payload materialized and ts non-materialized: entries of one key can
// differ in payload, and ts cannot be computed from the range files.
func ttlSchema(t *testing.T) *format.IndexSchema {
	t.Helper()
	source := iceberg.NewSchema(0,
		iceberg.NestedField{ID: 1, Name: "k", Type: iceberg.PrimitiveTypes.Int64},
		iceberg.NestedField{ID: 2, Name: "payload", Type: iceberg.PrimitiveTypes.String},
		iceberg.NestedField{ID: 3, Name: "ts", Type: iceberg.PrimitiveTypes.Int64},
	)
	md := &format.Metadata{FormatVersion: 1, IndexUUID: "u", TableUUID: "t", Location: "file:///x", Type: format.TypeScalar,
		IdentityFields: []int{1},
		MaterializedFields: []format.ExprField{
			{FieldID: 100, Type: format.ExprFieldType, DataType: iceberg.PrimitiveTypes.String, Expr: format.Ref{ID: 2}}},
		NonMaterializedFields: []format.ExprField{
			{FieldID: 101, Type: format.ExprFieldType, DataType: iceberg.PrimitiveTypes.Int64, Expr: format.Ref{ID: 3}}},
		ClusterSpec: []int{1}}
	return validIndexSchema(t, md, source)
}

func (x *mergeFixture) sortByKey(rows []format.Key) {
	x.t.Helper()
	type keyed struct {
		key []byte
		row format.Key
	}
	ks := make([]keyed, len(rows))
	for i, r := range rows {
		k, err := x.codec.AppendKey(nil, r)
		if err != nil {
			x.t.Fatal(err)
		}
		ks[i] = keyed{k, r}
	}
	slices.SortStableFunc(ks, func(a, b keyed) int { return bytes.Compare(a.key, b.key) })
	for i := range ks {
		rows[i] = ks[i].row
	}
}

// write writes rows as range files of about target bytes each.
func (x *mergeFixture) write(target int64, rows ...format.Key) []format.TrackingEntry {
	x.t.Helper()
	rows = slices.Clone(rows)
	x.sortByKey(rows)
	opts := x.opts.RangeWriterOptions
	opts.TargetFileSize = target
	w, err := NewRangeWriter(context.Background(), x.is, x.dir, opts)
	if err != nil {
		x.t.Fatal(err)
	}
	for _, r := range rows {
		if err := w.Add(r); err != nil {
			x.t.Fatal(err)
		}
	}
	entries, err := w.Close()
	if err != nil {
		x.t.Fatal(err)
	}
	return entries
}

type mut struct {
	entry format.Key
	count int
}

// delta encodes mutations and yields them in staging-key order.
func (x *mergeFixture) delta(muts ...mut) Delta {
	x.t.Helper()
	type rec struct {
		key, value []byte
		count      int
	}
	var recs []rec
	for _, m := range muts {
		k, err := x.codec.AppendKey(nil, m.entry)
		if err != nil {
			x.t.Fatal(err)
		}
		v, err := x.codec.AppendValue(nil, m.entry)
		if err != nil {
			x.t.Fatal(err)
		}
		recs = append(recs, rec{k, v, m.count})
	}
	slices.SortStableFunc(recs, func(a, b rec) int { return bytes.Compare(a.key, b.key) })
	return func(yield func(key, value []byte, count int) bool) error {
		for _, r := range recs {
			if !yield(r.key, r.value, r.count) {
				return nil
			}
		}
		return nil
	}
}

func (x *mergeFixture) merge(prev []format.TrackingEntry, muts ...mut) (*MergeResult, error) {
	return Merge(context.Background(), x.is, prev, x.delta(muts...), x.dir, x.opts)
}

// storedRows renders the stored values of entries, sorted, for comparing
// multisets.
func (x *mergeFixture) storedRows(rows []format.Key) []string {
	var out []string
	for _, r := range rows {
		var parts []string
		for i, f := range x.is.Fields() {
			if f.Stored() {
				parts = append(parts, format.FormatValue(f.Type, r[i]))
			}
		}
		out = append(out, strings.Join(parts, "|"))
	}
	slices.Sort(out)
	return out
}

// check reads every range file of an index snapshot, checks what a reader
// relies on (record counts, cluster order within and across files,
// group_max_value, a tracking file that can be written) and returns the
// stored rows.
func (x *mergeFixture) check(entries []format.TrackingEntry) []string {
	x.t.Helper()
	if err := format.WriteTrackingFile(io.Discard, x.is, entries, format.TrackingWriteOptions{}); err != nil {
		x.t.Fatalf("the merged entries do not make a valid tracking file: %v", err)
	}
	types := x.is.ClusterTypes()
	var clusterPos []int
	for _, cf := range x.is.ClusterFields() {
		for i, f := range x.is.Fields() {
			if f.ID == cf.ID && f.Stored() {
				clusterPos = append(clusterPos, i)
			}
		}
	}
	var all []format.Key
	var prevMax format.Key
	for _, te := range entries {
		rows := x.readFile(te)
		if int64(len(rows)) != te.RecordCount || len(rows) == 0 {
			x.t.Fatalf("%s holds %d entries, its tracking entry says %d", te.FilePath, len(rows), te.RecordCount)
		}
		var last format.Key
		for _, r := range rows {
			key := format.Key{}
			for _, p := range clusterPos {
				key = append(key, r[p])
			}
			if last != nil && format.CompareKeys(types, last, key) > 0 || last == nil && prevMax != nil && format.CompareKeys(types, prevMax, key) >= 0 {
				x.t.Fatalf("%s: key %v out of cluster order", te.FilePath, key)
			}
			last = key
		}
		if gm, _ := te.GroupMaxKey(x.is); format.CompareKeys(types, gm, last) != 0 {
			x.t.Fatalf("%s: group_max_value %v, last key %v", te.FilePath, gm, last)
		}
		prevMax = last
		all = append(all, rows...)
	}
	return x.storedRows(all)
}

// readFile returns the entries of a range file (non-materialized fields nil).
func (x *mergeFixture) readFile(te format.TrackingEntry) []format.Key {
	x.t.Helper()
	r, err := objstore.Local().OpenRange(context.Background(), &te, x.is, format.RangeFileReadOptions{})
	if err != nil {
		x.t.Fatal(err)
	}
	defer r.Close()
	var out []format.Key
	err = r.Read(context.Background(), nil, nil, func(rec arrow.RecordBatch) error {
		for row := range int(rec.NumRows()) {
			k := make(format.Key, len(x.is.Fields()))
			col := 0
			for i, f := range x.is.Fields() {
				if f.Stored() {
					k[i] = ownValue(format.ValueAtAs(f.Type, rec.Column(col), row))
					col++
				}
			}
			out = append(out, k)
		}
		return nil
	})
	if err != nil {
		x.t.Fatal(err)
	}
	return out
}

// parquetFiles counts the range files in the fixture's directory.
func (x *mergeFixture) parquetFiles() int {
	x.t.Helper()
	m, err := filepath.Glob(filepath.Join(x.path, "*.parquet"))
	if err != nil {
		x.t.Fatal(err)
	}
	return len(m)
}

func row(k int64, payload string) format.Key { return format.Key{k, payload} }

// evenRows are the keys 0, 2, ..., 2(n-1).
func evenRows(n int) []format.Key {
	var rows []format.Key
	for i := range n {
		rows = append(rows, row(int64(2*i), fmt.Sprintf("payload-%05d", i)))
	}
	return rows
}

// applyModel applies mutations to a multiset of rows.
func applyModel(rows []format.Key, muts []mut) []format.Key {
	count := map[string]int{} // copies to delete
	for _, m := range muts {
		count[entryID(m.entry)] += max(-m.count, 0)
	}
	var out []format.Key
	for _, r := range rows {
		if k := entryID(r); count[k] > 0 {
			count[k]--
			continue
		}
		out = append(out, r)
	}
	for _, m := range muts {
		for range m.count {
			out = append(out, m.entry)
		}
	}
	return out
}

// entryID renders an entry for comparing by value: floats by their bits,
// which tell -NaN from NaN and -0.0 from 0.0 as an index does.
func entryID(e format.Key) string {
	parts := make([]string, len(e))
	for i, v := range e {
		switch f := v.(type) {
		case float64:
			parts[i] = fmt.Sprintf("f64:%x", math.Float64bits(f))
		case float32:
			parts[i] = fmt.Sprintf("f32:%x", math.Float32bits(f))
		default:
			parts[i] = fmt.Sprintf("%T:%v", v, v)
		}
	}
	return strings.Join(parts, "|")
}

// touched returns the indexes of prev whose file is not in entries.
func touched(prev, entries []format.TrackingEntry) []int {
	var out []int
	for i, e := range prev {
		if !slices.ContainsFunc(entries, func(n format.TrackingEntry) bool { return n.FilePath == e.FilePath }) {
			out = append(out, i)
		}
	}
	return out
}

func TestMergeAppliesDeltaAndRewritesOnlyTouchedFiles(t *testing.T) {
	is := testIndexSchema(t)
	base := evenRows(400)
	firstOf := func(prev []format.TrackingEntry, i int) int64 { // the smallest key of file i
		if i == 0 {
			return 0
		}
		gm, _ := prev[i-1].GroupMaxKey(is)
		return gm[0].(int64) + 2
	}
	cases := []struct {
		name string
		// muts builds the delta from the previous files.
		muts func(prev []format.TrackingEntry) []mut
		// rewritten are the indexes of the files that must be replaced.
		rewritten func(prev []format.TrackingEntry) []int
	}{
		{"insert in the middle",
			func(prev []format.TrackingEntry) []mut { return []mut{{row(firstOf(prev, 3)+1, "new"), 1}} },
			func([]format.TrackingEntry) []int { return []int{3} }},
		{"insert before the first key",
			func([]format.TrackingEntry) []mut { return []mut{{row(-7, "new"), 1}, {row(-5, "new"), 2}} },
			func([]format.TrackingEntry) []int { return []int{0} }},
		{"insert after the last key",
			func([]format.TrackingEntry) []mut { return []mut{{row(100000, "new"), 1}} },
			func(prev []format.TrackingEntry) []int { return []int{len(prev) - 1} }},
		{"delete and re-insert under a new payload",
			func(prev []format.TrackingEntry) []mut {
				k := firstOf(prev, 2)
				return []mut{{row(k, fmt.Sprintf("payload-%05d", k/2)), -1}, {row(k, "updated"), 1}}
			},
			func([]format.TrackingEntry) []int { return []int{2} }},
		{"mixed changes in separate files",
			func(prev []format.TrackingEntry) []mut {
				a, b := firstOf(prev, 1), firstOf(prev, 4)
				return []mut{{row(a, fmt.Sprintf("payload-%05d", a/2)), -1}, {row(a+1, "x"), 3},
					{row(b+1, "y"), 1}, {row(b+2, fmt.Sprintf("payload-%05d", (b+2)/2)), -1}}
			},
			func([]format.TrackingEntry) []int { return []int{1, 4} }},
		{"a run of consecutive files",
			func(prev []format.TrackingEntry) []mut {
				return []mut{{row(firstOf(prev, 2)+1, "a"), 1}, {row(firstOf(prev, 3)+1, "b"), 1}, {row(firstOf(prev, 4)+1, "c"), 1}}
			},
			func([]format.TrackingEntry) []int { return []int{2, 3, 4} }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			x := newMergeFixture(t, is)
			prev := x.write(512, base...)
			if len(prev) < 6 {
				t.Fatalf("the fixture needs several range files, got %d", len(prev))
			}
			muts := c.muts(prev)
			res, err := x.merge(prev, muts...)
			if err != nil {
				t.Fatal(err)
			}
			if got, want := x.check(res.Entries), x.storedRows(applyModel(base, muts)); !slices.Equal(got, want) {
				t.Fatalf("merged index holds\n%v\nwant\n%v", got, want)
			}
			want := c.rewritten(prev)
			if got := touched(prev, res.Entries); !slices.Equal(got, want) {
				t.Errorf("replaced files %v, want only %v", got, want)
			}
			if res.Rewritten != len(want) || res.Reused != len(prev)-len(want) {
				t.Errorf("rewritten %d reused %d, want %d and %d", res.Rewritten, res.Reused, len(want), len(prev)-len(want))
			}
			for _, e := range prev {
				if i := slices.IndexFunc(res.Entries, func(n format.TrackingEntry) bool { return n.FilePath == e.FilePath }); i >= 0 && !reflect.DeepEqual(res.Entries[i], e) {
					t.Errorf("reused file %s has a changed tracking entry", e.FilePath)
				}
			}
			if res.Written != len(res.Entries)-res.Reused || res.BytesWritten <= 0 {
				t.Errorf("written %d files of %d bytes, entries %d reused %d", res.Written, res.BytesWritten, len(res.Entries), res.Reused)
			}
			var ins, del int64
			for _, m := range muts {
				ins += int64(max(m.count, 0))
				del += int64(max(-m.count, 0))
			}
			if res.Inserted != ins || res.Deleted != del {
				t.Errorf("inserted %d deleted %d, want %d and %d", res.Inserted, res.Deleted, ins, del)
			}
		})
	}
}

func TestMergeIntoEmptyIndex(t *testing.T) {
	x := newMergeFixture(t, testIndexSchema(t))
	var muts []mut
	for _, r := range evenRows(200) {
		muts = append(muts, mut{r, 1})
	}
	res, err := x.merge(nil, muts...)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := x.check(res.Entries), x.storedRows(applyModel(nil, muts)); !slices.Equal(got, want) {
		t.Fatalf("index holds %d entries, want %d", len(got), len(want))
	}
	if len(res.Entries) < 2 || res.Rewritten != 0 || res.Reused != 0 || res.Written != len(res.Entries) {
		t.Errorf("files %d rewritten %d reused %d written %d", len(res.Entries), res.Rewritten, res.Reused, res.Written)
	}
	if _, err := x.merge(nil, mut{row(1, "a"), -1}); !errors.Is(err, ErrDeltaMismatch) {
		t.Errorf("a delete from an empty index: got %v, want ErrDeltaMismatch", err)
	}
}

func TestMergeDeletingAFileEntirelyDropsIt(t *testing.T) {
	x := newMergeFixture(t, testIndexSchema(t))
	base := evenRows(400)
	prev := x.write(512, base...)
	victim := x.readFile(prev[2])
	var muts []mut
	for _, r := range victim {
		muts = append(muts, mut{r, -1})
	}
	res, err := x.merge(prev, muts...)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := x.check(res.Entries), x.storedRows(applyModel(base, muts)); !slices.Equal(got, want) {
		t.Fatalf("index holds %d entries, want %d", len(got), len(want))
	}
	if len(res.Entries) != len(prev)-1 || res.Written != 0 || res.Rewritten != 1 {
		t.Errorf("%d files (was %d), written %d rewritten %d", len(res.Entries), len(prev), res.Written, res.Rewritten)
	}
	if slices.ContainsFunc(res.Entries, func(e format.TrackingEntry) bool { return e.FilePath == prev[2].FilePath }) {
		t.Error("the emptied file is still referenced")
	}
}

func TestMergeRejectsDeletesOfAbsentEntries(t *testing.T) {
	is := testIndexSchema(t)
	for name, muts := range map[string][]mut{
		"absent key":                   {{row(3, "payload-00001"), -1}},
		"absent key after good writes": {{row(1, "a"), 5}, {row(401, "x"), 1}, {row(501, "payload-00250"), -1}},
		"present key, other payload":   {{row(4, "payload-99999"), -1}},
		"more copies than held":        {{row(4, "payload-00002"), -2}},
	} {
		t.Run(name, func(t *testing.T) {
			x := newMergeFixture(t, is)
			prev := x.write(512, evenRows(400)...)
			before := x.parquetFiles()
			_, err := x.merge(prev, muts...)
			if !errors.Is(err, ErrDeltaMismatch) {
				t.Fatalf("got %v, want ErrDeltaMismatch", err)
			}
			if !strings.Contains(err.Error(), "payload-") {
				t.Errorf("the error does not name the entry: %v", err)
			}
			if after := x.parquetFiles(); after != before {
				t.Errorf("a failed merge left %d new files behind", after-before)
			}
		})
	}
}

func TestMergeIdenticalEntriesWithMultiplicity(t *testing.T) {
	is := testIndexSchema(t)
	dup := row(10, "same")
	base := append(evenRows(100), dup, dup, dup)
	for _, c := range []struct {
		count   int
		wantErr bool
	}{{-2, false}, {-3, false}, {-4, true}, {2, false}} {
		t.Run(fmt.Sprint(c.count), func(t *testing.T) {
			x := newMergeFixture(t, is)
			prev := x.write(512, base...)
			muts := []mut{{dup, c.count}}
			res, err := x.merge(prev, muts...)
			if c.wantErr {
				if !errors.Is(err, ErrDeltaMismatch) {
					t.Fatalf("got %v, want ErrDeltaMismatch", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got, want := x.check(res.Entries), x.storedRows(applyModel(base, muts)); !slices.Equal(got, want) {
				t.Fatalf("index holds %d entries, want %d", len(got), len(want))
			}
		})
	}
}

// Entries with one staging key but different stored values are matched by
// their stored values, not by the key alone.
func TestMergeMatchesEntriesOfOneKeyByValue(t *testing.T) {
	is := ttlSchema(t)
	x := newMergeFixture(t, is)
	base := []format.Key{{int64(1), "a", int64(10)}, {int64(5), "a", int64(11)}, {int64(5), "b", int64(12)}, {int64(9), "z", int64(13)}}
	prev := x.write(1<<20, base...)
	muts := []mut{{format.Key{int64(5), "a", int64(11)}, -1}, {format.Key{int64(5), "c", int64(14)}, 1}}
	res, err := x.merge(prev, muts...)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"1|a", "5|b", "5|c", "9|z"}
	if got := x.check(res.Entries); !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	if _, err := x.merge(prev, mut{format.Key{int64(5), "q", int64(11)}, -1}); !errors.Is(err, ErrDeltaMismatch) {
		t.Errorf("deleting (5, q), which the index lacks: got %v, want ErrDeltaMismatch", err)
	}
}

// A non-materialized field over a column the range files do not store keeps
// bounds that are the union of the replaced file's and the inserted values.
func TestMergeUnionBoundsOfUncomputableFields(t *testing.T) {
	is := ttlSchema(t)
	x := newMergeFixture(t, is)
	var base []format.Key
	for i := range 40 {
		base = append(base, format.Key{int64(i), "p", int64(1000 + i)})
	}
	x.opts.TargetFileSize = 1 << 20
	prev := x.write(1<<20, base[:20]...)
	prev = append(prev, x.write(1<<20, base[20:]...)...)
	if len(prev) != 2 {
		t.Fatalf("want two files, got %d", len(prev))
	}
	res, err := x.merge(prev,
		mut{format.Key{int64(3), "p", int64(1003)}, -1}, // deletes an entry inside the bounds
		mut{format.Key{int64(0), "p", int64(1000)}, -1}, // deletes the lower bound's entry
		mut{format.Key{int64(7), "q", int64(5000)}, 1})  // inserts above the old upper bound
	if err != nil {
		t.Fatal(err)
	}
	if res.Rewritten != 1 || res.Reused != 1 {
		t.Fatalf("rewritten %d reused %d", res.Rewritten, res.Reused)
	}
	x.check(res.Entries)
	st := res.Entries[0].Stats[101]
	if st == nil || st.LowerBound != int64(1000) || st.UpperBound != int64(5000) {
		t.Fatalf("bounds of the uncomputable field: %+v, want [1000, 5000]", st)
	}
	if st.TightBounds == nil || *st.TightBounds || st.NullValueCount != nil {
		t.Errorf("union bounds must say tight_bounds=false and leave the null count unknown: %+v", st)
	}
	if reused := res.Entries[1].Stats[101]; reused.LowerBound != int64(1020) || reused.TightBounds == nil || !*reused.TightBounds {
		t.Errorf("the untouched file's statistics changed: %+v", reused)
	}
}

// files writes each group of rows as its own range file.
func (x *mergeFixture) files(groups ...[]format.Key) []format.TrackingEntry {
	var out []format.TrackingEntry
	for _, g := range groups {
		es := x.write(1<<30, g...)
		if len(es) != 1 {
			x.t.Fatalf("want one file, got %d", len(es))
		}
		out = append(out, es...)
	}
	return out
}

func keyRange(from, to int) []format.Key {
	var rows []format.Key
	for i := from; i < to; i++ {
		rows = append(rows, row(int64(i), fmt.Sprintf("payload-%05d", i)))
	}
	return rows
}

// noisyRows are keys [from, to) with payloads that do not compress away.
func noisyRows(from, to int) []format.Key {
	var rows []format.Key
	for i := from; i < to; i++ {
		h := uint64(i) * 0x9E3779B97F4A7C15
		rows = append(rows, row(int64(i), fmt.Sprintf("%016x%016x%016x%016x", h, h*31, h*131, h*1031)))
	}
	return rows
}

func TestMergeFoldsSmallNeighbours(t *testing.T) {
	is := testIndexSchema(t)
	t.Run("a shrunken file absorbs the next", func(t *testing.T) {
		x := newMergeFixture(t, is)
		base := slices.Concat(keyRange(0, 200), keyRange(200, 400), keyRange(400, 600), keyRange(600, 800))
		prev := x.files(base[:200], base[200:400], base[400:600], base[600:])
		x.opts.TargetFileSize = prev[1].FileSizeInBytes + prev[2].FileSizeInBytes
		x.opts.MinFileSize = prev[1].FileSizeInBytes / 2
		var muts []mut
		for _, r := range base[205:400] { // file 1 keeps 5 entries
			muts = append(muts, mut{r, -1})
		}
		res, err := x.merge(prev, muts...)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := x.check(res.Entries), x.storedRows(applyModel(base, muts)); !slices.Equal(got, want) {
			t.Fatalf("index holds %d entries, want %d", len(got), len(want))
		}
		if got := touched(prev, res.Entries); !slices.Equal(got, []int{1, 2}) || len(res.Entries) != 3 || res.Rewritten != 2 {
			t.Errorf("replaced %v into %d files (rewritten %d); want files 1 and 2 merged into one", got, len(res.Entries), res.Rewritten)
		}
	})
	t.Run("a small file before the run joins it", func(t *testing.T) {
		x := newMergeFixture(t, is)
		base := slices.Concat(keyRange(0, 200), keyRange(200, 205), keyRange(205, 400), keyRange(400, 600))
		prev := x.files(base[:200], base[200:205], base[205:400], base[400:])
		x.opts.TargetFileSize = prev[1].FileSizeInBytes + prev[2].FileSizeInBytes + 1<<10
		x.opts.MinFileSize = prev[1].FileSizeInBytes + 1
		muts := []mut{{row(300, "payload-00300"), -1}}
		res, err := x.merge(prev, muts...)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := x.check(res.Entries), x.storedRows(applyModel(base, muts)); !slices.Equal(got, want) {
			t.Fatalf("index holds %d entries, want %d", len(got), len(want))
		}
		if got := touched(prev, res.Entries); !slices.Equal(got, []int{1, 2}) || len(res.Entries) != 3 {
			t.Errorf("replaced %v into %d files; want the small file 1 folded into file 2's rewrite", got, len(res.Entries))
		}
	})
	t.Run("a shrunken file and a neighbour too big for one file are split evenly", func(t *testing.T) {
		x := newMergeFixture(t, is)
		// Files large enough that their data, not their footers, make
		// their size.
		x.opts.RowGroupRows, x.opts.BatchRows, x.opts.PageSizeBytes = 1024, 256, 4096
		base := noisyRows(0, 6000)
		prev := x.files(base[:2000], base[2000:4000], base[4000:])
		size := prev[2].FileSizeInBytes
		x.opts.TargetFileSize = size * 4 / 5 // file 2 fits in the band; with the rest of file 1 it does not
		x.opts.MinFileSize = x.opts.TargetFileSize / 2
		var muts []mut
		for _, r := range base[2500:4000] { // file 1 keeps a quarter of its entries
			muts = append(muts, mut{r, -1})
		}
		res, err := x.merge(prev, muts...)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := x.check(res.Entries), x.storedRows(applyModel(base, muts)); !slices.Equal(got, want) {
			t.Fatalf("index holds %d entries, want %d", len(got), len(want))
		}
		if got := touched(prev, res.Entries); !slices.Equal(got, []int{1, 2}) || len(res.Entries) != 3 {
			for _, e := range res.Entries {
				t.Logf("%d entries %d bytes (target %d)", e.RecordCount, e.FileSizeInBytes, x.opts.TargetFileSize)
			}
			t.Fatalf("replaced %v into %d files; want files 1 and 2 rewritten as two", got, len(res.Entries))
		}
		for _, e := range res.Entries[1:] {
			if e.FileSizeInBytes < x.opts.MinFileSize || e.FileSizeInBytes > x.opts.TargetFileSize*3/2 {
				t.Errorf("a rewritten file of %d bytes (%d entries) is outside [%d, %d]", e.FileSizeInBytes, e.RecordCount,
					x.opts.MinFileSize, x.opts.TargetFileSize*3/2)
			}
		}
	})
}

func TestMergeRejectsUnsortedDelta(t *testing.T) {
	x := newMergeFixture(t, testIndexSchema(t))
	prev := x.write(512, evenRows(50)...)
	k1, _ := x.codec.AppendKey(nil, row(9, "a"))
	k2, _ := x.codec.AppendKey(nil, row(3, "a"))
	v1, _ := x.codec.AppendValue(nil, row(9, "a"))
	v2, _ := x.codec.AppendValue(nil, row(3, "a"))
	delta := func(yield func(key, value []byte, count int) bool) error {
		_ = yield(k1, v1, 1) && yield(k2, v2, 1)
		return nil
	}
	if _, err := Merge(context.Background(), x.is, prev, delta, x.dir, x.opts); err == nil || !strings.Contains(err.Error(), "out of order") {
		t.Fatalf("got %v, want an out-of-order error", err)
	}
	failing := func(yield func(key, value []byte, count int) bool) error {
		yield(k2, v2, 1)
		return errors.New("staging store closed")
	}
	if _, err := Merge(context.Background(), x.is, prev, failing, x.dir, x.opts); err == nil || !strings.Contains(err.Error(), "staging store closed") {
		t.Fatalf("got %v, want the delta's error", err)
	}
}

// validIndexSchema checks an index definition against its source schema
// and resolves it.
func validIndexSchema(t testing.TB, md *format.Metadata, source *iceberg.Schema) *format.IndexSchema {
	t.Helper()
	if err := format.Validate(md, source); err != nil {
		t.Fatal(err)
	}
	is, err := format.NewIndexSchema(md, source)
	if err != nil {
		t.Fatal(err)
	}
	return is
}
