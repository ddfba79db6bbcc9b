package planner

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"

	"github.com/streamidx/streamidx/compactor"
	"github.com/streamidx/streamidx/format"
	"github.com/streamidx/streamidx/internal/objstore"
	"github.com/streamidx/streamidx/internal/testtables"
	"github.com/streamidx/streamidx/planner/reconcile"
)

type lookupCase struct {
	where string
	want  match
}

// casesByIndex are, per index, every predicate form on the columns its
// clustering projects, with the edges of each transform.
var casesByIndex = map[string][]lookupCase{
	"pk": {
		{"id = 42", eq("id", int64(42))},
		{"id = 1000", eq("id", int64(1000))},
		{"id IN (1, 2, 3, 99, 500)", in("id", int64(1), int64(2), int64(3), int64(99), int64(500))},
		{"id < 10", lt("id", int64(10))},
		{"id <= 10", le("id", int64(10))},
		{"id > 290", gt("id", int64(290))},
		{"id >= 290", ge("id", int64(290))},
		{"id BETWEEN 20 AND 30", between("id", int64(20), int64(30))},
		{"id IS NULL", isNull("id")},
		{"id > 10 AND id < 20", and(gt("id", int64(10)), lt("id", int64(20)))},
		{"id IN (5, 6, 7) AND id >= 6", and(in("id", int64(5), int64(6), int64(7)), ge("id", int64(6)))},
		{"id < 10 AND id > 20", func(row) bool { return false }},
		{"", func(row) bool { return true }},
	},
	"by_customer": {
		{"customer_id = 3", eq("customer_id", int64(3))},
		{"customer_id IN (1, 4, 6, 100)", in("customer_id", int64(1), int64(4), int64(6), int64(100))},
		{"customer_id < 2", lt("customer_id", int64(2))},
		{"customer_id <= 2", le("customer_id", int64(2))},
		{"customer_id > 4", gt("customer_id", int64(4))},
		{"customer_id >= 4", ge("customer_id", int64(4))},
		{"customer_id BETWEEN 2 AND 3", between("customer_id", int64(2), int64(3))},
		{"customer_id IS NULL", isNull("customer_id")},
		{"customer_id IS NOT NULL AND id < 30", and(isNotNull("customer_id"), lt("id", int64(30)))},
		{"customer_id = 3 AND id > 150", and(eq("customer_id", int64(3)), gt("id", int64(150)))},
		{"customer_id IN (1, 2) AND name = 'ada'", and(in("customer_id", int64(1), int64(2)), eq("name", "ada"))},
		{"customer_id_bucket_8 = 3", func(r row) bool {
			b, _ := format.TransformValue("bucket", 8, iceberg.PrimitiveTypes.Int64, r["customer_id"])
			return b == int32(3)
		}},
	},
	"by_name": {
		{"name = 'grace'", eq("name", "grace")},
		{"name = ''", eq("name", "")},
		{"name IN ('ada', 'al', '', 'łukasz', 'zed')", in("name", "ada", "al", "", "łukasz", "zed")},
		{"name < 'al'", lt("name", "al")},
		{"name < 'alan'", lt("name", "alan")},
		{"name <= 'al'", le("name", "al")},
		{"name > 'al'", gt("name", "al")},
		{"name > 'a'", gt("name", "a")},
		{"name >= 'grace'", ge("name", "grace")},
		{"name BETWEEN 'al' AND 'b'", between("name", "al", "b")},
		{"name IS NULL", isNull("name")},
		{"name >= 'a' AND name < 'alan'", and(ge("name", "a"), lt("name", "alan"))},
		{"name > 'ł'", gt("name", "ł")},
	},
	"by_day": {
		{"ts = '2026-11-02T11:00:00Z'", eq("ts", ts("2026-11-02T11:00:00Z"))},
		{"ts IN ('2026-11-02T11:00:00Z', '2026-11-08T00:00:00Z', '2026-11-08T00:00:01Z')",
			in("ts", ts("2026-11-02T11:00:00Z"), ts("2026-11-08T00:00:00Z"), ts("2026-11-08T00:00:01Z"))},
		{"ts < '2026-11-02T00:00:00Z'", lt("ts", ts("2026-11-02T00:00:00Z"))},
		{"ts <= '2026-11-02T00:00:00Z'", le("ts", ts("2026-11-02T00:00:00Z"))},
		{"ts > '2026-11-08T00:00:00Z'", gt("ts", ts("2026-11-08T00:00:00Z"))},
		{"ts > '2026-11-07T23:59:59.999999Z'", gt("ts", ts("2026-11-07T23:59:59.999999Z"))},
		{"ts >= '2026-11-08T00:00:00Z'", ge("ts", ts("2026-11-08T00:00:00Z"))},
		{"ts BETWEEN '2026-11-03T07:00:00Z' AND '2026-11-05T00:00:00Z'", between("ts", ts("2026-11-03T07:00:00Z"), ts("2026-11-05T00:00:00Z"))},
		{"ts >= '2026-11-01T00:00:00Z' AND ts < '2026-11-02T00:00:00Z'", and(ge("ts", ts("2026-11-01T00:00:00Z")), lt("ts", ts("2026-11-02T00:00:00Z")))},
		{"ts IS NULL", isNull("ts")},
		{"ts >= '2026-11-05' AND score = 'NaN'", and(ge("ts", ts("2026-11-05T00:00:00Z")), eq("score", math.NaN()))},
		{"ts_day = '2026-11-03'", and(ge("ts", ts("2026-11-03T00:00:00Z")), lt("ts", ts("2026-11-04T00:00:00Z")))},
	},
	"by_score": {
		{"score = 'NaN'", eq("score", math.NaN())},
		{"score = 0", eq("score", 0.0)},
		{"score = -0.0", eq("score", 0.0)},
		{"score IN (0, 'NaN', 1, 'Infinity')", in("score", 0.0, math.NaN(), 1.0, math.Inf(1))},
		{"score < 0", lt("score", 0.0)},
		{"score <= 0", le("score", 0.0)},
		{"score > 10", gt("score", 10.0)},
		{"score >= 10", ge("score", 10.0)},
		{"score > 'Infinity'", gt("score", math.Inf(1))},
		{"score < 'NaN'", lt("score", math.NaN())},
		{"score <= 'NaN'", le("score", math.NaN())},
		{"score > 'NaN'", gt("score", math.NaN())},
		{"score BETWEEN -1 AND 1", between("score", -1.0, 1.0)},
		{"score BETWEEN -1 AND 'NaN'", between("score", -1.0, math.NaN())},
		{"score IS NULL", isNull("score")},
		{"score >= -2 AND id < 100", and(ge("score", -2.0), lt("id", int64(100)))},
	},
}

// history builds a v2 or v3 table through appends, deletes of every kind
// and a rewrite; every lookup below must equal a filtered scan of it.
func history(t *testing.T, fv int) *table.Table {
	cat, _ := testtables.NewCatalog(t)
	tbl := testtables.CreateTable(t, cat, testtables.TableConfig{Name: "orders", Schema: testtables.OrdersSchema, FormatVersion: fv, RowGroupRows: 16})
	tbl, f1 := testtables.Append(t, tbl, testtables.OrderRows(0, 150, 0)...)
	tbl, f2 := testtables.Append(t, tbl, testtables.OrderRows(150, 300, 0)...)
	if fv >= 3 {
		tbl, _ = testtables.AddDV(t, tbl, f1[0], 3, 5, 8, 40)
	} else {
		tbl, _ = testtables.AddPositionDeletes(t, tbl, testtables.Positions{File: f1[0], Pos: []int64{3, 5, 8, 40}})
	}
	tbl = testtables.AddEqualityDeletes(t, tbl, []int{1}, []any{int64(10)}, []any{int64(170)})
	tbl, _ = testtables.Rewrite(t, tbl, f2, testtables.OrderRows(150, 290, 3)...)
	return tbl
}

func TestLookupEqualsFilteredScan(t *testing.T) {
	ctx := context.Background()
	for _, fv := range []int{2, 3} {
		t.Run(fmt.Sprintf("v%d", fv), func(t *testing.T) {
			tbl := history(t, fv)
			snap := tbl.CurrentSnapshot()
			rows := scanTable(t, tbl, snap)
			for _, pc := range plannerCases() {
				p := pc.p
				for _, name := range slices.Sorted(func(yield func(string) bool) {
					for k := range casesByIndex {
						if !yield(k) {
							return
						}
					}
				}) {
					for _, layout := range []struct {
						name string
						opts compactor.RangeWriterOptions
					}{{"small", buildSmall}, {"paged", buildPaged}} {
						md := newIndex(t, tbl, name)
						buildIndex(t, tbl, md, snap, layout.opts)
						for _, tc := range casesByIndex[name] {
							t.Run(pc.name+"/"+name+"/"+layout.name+"/"+tc.where, func(t *testing.T) {
								for range pc.times {
									res, err := p.Lookup(ctx, reconcile.Table(tbl), md, Query{Where: tc.where})
									if err != nil {
										t.Fatalf("lookup: %v", err)
									}
									got, want := resultRows(res), expectedRows(res.Fields, rows, tc.want)
									if !slices.Equal(got, want) {
										t.Errorf("%d rows, want %d:%s", len(got), len(want), diffRows(got, want))
									}
									if res.Stats.Rows != int64(len(got)) || res.Plan.CommitsBehind != 0 {
										t.Errorf("stats %+v, plan behind %d", res.Stats, res.Plan.CommitsBehind)
									}
									checkLocations(t, res)
									res.Release()
								}
							})
						}
					}
				}
			}
		})
	}
}

// plannerCase is a planner the lookup tests run through, and how many
// times each lookup runs: a planner whose store keeps a lookup cache
// answers each lookup twice, the second time from what the first cached.
type plannerCase struct {
	name  string
	p     *Planner
	times int
}

func plannerCases() []plannerCase {
	return []plannerCase{
		{"uncached", New(Options{Parallelism: 1}), 1},
		{"parallel", New(Options{Parallelism: 3}), 1},
		{"cached", New(Options{Store: objstore.New(objstore.Options{LookupCacheBytes: 64 << 20})}), 2},
	}
}

// TestPointLookupSkipsPages: in one big row group, a point lookup decodes
// only the pages the page index says can hold the key.
func TestPointLookupSkipsPages(t *testing.T) {
	ctx := context.Background()
	tbl := history(t, 2)
	md := newIndex(t, tbl, "pk")
	buildIndex(t, tbl, md, tbl.CurrentSnapshot(), buildPaged)
	res, err := New(Options{}).Lookup(ctx, reconcile.Table(tbl), md, Query{Where: "id = 42"})
	if err != nil {
		t.Fatal(err)
	}
	defer res.Release()
	st := res.Stats
	if st.Rows != 1 || st.RowGroupsRead != 1 || st.PagesTotal < 4 || st.PagesRead > 2 {
		t.Errorf("point lookup: %d rows, %d of %d pages read, %d entries scanned", st.Rows, st.PagesRead, st.PagesTotal, st.EntriesScanned)
	}
}

// checkLocations checks that the bitmaps hold exactly the result's rows.
func checkLocations(t *testing.T, res *Result) {
	t.Helper()
	fileCol := slices.IndexFunc(res.Fields, func(f format.IndexField) bool { return f.Name == "_file" })
	posCol := slices.IndexFunc(res.Fields, func(f format.IndexField) bool { return f.Name == "_pos" })
	locations := res.Locations()
	if fileCol < 0 {
		if locations != nil {
			t.Errorf("index without locations returned locations")
		}
		return
	}
	want := map[string][]uint64{}
	for _, b := range res.Batches {
		for i := range int(b.NumRows()) {
			f := format.ValueAt(b.Column(fileCol), i).(string)
			want[f] = append(want[f], uint64(format.ValueAt(b.Column(posCol), i).(int64)))
		}
	}
	if len(want) != len(locations) {
		t.Errorf("locations for %d files, rows in %d", len(locations), len(want))
	}
	for f, pos := range want {
		slices.Sort(pos)
		bm := locations[f]
		if bm == nil || !slices.Equal(bm.ToArray(), pos) {
			t.Errorf("locations of %s differ from the rows' positions", f)
		}
	}
}

func TestPointLookupPrunes(t *testing.T) {
	ctx := context.Background()
	tbl := history(t, 2)
	md := newIndex(t, tbl, "pk")
	buildIndex(t, tbl, md, tbl.CurrentSnapshot(), buildSmall)
	p := New(Options{})
	res, err := p.Lookup(ctx, reconcile.Table(tbl), md, Query{Where: "id = 42"})
	if err != nil {
		t.Fatal(err)
	}
	defer res.Release()
	st := res.Stats
	if st.Rows != 1 || st.RangeFilesTotal < 5 || st.RangeFilesRead != 1 || st.RowGroupsRead != 1 || st.RowGroupsRead >= st.RowGroupsTotal && st.RowGroupsTotal > 1 {
		t.Errorf("point lookup read %d of %d range files, %d of %d row groups, %d rows", st.RangeFilesRead, st.RangeFilesTotal, st.RowGroupsRead, st.RowGroupsTotal, st.Rows)
	}
	if st.EntriesScanned > 8 || st.BytesRead == 0 || st.TrackingBytesRead == 0 {
		t.Errorf("counters: %+v", st)
	}
	if res.Plan.PrunedByKey != st.RangeFilesTotal-1 || res.Plan.KeyRanges != 1 {
		t.Errorf("plan: %+v", res.Plan)
	}
	// The tracking file now comes from the cache.
	res2, err := p.Lookup(ctx, reconcile.Table(tbl), md, Query{Where: "id IN (42, 43)"})
	if err != nil {
		t.Fatal(err)
	}
	defer res2.Release()
	if res2.Stats.TrackingBytesRead != 0 || res2.Stats.Rows != 2 {
		t.Errorf("second lookup: %+v", res2.Stats)
	}
	var explain strings.Builder
	if err := res.WriteExplain(&explain); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"key ranges: 1", "key (42)", fmt.Sprintf("range files: 1 of %d read", st.RangeFilesTotal), "entries scanned", "rows 1"} {
		if !strings.Contains(explain.String(), want) {
			t.Errorf("explain lacks %q:\n%s", want, explain.String())
		}
	}
}

func TestBucketLookupPrunesByTrackingFile(t *testing.T) {
	ctx := context.Background()
	tbl := history(t, 2)
	md := newIndex(t, tbl, "by_customer")
	buildIndex(t, tbl, md, tbl.CurrentSnapshot(), buildSmall)
	res, err := New(Options{}).Lookup(ctx, reconcile.Table(tbl), md, Query{Where: "customer_id = 3"})
	if err != nil {
		t.Fatal(err)
	}
	defer res.Release()
	st := res.Stats
	if st.RangeFilesRead*2 > st.RangeFilesTotal {
		t.Errorf("customer_id = 3 read %d of %d range files", st.RangeFilesRead, st.RangeFilesTotal)
	}
	i := slices.IndexFunc(res.Plan.Fields, func(f FieldPlan) bool { return f.ClusterPosition == 1 })
	if i < 0 || res.Plan.Fields[i].Derivation != "bucket[8](customer_id)" || res.Plan.Fields[i].Values != "{3}" {
		t.Errorf("plan fields: %+v", res.Plan.Fields)
	}
}

func TestLimit(t *testing.T) {
	ctx := context.Background()
	tbl := history(t, 2)
	md := newIndex(t, tbl, "pk")
	buildIndex(t, tbl, md, tbl.CurrentSnapshot(), buildSmall)
	res, err := New(Options{}).Lookup(ctx, reconcile.Table(tbl), md, Query{Where: "id >= 100", Limit: 5})
	if err != nil {
		t.Fatal(err)
	}
	defer res.Release()
	rows := resultRows(res)
	if len(rows) != 5 || !res.Truncated || res.NumRows() != 5 {
		t.Fatalf("limit 5: %d rows, truncated %v", len(rows), res.Truncated)
	}
	for _, r := range rows {
		var id int64
		fmt.Sscanf(r, "id=%d", &id)
		if id < 100 {
			t.Errorf("row %s does not match", r)
		}
	}
}

func TestLookupErrors(t *testing.T) {
	ctx := context.Background()
	cat, _ := testtables.NewCatalog(t)
	tbl := testtables.CreateTable(t, cat, testtables.TableConfig{Name: "orders", Schema: testtables.OrdersSchema, FormatVersion: 2})
	tbl, _ = testtables.Append(t, tbl, testtables.OrderRows(0, 20, 0)...)
	first := tbl.CurrentSnapshot()
	tbl, _ = testtables.Append(t, tbl, testtables.OrderRows(20, 30, 0)...)
	p := New(Options{})

	byName := newIndex(t, tbl, "by_name")
	if _, err := p.Lookup(ctx, reconcile.Table(tbl), byName, Query{Where: "name = 'ada'"}); !errors.Is(err, ErrNoIndexSnapshot) {
		t.Errorf("unbuilt index: %v", err)
	}
	buildIndex(t, tbl, byName, first, buildSmall)
	_, err := p.Lookup(ctx, reconcile.Table(tbl), byName, Query{Where: "name = 'ada'"})
	if !errors.Is(err, ErrCannotReconcile) {
		t.Errorf("stale index without locations: %v", err)
	}
	// At the index snapshot's own table snapshot it answers.
	res, err := p.Lookup(ctx, reconcile.Table(tbl), byName, Query{Where: "name = 'ada'", TableSnapshotID: first.SnapshotID})
	if err != nil {
		t.Fatalf("lookup at the index's table snapshot: %v", err)
	}
	res.Release()

	var pe *PredicateError
	_, err = p.Lookup(ctx, reconcile.Table(tbl), byName, Query{Where: "name = 'ada' AND customer_id = 3", TableSnapshotID: first.SnapshotID})
	if !errors.As(err, &pe) || pe.Pos != 18 || !strings.Contains(err.Error(), "name, id") {
		t.Errorf("condition on a column the index does not store: %v", err)
	}
	_, err = p.Lookup(ctx, reconcile.Table(tbl), byName, Query{Where: "name = 42", TableSnapshotID: first.SnapshotID})
	if !errors.As(err, &pe) || pe.Pos != 8 || !strings.Contains(err.Error(), "quoted string") {
		t.Errorf("number for a string column: %v", err)
	}

}

// TestLookupThroughAnUnsupportedIndexScansTheTable: the spec says a reader
// that does not implement an index type ignores the index and reads the
// table, and must not fail; the plan says so.
func TestLookupThroughAnUnsupportedIndexScansTheTable(t *testing.T) {
	ctx := context.Background()
	cat, _ := testtables.NewCatalog(t)
	tbl := testtables.CreateTable(t, cat, testtables.TableConfig{Name: "orders", Schema: testtables.OrdersSchema, FormatVersion: 2})
	tbl, files := testtables.Append(t, tbl, testtables.OrderRows(0, 30, 0)...)
	tbl, _ = testtables.AddPositionDeletes(t, tbl, testtables.Positions{File: files[0], Pos: []int64{4}})
	vector := &format.Metadata{FormatVersion: 1, IndexUUID: "u", TableUUID: tbl.Metadata().TableUUID().String(),
		Location: "file:///x", Type: "vector"}
	p := New(Options{})
	for where, want := range map[string][]int64{"id = 7": {7}, "id = 4": nil, "customer_id = 3 AND id < 20": {3, 10, 17}} {
		res, err := p.Lookup(ctx, reconcile.Table(tbl), vector, Query{Where: where})
		if err != nil {
			t.Fatalf("%s: %v", where, err)
		}
		var got []int64
		for _, b := range res.Batches {
			for i := range int(b.NumRows()) {
				got = append(got, format.ValueAt(b.Column(0), i).(int64))
			}
		}
		slices.Sort(got)
		if !slices.Equal(got, want) || res.Plan.TableScan == "" || !strings.Contains(res.Plan.TableScan, `"vector" is not implemented`) {
			t.Errorf("%s: ids %v, want %v; plan %+v", where, got, want, res.Plan)
		}
		if len(res.Fields) != len(testtables.OrdersSchema.Fields())+2 || res.Fields[len(res.Fields)-1].Name != "_pos" {
			t.Errorf("%s: fields %v, want every column and _file, _pos", where, res.Fields)
		}
		var explain strings.Builder
		if err := res.WriteExplain(&explain); err != nil || !strings.Contains(explain.String(), "table scan of table snapshot") {
			t.Errorf("%s: explain %q, %v", where, explain.String(), err)
		}
		res.Release()
	}
}

func TestLookupRefusesLiteralsTheColumnCannotHold(t *testing.T) {
	ctx := context.Background()
	cat, _ := testtables.NewCatalog(t)
	tbl := testtables.CreateTable(t, cat, testtables.TableConfig{Name: "orders", Schema: testtables.OrdersSchema, FormatVersion: 2})
	tbl, _ = testtables.Append(t, tbl, testtables.OrderRows(0, 20, 0)...)
	byScore := newIndex(t, tbl, "by_score")
	buildIndex(t, tbl, byScore, tbl.CurrentSnapshot(), buildSmall)
	p := New(Options{})
	for where, want := range map[string]string{
		"amount = 1e38":                "column amount: 1e38 does not fit decimal(10, 2)",
		"amount IN (1, -1e38)":         "column amount: -1e38 does not fit decimal(10, 2)",
		"amount = 0.001":               "column amount: 0.001 has more than 2 decimal places",
		"score > 1e400":                "column score: 1e400 is out of range for double",
		"id = 9223372036854775808":     "column id: 9223372036854775808 is out of range for long",
		"id BETWEEN 1 AND 1e999999999": "column id: 1e999999999 is not an integer",
	} {
		res, err := p.Lookup(ctx, reconcile.Table(tbl), byScore, Query{Where: where})
		var pe *PredicateError
		if !errors.As(err, &pe) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want a predicate error saying %q", where, err, want)
		}
		if res != nil {
			res.Release()
		}
	}
}
