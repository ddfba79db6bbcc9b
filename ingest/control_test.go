package ingest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/uuid"
)

// readSample reads an encoded control event of testdata/connect, written by
// scripts/connect_samples.py with python3-avro from the sink's published
// schemas.
func readSample(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "connect", name+".bin"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

var sampleCommit = uuid.MustParse("6f1f8a0e-8f4e-4c1e-9a39-2f8d1c5b7a10")

func TestDecodeControlSamples(t *testing.T) {
	for name, typ := range map[string]ControlPayloadType{"start_commit": StartCommit, "data_written": DataWritten,
		"data_complete": DataComplete, "commit_to_table": CommitToTable, "commit_to_table_no_snapshot": CommitToTable,
		"commit_complete": CommitComplete} {
		ev, err := DecodeControlEvent(readSample(t, name))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if ev.Type != typ || ev.GroupID != "cg-orders" || ev.TimestampUs != 1764400000000000 ||
			(ev.CommitID != sampleCommit) != (typ == DataWritten) { // DATA_WRITTEN's payload is not read
			t.Errorf("%s: %+v", name, ev)
		}
	}
	dc, _ := DecodeControlEvent(readSample(t, "data_complete"))
	want := []TopicPartitionOffset{{"orders-cdc", 0, 1042, true}, {"orders-cdc", 1, 977, true}, {"orders-cdc", 2, 0, false}}
	if dc.CommitID != sampleCommit || len(dc.Assignments) != 3 {
		t.Fatalf("data complete %+v", dc)
	}
	for i, a := range dc.Assignments {
		if a != want[i] {
			t.Errorf("assignment %d: %+v, want %+v", i, a, want[i])
		}
	}
	ct, _ := DecodeControlEvent(readSample(t, "commit_to_table"))
	if ct.CommitID != sampleCommit || ct.Table() != "sales.orders" || ct.Catalog != "default" || !ct.HasSnapshot ||
		ct.SnapshotID != 5171532812399482101 {
		t.Errorf("commit to table %+v", ct)
	}
	none, _ := DecodeControlEvent(readSample(t, "commit_to_table_no_snapshot"))
	if none.HasSnapshot {
		t.Errorf("no snapshot: %+v", none)
	}
}

func TestDecodeControlRefuses(t *testing.T) {
	good := readSample(t, "commit_to_table")
	for what, b := range map[string][]byte{
		"empty":      nil,
		"json":       []byte(`{"table":"a.b","snapshot-id":1}`),
		"truncated":  good[:len(good)-3],
		"trailing":   append(append([]byte{}, good...), 0),
		"bad length": append([]byte("aVR\x01\x7f\xff\xff\xff"), good[8:]...),
	} {
		if _, err := DecodeControlEvent(b); err == nil {
			t.Errorf("%s: decoded", what)
		} else if !strings.HasPrefix(err.Error(), "control event") {
			t.Errorf("%s: error %q does not say what it read", what, err)
		}
	}
}

// TestMalformedWriterSchemaIsAnError: a writer schema on which the Avro
// parser panics (an empty union with a default) is an error for the
// dead-letter topic, not a crash of the daemon. Found by fuzzing.
func TestMalformedWriterSchemaIsAnError(t *testing.T) {
	_, err := parseAvroSchema([]byte(`{"type":"record","name":"R","fields":[{"name":"x","type":[],"default":null}]}`))
	if err == nil || !strings.Contains(err.Error(), "malformed schema") {
		t.Fatalf("parse: %v, want a malformed schema error", err)
	}
}
