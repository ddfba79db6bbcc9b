package lineage

import (
	"bytes"
	"encoding/json"
	"fmt"
	"iter"
	"os"
	"strings"
	"testing"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"

	"github.com/streamidx/streamidx/internal/tablemeta"
	"github.com/streamidx/streamidx/internal/testtables"
)

// history appends three times and returns the table and its snapshot ids,
// oldest first.
func history(t *testing.T) (*table.Table, []int64) {
	cat, _ := testtables.NewCatalog(t)
	tbl := testtables.CreateTable(t, cat, testtables.TableConfig{Name: "orders", Schema: testtables.OrdersSchema, FormatVersion: 2})
	var ids []int64
	for i := range 3 {
		tbl, _ = testtables.Append(t, tbl, testtables.OrderRows(i*10, i*10+10, 0)...)
		ids = append(ids, tbl.CurrentSnapshot().SnapshotID)
	}
	return tbl, ids
}

func idsOf(snaps []*table.Snapshot) []int64 {
	out := []int64{}
	for _, s := range snaps {
		out = append(out, s.SnapshotID)
	}
	return out
}

// walked collects a walk of Ancestors, checking that each snapshot says
// how far behind head it lies.
func walked(t *testing.T, seq iter.Seq2[int, *table.Snapshot]) []*table.Snapshot {
	t.Helper()
	var out []*table.Snapshot
	for behind, s := range seq {
		if behind != len(out) {
			t.Errorf("snapshot %d comes %d after head but is said to be %d behind", s.SnapshotID, len(out), behind)
		}
		out = append(out, s)
	}
	return out
}

func TestLinearHistory(t *testing.T) {
	tbl, ids := history(t)
	head := tbl.CurrentSnapshot()
	if got := idsOf(walked(t, Ancestors(tbl, head))); fmt.Sprint(got) != fmt.Sprint([]int64{ids[2], ids[1], ids[0]}) {
		t.Errorf("Ancestors = %v, want newest first %v", got, ids)
	}
	if got := idsOf(walked(t, Ancestors(tbl, tbl.SnapshotByID(ids[1])))); fmt.Sprint(got) != fmt.Sprint([]int64{ids[1], ids[0]}) {
		t.Errorf("Ancestors of the middle snapshot = %v, want %v", got, []int64{ids[1], ids[0]})
	}
	since, ok := Since(tbl, head, ids[0])
	if !ok || fmt.Sprint(idsOf(since)) != fmt.Sprint(ids[1:]) {
		t.Errorf("Since(first) = %v, %t; want %v oldest first", idsOf(since), ok, ids[1:])
	}
	if since, ok := Since(tbl, head, head.SnapshotID); !ok || len(since) != 0 {
		t.Errorf("Since(head) = %v, %t; want none", idsOf(since), ok)
	}
	if _, ok := Since(tbl, tbl.SnapshotByID(ids[0]), ids[2]); ok {
		t.Error("a later snapshot counts as an ancestor of an earlier one")
	}
	if !IsAncestor(tbl, ids[2], ids[0]) || !IsAncestor(tbl, ids[2], ids[2]) || IsAncestor(tbl, ids[0], ids[2]) {
		t.Error("IsAncestor is wrong on a linear history")
	}
	if s, err := Snapshot(tbl, 0); err != nil || s.SnapshotID != ids[2] {
		t.Errorf("Snapshot(0) = %v, %v; want the current one", s, err)
	}
	if _, err := Snapshot(tbl, 42); err == nil {
		t.Error("Snapshot of an unknown id succeeded")
	}
}

func TestSnapshotSchemaFollowsSchemaChanges(t *testing.T) {
	tbl, ids := history(t)
	tbl = testtables.UpdateSchema(t, tbl, func(u *table.UpdateSchema) {
		u.AddColumn([]string{"note"}, iceberg.PrimitiveTypes.String, "", false, nil)
	})
	tbl, _ = testtables.Append(t, tbl, append(testtables.OrderRow(99, 0), "n"))
	if _, ok := SnapshotSchema(tbl, tbl.SnapshotByID(ids[0])).FindFieldByName("note"); ok {
		t.Error("the schema of a snapshot before the change has the new column")
	}
	if _, ok := SnapshotSchema(tbl, tbl.CurrentSnapshot()).FindFieldByName("note"); !ok {
		t.Error("the schema of a snapshot after the change lacks the new column")
	}
	if SnapshotSchema(tbl, nil).ID != tbl.Schema().ID {
		t.Error("no snapshot should give the current schema")
	}
}

// TestCyclicParentChainEnds gives the oldest snapshot the newest as its
// parent, as corrupt metadata could: every walk must end.
func TestCyclicParentChainEnds(t *testing.T) {
	tbl, ids := history(t)
	data, err := json.Marshal(tbl.Metadata())
	if err != nil {
		t.Fatal(err)
	}
	// Snapshot ids do not fit a float64: keep them as written.
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var raw map[string]any
	if err := dec.Decode(&raw); err != nil {
		t.Fatal(err)
	}
	for _, s := range raw["snapshots"].([]any) {
		if s := s.(map[string]any); s["snapshot-id"].(json.Number).String() == fmt.Sprint(ids[0]) {
			s["parent-snapshot-id"] = ids[2]
		}
	}
	if data, err = json.Marshal(raw); err != nil {
		t.Fatal(err)
	}
	meta, err := table.ParseMetadataBytes(data)
	if err != nil {
		t.Fatal(err)
	}
	cyclic := table.New(tbl.Identifier(), meta, tbl.MetadataLocation(), nil, nil)
	if p := cyclic.SnapshotByID(ids[0]).ParentSnapshotID; p == nil || *p != ids[2] {
		t.Fatal("the parent chain is not cyclic")
	}
	head := cyclic.CurrentSnapshot()
	if got := walked(t, Ancestors(cyclic, head)); len(got) != 3 {
		t.Errorf("Ancestors on a cycle = %v, want each snapshot once", idsOf(got))
	}
	if _, ok := Since(cyclic, head, 12345); ok {
		t.Error("an unknown base counts as an ancestor on a cycle")
	}
	if IsAncestor(cyclic, head.SnapshotID, 12345) {
		t.Error("an unknown snapshot counts as an ancestor on a cycle")
	}
	if since, ok := Since(cyclic, head, ids[0]); !ok || len(since) != 2 {
		t.Errorf("Since(first) on a cycle = %v, %t; want the two snapshots after it", idsOf(since), ok)
	}
}

// TestViewIsWhatTheMetadataFileSays holds the two ways to a
// tablemeta.View equal: View of a table iceberg-go loaded, and
// tablemeta.Parse of its metadata file, on a history with a schema change;
// and the view's walks equal this package's.
func TestViewIsWhatTheMetadataFileSays(t *testing.T) {
	tbl, ids := history(t)
	tbl = testtables.UpdateSchema(t, tbl, func(u *table.UpdateSchema) {
		u.AddColumn([]string{"note"}, iceberg.PrimitiveTypes.String, "", false, nil)
	})
	tbl, _ = testtables.Append(t, tbl, append(testtables.OrderRow(99, 0), "n"))
	data, err := os.ReadFile(strings.TrimPrefix(tbl.MetadataLocation(), "file://"))
	if err != nil {
		t.Fatal(err)
	}
	parsed, err := tablemeta.Parse(tbl.Identifier(), tbl.MetadataLocation(), data)
	if err != nil {
		t.Fatal(err)
	}
	v := View(tbl)
	if View(tbl) != v {
		t.Error("View of one metadata file made twice")
	}
	same := func(what string, a, b any) {
		t.Helper()
		if fmt.Sprint(a) != fmt.Sprint(b) {
			t.Errorf("%s: parsed %v, iceberg-go's %v", what, a, b)
		}
	}
	same("identifier", parsed.Name(), v.Name())
	same("format version", parsed.FormatVersion, v.FormatVersion)
	same("uuid", parsed.UUID, v.UUID)
	same("location", parsed.Location, v.Location)
	same("properties", parsed.Properties, v.Properties)
	same("current snapshot", parsed.CurrentSnapshotID, v.CurrentSnapshotID)
	same("current schema", parsed.CurrentSchemaID, v.CurrentSchemaID)
	if len(parsed.Snapshots()) != len(v.Snapshots()) || len(parsed.Snapshots()) != 4 {
		t.Fatalf("snapshots: parsed %d, iceberg-go's %d, want 4", len(parsed.Snapshots()), len(v.Snapshots()))
	}
	for i, s := range parsed.Snapshots() {
		w := v.Snapshots()[i]
		same(fmt.Sprintf("snapshot %d", i), fmt.Sprintf("%d %v %d %d %v %s", s.ID, deref(s.ParentID), s.SequenceNumber, s.TimestampMs, deref(s.SchemaID), s.ManifestList),
			fmt.Sprintf("%d %v %d %d %v %s", w.ID, deref(w.ParentID), w.SequenceNumber, w.TimestampMs, deref(w.SchemaID), w.ManifestList))
	}
	if len(parsed.Schemas) != 2 {
		t.Fatalf("schemas: %d, want 2", len(parsed.Schemas))
	}
	for i, s := range parsed.Schemas {
		if !s.Equals(v.Schemas[i]) || s.ID != v.Schemas[i].ID {
			t.Errorf("schema %d: parsed %s, iceberg-go's %s", i, s, v.Schemas[i])
		}
	}
	for _, view := range []*tablemeta.View{parsed, v} {
		var walk []int64
		for behind, s := range view.Ancestors(view.SnapshotByID(view.CurrentSnapshotID)) {
			if behind != len(walk) {
				t.Errorf("snapshot %d is said to be %d behind, not %d", s.ID, behind, len(walk))
			}
			walk = append(walk, s.ID)
		}
		same("ancestors", walk, idsOf(walked(t, Ancestors(tbl, tbl.CurrentSnapshot()))))
		first, err := view.Snapshot(ids[0])
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := view.SnapshotSchema(first).FindFieldByName("note"); ok {
			t.Error("the schema of a snapshot before the change has the new column")
		}
		if cur, err := view.Snapshot(0); err != nil || cur.ID != tbl.CurrentSnapshot().SnapshotID {
			t.Errorf("Snapshot(0) = %v, %v; want the current one", cur, err)
		}
		if _, err := view.Snapshot(42); err == nil {
			t.Error("Snapshot of an unknown id succeeded")
		}
		if f, _ := tbl.Schema().FindFieldByName("note"); view.ColumnName(f.ID) != "note" {
			t.Errorf("ColumnName(%d) = %q", f.ID, view.ColumnName(f.ID))
		}
	}
}

func deref[T any](p *T) any {
	if p == nil {
		return nil
	}
	return *p
}
