package planner

import (
	"github.com/apache/iceberg-go"

	"github.com/streamidx/streamidx/format"
)

// DataFileKeyBounds returns the bounds of the leading cluster value of a
// data file's rows, taken from the file's column metrics, or nil when they
// cannot be known: the leading cluster field is not a source column as it
// is (an identity field), its type is not one format.BoundValue
// decodes, the file records no bounds for it, or no null count of zero (an
// entry with a null key sorts before every bound).
func DataFileKeyBounds(is *format.IndexSchema, df iceberg.DataFile) *KeyBounds {
	f := is.ClusterFields()[0]
	if f.Kind != format.KindIdentity {
		return nil
	}
	lower, upper, nulls := format.FileBounds(df, f.ID, f.Type)
	if lower == nil || nulls {
		return nil
	}
	return &KeyBounds{Lower: lower, Upper: upper}
}

// KeyBoundsOf is DataFileKeyBounds for r's index.
func (r *SnapshotReader) KeyBoundsOf(df iceberg.DataFile) *KeyBounds {
	return DataFileKeyBounds(r.is, df)
}
