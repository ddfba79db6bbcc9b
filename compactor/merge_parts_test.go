package compactor

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/apache/iceberg-go"

	"github.com/streamidx/streamidx/format"
)

// A delta spread over the index is merged in parts at the same time; the
// index snapshot holds what a merge in one pass gives, its files stay in
// the size band, and no file written along the way is left behind.
func TestMergeInPartsMatchesOnePass(t *testing.T) {
	is := testIndexSchema(t)
	base := noisyRows(0, 4000)
	r := rand.New(rand.NewPCG(5, 6))
	var muts []mut
	for i := 0; i < len(base); i += 40 + r.IntN(80) {
		muts = append(muts, mut{base[i], -1}, mut{row(base[i][0].(int64), "updated"), 1})
	}
	for i := 2000; i < 2300; i++ { // a hole: the file around it shrinks
		if !slices.ContainsFunc(muts, func(m mut) bool { return m.entry[0] == base[i][0] }) {
			muts = append(muts, mut{base[i], -1})
		}
	}
	want := applyModel(base, muts)
	var oneFiles []int64
	for _, parallelism := range []int{1, 2, 3} {
		t.Run(fmt.Sprintf("parallelism %d", parallelism), func(t *testing.T) {
			x := newMergeFixture(t, is)
			x.opts.RowGroupRows, x.opts.BatchRows, x.opts.PageSizeBytes = 256, 64, 2048
			prev := x.write(16<<10, base...)
			x.opts.TargetFileSize, x.opts.MinFileSize = 16<<10, 0
			x.opts.Parallelism = parallelism
			res, err := x.merge(prev, muts...)
			if err != nil {
				t.Fatal(err)
			}
			if got := x.check(res.Entries); !slices.Equal(got, x.storedRows(want)) {
				t.Fatalf("index holds %d entries, want %d", len(got), len(want))
			}
			var counts []int64
			for i, e := range res.Entries {
				counts = append(counts, e.RecordCount)
				if e.FileSizeInBytes > 24<<10 || i < len(res.Entries)-1 && e.FileSizeInBytes < 8<<10 {
					t.Errorf("range file %d of %d is %d bytes, outside [8 KiB, 24 KiB]", i, len(res.Entries), e.FileSizeInBytes)
				}
			}
			if on := x.parquetFiles(); on != len(prev)+res.Written {
				t.Errorf("%d range files on disk, want the %d of before and the %d written", on, len(prev), res.Written)
			}
			var inserted int64
			for _, m := range muts {
				inserted += int64(max(m.count, 0))
			}
			if res.Rewritten+res.Reused != len(prev) || res.Inserted != inserted {
				t.Errorf("rewritten %d + reused %d, %d files before; inserted %d", res.Rewritten, res.Reused, len(prev), res.Inserted)
			}
			if parallelism == 1 {
				oneFiles = counts
			} else if len(counts) < len(oneFiles)-1 || len(counts) > len(oneFiles)+1 {
				t.Errorf("%d range files (%v), one pass writes %d (%v)", len(counts), counts, len(oneFiles), oneFiles)
			}
		})
	}
}

// A part that ends with a small file of its own is mended: that file and
// the next part's first are rewritten together, as one pass folds a
// shrunken file into its untouched neighbour.
func TestMergeInPartsMendsSmallFileAtACut(t *testing.T) {
	is := testIndexSchema(t)
	x := newMergeFixture(t, is)
	base := keyRange(0, 750)
	// File 3, smaller than file 1, puts the cut right after file 1.
	prev := x.files(base[:200], base[200:400], base[400:600], base[600:])
	x.opts.TargetFileSize = prev[1].FileSizeInBytes + prev[2].FileSizeInBytes
	x.opts.MinFileSize = prev[1].FileSizeInBytes / 2
	x.opts.Parallelism = 2
	var muts []mut
	for _, r := range base[205:400] { // file 1 keeps 5 entries
		muts = append(muts, mut{r, -1})
	}
	muts = append(muts, mut{row(700, "payload-00700"), -1}) // file 3 changes too: the cut falls after file 1
	res, err := x.merge(prev, muts...)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := x.check(res.Entries), x.storedRows(applyModel(base, muts)); !slices.Equal(got, want) {
		t.Fatalf("index holds %d entries, want %d", len(got), len(want))
	}
	if got := touched(prev, res.Entries); !slices.Equal(got, []int{1, 2, 3}) || len(res.Entries) != 3 || res.Rewritten != 3 {
		t.Errorf("replaced %v into %d files (rewritten %d); want files 1 and 2 joined, file 3 rewritten", got, len(res.Entries), res.Rewritten)
	}
	if on := x.parquetFiles(); on != len(prev)+res.Written {
		t.Errorf("%d range files on disk, want the %d of before and the %d written: the small file was not removed", on, len(prev), res.Written)
	}
}

// A part that fails fails the merge, and no file any part wrote is left.
func TestMergeInPartsFailsAsAWhole(t *testing.T) {
	is := testIndexSchema(t)
	x := newMergeFixture(t, is)
	base := keyRange(0, 800)
	prev := x.files(base[:200], base[200:400], base[400:600], base[600:])
	x.opts.Parallelism = 2
	muts := []mut{{row(10, "payload-00010"), -1}, {row(250, "payload-00250"), -1}, {row(450, "payload-00450"), -1},
		{row(650, "not there"), -1}}
	if _, err := x.merge(prev, muts...); !errors.Is(err, ErrDeltaMismatch) {
		t.Fatalf("got %v, want ErrDeltaMismatch", err)
	}
	if on := x.parquetFiles(); on != len(prev) {
		t.Errorf("%d range files on disk, want the %d of before", on, len(prev))
	}
}

// stringsSchema is (k long, path string, blob binary) indexed by identity k
// with path and blob materialized and a non-materialized copy of path
// computed from it: the string and binary columns a merge reads as
// dictionaries.
func stringsSchema(t *testing.T) *format.IndexSchema {
	t.Helper()
	source := iceberg.NewSchema(0,
		iceberg.NestedField{ID: 1, Name: "k", Type: iceberg.PrimitiveTypes.Int64, Required: true},
		iceberg.NestedField{ID: 2, Name: "path", Type: iceberg.PrimitiveTypes.String},
		iceberg.NestedField{ID: 3, Name: "blob", Type: iceberg.PrimitiveTypes.Binary},
	)
	md := &format.Metadata{FormatVersion: 1, IndexUUID: "u", TableUUID: "t", Location: "file:///x", Type: format.TypeScalar,
		IdentityFields: []int{1},
		MaterializedFields: []format.ExprField{
			{FieldID: 100, Type: format.ExprFieldType, DataType: iceberg.PrimitiveTypes.String, Expr: format.Ref{ID: 2}},
			{FieldID: 101, Type: format.ExprFieldType, DataType: iceberg.PrimitiveTypes.Binary, Expr: format.Ref{ID: 3}}},
		NonMaterializedFields: []format.ExprField{
			{FieldID: 102, Type: format.ExprFieldType, DataType: iceberg.PrimitiveTypes.String, Expr: format.Ref{ID: 2}}},
		ClusterSpec: []int{1}}
	return validIndexSchema(t, md, source)
}

// String and binary columns, which a merge carries as dictionaries, come
// out as a full build writes them: few long values (stored as a Parquet
// dictionary), values all distinct (stored plain once the dictionary stops
// paying), and nulls; the statistics of the field computed from them are
// exact.
func TestMergeOfStringAndBinaryColumnsMatchesFullBuild(t *testing.T) {
	is := stringsSchema(t)
	pos := map[int]int{}
	for i, f := range is.Fields() {
		pos[f.ID] = i
	}
	entry := func(k int64, path string, blob []byte) format.Key {
		e := make(format.Key, len(is.Fields()))
		e[pos[1]], e[pos[102]] = k, nil
		if path != "" {
			e[pos[100]], e[pos[102]] = path, path
		}
		if blob != nil {
			e[pos[101]] = blob
		}
		return e
	}
	cases := map[string]func(k int64, gen int) format.Key{
		"few long values": func(k int64, gen int) format.Key {
			return entry(k, fmt.Sprintf("s3://warehouse/db/orders/data/%05d-%d-028a47ac-039f-4aea-8752-9b6c8328c6ac.parquet", k/300, gen),
				[]byte{byte(k % 3), byte(gen)})
		},
		"distinct values": func(k int64, gen int) format.Key {
			h := uint64(k)*0x9E3779B97F4A7C15 + uint64(gen)
			return entry(k, fmt.Sprintf("%016x%016x", h, h*31), fmt.Appendf(nil, "%x", h*131))
		},
		"nulls": func(k int64, gen int) format.Key {
			if (k+int64(gen))%3 == 0 {
				return entry(k, "", nil)
			}
			return entry(k, fmt.Sprintf("p-%d-%d", k%5, gen), nil)
		},
	}
	for name, gen := range cases {
		t.Run(name, func(t *testing.T) {
			x := newMergeFixture(t, is)
			x.opts.RowGroupRows, x.opts.BatchRows = 128, 64
			var base []format.Key
			for k := range int64(2000) {
				base = append(base, gen(k, 0))
			}
			prev := x.write(8<<10, base...)
			x.opts.TargetFileSize, x.opts.MinFileSize = 8<<10, 0
			var muts []mut
			for k := int64(7); k < 2000; k += 50 {
				muts = append(muts, mut{base[k], -1}, mut{gen(k, 1), 1})
			}
			muts = append(muts, mut{gen(5000, 1), 1})
			res, err := x.merge(prev, muts...)
			if err != nil {
				t.Fatal(err)
			}
			want := applyModel(base, muts)
			if got := x.check(res.Entries); !slices.Equal(got, x.storedRows(want)) {
				t.Fatalf("index holds %d entries, want %d", len(got), len(want))
			}
			// The same entries built in one go: the same values, field by
			// field, and the same statistics for the computed field.
			x.sortByKey(want)
			built := x.write(1<<30, want...)
			var merged []format.Key
			for _, e := range res.Entries {
				merged = append(merged, x.readFile(e)...)
			}
			if got, want := x.storedRows(merged), x.storedRows(x.readFile(built[0])); !slices.Equal(got, want) {
				t.Fatalf("merged entries differ from a full build's")
			}
			for _, e := range res.Entries {
				if slices.ContainsFunc(prev, func(p format.TrackingEntry) bool { return p.FilePath == e.FilePath }) {
					continue
				}
				var lo, hi any
				var nulls int64
				for _, r := range x.readFile(e) {
					v := r[pos[100]]
					if v == nil {
						nulls++
						continue
					}
					if lo == nil || v.(string) < lo.(string) {
						lo = v
					}
					if hi == nil || v.(string) > hi.(string) {
						hi = v
					}
				}
				st := e.Stats[102]
				if st == nil || st.NullValueCount == nil || *st.NullValueCount != nulls || st.LowerBound != lo || st.UpperBound != hi ||
					lo != nil && (st.TightBounds == nil || !*st.TightBounds) {
					t.Errorf("%s: statistics of the computed field %+v, want bounds %v..%v, %d nulls, tight", e.FilePath, st, lo, hi, nulls)
				}
			}
		})
	}
}

// TestTargetOfMatchesTheClusterOrder: the file a delta key falls into,
// found on the key's bytes, is the one its decoded cluster fields give,
// for keys of two cluster fields (strings with NUL bytes, prefixes of one
// another, nulls) followed by more key fields.
func TestTargetOfMatchesTheClusterOrder(t *testing.T) {
	types := []iceberg.Type{iceberg.PrimitiveTypes.String, iceberg.PrimitiveTypes.Int64}
	r := rand.New(rand.NewPCG(5, 8))
	strs := []any{nil, "", "a", "a\x00", "a\x00b", "ab", "b", "\x00", "\x00\x00"}
	randKey := func() format.Key {
		var l any
		if r.IntN(5) > 0 {
			l = int64(r.IntN(7) - 3)
		}
		return format.Key{strs[r.IntN(len(strs))], l}
	}
	for trial := range 300 {
		var maxes []format.Key
		for range 1 + r.IntN(6) {
			maxes = append(maxes, randKey())
		}
		slices.SortFunc(maxes, func(a, b format.Key) int { return format.CompareKeys(types, a, b) })
		m := &merger{prev: make([]format.TrackingEntry, len(maxes))}
		for _, k := range maxes {
			enc, err := format.AppendKey(nil, types, k)
			if err != nil {
				t.Fatal(err)
			}
			m.groupMax = append(m.groupMax, enc)
		}
		for range 20 {
			cluster := randKey()
			key, err := format.AppendKey(nil, types, cluster)
			if err != nil {
				t.Fatal(err)
			}
			// The entry's identity follows its cluster fields.
			key, _ = format.AppendKey(key, []iceberg.Type{iceberg.PrimitiveTypes.String}, format.Key{strs[r.IntN(len(strs))]})
			from := r.IntN(len(maxes))
			want := from
			for want < len(maxes)-1 && format.CompareKeys(types, cluster, maxes[want]) > 0 {
				want++
			}
			if got := m.targetOf(from, key); got != want {
				t.Fatalf("trial %d: key %v from file %d of maxes %v: file %d, want %d", trial, cluster, from, maxes, got, want)
			}
		}
	}
}
