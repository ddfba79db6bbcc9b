package tablemeta

import (
	"errors"
	"strings"
	"testing"
)

// v2 is a metadata file of two snapshots and two schemas, as the table
// spec lays it out.
const v2 = `{
  "format-version": 2,
  "table-uuid": "9C12D441-03FE-4693-9A96-A0705DDF69C1",
  "location": "s3://bucket/warehouse/shop.db/orders",
  "last-sequence-number": 2, "last-updated-ms": 1700000002000, "last-column-id": 3,
  "current-schema-id": 1,
  "schemas": [
    {"type": "struct", "schema-id": 0, "fields": [{"id": 1, "name": "id", "required": true, "type": "long"}]},
    {"type": "struct", "schema-id": 1, "fields": [{"id": 1, "name": "id", "required": true, "type": "long"},
      {"id": 3, "name": "note", "required": false, "type": "string"}]}
  ],
  "default-spec-id": 0, "partition-specs": [{"spec-id": 0, "fields": []}], "last-partition-id": 999,
  "default-sort-order-id": 0, "sort-orders": [{"order-id": 0, "fields": []}],
  "properties": {"write.format.default": "parquet"},
  "current-snapshot-id": 22,
  "refs": {"main": {"snapshot-id": 22, "type": "branch"}},
  "snapshots": [
    {"snapshot-id": 11, "sequence-number": 1, "timestamp-ms": 1700000001000, "schema-id": 0,
     "manifest-list": "s3://bucket/m1.avro", "summary": {"operation": "append"}},
    {"snapshot-id": 22, "parent-snapshot-id": 11, "sequence-number": 2, "timestamp-ms": 1700000002000, "schema-id": 1,
     "manifest-list": "s3://bucket/m2.avro", "summary": {"operation": "overwrite"}}
  ]
}`

func TestParseReadsWhatTheSpecLaysOut(t *testing.T) {
	v, err := Parse([]string{"shop", "orders"}, "s3://bucket/m.json", []byte(v2))
	if err != nil {
		t.Fatal(err)
	}
	if v.UUID != "9c12d441-03fe-4693-9a96-a0705ddf69c1" {
		t.Errorf("uuid %q, want the canonical lower-case form", v.UUID)
	}
	if v.FormatVersion != 2 || v.CurrentSnapshotID != 22 || v.Schema().ID != 1 || v.Location != "s3://bucket/warehouse/shop.db/orders" {
		t.Errorf("view %+v", v)
	}
	head, err := v.Snapshot(0)
	if err != nil || head.ID != 22 || head.ManifestList != "s3://bucket/m2.avro" || *head.ParentID != 11 {
		t.Fatalf("Snapshot(0) = %+v, %v", head, err)
	}
	var walk []int64
	for _, s := range v.Ancestors(head) {
		walk = append(walk, s.ID)
	}
	if len(walk) != 2 || walk[0] != 22 || walk[1] != 11 {
		t.Errorf("ancestors %v", walk)
	}
	first := v.SnapshotByID(11)
	if _, ok := v.SnapshotSchema(first).FindFieldByName("note"); ok {
		t.Error("snapshot 11 was written before note was added")
	}
	if v.ColumnName(3) != "note" || v.ColumnName(9) != "" {
		t.Errorf("column names %q %q", v.ColumnName(3), v.ColumnName(9))
	}
	if v.Name() != "shop.orders" {
		t.Errorf("name %q", v.Name())
	}
}

func TestParseVersion1AndAnEmptyTable(t *testing.T) {
	v1 := `{"format-version": 1, "location": "file:///w/t", "schema": {"type": "struct", "schema-id": 0,
	  "fields": [{"id": 1, "name": "id", "required": true, "type": "int"}]}, "current-snapshot-id": -1}`
	v, err := Parse([]string{"a", "t"}, "m.json", []byte(v1))
	if err != nil {
		t.Fatal(err)
	}
	if v.CurrentSnapshotID != 0 || len(v.Snapshots()) != 0 || v.Schema() == nil {
		t.Errorf("view %+v", v)
	}
	if _, err := v.Snapshot(0); err == nil || !strings.Contains(err.Error(), "no snapshot yet") {
		t.Errorf("Snapshot(0) of an empty table: %v", err)
	}
	lists := `{"format-version": 1, "location": "file:///w/t", "schema": {"type": "struct", "schema-id": 0, "fields": []},
	  "current-snapshot-id": 5, "snapshots": [{"snapshot-id": 5, "timestamp-ms": 1, "manifests": ["m1.avro"]}]}`
	if _, err := Parse([]string{"a", "t"}, "m.json", []byte(lists)); !errors.Is(err, ErrUnsupported) {
		t.Errorf("a v1 snapshot listing manifests: %v, want ErrUnsupported", err)
	}
}

// TestParseRefusesWhatTheSpecRequires: required fields are required on
// read, and the current snapshot and schema must be there.
func TestParseRefusesWhatTheSpecRequires(t *testing.T) {
	for _, tc := range []struct{ name, from, to, want string }{
		{"no format version", `"format-version": 2,`, ``, "format-version"},
		{"format version 4", `"format-version": 2,`, `"format-version": 4,`, "format-version"},
		{"no location", `"location": "s3://bucket/warehouse/shop.db/orders",`, ``, "location"},
		{"no uuid", `"table-uuid": "9C12D441-03FE-4693-9A96-A0705DDF69C1",`, ``, "table-uuid"},
		{"bad uuid", `9C12D441-03FE-4693-9A96-A0705DDF69C1`, `not-a-uuid`, "table-uuid"},
		{"no snapshot id", `"snapshot-id": 11, "sequence-number": 1,`, `"sequence-number": 1,`, "snapshot-id"},
		{"no timestamp", `"timestamp-ms": 1700000001000, "schema-id": 0,`, `"schema-id": 0,`, "timestamp-ms"},
		{"current snapshot missing", `"current-snapshot-id": 22,`, `"current-snapshot-id": 33,`, "current-snapshot-id 33"},
		{"current schema missing", `"current-schema-id": 1,`, `"current-schema-id": 7,`, "current-schema-id 7"},
		{"not JSON", `{`, `[`, "m.json"},
	} {
		doc := strings.Replace(v2, tc.from, tc.to, 1)
		if doc == v2 {
			t.Fatalf("%s: the sample does not hold %q", tc.name, tc.from)
		}
		_, err := Parse([]string{"shop", "orders"}, "m.json", []byte(doc))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error naming %q", tc.name, err, tc.want)
		}
	}
}

// TestAncestorsEndOnACycle: corrupt metadata whose parent chain loops
// back ends the walk instead of hanging it.
func TestAncestorsEndOnACycle(t *testing.T) {
	doc := strings.Replace(v2, `{"snapshot-id": 11, "sequence-number": 1,`, `{"snapshot-id": 11, "parent-snapshot-id": 22, "sequence-number": 1,`, 1)
	v, err := Parse([]string{"shop", "orders"}, "m.json", []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	var walk []int64
	for _, s := range v.Ancestors(v.SnapshotByID(22)) {
		walk = append(walk, s.ID)
		if len(walk) > 5 {
			break
		}
	}
	if len(walk) != 2 {
		t.Errorf("walk %v, want 22 then 11 and an end", walk)
	}
}

// FuzzParse: a metadata file either is refused or gives a view whose every
// question has an answer: a current schema, the current snapshot when it
// names one, a walk of its ancestors that ends within the snapshots it
// has, a schema for every snapshot.
func FuzzParse(f *testing.F) {
	f.Add([]byte(v2))
	f.Add([]byte(strings.Replace(v2, `{"snapshot-id": 11, "sequence-number": 1,`, `{"snapshot-id": 11, "parent-snapshot-id": 22, "sequence-number": 1,`, 1)))
	f.Add([]byte(`{"format-version": 1, "location": "l", "schema": {"type": "struct", "schema-id": 0, "fields": []}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		v, err := Parse([]string{"ns", "t"}, "m.json", data)
		if err != nil {
			return
		}
		if v.Schema() == nil {
			t.Fatal("no current schema")
		}
		head, err := v.Snapshot(0)
		if (err == nil) != (v.CurrentSnapshotID != 0) {
			t.Fatalf("Snapshot(0) = %v, %v with current snapshot %d", head, err, v.CurrentSnapshotID)
		}
		for _, s := range v.Snapshots() {
			walked := 0
			for range v.Ancestors(v.SnapshotByID(s.ID)) {
				walked++
				if walked > len(v.Snapshots()) {
					t.Fatalf("the walk from %d passes more snapshots than there are", s.ID)
				}
			}
			if v.SnapshotSchema(v.SnapshotByID(s.ID)) == nil {
				t.Fatalf("snapshot %d has no schema", s.ID)
			}
		}
		_ = v.ColumnName(1)
	})
}

// TestParseReadsEscapesAndSkipsTheRest: escaped member names and values,
// nulls, members the view does not hold (of every JSON kind) and a member
// given twice read as encoding/json reads them; text after the object is
// refused.
func TestParseReadsEscapesAndSkipsTheRest(t *testing.T) {
	doc := `{"form\u0061t-version": 2, "table-uuid": "9c12d441-03fe-4693-9a96-a0705ddf69c1",
	  "location": "s3://b/caf\u00e9/\"x\"", "location": "s3://b/caf\u00e9/\"y\"",
	  "unknown": {"a": [1, 2.5e3, true, false, null, {"b": "c"}]}, "refs": null,
	  "properties": {"k\u0031": "v\n1", "k2": ""},
	  "current-schema-id": 0, "schemas": [{"type": "struct", "schema-id": 0, "fields": []}],
	  "current-snapshot-id": null, "snapshots": [{"snapshot-id": 7, "timestamp-ms": 1, "manifest-list": "m\u002eavro",
	    "parent-snapshot-id": null, "summary": {"operation": "append", "x": "\u263a"}}]}`
	v, err := Parse([]string{"a", "t"}, "m.json", []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	if v.FormatVersion != 2 || v.Location != `s3://b/café/"y"` || v.Properties["k1"] != "v\n1" || len(v.Properties) != 2 {
		t.Errorf("view %+v", v)
	}
	s := v.SnapshotByID(7)
	if v.CurrentSnapshotID != 0 || s == nil || s.ManifestList != "m.avro" || s.ParentID != nil {
		t.Errorf("snapshot %+v, current %d", s, v.CurrentSnapshotID)
	}
	for _, bad := range []string{doc + ` {}`, strings.Replace(doc, `"timestamp-ms": 1,`, `"timestamp-ms": 1.5,`, 1),
		strings.Replace(doc, `"k2": ""`, `"k2": 3`, 1), strings.Replace(doc, `"v\n1"`, `"v\x"`, 1)} {
		if _, err := Parse([]string{"a", "t"}, "m.json", []byte(bad)); err == nil {
			t.Errorf("accepted %s", bad)
		}
	}
}
