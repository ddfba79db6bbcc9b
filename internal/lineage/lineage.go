// Package lineage answers the questions every part of streamidx asks about
// a table's snapshot history: which snapshot an id means, which schema a
// snapshot was written with, and how two snapshots are related through
// their parent chain. Every parent-chain walk (Ancestors here, and
// iceberg-go's AncestorsBetween and IsAncestorOf) keeps the snapshots it
// visited and stops at a cycle, so corrupt table metadata whose parent
// chain loops ends a walk instead of hanging it.
//
// Concurrency: the functions only read the table's metadata.
package lineage

import (
	"fmt"
	"iter"
	"slices"
	"strings"
	"sync"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"

	"github.com/streamidx/streamidx/internal/tablemeta"
)

// Snapshot returns the table snapshot with the given id, or the table's
// current snapshot for 0.
func Snapshot(tbl *table.Table, id int64) (*table.Snapshot, error) {
	if id == 0 {
		if s := tbl.CurrentSnapshot(); s != nil {
			return s, nil
		}
		return nil, fmt.Errorf("table %s has no snapshot yet", strings.Join(tbl.Identifier(), "."))
	}
	if s := tbl.SnapshotByID(id); s != nil {
		return s, nil
	}
	return nil, fmt.Errorf("table %s has no snapshot %d", strings.Join(tbl.Identifier(), "."), id)
}

// SnapshotSchema returns the schema a table snapshot was written with: the
// one its schema-id names, else (no snapshot, a v1 snapshot without one, or
// a schema no longer kept) the table's current schema.
func SnapshotSchema(tbl *table.Table, snap *table.Snapshot) *iceberg.Schema {
	if snap != nil && snap.SchemaID != nil {
		if cur := tbl.Schema(); cur.ID == *snap.SchemaID { // most snapshots: no copy of the schema list
			return cur
		}
		for _, s := range tbl.Metadata().Schemas() {
			if s.ID == *snap.SchemaID {
				return s
			}
		}
	}
	return tbl.Schema()
}

// Ancestors yields head and its ancestors, newest first, each with how
// many commits it lies behind head, as far as the table's metadata keeps
// them. The walk is lazy: a lookup of an index that is current stops at
// head and pays for nothing more, however long the table's history. It
// ends where a corrupt parent chain loops back.
func Ancestors(tbl *table.Table, head *table.Snapshot) iter.Seq2[int, *table.Snapshot] {
	return tablemeta.WalkParents(head, func(s *table.Snapshot) (int64, *int64) { return s.SnapshotID, s.ParentSnapshotID }, tbl.SnapshotByID)
}

// Since returns the snapshots after base up to head, oldest first, and
// whether base is an ancestor of head at all (it is not after a rollback,
// or when history between them expired). head == base gives none.
func Since(tbl *table.Table, head *table.Snapshot, base int64) ([]*table.Snapshot, bool) {
	between, found := table.AncestorsBetween(head.SnapshotID, base, tbl.SnapshotByID)
	if !found {
		return nil, false
	}
	out := pointers(between)
	slices.Reverse(out)
	return out, true
}

// IsAncestor reports whether snapshot snap is head or one of head's
// ancestors.
func IsAncestor(tbl *table.Table, head, snap int64) bool {
	return table.IsAncestorOf(head, snap, tbl.SnapshotByID)
}

func pointers(snaps []table.Snapshot) []*table.Snapshot {
	out := make([]*table.Snapshot, len(snaps))
	for i := range snaps {
		out[i] = &snaps[i]
	}
	return out
}

// RewriteDeletesProperty is the snapshot summary property (value "true")
// that marks the table snapshots committed by streamidx rewrite-deletes:
// they turn equality deletes into position deletes and change no live row.
const RewriteDeletesProperty = "streamidx.rewrite-deletes"

// KeepsLiveRows reports whether snapshot s is known to leave the table's
// live rows as they were: a replace (a compaction, a rewrite of files) or
// a snapshot of streamidx rewrite-deletes. An index fed by change events
// may move over such a snapshot without any event.
func KeepsLiveRows(s *table.Snapshot) bool {
	if s == nil || s.Summary == nil {
		return false
	}
	return s.Summary.Operation == table.OpReplace || s.Summary.Properties[RewriteDeletesProperty] == "true"
}

// OnlyRewritesRemove reports whether, of the snapshots after base up to
// head, none but those of streamidx rewrite-deletes (RewriteDeletesProperty)
// removed a data file or a delete file, by their summaries (the counts
// deleted-data-files and removed-delete-files, which writers leave out when
// zero). Then every delete file that is live at base and gone at head was
// removed by a rewrite, which kept what it deleted, and every deletion
// vector or position delete that others added since only deletes more.
func OnlyRewritesRemove(tbl *table.Table, head *table.Snapshot, base int64) bool {
	chain, ok := Since(tbl, head, base)
	if !ok {
		return false
	}
	for _, s := range chain {
		if s.Summary == nil {
			return false
		}
		if s.Summary.Properties[RewriteDeletesProperty] == "true" {
			continue
		}
		for _, k := range []string{"deleted-data-files", "removed-delete-files"} {
			if v, ok := s.Summary.Properties[k]; ok && v != "0" {
				return false
			}
		}
	}
	return true
}

// OnlyRewritesDeletes returns how many snapshots lie after base up to head
// when every one of them is one that streamidx rewrite-deletes committed (RewriteDeletesProperty)
// and, by its summary, adds and removes no data file and no record: such a
// snapshot turns equality deletes into position deletes of exactly the rows
// they deleted already (the rewrite's invariant), so the live rows of head
// are those of base, at the same places. A snapshot that carries the
// property but changes data files, or whose summary lacks the totals to
// tell, does not count: then, or when there is no such snapshot, it
// returns 0.
func OnlyRewritesDeletes(tbl *table.Table, base, head *table.Snapshot) int {
	if base == nil || head == nil {
		return 0
	}
	chain, ok := Since(tbl, head, base.SnapshotID)
	if !ok {
		return 0
	}
	parent := base
	for _, s := range chain {
		if !rewritesDeletesOnly(parent, s) {
			return 0
		}
		parent = s
	}
	return len(chain)
}

// rewritesDeletesOnly is OnlyRewritesDeletes for one snapshot s and its
// parent.
func rewritesDeletesOnly(parent, s *table.Snapshot) bool {
	if s.Summary == nil || parent.Summary == nil || s.Summary.Properties[RewriteDeletesProperty] != "true" {
		return false
	}
	props := s.Summary.Properties
	for _, k := range []string{"added-data-files", "deleted-data-files", "added-records", "deleted-records"} {
		if v, ok := props[k]; ok && v != "0" {
			return false
		}
	}
	for _, k := range []string{"total-data-files", "total-records"} {
		if v, ok := props[k]; !ok || v != parent.Summary.Properties[k] {
			return false
		}
	}
	return true
}

// views keeps the view of each table metadata file View made: a metadata
// file never changes, and a service asks for the view at every lookup.
var views struct {
	sync.Mutex
	m map[string]*tablemeta.View
}

// maxViews bounds the views kept: a few per table a process works on.
const maxViews = 256

// View is the table-free view of tbl (package tablemeta) that the planner
// and the index checks read, made once per metadata file.
func View(tbl *table.Table) *tablemeta.View {
	key := tbl.MetadataLocation()
	if key != "" {
		views.Lock()
		v, ok := views.m[key]
		views.Unlock()
		if ok && slices.Equal(v.Identifier, tbl.Identifier()) {
			return v
		}
	}
	md := tbl.Metadata()
	snaps := make([]tablemeta.Snapshot, 0, len(md.Snapshots()))
	for _, s := range md.Snapshots() {
		snaps = append(snaps, tablemeta.Snapshot{ID: s.SnapshotID, ParentID: s.ParentSnapshotID, SequenceNumber: s.SequenceNumber,
			TimestampMs: s.TimestampMs, SchemaID: s.SchemaID, ManifestList: s.ManifestList})
	}
	var cur int64
	if s := tbl.CurrentSnapshot(); s != nil {
		cur = s.SnapshotID
	}
	v := tablemeta.New(tbl.Identifier(), tbl.MetadataLocation(), md.Version(), md.TableUUID().String(), tbl.Location(),
		md.Properties(), cur, snaps, md.Schemas(), tbl.Schema())
	if key != "" {
		views.Lock()
		if views.m == nil || len(views.m) >= maxViews {
			views.m = map[string]*tablemeta.View{}
		}
		views.m[key] = v
		views.Unlock()
	}
	return v
}
