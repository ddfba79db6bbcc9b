package format

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/iceberg-go"
)

// PageStats describes one data page of a stored field's column chunk, from
// the Parquet page index (column index and offset index) that range files
// carry.
type PageStats struct {
	FirstRow int64 // offset of the page's first row in its row group
	Rows     int64
	// Stats holds the page's bounds (LowerBound, UpperBound) and null
	// count as canonical values; bounds are nil when unknown or the page
	// holds only nulls.
	Stats *FieldStats
	// OnlyNulls is true when every value of the page is null.
	OnlyNulls bool
}

// PageStats returns the pages of field fieldID in row group rowGroup, in row
// order, so that a reader can skip the pages a lookup cannot match. It
// returns nil (and no error) when the file has no page index for the
// column.
func (r *RangeFileReader) PageStats(rowGroup, fieldID int) ([]PageStats, error) {
	var col *storedColumn
	for i := range r.stored {
		if r.stored[i].field.ID == fieldID {
			col = &r.stored[i]
		}
	}
	if col == nil {
		return nil, fmt.Errorf("read range file %s: field %d is not stored", r.name, fieldID)
	}
	if rowGroup < 0 || rowGroup >= r.NumRowGroups() {
		return nil, fmt.Errorf("read range file %s: no row group %d", r.name, rowGroup)
	}
	var out []PageStats
	err := r.guard(func() error {
		pir := r.pf.GetPageIndexReader()
		if pir == nil {
			return nil
		}
		rg, err := pir.RowGroup(rowGroup)
		if err != nil || rg == nil {
			return err
		}
		oi, err := rg.GetOffsetIndex(col.leaf)
		if err != nil || oi == nil {
			return err
		}
		ci, _ := rg.GetColumnIndex(col.leaf) // optional: without it, pages have no bounds
		locs := oi.GetPageLocations()
		total := r.pf.MetaData().RowGroup(rowGroup).NumRows()
		phys := r.pf.MetaData().Schema.Column(col.leaf).PhysicalType()
		for i, loc := range locs {
			end := total
			if i+1 < len(locs) {
				end = locs[i+1].FirstRowIndex
			}
			p := PageStats{FirstRow: loc.FirstRowIndex, Rows: end - loc.FirstRowIndex, Stats: &FieldStats{}}
			if ci != nil && i < len(ci.GetMinValues()) {
				if nulls := ci.GetNullPages(); i < len(nulls) && nulls[i] {
					p.OnlyNulls = true
				} else {
					lo := pageBound(col.field.Type, phys, ci.GetMinValues()[i])
					hi := pageBound(col.field.Type, phys, ci.GetMaxValues()[i])
					if lo != nil && hi != nil {
						p.Stats.LowerBound, p.Stats.UpperBound = lo, hi
					}
				}
				if ci.IsSetNullCounts() && i < len(ci.GetNullCounts()) {
					n := ci.GetNullCounts()[i]
					p.Stats.NullValueCount = &n
				}
			}
			out = append(out, p)
		}
		return nil
	})
	if err != nil {
		return nil, r.failure("read page index", err)
	}
	return out, nil
}

// pageBound decodes a page index bound, which Parquet stores in the plain
// encoding of the column's physical type, to the canonical value of t; nil
// when it cannot (NaN bounds are no bounds).
func pageBound(t iceberg.Type, phys parquet.Type, b []byte) any {
	_, isDecimal := t.(iceberg.DecimalType)
	switch phys {
	case parquet.Types.Boolean:
		if len(b) == 1 {
			return b[0] != 0
		}
	case parquet.Types.Int32:
		if len(b) == 4 {
			v := int32(binary.LittleEndian.Uint32(b))
			if isDecimal {
				return decimal128.FromI64(int64(v))
			}
			return promoted(t, v)
		}
	case parquet.Types.Int64:
		if len(b) == 8 {
			v := int64(binary.LittleEndian.Uint64(b))
			if isDecimal {
				return decimal128.FromI64(v)
			}
			return v
		}
	case parquet.Types.Float:
		if len(b) == 4 {
			if v := math.Float32frombits(binary.LittleEndian.Uint32(b)); !math.IsNaN(float64(v)) {
				return promoted(t, v)
			}
		}
	case parquet.Types.Double:
		if len(b) == 8 {
			if v := math.Float64frombits(binary.LittleEndian.Uint64(b)); !math.IsNaN(v) {
				return v
			}
		}
	case parquet.Types.FixedLenByteArray:
		return bytesStatsValue(t, b)
	}
	// Variable-length bounds (strings, binary) may be truncated by writers;
	// they are not used rather than trusted.
	return nil
}

// promoted returns a statistic that Parquet stores as an int or a float as
// the value of t: widened when t is the long or double its column was
// promoted to after the file was written.
func promoted(t iceberg.Type, v any) any {
	switch x := v.(type) {
	case int32:
		if _, ok := t.(iceberg.Int64Type); ok {
			return int64(x)
		}
	case float32:
		if _, ok := t.(iceberg.Float64Type); ok {
			return float64(x)
		}
	}
	return v
}
