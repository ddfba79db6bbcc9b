package format

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/apache/iceberg-go"
)

// FieldKind says where an index field's values live.
type FieldKind int

// The three lists of index fields.
const (
	// KindIdentity is a source table field stored in range files under its own ID.
	KindIdentity FieldKind = iota
	// KindMaterialized is an expression field stored in range files.
	KindMaterialized
	// KindNonMaterialized is an expression field kept only as tracking-file statistics.
	KindNonMaterialized
)

func (k FieldKind) String() string {
	switch k {
	case KindIdentity:
		return "identity"
	case KindMaterialized:
		return "materialized"
	case KindNonMaterialized:
		return "non-materialized"
	}
	return fmt.Sprintf("FieldKind(%d)", int(k))
}

// IndexField is one field of an index entry, resolved against a source schema.
type IndexField struct {
	ID   int
	Name string // the column name in range files; readers match by ID, never by name
	Type iceberg.Type
	Kind FieldKind
	Expr Expr // nil for identity fields
}

// Stored reports whether the field's values are stored in range files.
func (f IndexField) Stored() bool { return f.Kind != KindNonMaterialized }

// IndexSchema is an index definition resolved against the schema of one
// source table snapshot: the type and column name of every index field and
// the clustering key's fields. It is immutable and safe to share.
type IndexSchema struct {
	fields  []IndexField
	byID    map[int]int
	cluster []int // positions in fields, cluster-spec order
	// parquetSchema is the encoded Parquet schema of the range files
	// written now, made once when a row group copy first asks for it.
	parquetSchema *onceBytes
	// signature is Signature's answer, clusterFields ClusterFields', made
	// once.
	signature     string
	clusterFields []IndexField
}

// onceBytes is a value computed once.
type onceBytes struct {
	once sync.Once
	b    []byte
	err  error
}

// NewIndexSchema resolves the definition in md against a source schema. The
// definition should have passed Validate; NewIndexSchema still fails rather
// than guess when a field cannot be resolved.
func NewIndexSchema(md *Metadata, source *iceberg.Schema) (*IndexSchema, error) {
	if err := checkEvaluable(md); err != nil {
		return nil, err
	}
	s := &IndexSchema{byID: map[int]int{}, parquetSchema: &onceBytes{}}
	names := map[string]bool{}
	add := func(f IndexField) error {
		if _, dup := s.byID[f.ID]; dup {
			return fmt.Errorf("index field ID %d is declared twice", f.ID)
		}
		if names[f.Name] {
			f.Name = fmt.Sprintf("%s_%d", f.Name, f.ID)
		}
		names[f.Name] = true
		s.byID[f.ID] = len(s.fields)
		s.fields = append(s.fields, f)
		return nil
	}
	for _, id := range md.IdentityFields {
		sf, ok := source.FindFieldByID(id)
		if !ok {
			return nil, fmt.Errorf("identity field %d is not in the source schema", id)
		}
		name, _ := source.FindColumnName(id)
		if err := add(IndexField{ID: id, Name: name, Type: sf.Type, Kind: KindIdentity}); err != nil {
			return nil, err
		}
	}
	for _, list := range []struct {
		fields []ExprField
		kind   FieldKind
	}{{md.MaterializedFields, KindMaterialized}, {md.NonMaterializedFields, KindNonMaterialized}} {
		for _, ef := range list.fields {
			if err := add(IndexField{ID: ef.FieldID, Name: exprColumnName(ef.Expr, source), Type: ef.DataType, Kind: list.kind, Expr: ef.Expr}); err != nil {
				return nil, err
			}
		}
	}
	for _, id := range md.ClusterSpec {
		pos, ok := s.byID[id]
		if !ok {
			return nil, fmt.Errorf("cluster-spec field %d is not an index field", id)
		}
		if !IsPrimitive(s.fields[pos].Type) {
			return nil, fmt.Errorf("cluster-spec field %d has type %s, not a primitive type", id, s.fields[pos].Type)
		}
		s.cluster = append(s.cluster, pos)
	}
	if len(s.cluster) == 0 {
		return nil, fmt.Errorf("cluster-spec is empty")
	}
	s.signature = s.makeSignature()
	for _, pos := range s.cluster {
		s.clusterFields = append(s.clusterFields, s.fields[pos])
	}
	s.clusterFields = slices.Clip(s.clusterFields)
	return s, nil
}

// Signature names what decoding an index file with s depends on: the
// fields' IDs and types and the cluster order. Two schemas with the same
// signature decode every file alike, so what was decoded with one serves
// the other.
func (s *IndexSchema) Signature() string { return s.signature }

func (s *IndexSchema) makeSignature() string {
	var b strings.Builder
	for _, f := range s.fields {
		b.WriteString(strconv.Itoa(f.ID))
		b.WriteByte(':')
		b.WriteString(f.Type.String())
		b.WriteByte(',')
	}
	b.WriteByte('|')
	for _, pos := range s.cluster {
		b.WriteString(strconv.Itoa(s.fields[pos].ID))
		b.WriteByte(',')
	}
	return b.String()
}

// ErrUnsupportedExpression is returned (wrapped) for an index whose
// definition the spec allows but streamidx cannot evaluate: an expression
// over the _partition metadata column. Such an index is valid; streamidx
// neither builds nor reads it, and says so.
var ErrUnsupportedExpression = errors.New("streamidx cannot evaluate this index expression")

// checkEvaluable refuses index fields that reference _partition: its value
// is a struct of the row's partition values, typed by the table's partition
// specs, which neither the table scan nor the range files carry.
func checkEvaluable(md *Metadata) error {
	for _, list := range [][]ExprField{md.MaterializedFields, md.NonMaterializedFields} {
		for _, f := range list {
			if f.Expr != nil && slices.Contains(Refs(f.Expr), FieldIDPartition) {
				return fmt.Errorf("index field %d (%s) references _partition (%d), an allowed metadata column whose "+
					"partition struct streamidx does not compute: %w", f.FieldID, f.Expr, FieldIDPartition, ErrUnsupportedExpression)
			}
		}
	}
	return nil
}

// exprColumnName names an expression field's column after what it computes,
// the way Iceberg names partition fields: _file, _pos, customer_id,
// customer_id_bucket_16, ts_day.
func exprColumnName(e Expr, source *iceberg.Schema) string {
	switch e := e.(type) {
	case Ref:
		if name, _, ok := MetadataColumn(e.ID); ok {
			return name
		}
		if name, ok := source.FindColumnName(e.ID); ok {
			return name
		}
		return fmt.Sprintf("field_%d", e.ID)
	case Apply:
		var inner, params []string
		for _, a := range e.Args {
			if l, ok := a.(Lit); ok {
				params = append(params, fmt.Sprint(l.Value))
				continue
			}
			inner = append(inner, exprColumnName(a, source))
		}
		return strings.Join(append(append(inner, e.Function.Name), params...), "_")
	}
	return "literal"
}

// Fields returns all index fields: identity, materialized, non-materialized,
// each list in declaration order.
func (s *IndexSchema) Fields() []IndexField { return s.fields }

// Field returns the index field with the given ID.
func (s *IndexSchema) Field(id int) (IndexField, bool) {
	pos, ok := s.byID[id]
	if !ok {
		return IndexField{}, false
	}
	return s.fields[pos], true
}

// ClusterFields returns the fields of the clustering key in cluster-spec
// order. The slice is the schema's own, shared by every caller (a lookup
// asks for it several times): it must not be modified.
func (s *IndexSchema) ClusterFields() []IndexField { return s.clusterFields }

// ClusterTypes returns the types of the clustering key's fields, for
// CompareKeys and the key encoding.
func (s *IndexSchema) ClusterTypes() []iceberg.Type {
	out := make([]iceberg.Type, len(s.cluster))
	for i, pos := range s.cluster {
		out[i] = s.fields[pos].Type
	}
	return out
}

// IsCluster reports whether field id is part of the clustering key.
func (s *IndexSchema) IsCluster(id int) bool {
	for _, pos := range s.cluster {
		if s.fields[pos].ID == id {
			return true
		}
	}
	return false
}

// HasLocation reports whether the index stores row locations (_file and _pos
// materialized), which lets it turn equality deletes into positions.
func (s *IndexSchema) HasLocation() bool {
	var file, pos bool
	for _, f := range s.fields {
		if r, ok := f.Expr.(Ref); ok && f.Kind == KindMaterialized {
			file = file || r.ID == FieldIDFile
			pos = pos || r.ID == FieldIDPos
		}
	}
	return file && pos
}

// StoredSchema is the Iceberg schema of range files: the identity and
// materialized fields under their IDs. All columns are optional: a range
// file may hold nulls wherever the source may.
func (s *IndexSchema) StoredSchema() *iceberg.Schema { return s.schema(false) }

// EntrySchema is StoredSchema plus the non-materialized fields: the shape of
// the entries a range file writer takes, since it keeps statistics of
// non-materialized fields without storing them.
func (s *IndexSchema) EntrySchema() *iceberg.Schema { return s.schema(true) }

func (s *IndexSchema) schema(withNonMaterialized bool) *iceberg.Schema {
	var nfs []iceberg.NestedField
	for _, f := range s.fields {
		if f.Stored() || withNonMaterialized {
			nfs = append(nfs, iceberg.NestedField{ID: f.ID, Name: f.Name, Type: f.Type})
		}
	}
	return iceberg.NewSchema(0, nfs...)
}
