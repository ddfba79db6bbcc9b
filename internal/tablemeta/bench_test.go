package tablemeta

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/apache/iceberg-go"
)

// longHistory is the metadata file of a table that kept n snapshots, each
// with the summary a writer leaves: what a table that commits every few
// seconds carries between expiries.
func longHistory(n int) []byte {
	var b strings.Builder
	b.WriteString(`{"format-version": 2, "table-uuid": "9c12d441-03fe-4693-9a96-a0705ddf69c1", "location": "s3://b/t", "current-schema-id": 0,
	"schemas": [{"type": "struct", "schema-id": 0, "fields": [{"id": 1, "name": "id", "required": true, "type": "long"}]}], "snapshots": [`)
	for i := 1; i <= n; i++ {
		if i > 1 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `{"snapshot-id": %d, "parent-snapshot-id": %d, "sequence-number": %d, "timestamp-ms": 1700000000000, "schema-id": 0, `+
			`"manifest-list": "s3://bucket/warehouse/db/t/metadata/snap-%d-1-0b1f6a7e-3c55-4c7e-9f2a-6b1c1a2b3c4d.avro", "summary": {"operation": "overwrite", `+
			`"added-data-files": "1", "added-records": "20000", "added-files-size": "123456", "changed-partition-count": "1", "total-records": "10000000", `+
			`"total-files-size": "987654321", "total-data-files": "55", "total-delete-files": "50", "total-position-deletes": "0", "total-equality-deletes": "1000000"}}`,
			i, i-1, i, i)
	}
	fmt.Fprintf(&b, `], "current-snapshot-id": %d}`, n)
	return []byte(b.String())
}

// BenchmarkParse reads the metadata file of a table that kept 5,000
// snapshots (2.8 MB).
func BenchmarkParse(b *testing.B) {
	data := longHistory(5000)
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if _, err := Parse([]string{"a", "t"}, "m.json", data); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkParseEncodingJSON is the baseline of BenchmarkParse: the same
// members decoded by encoding/json into a struct, as Parse read them
// before it used jsonscan.
func BenchmarkParseEncodingJSON(b *testing.B) {
	data := longHistory(5000)
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		var m struct {
			FormatVersion     *int              `json:"format-version"`
			UUID              string            `json:"table-uuid"`
			Location          *string           `json:"location"`
			Properties        map[string]string `json:"properties"`
			CurrentSnapshotID *int64            `json:"current-snapshot-id"`
			Snapshots         []struct {
				ID             *int64 `json:"snapshot-id"`
				ParentID       *int64 `json:"parent-snapshot-id"`
				SequenceNumber int64  `json:"sequence-number"`
				TimestampMs    *int64 `json:"timestamp-ms"`
				SchemaID       *int   `json:"schema-id"`
				ManifestList   string `json:"manifest-list"`
			} `json:"snapshots"`
			Schemas         []*iceberg.Schema `json:"schemas"`
			CurrentSchemaID *int              `json:"current-schema-id"`
		}
		if err := json.Unmarshal(data, &m); err != nil {
			b.Fatal(err)
		}
	}
}
