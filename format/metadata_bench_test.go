package format

import (
	"fmt"
	"testing"
)

// BenchmarkParseMetadata parses the metadata of an index with an hour of
// snapshots at one commit a second, as a daemon keeps it (expiry spares
// snapshots superseded within the last hour).
func BenchmarkParseMetadata(b *testing.B) {
	m, err := ParseMetadata(readFullMetadata(b))
	if err != nil {
		b.Fatal(err)
	}
	m.Snapshots = m.Snapshots[:0]
	for i := range 3600 {
		m.Snapshots = append(m.Snapshots, Snapshot{SnapshotID: int64(1e15) + int64(i)*7919, SourceTableSnapshotID: int64(2e15) + int64(i)*104729,
			TimestampMs: 1764400000000 + int64(i)*1000, TrackingFile: fmt.Sprintf("%s/metadata/snap-%d-0f3c9a52-6c1e-4b7d-9e2a-3d4c5b6a7f80.avro", m.Location, i),
			Properties: map[string]string{"source-offsets": fmt.Sprintf(`{"commits/0":%d}`, i), "added-entries": "1000"}})
	}
	m.EncryptionKeys = nil
	for i := range m.Snapshots {
		m.Snapshots[i].KeyID = ""
	}
	data, err := m.MarshalJSON()
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseMetadata(data); err != nil {
			b.Fatal(err)
		}
	}
}
