package ingest

import (
	"strings"
	"testing"
)

func TestDecodeNotification(t *testing.T) {
	n, err := DecodeNotification([]byte(`{"table":"sales.orders","snapshot-id":51,"sequence-number":7,"timestamp-ms":1764400000000,"offsets":{"orders-cdc":{"0":1042}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if n.Table != "sales.orders" || n.SnapshotID != 51 || n.SequenceNumber != 7 || n.TimestampMs != 1764400000000 ||
		string(n.Offsets) != `{"orders-cdc":{"0":1042}}` {
		t.Errorf("decoded %+v", n)
	}
	if n, err := DecodeNotification([]byte(`{"table":"a.b.orders","snapshot-id":-1}`)); err != nil || n.SnapshotID != -1 {
		t.Errorf("a negative snapshot id decodes (the catalog decides whether it exists): %+v %v", n, err)
	}
	for in, want := range map[string]string{
		``:                                      "empty record",
		`   `:                                   "empty record",
		`{"table":"orders","snapshot-id":1}`:    "want namespace.table",
		`{"table":"a..b","snapshot-id":1}`:      "want namespace.table",
		`{"table":"a.b"}`:                       "snapshot-id is required",
		`{"table":"a.b","snapshot-id":1,"x":2}`: "unknown field",
		`{"table":"a.b","snapshot-id":1} {}`:    "trailing data",
		`{"table":"a.b","snapshot-id":1,"offsets":[1]}`: "offsets must be an object",
		`{"table":"a.b","snapshot-id":"1"}`:             "decode commit notification",
	} {
		if _, err := DecodeNotification([]byte(in)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: error %v, want one saying %q", in, err, want)
		}
	}
}
