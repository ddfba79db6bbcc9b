package ingest

import (
	"errors"
	"testing"

	"github.com/apache/iceberg-go"

	"github.com/streamidx/streamidx/format"
)

// fuzzEntries is an index over eventSchema with identity columns of several
// types and transforms, so that a decoded event also runs through the entry
// computation and the key encoding.
func fuzzEntries(t testing.TB) (*ChangeDecoder, *EventEntries) {
	schema := eventSchema()
	md := &format.Metadata{
		IdentityFields: []int{2, 1, 3, 7, 11, 13, 15, 17},
		MaterializedFields: []format.ExprField{{FieldID: 900000, DataType: iceberg.PrimitiveTypes.Int32,
			Expr: format.NewApply("bucket", format.IntLit(8), format.Ref{ID: 7})}},
		NonMaterializedFields: []format.ExprField{
			{FieldID: 900001, DataType: iceberg.PrimitiveTypes.String, Expr: format.NewApply("truncate", format.IntLit(2), format.Ref{ID: 2})},
			{FieldID: 900002, DataType: iceberg.PrimitiveTypes.Int32, Expr: format.NewApply("day", format.Ref{ID: 11})},
		},
		ClusterSpec: []int{900001, 900002, 2, 1},
	}
	is, err := format.NewIndexSchema(md, schema)
	if err != nil {
		t.Fatal(err)
	}
	ids := append(is.SourceFieldIDs(), 4, 5, 6, 8, 9, 10, 12, 14, 18)
	rc, err := NewRowColumns(schema, ids)
	if err != nil {
		t.Fatal(err)
	}
	d, err := NewChangeDecoder(rc, DebeziumOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ee, err := NewEventEntries(is, rc)
	if err != nil {
		t.Fatal(err)
	}
	return d, ee
}

// fuzzChangeEvent decodes data and computes its mutations; neither may
// panic, and a decoded event must give the mutations its op says.
func fuzzChangeEvent(t *testing.T, d *ChangeDecoder, ee *EventEntries, data []byte) {
	var ev ChangeEvent
	if err := d.Decode(data, &ev); err != nil {
		if errors.Is(err, ErrTombstone) && len(data) > 0 && data[0] == '{' && !isTombstonePayload(data) {
			t.Fatalf("a non-empty record read as a tombstone: %v", err)
		}
		return
	}
	muts, err := ee.Mutations(nil, &ev)
	if err != nil {
		return
	}
	want := map[EventOp]int{OpInsert: 1, OpDelete: 1, OpUpdate: 2}[ev.Op]
	if len(muts) != want {
		t.Fatalf("%s gave %d mutations", ev.Op, len(muts))
	}
}

// isTombstonePayload reports whether data is an envelope whose payload is
// null, the one non-empty record that is a tombstone.
func isTombstonePayload(data []byte) bool {
	top, err := readTop(data, nil)
	return err == nil && top.payload != nil && isNull(top.payload)
}

// The two change-event targets run the same decoder (it tells the forms
// apart by the "row" member) from seeds of one form each.
func FuzzDecodeDebezium(f *testing.F) {
	f.Add([]byte(`{"before": null, "after": ` + fullRow + `, "op": "c"}`))
	f.Add([]byte(`{"op":"u","before":` + fullRow + `,"after":` + fullRow + `}`))
	f.Add([]byte(`{"op":"d","before":` + fullRow + `}`))
	f.Add([]byte(`{"schema": ` + debeziumSchema + `, "payload": {"op": "c", "after": {"id": 1, "amount": "JxA=", "d": 1, "t": 1, "ts": 1, "tstz": null, "tsns": 1, "score": "NaN"}}}`))
	f.Add([]byte(`{"schema":{},"payload":null}`))
	f.Add([]byte(`{"op":"c","after":{"id":1,"amount":{"scale":3,"value":"MDk="}}}`))
	f.Add([]byte(`{"op":"t"}`))
	d, ee := fuzzEntries(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		fuzzChangeEvent(t, d, ee, data)
	})
}

func FuzzDecodeNative(f *testing.F) {
	f.Add([]byte(`{"op":"upsert","table":"sales.orders","row":` + fullRow + `}`))
	f.Add([]byte(`{"op":"upsert","row":` + fullRow + `,"before":` + fullRow + `}`))
	f.Add([]byte(`{"op":"delete","row":{"id":1,"name":"a\u0000","addr.city":"\ud83d\ude00"}}`))
	f.Add([]byte(`{"op":"upsert","row":{"id":1,"amount":"-1.5e1","tstz":"2026-01-02 03:04:05","u":"f79c3e09677c4bbda4793f349cb785e7"}}`))
	d, ee := fuzzEntries(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		fuzzChangeEvent(t, d, ee, data)
	})
}

func FuzzDecodeControlEvent(f *testing.F) {
	for _, name := range []string{"start_commit", "data_written", "data_complete", "commit_to_table",
		"commit_to_table_no_snapshot", "commit_complete"} {
		f.Add(readSample(f, name))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		ev, err := DecodeControlEvent(data)
		if err != nil {
			return
		}
		if ev.Type == CommitToTable && (ev.Name == "" || len(ev.Namespace) == 0) {
			t.Fatalf("COMMIT_TO_TABLE without a table: %+v", ev)
		}
	})
}
