package format

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/apache/iceberg-go"
)

// FormatVersion is the only index format version this package reads and writes.
const FormatVersion = 1

// Index types. Writers write them in upper case; readers match them without
// regard to case.
const (
	TypeScalar = "SCALAR"
	TypeVector = "VECTOR"
)

// ExprFieldType is the only expression field representation the spec defines.
const ExprFieldType = "expr-value"

// Index properties that this package gives meaning to.
const (
	// PropPreviousVersionsMax caps the metadata log. Default 100.
	PropPreviousVersionsMax = "write.metadata.previous-versions-max"
	// PropDeleteAfterCommit deletes metadata files dropped from the log. Default false.
	PropDeleteAfterCommit = "write.metadata.delete-after-commit.enabled"
)

// ErrUnsupportedIndexType is returned (wrapped) by ParseMetadata for an index
// whose type this package does not implement, such as VECTOR. The metadata
// returned alongside it holds the fields common to every index type, so a
// caller can list the index; it must not use the index to plan reads and
// reads the source table directly instead. It is never a reason to fail.
var ErrUnsupportedIndexType = errors.New("index type not implemented")

// ErrUnknownFormatVersion is returned (wrapped) by ParseMetadata for a
// metadata file whose format-version is newer than FormatVersion: a newer
// writer made it, and this package can neither read it as it was meant nor
// write it back without losing what it does not know. It is not a
// corruption; upgrading streamidx is the remedy. No metadata is returned
// with it, so nothing can be committed on top.
var ErrUnknownFormatVersion = errors.New("unknown index format version")

// Metadata is an index metadata file.
type Metadata struct {
	FormatVersion         int                `json:"format-version"`
	IndexUUID             string             `json:"index-uuid"`
	TableUUID             string             `json:"table-uuid"`
	Location              string             `json:"location"`
	LastUpdatedMs         int64              `json:"last-updated-ms"`
	Type                  string             `json:"type"`
	IdentityFields        []int              `json:"identity-fields"`
	MaterializedFields    []ExprField        `json:"materialized-fields"`
	NonMaterializedFields []ExprField        `json:"non-materialized-fields"`
	ClusterSpec           []int              `json:"cluster-spec"`
	Properties            map[string]string  `json:"properties"`
	Snapshots             []Snapshot         `json:"snapshots"`
	MetadataLog           []MetadataLogEntry `json:"metadata-log"`
	EncryptionKeys        []EncryptionKey    `json:"encryption-keys"`

	// Extra keeps top-level keys this version does not know, so that a
	// metadata file written by a newer writer keeps them when streamidx
	// commits on top of it.
	Extra map[string]json.RawMessage `json:"-"`
}

// ExprField is an index field whose value is an expression over a source row.
type ExprField struct {
	FieldID  int
	Type     string // always ExprFieldType
	DataType iceberg.Type
	Expr     Expr
}

// Snapshot is an index snapshot: the index data for one source table snapshot.
type Snapshot struct {
	SnapshotID            int64             `json:"snapshot-id"`
	SourceTableSnapshotID int64             `json:"source-table-snapshot-id"`
	TimestampMs           int64             `json:"timestamp-ms"`
	TrackingFile          string            `json:"tracking-file"`
	Properties            map[string]string `json:"properties,omitempty"`
	KeyID                 string            `json:"key-id,omitempty"`
}

// MetadataLogEntry names a metadata file that preceded the current one.
type MetadataLogEntry struct {
	MetadataFile string `json:"metadata-file"`
	TimestampMs  int64  `json:"timestamp-ms"`
}

// EncryptionKey is an encrypted key used by the index; never a plain key.
type EncryptionKey struct {
	KeyID                string            `json:"key-id"`
	EncryptedKeyMetadata string            `json:"encrypted-key-metadata"`
	EncryptedByID        string            `json:"encrypted-by-id,omitempty"`
	Properties           map[string]string `json:"properties,omitempty"`
}

// Supported reports whether this package implements the index type.
func (m *Metadata) Supported() bool { return strings.EqualFold(m.Type, TypeScalar) }

// SnapshotByID returns the index snapshot with the given id, or nil.
func (m *Metadata) SnapshotByID(id int64) *Snapshot {
	for i := range m.Snapshots {
		if m.Snapshots[i].SnapshotID == id {
			return &m.Snapshots[i]
		}
	}
	return nil
}

// SnapshotsForSource returns the index snapshots built for a source table
// snapshot, newest first.
func (m *Metadata) SnapshotsForSource(sourceSnapshotID int64) []*Snapshot {
	var out []*Snapshot
	for i := len(m.Snapshots) - 1; i >= 0; i-- {
		if m.Snapshots[i].SourceTableSnapshotID == sourceSnapshotID {
			out = append(out, &m.Snapshots[i])
		}
	}
	return out
}

// CurrentSnapshot returns the most recently added index snapshot, or nil
// when the index has not been built.
func (m *Metadata) CurrentSnapshot() *Snapshot {
	if len(m.Snapshots) == 0 {
		return nil
	}
	return &m.Snapshots[len(m.Snapshots)-1]
}

// Field returns the expression field with the given id among the
// materialized and non-materialized fields.
func (m *Metadata) Field(id int) (f *ExprField, materialized bool) {
	for i := range m.MaterializedFields {
		if m.MaterializedFields[i].FieldID == id {
			return &m.MaterializedFields[i], true
		}
	}
	for i := range m.NonMaterializedFields {
		if m.NonMaterializedFields[i].FieldID == id {
			return &m.NonMaterializedFields[i], false
		}
	}
	return nil, false
}

var metadataKeys = []string{
	"format-version", "index-uuid", "table-uuid", "location", "last-updated-ms", "type",
	"identity-fields", "materialized-fields", "non-materialized-fields", "cluster-spec",
	"properties", "snapshots", "metadata-log", "encryption-keys",
}

// MarshalJSON writes the metadata file. The type is written in upper case and
// empty optional lists and maps are left out.
func (m *Metadata) MarshalJSON() ([]byte, error) {
	type plain Metadata
	p := plain(*m)
	p.Type = strings.ToUpper(p.Type)
	data, err := json.Marshal(&p)
	if err != nil {
		return nil, err
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(data, &obj); err != nil {
		return nil, err
	}
	for _, k := range []string{"materialized-fields", "non-materialized-fields", "properties", "snapshots", "metadata-log", "encryption-keys"} {
		if v := obj[k]; bytes.Equal(v, []byte("null")) || bytes.Equal(v, []byte("[]")) || bytes.Equal(v, []byte("{}")) {
			delete(obj, k)
		}
	}
	for k, v := range m.Extra {
		// Extra never overrides a field this package wrote; it fills keys
		// that are unknown here or, for an unsupported index type, not
		// interpreted.
		if cur, set := obj[k]; !set || bytes.Equal(cur, []byte("null")) {
			obj[k] = v
		}
	}
	for _, k := range []string{"identity-fields", "cluster-spec"} {
		if bytes.Equal(obj[k], []byte("null")) {
			delete(obj, k)
		}
	}
	return marshalOrdered(obj, metadataKeys)
}

// marshalOrdered writes an object with the known keys first, in the spec's
// order, then any others sorted, so files are stable and easy to read.
func marshalOrdered(obj map[string]json.RawMessage, order []string) ([]byte, error) {
	var buf bytes.Buffer
	buf.WriteByte('{')
	first := true
	write := func(k string, v json.RawMessage) {
		if !first {
			buf.WriteByte(',')
		}
		first = false
		kb, _ := json.Marshal(k)
		buf.Write(kb)
		buf.WriteByte(':')
		buf.Write(v)
	}
	for _, k := range order {
		if v, ok := obj[k]; ok {
			write(k, v)
		}
	}
	var rest []string
	for k := range obj {
		if !slices.Contains(order, k) {
			rest = append(rest, k)
		}
	}
	slices.Sort(rest)
	for _, k := range rest {
		write(k, obj[k])
	}
	buf.WriteByte('}')
	return buf.Bytes(), nil
}

// ParseMetadata reads an index metadata file. Missing optional lists read as
// empty. For an index type other than SCALAR it returns the metadata fields
// common to all types with an error wrapping ErrUnsupportedIndexType; the
// type-specific fields are then not interpreted. A format-version newer than
// FormatVersion is ErrUnknownFormatVersion. It does not check the rules of
// the spec: see Validate.
func ParseMetadata(data []byte) (*Metadata, error) {
	var obj map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(&obj); err != nil {
		return nil, fmt.Errorf("parse index metadata: %w", err)
	}
	if obj == nil {
		return nil, errors.New("parse index metadata: not a JSON object")
	}
	m := &Metadata{}
	required := []string{"format-version", "index-uuid", "table-uuid", "location", "last-updated-ms", "type"}
	for _, k := range required {
		if _, ok := obj[k]; !ok {
			return nil, fmt.Errorf("parse index metadata: required field %q is missing", k)
		}
	}
	// The version comes first: the rest of a newer file may mean something
	// else than it would in this one.
	if err := decodeField(obj, "format-version", &m.FormatVersion); err != nil {
		return nil, err
	}
	switch {
	case m.FormatVersion > FormatVersion:
		return nil, fmt.Errorf("index metadata has format-version %d, and this streamidx reads only version %d: "+
			"a newer writer made it; upgrade streamidx to use the index: %w", m.FormatVersion, FormatVersion, ErrUnknownFormatVersion)
	case m.FormatVersion < 1:
		return nil, fmt.Errorf("parse index metadata: format-version %d: versions start at 1", m.FormatVersion)
	}
	fields := []struct {
		key string
		dst any
	}{
		{"index-uuid", &m.IndexUUID},
		{"table-uuid", &m.TableUUID},
		{"location", &m.Location},
		{"last-updated-ms", &m.LastUpdatedMs},
		{"type", &m.Type},
		{"properties", &m.Properties},
		{"metadata-log", &m.MetadataLog},
		{"encryption-keys", &m.EncryptionKeys},
	}
	// The required fields of list entries are required on read too: a
	// snapshot without an id must not read as snapshot 0.
	for _, l := range []struct {
		key, entry string
		required   []string
	}{
		{"metadata-log", "metadata-log entry", []string{"metadata-file", "timestamp-ms"}},
		{"encryption-keys", "encryption-keys entry", []string{"key-id", "encrypted-key-metadata"}},
	} {
		if err := requireEntryFields(obj, l.key, l.entry, l.required); err != nil {
			return nil, err
		}
	}
	for _, f := range fields {
		if err := decodeField(obj, f.key, f.dst); err != nil {
			return nil, err
		}
	}
	snaps, err := decodeSnapshots(obj["snapshots"])
	if err != nil {
		return nil, err
	}
	m.Snapshots = snaps
	for k, v := range obj {
		if !slices.Contains(metadataKeys, k) {
			if m.Extra == nil {
				m.Extra = map[string]json.RawMessage{}
			}
			m.Extra[k] = v
		}
	}
	for _, s := range m.Snapshots {
		if s.TrackingFile == "" {
			return nil, fmt.Errorf("parse index metadata: snapshot %d has an empty tracking-file", s.SnapshotID)
		}
	}
	if !m.Supported() {
		// Keep the type-specific fields for a writer that commits on top.
		for _, k := range []string{"identity-fields", "materialized-fields", "non-materialized-fields", "cluster-spec"} {
			if v, ok := obj[k]; ok {
				if m.Extra == nil {
					m.Extra = map[string]json.RawMessage{}
				}
				m.Extra[k] = v
			}
		}
		return m, fmt.Errorf("index %s has type %q: %w", m.IndexUUID, m.Type, ErrUnsupportedIndexType)
	}
	for _, k := range []string{"identity-fields", "cluster-spec"} {
		if _, ok := obj[k]; !ok {
			return nil, fmt.Errorf("parse index metadata: required field %q is missing", k)
		}
	}
	for _, f := range []struct {
		key string
		dst any
	}{
		{"identity-fields", &m.IdentityFields},
		{"materialized-fields", &m.MaterializedFields},
		{"non-materialized-fields", &m.NonMaterializedFields},
		{"cluster-spec", &m.ClusterSpec},
	} {
		if err := decodeField(obj, f.key, f.dst); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// snapshotJSON is a snapshot as written, its required fields pointers so
// that one absent or null tells from a zero.
type snapshotJSON struct {
	SnapshotID            *int64            `json:"snapshot-id"`
	SourceTableSnapshotID *int64            `json:"source-table-snapshot-id"`
	TimestampMs           *int64            `json:"timestamp-ms"`
	TrackingFile          *string           `json:"tracking-file"`
	Properties            map[string]string `json:"properties"`
	KeyID                 string            `json:"key-id"`
}

// decodeSnapshots reads the snapshots list in one pass, its entries'
// required fields required (an index with an hour of snapshots at a commit
// a second has thousands of them). An absent or null list is an empty one.
func decodeSnapshots(raw json.RawMessage) ([]Snapshot, error) {
	if raw == nil || bytes.Equal(raw, []byte("null")) {
		return nil, nil
	}
	var in []snapshotJSON
	if err := json.Unmarshal(raw, &in); err != nil {
		return nil, fmt.Errorf("parse index metadata: field %q: %w", "snapshots", err)
	}
	out := make([]Snapshot, len(in))
	for i, s := range in {
		for _, f := range []struct {
			name    string
			missing bool
		}{
			{"snapshot-id", s.SnapshotID == nil},
			{"source-table-snapshot-id", s.SourceTableSnapshotID == nil},
			{"timestamp-ms", s.TimestampMs == nil},
			{"tracking-file", s.TrackingFile == nil},
		} {
			if f.missing {
				return nil, fmt.Errorf("parse index metadata: snapshot %d has no %q, which is required", i, f.name)
			}
		}
		out[i] = Snapshot{SnapshotID: *s.SnapshotID, SourceTableSnapshotID: *s.SourceTableSnapshotID, TimestampMs: *s.TimestampMs,
			TrackingFile: *s.TrackingFile, Properties: s.Properties, KeyID: s.KeyID}
	}
	return out, nil
}

func decodeField(obj map[string]json.RawMessage, key string, dst any) error {
	raw, ok := obj[key]
	if !ok || bytes.Equal(raw, []byte("null")) {
		return nil
	}
	if err := json.Unmarshal(raw, dst); err != nil {
		return fmt.Errorf("parse index metadata: field %q: %w", key, err)
	}
	return nil
}

// requireEntryFields checks that every entry of the list obj[key] is an
// object holding the required fields, none of them null. An absent or null
// list is an empty one.
func requireEntryFields(obj map[string]json.RawMessage, key, entry string, required []string) error {
	raw, ok := obj[key]
	if !ok || bytes.Equal(raw, []byte("null")) {
		return nil
	}
	var entries []map[string]json.RawMessage
	if err := json.Unmarshal(raw, &entries); err != nil {
		return fmt.Errorf("parse index metadata: field %q: want a list of objects: %w", key, err)
	}
	for i, e := range entries {
		for _, f := range required {
			if v, ok := e[f]; !ok || bytes.Equal(v, []byte("null")) {
				return fmt.Errorf("parse index metadata: %s %d has no %q, which is required", entry, i, f)
			}
		}
	}
	return nil
}

type exprFieldJSON struct {
	FieldID  *int            `json:"field-id"`
	Type     string          `json:"type"`
	DataType json.RawMessage `json:"data-type"`
	Expr     json.RawMessage `json:"expr"`
}

// MarshalJSON writes an expression field.
func (f ExprField) MarshalJSON() ([]byte, error) {
	if f.DataType == nil || f.Expr == nil {
		return nil, fmt.Errorf("expression field %d: data-type and expr are required", f.FieldID)
	}
	dt, err := MarshalType(f.DataType)
	if err != nil {
		return nil, fmt.Errorf("expression field %d: %w", f.FieldID, err)
	}
	ex, err := MarshalExpr(f.Expr)
	if err != nil {
		return nil, fmt.Errorf("expression field %d: %w", f.FieldID, err)
	}
	typ := f.Type
	if typ == "" {
		typ = ExprFieldType
	}
	id := f.FieldID
	return json.Marshal(exprFieldJSON{FieldID: &id, Type: typ, DataType: dt, Expr: ex})
}

// UnmarshalJSON reads an expression field; every field is required.
func (f *ExprField) UnmarshalJSON(data []byte) error {
	var j exprFieldJSON
	if err := json.Unmarshal(data, &j); err != nil {
		return err
	}
	switch {
	case j.FieldID == nil:
		return errors.New("expression field: field-id is required")
	case j.Type == "":
		return fmt.Errorf("expression field %d: type is required", *j.FieldID)
	case j.DataType == nil:
		return fmt.Errorf("expression field %d: data-type is required", *j.FieldID)
	case j.Expr == nil:
		return fmt.Errorf("expression field %d: expr is required", *j.FieldID)
	}
	dt, err := ParseType(j.DataType)
	if err != nil {
		return fmt.Errorf("expression field %d: %w", *j.FieldID, err)
	}
	ex, err := ParseExpr(j.Expr)
	if err != nil {
		return fmt.Errorf("expression field %d: %w", *j.FieldID, err)
	}
	*f = ExprField{FieldID: *j.FieldID, Type: j.Type, DataType: dt, Expr: ex}
	return nil
}

// ParseType reads an Iceberg type in the table spec's JSON serialization:
// a string for a primitive ("long", "decimal(9,2)", "fixed[16]") or an object
// for a struct, list or map.
func ParseType(data json.RawMessage) (iceberg.Type, error) {
	wrapped := append(append([]byte(`{"id":1,"name":"t","required":false,"type":`), data...), '}')
	var nf iceberg.NestedField
	if err := json.Unmarshal(wrapped, &nf); err != nil {
		return nil, fmt.Errorf("parse data-type %s: %w", data, err)
	}
	if nf.Type == nil {
		return nil, fmt.Errorf("parse data-type %s: no type", data)
	}
	return nf.Type, nil
}

// MarshalType writes an Iceberg type in the table spec's JSON serialization.
func MarshalType(t iceberg.Type) (json.RawMessage, error) {
	data, err := json.Marshal(iceberg.NestedField{ID: 1, Name: "t", Type: t})
	if err != nil {
		return nil, fmt.Errorf("write data-type %s: %w", t, err)
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(data, &obj); err != nil {
		return nil, err
	}
	return obj["type"], nil
}

// Clone returns a copy of m that shares nothing a caller may change with
// m: its slices and maps are copied (expressions and types, which nothing
// changes, are shared).
func (m *Metadata) Clone() *Metadata {
	c := *m
	c.IdentityFields = slices.Clone(m.IdentityFields)
	c.MaterializedFields = slices.Clone(m.MaterializedFields)
	c.NonMaterializedFields = slices.Clone(m.NonMaterializedFields)
	c.ClusterSpec = slices.Clone(m.ClusterSpec)
	c.Properties = maps.Clone(m.Properties)
	c.Snapshots = slices.Clone(m.Snapshots)
	for i := range c.Snapshots {
		c.Snapshots[i].Properties = maps.Clone(c.Snapshots[i].Properties)
	}
	c.MetadataLog = slices.Clone(m.MetadataLog)
	c.EncryptionKeys = slices.Clone(m.EncryptionKeys)
	for i := range c.EncryptionKeys {
		c.EncryptionKeys[i].Properties = maps.Clone(c.EncryptionKeys[i].Properties)
	}
	c.Extra = maps.Clone(m.Extra)
	return &c
}
