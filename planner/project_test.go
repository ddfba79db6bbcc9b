package planner

import (
	"fmt"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/apache/iceberg-go"

	"github.com/streamidx/streamidx/format"
	"github.com/streamidx/streamidx/internal/indexdef"
	"github.com/streamidx/streamidx/internal/testtables"
)

func resolveFor(t *testing.T, def, where string) *resolved {
	t.Helper()
	d, err := indexdef.Parse([]byte(def))
	if err != nil {
		t.Fatal(err)
	}
	md, err := d.Resolve(testtables.OrdersSchema, "t", "file:///idx")
	if err != nil {
		t.Fatal(err)
	}
	is, err := format.NewIndexSchema(md, testtables.OrdersSchema)
	if err != nil {
		t.Fatal(err)
	}
	pred, err := Parse(where)
	if err != nil {
		t.Fatal(err)
	}
	r, err := resolve(pred, is, testtables.OrdersSchema)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func fieldNamed(r *resolved, name string) format.IndexField {
	for _, f := range r.is.Fields() {
		if f.Name == name {
			return f
		}
	}
	panic("no field " + name)
}

// Months and hours from the epoch that the month and hour transforms give.
const december2026 = (2026-1970)*12 + 11

var hourOf2026_12_01T01 = time.Date(2026, 12, 1, 1, 0, 0, 0, time.UTC).Unix() / 3600

func bucketOf(v int64) string {
	b, err := format.TransformValue("bucket", 8, iceberg.PrimitiveTypes.Int64, v)
	if err != nil {
		panic(err)
	}
	return fmt.Sprint(b)
}

// TestProjection checks what conditions on a source column admit for the
// fields computed from it, at the edges where a strict bound stays strict
// or must take in the boundary's whole class.
func TestProjection(t *testing.T) {
	const (
		byName   = `{"name":"n","identity":["name","id"],"cluster":["truncate(2, name)","name","id"]}`
		byDay    = `{"name":"d","identity":["ts","id"],"cluster":["day(ts)","ts","id"]}`
		byBucket = `{"name":"b","identity":["customer_id","id"],"cluster":["bucket(8, customer_id)","customer_id","id"]}`
		byTens   = `{"name":"t","identity":["id"],"cluster":["truncate(10, id)","id"]}`
		byMonth  = `{"name":"m","identity":["ts","id"],"cluster":["month(ts)","hour(ts)","id"]}`
		byScore  = `{"name":"s","identity":["score","id"],"cluster":["score","id"]}`
	)
	cases := []struct {
		def, where, field, want string
	}{
		{byName, "name < 'al'", "name_truncate_2", "(-∞, al)"},
		{byName, "name < 'alan'", "name_truncate_2", "(-∞, al]"},
		{byName, "name <= 'al'", "name_truncate_2", "(-∞, al]"},
		{byName, "name > 'al'", "name_truncate_2", "[al, +∞]"},
		{byName, "name > 'a'", "name_truncate_2", "(a, +∞]"},
		{byName, "name >= 'a'", "name_truncate_2", "[a, +∞]"},
		{byName, "name = 'alan'", "name_truncate_2", "{al}"},
		{byName, "name IN ('alan', 'alex', 'b')", "name_truncate_2", "{al} ∪ {b}"},
		{byName, "name BETWEEN 'alan' AND 'b'", "name_truncate_2", "[al, b]"},
		{byName, "name IS NULL", "name_truncate_2", "{null}"},
		{byName, "name > 'ł'", "name_truncate_2", "(ł, +∞]"},
		{byName, "name_truncate_2 = 'al' AND name > 'alan'", "name_truncate_2", "{al}"},
		{byName, "name_truncate_2 = 'ad' AND name > 'alan'", "name_truncate_2", "none"},
		{byDay, "ts < '2026-11-02T00:00:00Z'", "ts_day", "(-∞, 2026-11-02)"},
		{byDay, "ts <= '2026-11-02T00:00:00Z'", "ts_day", "(-∞, 2026-11-02]"},
		{byDay, "ts < '2026-11-02T00:00:00.000001Z'", "ts_day", "(-∞, 2026-11-02]"},
		{byDay, "ts > '2026-11-07T23:59:59.999999Z'", "ts_day", "(2026-11-07, +∞]"},
		{byDay, "ts > '2026-11-07T23:59:59.999998Z'", "ts_day", "[2026-11-07, +∞]"},
		{byDay, "ts >= '2026-11-01' AND ts < '2026-11-02'", "ts_day", "[2026-11-01, 2026-11-02)"},
		{byDay, "ts = '2026-11-01T05:00:00+02:00'", "ts_day", "{2026-11-01}"},
		{byMonth, "ts < '2026-12-01T00:00:00Z'", "ts_month", fmt.Sprintf("(-∞, %d)", december2026)},
		{byMonth, "ts < '2026-12-01T01:00:00Z'", "ts_month", fmt.Sprintf("(-∞, %d]", december2026)},
		{byMonth, "ts < '2026-12-01T01:00:00Z'", "ts_hour", fmt.Sprintf("(-∞, %d)", hourOf2026_12_01T01)},
		{byMonth, "ts <= '2026-12-01T01:00:00Z'", "ts_hour", fmt.Sprintf("(-∞, %d]", hourOf2026_12_01T01)},
		{byBucket, "customer_id = 42", "customer_id_bucket_8", "{" + bucketOf(42) + "}"},
		{byBucket, "customer_id < 5", "customer_id_bucket_8", "not null"},
		{byBucket, "customer_id IS NULL", "customer_id_bucket_8", "{null}"},
		{byTens, "id < 20", "id_truncate_10", "(-∞, 20)"},
		{byTens, "id < 21", "id_truncate_10", "(-∞, 20]"},
		{byTens, "id > 19", "id_truncate_10", "(10, +∞]"},
		{byTens, "id > 18", "id_truncate_10", "[10, +∞]"},
		{byTens, "id > -11", "id_truncate_10", "(-20, +∞]"},
		{byTens, "id > -12", "id_truncate_10", "[-20, +∞]"},
		{byTens, "id > -21", "id_truncate_10", "(-30, +∞]"},
		{byScore, "score = 0", "score", "[-0, 0]"},
		{byScore, "score = 'NaN'", "score", "(-∞, -Inf) ∪ (+Inf, +∞]"},
		{byScore, "score > 1", "score", "(-∞, -Inf) ∪ (1, +∞]"},
		{byScore, "score > 0", "score", "(-∞, -Inf) ∪ (0, +∞]"},
		{byScore, "score < 0", "score", "[-Inf, -0)"},
		{byScore, "score < 'NaN'", "score", "[-Inf, +Inf]"},
		{byScore, "score <= 'NaN'", "score", "not null"},
		{byScore, "score > 'NaN'", "score", "none"},
		{byScore, "score IS NOT NULL", "score", "not null"},
	}
	for _, tc := range cases {
		t.Run(tc.where+"/"+tc.field, func(t *testing.T) {
			r := resolveFor(t, tc.def, tc.where)
			f := fieldNamed(r, tc.field)
			set, ok := r.sets[f.ID]
			got := "any"
			if ok {
				got = set.String()
			}
			if got != tc.want {
				t.Errorf("got %s, want %s", got, tc.want)
			}
		})
	}
}

func TestKeyRanges(t *testing.T) {
	const byCustomer = `{"name":"b","identity":["customer_id","id"],"cluster":["bucket(8, customer_id)","customer_id","id"]}`
	cases := []struct {
		def, where string
		want       []string
	}{
		{byCustomer, "customer_id = 42", []string{fmt.Sprintf("keys starting (%s, 42)", bucketOf(42))}},
		{byCustomer, "customer_id = 42 AND id = 7", []string{fmt.Sprintf("key (%s, 42, 7)", bucketOf(42))}},
		{byCustomer, "customer_id = 42 AND id > 7", []string{fmt.Sprintf("((%s, 42, 7) .. (%s, 42), *]", bucketOf(42), bucketOf(42))}},
		// (bucket(v), v) pairs, not every bucket with every value.
		{byCustomer, "customer_id IN (1, 2)", []string{
			fmt.Sprintf("keys starting (%s, 1)", bucketOf(1)), fmt.Sprintf("keys starting (%s, 2)", bucketOf(2)),
		}},
		// Bucket keeps no order, but a comparison still excludes null.
		{byCustomer, "customer_id > 3", []string{"((null) .. +∞]"}},
		{byCustomer, "id > 3", []string{"every key"}},
		{byCustomer, "customer_id IS NULL", []string{"keys starting (null, null)"}},
		{byCustomer, "customer_id = 1 AND customer_id = 2", nil},
		{`{"name":"d","identity":["ts","id"],"cluster":["day(ts)","ts","id"]}`, "ts >= '2026-11-01' AND ts < '2026-11-03'",
			[]string{"[(2026-11-01) .. (2026-11-03))"}},
		{`{"name":"s","identity":["score","id"],"cluster":["score","id"]}`, "score = 'NaN'",
			[]string{"((null) .. (-Inf))", "((+Inf) .. +∞]"}},
	}
	for _, tc := range cases {
		t.Run(tc.where, func(t *testing.T) {
			r := resolveFor(t, tc.def, tc.where)
			var got []string
			if !r.none {
				for _, kr := range keyRanges(r, 1000) {
					got = append(got, formatRange(r.is.ClusterTypes(), kr))
				}
			}
			slices.Sort(got)
			slices.Sort(tc.want)
			if !slices.Equal(got, tc.want) {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestChooseFiles(t *testing.T) {
	types := []iceberg.Type{iceberg.PrimitiveTypes.Int64, iceberg.PrimitiveTypes.Int64}
	// Four range files holding keys up to (1,5], (1,9], (2,3], (4,0].
	groupMax := []format.Key{{int64(1), int64(5)}, {int64(1), int64(9)}, {int64(2), int64(3)}, {int64(4), int64(0)}}
	k := func(vs ...int64) format.Key {
		out := make(format.Key, len(vs))
		for i, v := range vs {
			out[i] = v
		}
		return out
	}
	cases := []struct {
		name string
		kr   keyRange
		want []int
	}{
		{"prefix 1 reaches into the file after its last group max", keyRange{keyBound{k(1), true}, keyBound{k(1), true}}, []int{0, 1, 2}},
		{"key (1,9) is the second file's last", keyRange{keyBound{k(1, 9), true}, keyBound{k(1, 9), true}}, []int{1}},
		{"key (1,10) can only be in the third", keyRange{keyBound{k(1, 10), true}, keyBound{k(1, 10), true}}, []int{2}},
		{"above (1,5) exclusive up to (2,3)", keyRange{keyBound{k(1, 5), false}, keyBound{k(2, 3), true}}, []int{1, 2}},
		{"below (1,9) exclusive", keyRange{keyBound{nil, true}, keyBound{k(1, 9), false}}, []int{0, 1}},
		{"prefix 3", keyRange{keyBound{k(3), true}, keyBound{k(3), true}}, []int{3}},
		{"beyond the last file", keyRange{keyBound{k(5), true}, keyBound{nil, true}}, nil},
		{"everything", keyRange{keyBound{nil, true}, keyBound{nil, true}}, []int{0, 1, 2, 3}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			why := chooseFiles(types, groupMax, []keyRange{tc.kr})
			var got []int
			for i, w := range why {
				if w >= 0 {
					got = append(got, i)
				}
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("files %v, want %v", got, tc.want)
			}
		})
	}
}

func TestMayMatch(t *testing.T) {
	long := iceberg.PrimitiveTypes.Int64
	double := iceberg.PrimitiveTypes.Float64
	n := func(v int64) *int64 { return &v }
	set := func(typ iceberg.Type, op Op, vals ...any) valueSet { return condSet(typ, op, vals) }
	cases := []struct {
		name string
		set  valueSet
		st   *format.FieldStats
		want bool
	}{
		{"inside bounds", set(long, OpEq, int64(5)), &format.FieldStats{LowerBound: int64(1), UpperBound: int64(9)}, true},
		{"above bounds", set(long, OpGt, int64(9)), &format.FieldStats{LowerBound: int64(1), UpperBound: int64(9)}, false},
		{"at the upper bound", set(long, OpGe, int64(9)), &format.FieldStats{LowerBound: int64(1), UpperBound: int64(9)}, true},
		{"null wanted, none there", set(long, OpIsNull), &format.FieldStats{LowerBound: int64(1), UpperBound: int64(9), NullValueCount: n(0)}, false},
		{"null wanted, count unknown", set(long, OpIsNull), &format.FieldStats{LowerBound: int64(1), UpperBound: int64(9)}, true},
		{"all null", set(long, OpEq, int64(1)), &format.FieldStats{ValueCount: n(4), NullValueCount: n(4)}, false},
		{"no bounds, no counts", set(long, OpEq, int64(1)), &format.FieldStats{}, true},
		{"NaN wanted, none there", set(double, OpEq, math.NaN()), &format.FieldStats{LowerBound: 1.0, UpperBound: 2.0, NanValueCount: n(0), NullValueCount: n(0)}, false},
		{"NaN wanted, some there", set(double, OpEq, math.NaN()), &format.FieldStats{LowerBound: 1.0, UpperBound: 2.0, NanValueCount: n(1)}, true},
		{"> 5 admits NaN", set(double, OpGt, 5.0), &format.FieldStats{LowerBound: 1.0, UpperBound: 2.0}, true},
		{"zero against a 0.0 lower bound that may stand for -0.0", set(double, OpEq, 0.0), &format.FieldStats{LowerBound: 0.0, UpperBound: 2.0, NanValueCount: n(0)}, true},
		{"below zero, the file holds only zeros", set(double, OpLt, 0.0), &format.FieldStats{LowerBound: 0.0, UpperBound: 0.0, NanValueCount: n(0), NullValueCount: n(0)}, false},
		{"above zero, the file holds only zeros", set(double, OpGt, 0.0), &format.FieldStats{LowerBound: 0.0, UpperBound: 0.0, NanValueCount: n(0), NullValueCount: n(0)}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := mayMatch(tc.set, tc.st); got != tc.want {
				t.Errorf("mayMatch %s with %+v = %v", tc.set, tc.st, got)
			}
		})
	}
}
