package planner

import (
	"fmt"
	"strconv"
	"sync"

	"github.com/apache/iceberg-go"

	"github.com/streamidx/streamidx/format"
	"github.com/streamidx/streamidx/internal/tablemeta"
	"github.com/streamidx/streamidx/planner/source"
)

// A prepared is what a lookup derives from an index definition and the
// table's schemas alone: whether the definition still fits the table, the
// index schema against the target snapshot's schema, and the Arrow schema
// and columns of the stored fields. A service answers thousands of lookups
// per index snapshot, so the planner derives it once per index metadata,
// table metadata file and pair of schemas, and shares it, read-only,
// between lookups.
type prepared struct {
	isErr error // format.NewIndexSchema's
	*columns
}

// preparedTable is what is derived from an index metadata and one table
// metadata file.
type preparedTable struct {
	check error // format.CheckTable's answer

	mu      sync.Mutex
	schemas map[[2]int]*prepared // by target and source schema IDs
	choices map[choiceKey]*choice
}

// A choice is what a lookup derives from the table metadata file and an
// index metadata for the table snapshot it asks for: the target snapshot,
// the index snapshot that answers and the table snapshot it was built
// for, and their schemas. iceberg-go hands out a fresh copy of a snapshot
// or schema at each call (and a schema copy indexes its fields again), so
// deriving this per lookup cost a service a fifth of its allocation.
// Shared read-only between lookups.
type choice struct {
	target, source             *tablemeta.Snapshot
	snap                       *format.Snapshot
	behind                     int
	targetSchema, sourceSchema *iceberg.Schema
}

// choiceKey: an index metadata (a service keeps one per index snapshot, and
// the table metadata is the preparedTable's) and the requested table
// snapshot ID (0: the current one).
type choiceKey struct {
	md        *format.Metadata
	requested int64
}

// maxChoices bounds the choices of one preparedTable: a few per index
// snapshot published while this table metadata file is current.
const maxChoices = 64

// choose returns the choice for table snapshot requested (0: the current
// one), derived once per index metadata.
func (pt *preparedTable) choose(v *tablemeta.View, md *format.Metadata, requested int64) (*choice, error) {
	k := choiceKey{md: md, requested: requested}
	pt.mu.Lock()
	c, ok := pt.choices[k]
	pt.mu.Unlock()
	if ok {
		return c, nil
	}
	target, err := v.Snapshot(requested)
	if err != nil {
		return nil, err
	}
	snap, src, behind, err := chooseSnapshot(v, md, target)
	if err != nil {
		return nil, err
	}
	// The index fields take the types of the table snapshot the answer is
	// for: a schema only widens a column's type (int to long, float to
	// double, a wider decimal), and range files written under the older
	// schema are read with the promotion applied.
	c = &choice{target: target, source: src, snap: snap, behind: behind,
		targetSchema: v.SnapshotSchema(target), sourceSchema: v.SnapshotSchema(src)}
	pt.mu.Lock()
	defer pt.mu.Unlock()
	if pt.choices == nil || len(pt.choices) >= maxChoices {
		pt.choices = map[choiceKey]*choice{}
	}
	pt.choices[k] = c
	return c, nil
}

// columns are the Arrow schema and columns of an index schema's stored
// fields (source.Columns; its Exact is filled per pair of schemas, by
// resolve) and the index schema.
type columns struct {
	is *format.IndexSchema
	*source.Columns
}

// preparedKey names an index by its UUID, not its metadata: the spec fixes
// an index's definition for its lifetime, so every metadata file of one
// index prepares the same, and a daemon that loads new metadata at every
// publish keeps one entry per table metadata file, not one per publish.
type preparedKey struct {
	index    string // index UUID
	location string // of the table metadata file
}

// maxPrepared bounds what a planner keeps prepared: a few entries per
// index the process serves (one per table metadata file since it started).
const maxPrepared = 256

type preparedCache struct {
	mu sync.Mutex
	m  map[preparedKey]*preparedTable
}

// Check is format.CheckTable, answered once per index and table metadata
// file: whether md's definition fits table tbl.
func (p *Planner) Check(md *format.Metadata, tbl Table) error {
	return p.prepareTable(md, tbl.View()).check
}

// prepareTable checks that md fits table v (format.CheckTable), once per
// table metadata file.
func (p *Planner) prepareTable(md *format.Metadata, v *tablemeta.View) *preparedTable {
	loc := v.MetadataLocation
	if loc == "" { // a table not read from a metadata file: nothing to key it by
		return &preparedTable{check: format.CheckTable(md, v)}
	}
	k := preparedKey{index: md.IndexUUID, location: loc}
	c := &p.prepared
	c.mu.Lock()
	pt, ok := c.m[k]
	c.mu.Unlock()
	if ok {
		return pt
	}
	pt = &preparedTable{check: format.CheckTable(md, v)}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= maxPrepared {
		c.m = map[preparedKey]*preparedTable{}
	}
	c.m[k] = pt
	return pt
}

// prepare returns the index schema of md against the target snapshot's
// schema and its stored columns, derived once per pair of schemas.
func (pt *preparedTable) prepare(md *format.Metadata, target, source *iceberg.Schema) (*prepared, error) {
	k := [2]int{target.ID, source.ID}
	pt.mu.Lock()
	defer pt.mu.Unlock()
	if pr, ok := pt.schemas[k]; ok {
		return pr, nil
	}
	pr := &prepared{}
	is, err := format.NewIndexSchema(md, target)
	if err != nil {
		pr.isErr = err
	} else if pr.columns, err = storedColumns(is); err != nil {
		return nil, err
	}
	if pt.schemas == nil {
		pt.schemas = map[[2]int]*prepared{}
	}
	pt.schemas[k] = pr
	return pr, nil
}

func storedColumns(is *format.IndexSchema) (*columns, error) {
	schema, err := format.ArrowSchema(is.StoredSchema())
	if err != nil {
		return nil, err
	}
	l := &columns{is: is, Columns: &source.Columns{Schema: schema, ColOf: map[int]int{}, FileCol: -1, PosCol: -1}}
	for i, f := range schema.Fields() {
		v, _ := f.Metadata.GetValue(format.ParquetFieldIDKey)
		id, err := strconv.Atoi(v)
		if err != nil {
			return nil, fmt.Errorf("arrow schema of index fields: field %s has no field ID", f.Name)
		}
		l.ColOf[id] = i
		l.Layout += f.Name + ":" + f.Type.String() + ";"
		fld, _ := l.is.Field(id)
		l.Fields = append(l.Fields, fld)
		if r, ok := fld.Expr.(format.Ref); ok && fld.Kind == format.KindMaterialized {
			switch r.ID {
			case format.FieldIDFile:
				l.FileCol = i
			case format.FieldIDPos:
				l.PosCol = i
			}
		}
	}
	return l, nil
}
