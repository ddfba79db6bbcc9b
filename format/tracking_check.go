package format

import (
	"bytes"
	"errors"
	"fmt"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/iceberg-go"
)

// The rules a tracking file's entries follow, which the writer enforces
// before writing a byte and the reader verifies on every entry.

// checkTrackingEntries checks every entry and their cluster order.
func checkTrackingEntries(s *IndexSchema, entries []TrackingEntry) error {
	types := s.ClusterTypes()
	for i := range entries {
		if err := checkTrackingEntry(s, &entries[i]); err != nil {
			return fmt.Errorf("entry %d (%s): %w", i, entries[i].FilePath, err)
		}
		if i > 0 {
			if err := checkTrackingOrder(s, types, &entries[i-1], &entries[i], i); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkTrackingOrder checks that entry i's group_max_value key is above
// that of entry i-1, prev.
func checkTrackingOrder(s *IndexSchema, types []iceberg.Type, prev, e *TrackingEntry, i int) error {
	a, _ := prev.GroupMaxKey(s)
	b, _ := e.GroupMaxKey(s)
	if CompareKeys(types, a, b) < 0 {
		return nil
	}
	return fmt.Errorf("entry %d (%s): group_max_value key %s is not above key %s of entry %d (%s)",
		i, e.FilePath, describeKey(types, b), describeKey(types, a), i-1, prev.FilePath)
}

func describeKey(types []iceberg.Type, k Key) string {
	var b bytes.Buffer
	b.WriteByte('(')
	for i, t := range types {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(FormatValue(t, k[i]))
	}
	b.WriteByte(')')
	return b.String()
}

// checkTrackingEntry checks one entry against s: the rules that the writer
// enforces and the reader verifies.
func checkTrackingEntry(s *IndexSchema, e *TrackingEntry) error {
	switch {
	case e.FilePath == "":
		return errors.New("file_path is empty")
	case !utf8.ValidString(e.FilePath):
		return errors.New("file_path is not UTF-8")
	case e.FileFormat == "" || !utf8.ValidString(e.FileFormat):
		return fmt.Errorf("file_format %q is empty or not UTF-8", e.FileFormat)
	case e.RecordCount < 0:
		return fmt.Errorf("record_count %d is negative", e.RecordCount)
	case e.FileSizeInBytes < 0:
		return fmt.Errorf("file_size_in_bytes %d is negative", e.FileSizeInBytes)
	}
	for id, st := range e.Stats {
		if f, ok := s.Field(id); !ok || !IsPrimitive(f.Type) {
			return fmt.Errorf("stats for field %d, which is not a primitive index field", id)
		}
		if st == nil {
			return fmt.Errorf("stats for field %d are nil", id)
		}
	}
	for _, f := range s.Fields() {
		if !IsPrimitive(f.Type) {
			continue
		}
		cluster := s.IsCluster(f.ID)
		st := e.Stats[f.ID]
		if st == nil {
			if cluster || f.Kind == KindNonMaterialized {
				return fmt.Errorf("field %d (%s): the stats struct is required for a %s field", f.ID, f.Name, fieldRole(f, cluster))
			}
			continue
		}
		if err := checkFieldStats(f, cluster, st); err != nil {
			return fmt.Errorf("field %d (%s): %w", f.ID, f.Name, err)
		}
	}
	return nil
}

func fieldRole(f IndexField, cluster bool) string {
	if cluster {
		return "cluster"
	}
	return f.Kind.String()
}

func checkFieldStats(f IndexField, cluster bool, st *FieldStats) error {
	for _, v := range []struct {
		name  string
		value any
	}{{"lower_bound", st.LowerBound}, {"upper_bound", st.UpperBound}, {"group_max_value", st.GroupMax}} {
		if err := checkStoredValue(f.Type, v.value); err != nil {
			return fmt.Errorf("%s: %w", v.name, err)
		}
	}
	switch {
	case (st.LowerBound == nil) != (st.UpperBound == nil):
		return errors.New("lower_bound and upper_bound must be both set or both null")
	case st.LowerBound != nil && Compare(f.Type, st.LowerBound, st.UpperBound) > 0:
		return fmt.Errorf("lower_bound %s is above upper_bound %s", FormatValue(f.Type, st.LowerBound), FormatValue(f.Type, st.UpperBound))
	case st.NanValueCount != nil && !hasNaN(f.Type):
		return fmt.Errorf("nan_value_count is not kept for type %s", f.Type)
	case st.AvgValueSize != nil && !isVariableLength(f.Type):
		return fmt.Errorf("avg_value_size_in_bytes is not kept for type %s", f.Type)
	case !st.HasGroupMax && st.GroupMax != nil:
		return errors.New("group_max_value is set but HasGroupMax is false")
	case st.HasGroupMax && !cluster:
		return errors.New("group_max_value is kept only for cluster fields")
	case cluster && !st.HasGroupMax:
		return errors.New("group_max_value is required for a cluster field")
	}
	return nil
}

// checkStoredValue is CheckValue plus the rules of the Avro encoding:
// decimals within their precision and strings in UTF-8.
func checkStoredValue(t iceberg.Type, v any) error {
	if err := CheckValue(t, v); err != nil || v == nil {
		return err
	}
	switch t := t.(type) {
	case iceberg.DecimalType:
		if !v.(decimal128.Num).FitsInPrecision(int32(t.Precision())) {
			return fmt.Errorf("value %s does not fit %s", FormatValue(t, v), t)
		}
	case iceberg.StringType:
		if !utf8.ValidString(v.(string)) {
			return errors.New("string value is not UTF-8")
		}
	}
	return nil
}
