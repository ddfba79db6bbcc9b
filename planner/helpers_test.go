package planner

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/iceberg-go/table"

	"github.com/streamidx/streamidx/compactor"
	"github.com/streamidx/streamidx/format"
	"github.com/streamidx/streamidx/internal/indexdef"
	"github.com/streamidx/streamidx/internal/lineage"
	"github.com/streamidx/streamidx/internal/objstore"
	"github.com/streamidx/streamidx/internal/tablescan"
)

// definitions cover the clusterings a lookup projects through: identity
// (pk, by_score on a double with NaN), bucket, truncate and day.
var definitions = map[string]string{
	"pk":          `{"name":"pk","identity":["id"],"materialized":["_file","_pos"],"cluster":["id"]}`,
	"by_customer": `{"name":"by_customer","identity":["customer_id","id"],"materialized":["_file","_pos","name"],"non-materialized":["bucket(8, customer_id)"],"cluster":["bucket(8, customer_id)","customer_id","id"]}`,
	"by_name":     `{"name":"by_name","identity":["name","id"],"cluster":["truncate(2, name)","name","id"]}`,
	"name_id":     `{"name":"name_id","identity":["name","id"],"materialized":["_file","_pos"],"cluster":["name","id"]}`,
	"by_day":      `{"name":"by_day","identity":["ts","id"],"materialized":["score","_file","_pos"],"cluster":["day(ts)","ts","id"]}`,
	"by_score":    `{"name":"by_score","identity":["score","id"],"materialized":["amount"],"cluster":["score","id"]}`,
}

// newIndex defines an index on tbl without building it.
func newIndex(t testing.TB, tbl *table.Table, name string) *format.Metadata {
	t.Helper()
	def, err := indexdef.Parse([]byte(definitions[name]))
	if err != nil {
		t.Fatal(err)
	}
	md, err := def.Resolve(tbl.Schema(), tbl.Metadata().TableUUID().String(), strings.TrimRight(tbl.Location(), "/")+"/indexes/"+name)
	if err != nil {
		t.Fatal(err)
	}
	return md
}

// buildSmall is the layout of test indexes: tiny range files and row
// groups, so that pruning has something to prune.
var buildSmall = compactor.RangeWriterOptions{TargetFileSize: 2 << 10, RowGroupRows: 8}

// buildPaged is one range file of one row group in tiny pages, so that
// only the page index can prune.
var buildPaged = compactor.RangeWriterOptions{TargetFileSize: 1 << 30, RowGroupRows: 1 << 20, PageSizeBytes: 64, BatchRows: 7}

// buildIndex builds an index snapshot of md for table snapshot snap and
// adds it to md, as `streamidx build` does without the catalog.
func buildIndex(t testing.TB, tbl *table.Table, md *format.Metadata, snap *table.Snapshot, layout compactor.RangeWriterOptions) *format.Snapshot {
	t.Helper()
	ctx := context.Background()
	res, err := compactor.FullBuild(ctx, tbl, snap, md, objstore.Join(md.Location, "data"), compactor.BuildOptions{RangeWriterOptions: layout})
	if err != nil {
		t.Fatalf("build: %v", err)
	}
	is, err := format.NewIndexSchema(md, lineage.SnapshotSchema(tbl, snap))
	if err != nil {
		t.Fatal(err)
	}
	id := int64(len(md.Snapshots) + 1)
	// Unique names, as flush.Publish gives them: tests define indexes of one
	// name more than once, and decoded tracking files are cached by location.
	loc := objstore.Join(md.Location, "metadata", fmt.Sprintf("snap-%d-%s.avro", id, md.IndexUUID))
	w, err := objstore.Local().Create(ctx, loc, objstore.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := format.WriteTrackingFile(w, is, res.Entries, format.TrackingWriteOptions{IndexUUID: md.IndexUUID, SnapshotID: id}); err != nil {
		w.Abort()
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	md.Snapshots = append(md.Snapshots, format.Snapshot{SnapshotID: id, SourceTableSnapshotID: snap.SnapshotID, TimestampMs: time.Now().UnixMilli(), TrackingFile: loc})
	return &md.Snapshots[len(md.Snapshots)-1]
}

// row is a source row by column name, with _file and _pos.
type row map[string]any

// scanTable reads the live rows of a table snapshot with tablescan, the
// reference reader the index itself is verified against.
func scanTable(t testing.TB, tbl *table.Table, snap *table.Snapshot) []row {
	t.Helper()
	var out []row
	_, err := tablescan.Scan(context.Background(), tbl, snap, tablescan.Options{}, func(b arrow.RecordBatch) error {
		for i := range int(b.NumRows()) {
			r := row{}
			for c, f := range b.Schema().Fields() {
				r[f.Name] = format.ValueAt(b.Column(c), i)
			}
			out = append(out, r)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("scan table: %v", err)
	}
	return out
}

// match is a predicate over source rows, written independently of the
// planner: SQL comparisons where null matches nothing, -0.0 equals 0.0 and
// NaN equals NaN and is above every number.
type match func(row) bool

func sqlCmp(a, b any) int {
	switch x := a.(type) {
	case float64:
		y := b.(float64)
		switch xn, yn := math.IsNaN(x), math.IsNaN(y); {
		case xn && yn:
			return 0
		case xn:
			return 1
		case yn:
			return -1
		case x < y:
			return -1
		case x > y:
			return 1
		}
		return 0
	case int64:
		y := b.(int64)
		return compareOrdered(x, y)
	case string:
		return strings.Compare(x, b.(string))
	case decimal128.Num:
		return x.Cmp(b.(decimal128.Num))
	}
	panic(fmt.Sprintf("sqlCmp of %T", a))
}

func compareOrdered[T int64 | int32](a, b T) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func cmpWith(col string, v any, ok func(int) bool) match {
	return func(r row) bool { return r[col] != nil && ok(sqlCmp(r[col], v)) }
}

func eq(col string, v any) match { return cmpWith(col, v, func(c int) bool { return c == 0 }) }
func lt(col string, v any) match { return cmpWith(col, v, func(c int) bool { return c < 0 }) }
func le(col string, v any) match { return cmpWith(col, v, func(c int) bool { return c <= 0 }) }
func gt(col string, v any) match { return cmpWith(col, v, func(c int) bool { return c > 0 }) }
func ge(col string, v any) match { return cmpWith(col, v, func(c int) bool { return c >= 0 }) }
func between(col string, lo, hi any) match {
	return and(ge(col, lo), le(col, hi))
}
func in(col string, vs ...any) match {
	return func(r row) bool {
		return slices.ContainsFunc(vs, func(v any) bool { return eq(col, v)(r) })
	}
}
func isNull(col string) match    { return func(r row) bool { return r[col] == nil } }
func isNotNull(col string) match { return func(r row) bool { return r[col] != nil } }
func and(ms ...match) match {
	return func(r row) bool {
		for _, m := range ms {
			if !m(r) {
				return false
			}
		}
		return true
	}
}

func ts(s string) int64 {
	v, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		panic(err)
	}
	return v.UnixMicro()
}

// resultRows renders the rows of a lookup result, one string per row with
// the stored fields by name, sorted.
func resultRows(res *Result) []string {
	var out []string
	for _, b := range res.Batches {
		for i := range int(b.NumRows()) {
			r := row{}
			for c, f := range res.Fields {
				r[f.Name] = format.ValueAtAs(f.Type, b.Column(c), i)
			}
			out = append(out, renderRow(res.Fields, r))
		}
	}
	slices.Sort(out)
	return out
}

// expectedRows renders the table rows that m admits like resultRows.
func expectedRows(fields []format.IndexField, rows []row, m match) []string {
	var out []string
	for _, r := range rows {
		if m(r) {
			out = append(out, renderRow(fields, r))
		}
	}
	slices.Sort(out)
	return out
}

func renderRow(fields []format.IndexField, r row) string {
	parts := make([]string, len(fields))
	for i, f := range fields {
		v := r[f.Name]
		if fl, ok := v.(float64); ok && math.IsNaN(fl) && math.Signbit(fl) {
			parts[i] = f.Name + "=-NaN"
			continue
		}
		parts[i] = f.Name + "=" + format.FormatValue(f.Type, v)
	}
	return strings.Join(parts, " ")
}

// diffRows describes how two sorted row lists differ, briefly.
func diffRows(got, want []string) string {
	var b strings.Builder
	i, j, n := 0, 0, 0
	for (i < len(got) || j < len(want)) && n < 8 {
		switch {
		case j == len(want) || (i < len(got) && got[i] < want[j]):
			fmt.Fprintf(&b, "\n  extra:   %s", got[i])
			i++
			n++
		case i == len(got) || want[j] < got[i]:
			fmt.Fprintf(&b, "\n  missing: %s", want[j])
			j++
			n++
		default:
			i++
			j++
		}
	}
	return b.String()
}
