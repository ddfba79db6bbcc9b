package tablescan

import (
	"github.com/apache/iceberg-go"

	"github.com/streamidx/streamidx/format"
)

// EqualityMayDelete reports whether equality delete file del may delete a
// row of data file data by their column metrics (schema gives the types of
// the equality fields): it cannot when, for one equality field, the values
// of the two files lie in disjoint ranges and the two cannot both hold a
// null there (null equals null in an equality delete). Sequence numbers
// and partitions are DeleteIndex.Applicable's business, not this one's.
func EqualityMayDelete(schema *iceberg.Schema, del, data iceberg.DataFile) bool {
	for _, id := range del.EqualityFieldIDs() {
		f, ok := schema.FindFieldByID(id)
		if !ok {
			continue
		}
		dLo, dHi, dNulls := format.FileBounds(del, id, f.Type)
		fLo, fHi, fNulls := format.FileBounds(data, id, f.Type)
		if dLo == nil || fLo == nil || dNulls && fNulls {
			continue
		}
		if format.Compare(f.Type, dHi, fLo) < 0 || format.Compare(f.Type, fHi, dLo) < 0 {
			return false
		}
	}
	return true
}
