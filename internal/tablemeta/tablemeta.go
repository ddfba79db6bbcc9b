// Package tablemeta is a read-only view of an Iceberg table metadata file:
// the snapshots, their parent chain, the schemas and the table's identity,
// which is all that a lookup through an index that is current for the
// table snapshot asks of the table. It parses the metadata file by the
// table spec with the standard library and iceberg-go's root package, so
// that a program which only answers such lookups need not link iceberg-go's
// table package (whose initialisation alone takes tens of milliseconds).
// Where a program holds a table that iceberg-go loaded, lineage.View makes
// the same view of it.
//
// Concurrency: a View is immutable once made and safe for concurrent use.
package tablemeta

import (
	"errors"
	"fmt"
	"iter"
	"strings"

	"github.com/apache/iceberg-go"
	"github.com/google/uuid"
)

// Snapshot is a table snapshot as the view knows it.
type Snapshot struct {
	ID             int64
	ParentID       *int64
	SequenceNumber int64
	TimestampMs    int64
	SchemaID       *int
	ManifestList   string
}

// View is a table at one metadata file.
type View struct {
	// Identifier is the table's name in its catalog, namespace first.
	Identifier []string
	// MetadataLocation is the metadata file the view was read from; "" for
	// a table not read from one.
	MetadataLocation string
	FormatVersion    int
	UUID             string
	Location         string
	Properties       map[string]string
	// CurrentSnapshotID is 0 when the table has no snapshot.
	CurrentSnapshotID int64
	Schemas           []*iceberg.Schema
	CurrentSchemaID   int

	snapshots []Snapshot
	byID      map[int64]int
	current   *iceberg.Schema
}

// New makes a view. Snapshots are copied; schemas are shared (they are not
// modified). The current schema must be among schemas and the current
// snapshot (0: none) among snapshots; Parse checks both, lineage.View
// takes them from a table iceberg-go loaded and checked.
func New(ident []string, metadataLocation string, formatVersion int, uuid, location string, props map[string]string,
	currentSnapshot int64, snapshots []Snapshot, schemas []*iceberg.Schema, current *iceberg.Schema) *View {
	v := &View{Identifier: ident, MetadataLocation: metadataLocation, FormatVersion: formatVersion, UUID: uuid,
		Location: location, Properties: props, CurrentSnapshotID: currentSnapshot, Schemas: schemas,
		CurrentSchemaID: current.ID, snapshots: append([]Snapshot(nil), snapshots...), byID: map[int64]int{},
		current: current}
	for i, s := range v.snapshots {
		v.byID[s.ID] = i
	}
	return v
}

// Name is the table's name, dotted.
func (v *View) Name() string { return strings.Join(v.Identifier, ".") }

// Schema is the table's current schema.
func (v *View) Schema() *iceberg.Schema { return v.current }

// Snapshots are the table's snapshots, in the order of its metadata file.
func (v *View) Snapshots() []Snapshot { return v.snapshots }

// SnapshotByID returns the snapshot with the given id, or nil.
func (v *View) SnapshotByID(id int64) *Snapshot {
	if i, ok := v.byID[id]; ok {
		return &v.snapshots[i]
	}
	return nil
}

// Snapshot returns the table snapshot with the given id, or the table's
// current snapshot for 0.
func (v *View) Snapshot(id int64) (*Snapshot, error) {
	if id == 0 {
		if v.CurrentSnapshotID == 0 {
			return nil, fmt.Errorf("table %s has no snapshot yet", v.Name())
		}
		id = v.CurrentSnapshotID
	}
	if s := v.SnapshotByID(id); s != nil {
		return s, nil
	}
	return nil, fmt.Errorf("table %s has no snapshot %d", v.Name(), id)
}

// SnapshotSchema returns the schema a table snapshot was written with: the
// one its schema-id names, else (no snapshot, a v1 snapshot without one, or
// a schema no longer kept) the table's current schema.
func (v *View) SnapshotSchema(snap *Snapshot) *iceberg.Schema {
	if snap != nil && snap.SchemaID != nil {
		for _, s := range v.Schemas {
			if s.ID == *snap.SchemaID {
				return s
			}
		}
	}
	return v.current
}

// Ancestors yields head and its ancestors, newest first, each with how
// many commits it lies behind head, as far as the metadata keeps them. The
// walk is lazy and ends where a corrupt parent chain loops back.
func (v *View) Ancestors(head *Snapshot) iter.Seq2[int, *Snapshot] {
	return WalkParents(head, func(s *Snapshot) (int64, *int64) { return s.ID, s.ParentID }, v.SnapshotByID)
}

// WalkParents yields head and its ancestors through a parent chain, newest
// first, each with how many commits it lies behind head: ids gives a
// snapshot's ID and its parent's (nil for none), byID the snapshot of an
// ID (nil when the metadata no longer keeps it). The walk is lazy: a
// lookup of an index that is current stops at head and pays for nothing
// more. It ends where a corrupt parent chain loops back.
func WalkParents[S comparable](head S, ids func(S) (int64, *int64), byID func(int64) S) iter.Seq2[int, S] {
	var none S
	return func(yield func(int, S) bool) {
		var seen map[int64]bool
		for behind, s := 0, head; s != none; behind++ {
			id, parent := ids(s)
			if !yield(behind, s) || parent == nil {
				return
			}
			if seen == nil {
				seen = map[int64]bool{}
			}
			seen[id] = true
			if seen[*parent] {
				return
			}
			s = byID(*parent)
		}
	}
}

// ColumnName names a field ID after the current schema, else the newest
// schema that has it (a column dropped since still has a name); "" when no
// schema has it.
func (v *View) ColumnName(id int) string {
	if name, ok := v.current.FindColumnName(id); ok {
		return name
	}
	for i := len(v.Schemas) - 1; i >= 0; i-- {
		if name, ok := v.Schemas[i].FindColumnName(id); ok {
			return name
		}
	}
	return ""
}

// metadataFile is the part of a table metadata file (table spec, "Table
// Metadata Fields") that a View holds; a nil pointer is a field the file
// does not have (or has as null).
type metadataFile struct {
	formatVersion     *int64
	uuid              string
	location          *string
	properties        map[string]string
	currentSnapshotID *int64
	snapshots         []snapshotFields
	schemas           []*iceberg.Schema
	schema            *iceberg.Schema // format version 1
	currentSchemaID   *int64
}

type snapshotFields struct {
	id, parentID, timestampMs, schemaID *int64
	sequenceNumber                      int64
	manifestList                        string
}

// ErrUnsupported is returned (wrapped) by Parse for a metadata file that is
// valid but outside what the view covers (a format version 1 snapshot that
// lists manifests instead of a manifest list): a caller reads such a table
// with iceberg-go's table package instead.
var ErrUnsupported = errors.New("table metadata the view does not cover")

// Parse reads a table metadata file (its JSON) into a view, checking the
// fields the view holds as the table spec requires them. It reads with
// jsonscan rather than encoding/json: a table that commits every few
// seconds keeps thousands of snapshots, each with a summary a lookup does
// not need, and a lookup process reads the whole file.
func Parse(ident []string, location string, data []byte) (*View, error) {
	m, err := scanMetadata(data)
	if err != nil {
		return nil, fmt.Errorf("table metadata %s: %w", location, err)
	}
	bad := func(what string) error {
		return fmt.Errorf("table metadata %s: %s", location, what)
	}
	if m.formatVersion == nil || *m.formatVersion < 1 || *m.formatVersion > 3 {
		return nil, bad("format-version is missing or not 1, 2 or 3")
	}
	if m.location == nil {
		return nil, bad("location is missing")
	}
	if m.uuid == "" && *m.formatVersion > 1 {
		return nil, bad("table-uuid is missing")
	}
	if m.uuid != "" {
		u, err := uuid.Parse(m.uuid)
		if err != nil {
			return nil, bad(fmt.Sprintf("table-uuid %q: %v", m.uuid, err))
		}
		m.uuid = u.String()
	}
	schemas, current := m.schemas, -1
	if m.currentSchemaID != nil {
		current = int(*m.currentSchemaID)
	}
	if len(schemas) == 0 && m.schema != nil {
		schemas, current = []*iceberg.Schema{m.schema}, m.schema.ID
	}
	if len(schemas) == 0 || current < 0 {
		return nil, bad("schemas or current-schema-id are missing")
	}
	var cur int64
	if m.currentSnapshotID != nil && *m.currentSnapshotID != -1 {
		cur = *m.currentSnapshotID
	}
	snaps := make([]Snapshot, 0, len(m.snapshots))
	for _, s := range m.snapshots {
		if s.id == nil || s.timestampMs == nil {
			return nil, bad("a snapshot without snapshot-id or timestamp-ms")
		}
		if s.manifestList == "" {
			return nil, fmt.Errorf("table metadata %s: snapshot %d has no manifest-list: %w", location, *s.id, ErrUnsupported)
		}
		snap := Snapshot{ID: *s.id, ParentID: s.parentID, SequenceNumber: s.sequenceNumber, TimestampMs: *s.timestampMs,
			ManifestList: s.manifestList}
		if s.schemaID != nil {
			id := int(*s.schemaID)
			snap.SchemaID = &id
		}
		snaps = append(snaps, snap)
	}
	var cs *iceberg.Schema
	for _, s := range schemas {
		if s.ID == current {
			cs = s
		}
	}
	if cs == nil {
		return nil, bad(fmt.Sprintf("current-schema-id %d is not among its schemas", current))
	}
	found := cur == 0
	for _, s := range snaps {
		found = found || s.ID == cur
	}
	if !found {
		return nil, bad(fmt.Sprintf("current-snapshot-id %d is not among its snapshots", cur))
	}
	return New(ident, location, int(*m.formatVersion), m.uuid, *m.location, m.properties, cur, snaps, schemas, cs), nil
}
