package format

import (
	"errors"
	"fmt"
	"net/url"
	"path"
	"slices"
	"strings"

	"github.com/apache/iceberg-go"
)

// The rules an index definition must follow. Validate wraps one of these for
// every broken rule, so callers and tests can tell them apart with errors.Is.
var (
	ErrFormatVersion       = errors.New("format-version must be 1")
	ErrLocation            = errors.New("location must be an absolute URI (with a scheme)")
	ErrPath                = errors.New("paths must be URIs or relative paths that resolve against the location")
	ErrIndexType           = errors.New("type must be a known index type")
	ErrIdentityEmpty       = errors.New("identity-fields must not be empty")
	ErrIdentityDuplicate   = errors.New("identity-fields must be unique")
	ErrIdentityNotData     = errors.New("identity-fields must reference data fields of the source schema")
	ErrIdentityType        = errors.New("identity-fields must have a primitive type outside lists and maps")
	ErrFieldIDDuplicate    = errors.New("index field IDs must be unique across identity, materialized and non-materialized fields")
	ErrFieldIDReserved     = errors.New("expression field IDs must not be reserved field IDs")
	ErrFieldIDInSource     = errors.New("expression field IDs must not be field IDs of the source schema")
	ErrFieldIDRange        = errors.New("expression field IDs must be positive and keep 10000 + 200 * id below 200,000,000")
	ErrExprFieldType       = errors.New(`expression field type must be "expr-value"`)
	ErrExprForbiddenColumn = errors.New("expressions must not reference _deleted, change-log columns or delete-file columns")
	ErrExprUnknownField    = errors.New("expressions must reference source fields or metadata columns that exist")
	ErrExprType            = errors.New("expressions must produce their declared data-type")
	ErrExprDepth           = fmt.Errorf("expressions must not nest function applications more than %d deep", MaxExprDepth)
	ErrClusterEmpty        = errors.New("cluster-spec must not be empty")
	ErrClusterUnknown      = errors.New("cluster-spec must reference declared index fields")
	ErrClusterDuplicate    = errors.New("cluster-spec must not repeat a field")
	ErrClusterType         = errors.New("cluster-spec fields must have a primitive type")
	ErrClusterSource       = errors.New("source fields referenced by cluster-spec expressions must be identity fields")
	ErrSnapshotDuplicate   = errors.New("snapshot-id must be unique")
	ErrSnapshotKey         = errors.New("a snapshot's key-id must name an encryption key")
)

// forbiddenColumns may not appear in index expressions.
var forbiddenColumns = map[int]string{
	FieldIDDeleted:          "_deleted",
	FieldIDChangeType:       "_change_type",
	FieldIDChangeOrdinal:    "_change_ordinal",
	FieldIDCommitSnapshotID: "_commit_snapshot_id",
	FieldIDDeleteFilePath:   "file_path",
	FieldIDDeletePos:        "pos",
	FieldIDDeleteRow:        "row",
}

// Validate checks an index metadata file and its definition against the
// source table schema. It reports every broken rule, each as an error
// wrapping one of the Err* rule errors above, joined with errors.Join. It
// returns nil for a valid SCALAR index.
//
// With a nil source it checks only the rules that need no table schema, as
// a reader does when it loads a metadata file before it has the table: an
// identity field is then not looked up, and an expression is type-checked
// only when it references metadata columns alone.
func Validate(m *Metadata, source *iceberg.Schema) error {
	names := func(int) string { return "" }
	if source != nil {
		names = func(id int) string { name, _ := source.FindColumnName(id); return name }
	}
	return validate(m, source, names)
}

// validate is Validate with the column names that messages use: a caller
// with the table's history names columns that its current schema lacks.
func validate(m *Metadata, source *iceberg.Schema, names func(id int) string) error {
	v := &validator{m: m, source: source, names: names}
	v.metadata()
	v.identity()
	v.expressionFields()
	v.clusterSpec()
	v.snapshots()
	return errors.Join(v.errs...)
}

type validator struct {
	m      *Metadata
	source *iceberg.Schema
	names  func(id int) string // column names for messages; "" when unknown
	errs   []error
	types  map[int]iceberg.Type // index field ID -> type, for the cluster-spec check
}

func (v *validator) fail(rule error, format string, args ...any) {
	v.errs = append(v.errs, fmt.Errorf("%w: %s", rule, fmt.Sprintf(format, args...)))
}

// column names a source field for messages: column "amount" (field 3).
func (v *validator) column(id int) string {
	if name := v.names(id); name != "" {
		return fmt.Sprintf("column %q (field %d)", name, id)
	}
	return fmt.Sprintf("field %d", id)
}

// describe renders an expression with its references named.
func (v *validator) describe(e Expr) string {
	return Describe(e, func(id int) string {
		if name, _, ok := MetadataColumn(id); ok {
			return name
		}
		return v.names(id)
	})
}

func (v *validator) metadata() {
	if v.m.FormatVersion != FormatVersion {
		v.fail(ErrFormatVersion, "got %d", v.m.FormatVersion)
	}
	if !isAbsoluteLocation(v.m.Location) {
		hint := ""
		if path.IsAbs(v.m.Location) {
			hint = fmt.Sprintf(": the table spec reads a path without a scheme as relative; write file://%s", v.m.Location)
		}
		v.fail(ErrLocation, "got %q%s", v.m.Location, hint)
	}
	if !strings.EqualFold(v.m.Type, TypeScalar) {
		v.fail(ErrIndexType, "got %q; streamidx implements %s", v.m.Type, TypeScalar)
	}
}

// isAbsoluteLocation accepts a URI with a scheme and an absolute path
// (s3://bucket/x, file:///x): the table spec's absolute paths, against
// which relative paths resolve.
func isAbsoluteLocation(loc string) bool {
	if !HasScheme(loc) {
		return false
	}
	u, err := url.Parse(loc)
	if err != nil {
		return false
	}
	return u.Host != "" || path.IsAbs(u.Path)
}

func (v *validator) identity() {
	v.types = map[int]iceberg.Type{}
	if len(v.m.IdentityFields) == 0 {
		v.fail(ErrIdentityEmpty, "the list is empty")
	}
	var inCollection map[int]bool
	if v.source != nil {
		inCollection = collectionFieldIDs(v.source)
	}
	seen := map[int]bool{}
	for _, id := range v.m.IdentityFields {
		if seen[id] {
			v.fail(ErrIdentityDuplicate, "field %d is listed twice", id)
			continue
		}
		seen[id] = true
		if IsReservedFieldID(id) {
			v.fail(ErrIdentityNotData, "field %d is a metadata column", id)
			continue
		}
		if v.source == nil {
			v.types[id] = nil // declared; its type is the table's
			continue
		}
		f, ok := v.source.FindFieldByID(id)
		if !ok {
			v.fail(ErrIdentityNotData, "identity %s is not in the source schema", v.column(id))
			continue
		}
		if !IsPrimitive(f.Type) || inCollection[id] {
			v.fail(ErrIdentityType, "identity %s has type %s", v.column(id), f.Type)
		}
		v.types[id] = f.Type
	}
}

// collectionFieldIDs returns the IDs of fields nested inside lists and maps:
// they have no single value per row.
func collectionFieldIDs(s *iceberg.Schema) map[int]bool {
	out := map[int]bool{}
	var walk func(t iceberg.Type, inside bool)
	walk = func(t iceberg.Type, inside bool) {
		switch t := t.(type) {
		case *iceberg.StructType:
			for _, f := range t.FieldList {
				if inside {
					out[f.ID] = true
				}
				walk(f.Type, inside)
			}
		case *iceberg.ListType:
			out[t.ElementID] = true
			walk(t.Element, true)
		case *iceberg.MapType:
			out[t.KeyID], out[t.ValueID] = true, true
			walk(t.KeyType, true)
			walk(t.ValueType, true)
		}
	}
	st := s.AsStruct()
	walk(&st, false)
	return out
}

func (v *validator) expressionFields() {
	for _, list := range [][]ExprField{v.m.MaterializedFields, v.m.NonMaterializedFields} {
		for _, f := range list {
			v.expressionField(f)
		}
	}
}

func (v *validator) expressionField(f ExprField) {
	id := f.FieldID
	if _, declared := v.types[id]; declared {
		v.fail(ErrFieldIDDuplicate, "field ID %d is declared twice", id)
		return
	}
	switch {
	case IsReservedFieldID(id):
		v.fail(ErrFieldIDReserved, "field ID %d", id)
	case id <= 0 || id > MaxIndexFieldID:
		v.fail(ErrFieldIDRange, "field ID %d (largest allowed %d)", id, MaxIndexFieldID)
	}
	if v.source != nil {
		if _, inSource := v.source.FindFieldByID(id); inSource {
			v.fail(ErrFieldIDInSource, "field ID %d", id)
		}
	}
	if f.Type != ExprFieldType {
		v.fail(ErrExprFieldType, "field %d has type %q", id, f.Type)
	}
	v.types[id] = f.DataType
	if f.Expr == nil || f.DataType == nil {
		v.fail(ErrExprType, "field %d has no expression or data-type", id)
		return
	}
	if d := ExprDepth(f.Expr); d > MaxExprDepth {
		v.fail(ErrExprDepth, "field %d nests %d deep", id, d)
		return
	}
	bad := false
	for _, ref := range Refs(f.Expr) {
		if ref == FieldIDPartition {
			// An allowed metadata column, typed by the table's partition
			// specs, which a schema does not give: NewIndexSchema says
			// that streamidx cannot evaluate it.
			bad = true
			continue
		}
		if name, forbidden := forbiddenColumns[ref]; forbidden {
			v.fail(ErrExprForbiddenColumn, "field %d references %s (%d)", id, name, ref)
			bad = true
		} else if _, ok := v.fieldType(ref); !ok {
			if v.source == nil && !IsReservedFieldID(ref) {
				bad = true // a source field: checked where the table is at hand
				continue
			}
			v.fail(ErrExprUnknownField, "field %d (%s) references %s, which the source schema does not have", id, v.describe(f.Expr), v.column(ref))
			bad = true
		}
	}
	if bad {
		return
	}
	got, err := ResultType(f.Expr, v.fieldType)
	if err != nil {
		v.fail(ErrExprType, "field %d (%s)%s: %v", id, v.describe(f.Expr), v.sourceTypes(f.Expr), err)
		return
	}
	if !got.Equals(f.DataType) {
		v.fail(ErrExprType, "field %d: %s produces %s, declared %s%s", id, v.describe(f.Expr), got, f.DataType, v.sourceTypes(f.Expr))
	}
}

// sourceTypes lists the source columns an expression reads with their
// types, which a schema change is the likely cause of a type error in.
func (v *validator) sourceTypes(e Expr) string {
	var parts []string
	for _, ref := range Refs(e) {
		if IsReservedFieldID(ref) {
			continue
		}
		if t, ok := v.fieldType(ref); ok {
			parts = append(parts, fmt.Sprintf("%s is %s", v.column(ref), t))
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return " (" + strings.Join(parts, ", ") + ")"
}

// fieldType resolves references of index expressions: source fields and the
// metadata columns that locate or describe a row.
func (v *validator) fieldType(id int) (iceberg.Type, bool) {
	if _, t, ok := MetadataColumn(id); ok {
		return t, true
	}
	if v.source == nil {
		return nil, false
	}
	f, ok := v.source.FindFieldByID(id)
	if !ok {
		return nil, false
	}
	return f.Type, true
}

func (v *validator) clusterSpec() {
	if len(v.m.ClusterSpec) == 0 {
		v.fail(ErrClusterEmpty, "the list is empty")
	}
	var seen []int
	for _, id := range v.m.ClusterSpec {
		if slices.Contains(seen, id) {
			v.fail(ErrClusterDuplicate, "field %d is listed twice", id)
			continue
		}
		seen = append(seen, id)
		t, ok := v.types[id]
		if !ok {
			v.fail(ErrClusterUnknown, "field %d is not an identity, materialized or non-materialized field", id)
			continue
		}
		if t != nil && !IsPrimitive(t) {
			v.fail(ErrClusterType, "field %d has type %s", id, t)
		}
		if f, _ := v.m.Field(id); f != nil && f.Expr != nil {
			for _, ref := range Refs(f.Expr) {
				if IsReservedFieldID(ref) {
					continue
				}
				if !slices.Contains(v.m.IdentityFields, ref) {
					v.fail(ErrClusterSource, "cluster field %d (%s) references source field %d, which is not an identity field", id, f.Expr, ref)
				}
			}
		}
	}
}

func (v *validator) snapshots() {
	ids := map[int64]bool{}
	for _, s := range v.m.Snapshots {
		if ids[s.SnapshotID] {
			v.fail(ErrSnapshotDuplicate, "snapshot %d", s.SnapshotID)
		}
		ids[s.SnapshotID] = true
		if s.KeyID != "" && !slices.ContainsFunc(v.m.EncryptionKeys, func(k EncryptionKey) bool { return k.KeyID == s.KeyID }) {
			v.fail(ErrSnapshotKey, "snapshot %d names key %q", s.SnapshotID, s.KeyID)
		}
		if _, err := ResolvePath(v.m.Location, s.TrackingFile); err != nil && isAbsoluteLocation(v.m.Location) {
			v.fail(ErrPath, "tracking-file of snapshot %d: %v", s.SnapshotID, err)
		}
	}
	for i, e := range v.m.MetadataLog {
		if _, err := ResolvePath(v.m.Location, e.MetadataFile); err != nil && isAbsoluteLocation(v.m.Location) {
			v.fail(ErrPath, "metadata-log entry %d: %v", i, err)
		}
	}
}
