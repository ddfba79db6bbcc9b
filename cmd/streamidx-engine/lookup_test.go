package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/iceberg-go/table"

	"github.com/streamidx/streamidx/format"
	"github.com/streamidx/streamidx/internal/tablescan"
	"github.com/streamidx/streamidx/internal/testtables"
	"github.com/streamidx/streamidx/planner"
)

// liveIDs scans a table snapshot and returns the ids of the rows keep
// admits, sorted, with their _file and _pos.
func liveIDs(t *testing.T, tbl *table.Table, snapshotID int64, keep func(map[string]any) bool) []string {
	t.Helper()
	var out []string
	_, err := tablescan.Scan(context.Background(), tbl, tbl.SnapshotByID(snapshotID), tablescan.Options{}, func(b arrow.RecordBatch) error {
		for i := range int(b.NumRows()) {
			r := map[string]any{}
			for c, f := range b.Schema().Fields() {
				r[f.Name] = format.ValueAt(b.Column(c), i)
			}
			if keep(r) {
				out = append(out, fmt.Sprintf("%v %v %v", r["id"], r["_file"], r["_pos"]))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	return out
}

// jsonRows reads `lookup --json` output: the rows, and the explain object
// when the last line is one.
func jsonRows(t *testing.T, out string) ([]map[string]any, *planner.ExplainLine) {
	t.Helper()
	var rows []map[string]any
	var x *planner.ExplainLine
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), `{"explain":`) {
			x = &planner.ExplainLine{}
			if err := json.Unmarshal(sc.Bytes(), x); err != nil {
				t.Fatal(err)
			}
			continue
		}
		var r map[string]any
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		rows = append(rows, r)
	}
	return rows, x
}

func rowIDs(rows []map[string]any) []string {
	var out []string
	for _, r := range rows {
		out = append(out, fmt.Sprintf("%v %v %v", r["id"], r["_file"], r["_pos"]))
	}
	slices.Sort(out)
	return out
}

func TestLookupCommand(t *testing.T) {
	cat, warehouse := testtables.NewCatalog(t)
	tbl := testtables.CreateTable(t, cat, testtables.TableConfig{Name: "orders", Schema: testtables.OrdersSchema, FormatVersion: 2, RowGroupRows: 16})
	tbl, snaps := buildHistory(t, tbl, 2)
	c := newCLI(t, warehouse, "")
	createIndexes(t, c, "test.orders")
	c.ok("build", "--table", "test.orders", "--index", "by_customer")

	current := tbl.CurrentSnapshot().SnapshotID

	out := c.ok("lookup", "--table", "test.orders", "--index", "by_customer", "--where", "customer_id = 4", "--json", "--explain")
	if !strings.HasPrefix(out, `{"customer_id":4,"id":`) {
		t.Errorf("first JSON line: %.80s", out)
	}
	rows, x := jsonRows(t, out)
	want := liveIDs(t, tbl, current, func(r map[string]any) bool { return r["customer_id"] == int64(4) })
	if got := rowIDs(rows); len(want) == 0 || !slices.Equal(got, want) {
		t.Errorf("customer_id = 4: %d rows %v, want %d %v", len(got), got, len(want), want)
	}
	if x == nil {
		t.Fatal("--json --explain printed no explain line")
	}
	if st := x.Explain.Stats; st.Rows != int64(len(rows)) || st.RangeFilesRead == 0 || st.RangeFilesRead >= st.RangeFilesTotal || x.Explain.Plan.KeyRanges != 1 {
		t.Errorf("explain: %+v %+v", x.Explain.Plan, st)
	}

	// An index three and more commits behind, with deletes and a rewrite
	// since, still answers exactly for the current snapshot.
	c.ok("build", "--table", "test.orders", "--index", "pk", "--snapshot", fmt.Sprint(snaps[3]))
	ids := []int64{10, 12, 20, 70, 71, 80, 94}
	out = c.ok("lookup", "--table", "test.orders", "--index", "pk", "--where", "id IN (10, 12, 20, 70, 71, 80, 94)", "--json", "--explain")
	rows, x = jsonRows(t, out)
	want = liveIDs(t, tbl, current, func(r map[string]any) bool { return slices.Contains(ids, r["id"].(int64)) })
	if got := rowIDs(rows); !slices.Equal(got, want) {
		t.Errorf("stale pk lookup: %v, want %v", got, want)
	}
	if x == nil || x.Explain.Plan.CommitsBehind < 3 || x.Explain.Stats.EntriesDropped == 0 || x.Explain.Stats.RowsAdded == 0 {
		t.Errorf("stale explain: %+v", x)
	}
	// At the index snapshot's own table snapshot nothing is reconciled.
	out = c.ok("lookup", "--table", "test.orders", "--index", "pk", "--where", "id IN (10, 12, 20, 70, 71, 80, 94)", "--json", "--snapshot", fmt.Sprint(snaps[3]))
	rows, _ = jsonRows(t, out)
	want = liveIDs(t, tbl, snaps[3], func(r map[string]any) bool { return slices.Contains(ids, r["id"].(int64)) })
	if got := rowIDs(rows); !slices.Equal(got, want) {
		t.Errorf("pk lookup at snapshot %d: %v, want %v", snaps[3], got, want)
	}

	text := c.ok("lookup", "--table", "test.orders", "--index", "by_customer", "--where", "customer_id >= 4", "--limit", "2", "--explain")
	for _, w := range []string{"CUSTOMER_ID  ID", "(2 rows; limit reached)", "predicate: customer_id >= 4", "range files:", "counters:"} {
		if !strings.Contains(text, w) {
			t.Errorf("text output lacks %q:\n%s", w, text)
		}
	}

	code, _, errs := c.run("lookup", "--table", "test.orders", "--index", "by_customer", "--where", "customer_id = ")
	if code != exitError || !strings.Contains(errs, "position 15") {
		t.Errorf("bad predicate: exit %d, %s", code, errs)
	}
	code, _, errs = c.run("lookup", "--table", "test.orders", "--index", "by_customer", "--where", "amount = 1")
	if code != exitError || !strings.Contains(errs, "does not store column amount") {
		t.Errorf("unanswerable predicate: exit %d, %s", code, errs)
	}
	c.ok("build", "--table", "test.orders", "--index", "by_name", "--snapshot", fmt.Sprint(snaps[3]))
	code, _, errs = c.run("lookup", "--table", "test.orders", "--index", "by_name", "--where", "name = 'ada'")
	if code != exitError || !strings.Contains(errs, "cannot be reconciled") {
		t.Errorf("stale index without locations: exit %d, %s", code, errs)
	}
}
