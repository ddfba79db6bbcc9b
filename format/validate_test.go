package format

import (
	"errors"
	"testing"

	"github.com/apache/iceberg-go"
)

func validateSource() *iceberg.Schema {
	return iceberg.NewSchema(0,
		iceberg.NestedField{ID: 1, Name: "customer_id", Type: iceberg.PrimitiveTypes.Int64, Required: true},
		iceberg.NestedField{ID: 2, Name: "order_id", Type: iceberg.PrimitiveTypes.Int64, Required: true},
		iceberg.NestedField{ID: 3, Name: "total", Type: iceberg.DecimalTypeOf(12, 2)},
		iceberg.NestedField{ID: 4, Name: "ts", Type: iceberg.PrimitiveTypes.TimestampTz},
		iceberg.NestedField{ID: 5, Name: "tags", Type: &iceberg.ListType{ElementID: 6, Element: iceberg.PrimitiveTypes.String}},
		iceberg.NestedField{ID: 7, Name: "address", Type: &iceberg.StructType{FieldList: []iceberg.NestedField{
			{ID: 8, Name: "city", Type: iceberg.PrimitiveTypes.String},
		}}},
		iceberg.NestedField{ID: 9, Name: "name", Type: iceberg.PrimitiveTypes.String},
	)
}

func validMetadata() *Metadata {
	return &Metadata{
		FormatVersion: 1, IndexUUID: "u", TableUUID: "t", Location: "s3://b/idx", LastUpdatedMs: 1,
		Type: "SCALAR", IdentityFields: []int{1, 2, 8},
		MaterializedFields: []ExprField{
			{FieldID: 1000, Type: ExprFieldType, DataType: iceberg.PrimitiveTypes.String, Expr: Ref{ID: FieldIDFile}},
			{FieldID: 1001, Type: ExprFieldType, DataType: iceberg.PrimitiveTypes.Int64, Expr: Ref{ID: FieldIDPos}},
			{FieldID: 1002, Type: ExprFieldType, DataType: iceberg.PrimitiveTypes.String, Expr: NewApply("truncate", IntLit(3), Ref{ID: 9})},
		},
		NonMaterializedFields: []ExprField{
			{FieldID: 1003, Type: ExprFieldType, DataType: iceberg.PrimitiveTypes.Int32, Expr: NewApply("bucket", IntLit(16), Ref{ID: 1})},
			{FieldID: 1004, Type: ExprFieldType, DataType: iceberg.PrimitiveTypes.Date, Expr: NewApply("day", Ref{ID: 4})},
		},
		ClusterSpec: []int{1003, 1, 2},
		Snapshots:   []Snapshot{{SnapshotID: 1, SourceTableSnapshotID: 10, TrackingFile: "a"}},
	}
}

func TestValidateAcceptsAValidDefinition(t *testing.T) {
	if err := Validate(validMetadata(), validateSource()); err != nil {
		t.Fatalf("valid definition rejected: %v", err)
	}
	if err := Validate(validMetadata(), nil); err != nil {
		t.Fatalf("valid definition rejected without a schema: %v", err)
	}
	m := validMetadata()
	m.Location = "file:///abs/path"
	m.Type = "scalar"
	if err := Validate(m, validateSource()); err != nil {
		t.Fatalf("lower-case type or file URI rejected: %v", err)
	}
}

func TestValidateRules(t *testing.T) {
	// These cases break rules that need the table's schema; the others are
	// checked on every load, before the table is at hand.
	bySchema := map[string]bool{"identity not in source": true, "identity struct": true, "identity inside list": true,
		"field id in source": true, "references unknown field": true, "wrong data-type": true, "transform on wrong type": true}
	cases := []struct {
		name   string
		rule   error
		mutate func(m *Metadata)
	}{
		{"format version 2", ErrFormatVersion, func(m *Metadata) { m.FormatVersion = 2 }},
		{"relative location", ErrLocation, func(m *Metadata) { m.Location = "indexes/x" }},
		{"location without a scheme", ErrLocation, func(m *Metadata) { m.Location = "/tmp/x" }},
		{"tracking file without a scheme", ErrPath, func(m *Metadata) {
			m.Snapshots = []Snapshot{{SnapshotID: 1, SourceTableSnapshotID: 2, TimestampMs: 3, TrackingFile: "/tmp/x/metadata/snap-1.avro"}}
		}},
		{"tracking file climbing out", ErrPath, func(m *Metadata) {
			m.Snapshots = []Snapshot{{SnapshotID: 1, SourceTableSnapshotID: 2, TimestampMs: 3, TrackingFile: "../other/snap-1.avro"}}
		}},
		{"metadata-log file without a scheme", ErrPath, func(m *Metadata) {
			m.MetadataLog = []MetadataLogEntry{{MetadataFile: "/tmp/x/metadata/00001.metadata.json", TimestampMs: 1}}
		}},
		{"empty location", ErrLocation, func(m *Metadata) { m.Location = "" }},
		{"vector type", ErrIndexType, func(m *Metadata) { m.Type = "VECTOR" }},
		{"identity empty", ErrIdentityEmpty, func(m *Metadata) { m.IdentityFields = nil; m.ClusterSpec = []int{1003} }},
		{"identity duplicate", ErrIdentityDuplicate, func(m *Metadata) { m.IdentityFields = []int{1, 2, 1} }},
		{"identity not in source", ErrIdentityNotData, func(m *Metadata) { m.IdentityFields = []int{1, 2, 99} }},
		{"identity metadata column", ErrIdentityNotData, func(m *Metadata) { m.IdentityFields = []int{1, 2, FieldIDPos} }},
		{"identity struct", ErrIdentityType, func(m *Metadata) { m.IdentityFields = []int{1, 2, 7} }},
		{"identity inside list", ErrIdentityType, func(m *Metadata) { m.IdentityFields = []int{1, 2, 6} }},
		{"field id repeats identity", ErrFieldIDDuplicate, func(m *Metadata) { m.MaterializedFields[0].FieldID = 1 }},
		{"field id repeats expression", ErrFieldIDDuplicate, func(m *Metadata) { m.NonMaterializedFields[1].FieldID = 1000 }},
		{"field id reserved", ErrFieldIDReserved, func(m *Metadata) { m.MaterializedFields[0].FieldID = FieldIDRowID }},
		{"field id in source", ErrFieldIDInSource, func(m *Metadata) { m.MaterializedFields[2].FieldID = 9 }},
		{"field id too large", ErrFieldIDRange, func(m *Metadata) { m.MaterializedFields[2].FieldID = MaxIndexFieldID + 1 }},
		{"field id zero", ErrFieldIDRange, func(m *Metadata) { m.MaterializedFields[2].FieldID = 0 }},
		{"expression field type", ErrExprFieldType, func(m *Metadata) { m.MaterializedFields[2].Type = "expr-other" }},
		{"references _deleted", ErrExprForbiddenColumn, func(m *Metadata) {
			m.MaterializedFields[1].Expr = Ref{ID: FieldIDDeleted}
			m.MaterializedFields[1].DataType = iceberg.PrimitiveTypes.Bool
		}},
		{"references _change_type", ErrExprForbiddenColumn, func(m *Metadata) { m.MaterializedFields[0].Expr = Ref{ID: FieldIDChangeType} }},
		{"references delete file_path", ErrExprForbiddenColumn, func(m *Metadata) { m.MaterializedFields[0].Expr = Ref{ID: FieldIDDeleteFilePath} }},
		{"references unknown field", ErrExprUnknownField, func(m *Metadata) { m.MaterializedFields[2].Expr = NewApply("truncate", IntLit(3), Ref{ID: 77}) }},
		{"wrong data-type", ErrExprType, func(m *Metadata) { m.NonMaterializedFields[0].DataType = iceberg.PrimitiveTypes.Int64 }},
		{"transform on wrong type", ErrExprType, func(m *Metadata) { m.NonMaterializedFields[1].Expr = NewApply("day", Ref{ID: 9}) }},
		{"cluster empty", ErrClusterEmpty, func(m *Metadata) { m.ClusterSpec = nil }},
		{"cluster unknown", ErrClusterUnknown, func(m *Metadata) { m.ClusterSpec = []int{1, 4242} }},
		{"cluster duplicate", ErrClusterDuplicate, func(m *Metadata) { m.ClusterSpec = []int{1, 2, 1} }},
		{"cluster non-primitive", ErrClusterType, func(m *Metadata) {
			m.MaterializedFields = append(m.MaterializedFields, ExprField{FieldID: 1010, Type: ExprFieldType,
				DataType: &iceberg.ListType{ElementID: 1011, Element: iceberg.PrimitiveTypes.String}, Expr: Ref{ID: 5}})
			m.ClusterSpec = []int{1010}
		}},
		{"cluster expression over non-identity field", ErrClusterSource, func(m *Metadata) { m.ClusterSpec = []int{1004, 1} }},
		{"snapshot duplicate", ErrSnapshotDuplicate, func(m *Metadata) { m.Snapshots = append(m.Snapshots, m.Snapshots[0]) }},
		{"snapshot key unknown", ErrSnapshotKey, func(m *Metadata) { m.Snapshots[0].KeyID = "nope" }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := validMetadata()
			c.mutate(m)
			err := Validate(m, validateSource())
			if !errors.Is(err, c.rule) {
				t.Fatalf("want %v, got %v", c.rule, err)
			}
			err = Validate(m, nil)
			switch {
			case bySchema[c.name] && err != nil:
				t.Errorf("without a schema: %v, want nil (the rule needs the table's schema)", err)
			case !bySchema[c.name] && !errors.Is(err, c.rule):
				t.Errorf("without a schema: want %v, got %v", c.rule, err)
			}
		})
	}
}

func TestValidateReportsEveryBrokenRule(t *testing.T) {
	m := validMetadata()
	m.FormatVersion = 3
	m.IdentityFields = []int{1, 1}
	m.ClusterSpec = nil
	err := Validate(m, validateSource())
	for _, rule := range []error{ErrFormatVersion, ErrIdentityDuplicate, ErrClusterEmpty} {
		if !errors.Is(err, rule) {
			t.Errorf("missing %v in %v", rule, err)
		}
	}
}
