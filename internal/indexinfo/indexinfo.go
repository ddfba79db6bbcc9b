// Package indexinfo describes indexes as `streamidx list` and `inspect
// --json` print them and the lookup service answers: one description,
// whichever asks.
package indexinfo

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/apache/iceberg-go/table"

	"github.com/streamidx/streamidx/api"
	"github.com/streamidx/streamidx/format"
	"github.com/streamidx/streamidx/indexcatalog"
	"github.com/streamidx/streamidx/internal/lineage"
	"github.com/streamidx/streamidx/internal/objstore"
)

// The descriptions, as the lookup service answers them (see package api).
type (
	Inspection = api.Inspection
	Field      = api.Field
	Snapshot   = api.Snapshot
	Tracking   = api.Tracking
	RangeFile  = api.RangeFile
	Bounds     = api.Bounds
	Entry      = api.IndexEntry
)

// Target is an index loaded with its table.
type Target struct {
	TableName, IndexName string
	Table                *table.Table
	Metadata             *format.Metadata
	MetadataLocation     string
	// Unsupported: the index is of a type streamidx does not implement;
	// only its metadata is described.
	Unsupported bool
}

// Inspect describes an index and the range files of one of its snapshots:
// snapshot is a source table snapshot id or an index snapshot id, 0 for
// the current one.
func Inspect(ctx context.Context, store *objstore.Store, t Target, snapshot int64) (Inspection, error) {
	tbl, md := t.Table, t.Metadata
	out := Inspection{
		Table: t.TableName, Index: t.IndexName, MetadataLocation: t.MetadataLocation, IndexUUID: md.IndexUUID,
		TableUUID: md.TableUUID, Type: strings.ToUpper(md.Type), Location: md.Location, Supported: !t.Unsupported,
		Properties: md.Properties,
	}
	if md.MetadataLog != nil {
		// An empty log stays [] in the JSON, as it was written.
		out.MetadataLog = make([]api.MetadataLogEntry, 0, len(md.MetadataLog))
	}
	for _, e := range md.MetadataLog {
		out.MetadataLog = append(out.MetadataLog, api.MetadataLogEntry{MetadataFile: e.MetadataFile, TimestampMs: e.TimestampMs})
	}
	for _, s := range md.Snapshots {
		out.Snapshots = append(out.Snapshots, Snapshot{SnapshotID: s.SnapshotID, SourceTableSnapshotID: s.SourceTableSnapshotID,
			TimestampMs: s.TimestampMs, TrackingFile: s.TrackingFile, Properties: s.Properties})
	}
	if t.Unsupported {
		return out, nil
	}
	snap := md.CurrentSnapshot()
	if snapshot != 0 {
		var err error
		if snap, err = FindSnapshot(md, snapshot); err != nil {
			return out, fmt.Errorf("index %s: %w", t.IndexName, err)
		}
	}
	var sourceSnap *table.Snapshot
	if snap != nil {
		out.CurrentSnapshot = &md.CurrentSnapshot().SnapshotID
		sourceSnap = tbl.SnapshotByID(snap.SourceTableSnapshotID)
	}
	schema := lineage.SnapshotSchema(tbl, sourceSnap)
	is, err := format.NewIndexSchema(md, schema)
	if err != nil {
		return out, err
	}
	columnName := func(id int) string {
		if n, _, ok := format.MetadataColumn(id); ok {
			return n
		}
		n, _ := schema.FindColumnName(id)
		return n
	}
	for _, f := range is.Fields() {
		f2 := Field{ID: f.ID, Name: f.Name, Kind: f.Kind.String(), Type: f.Type.String()}
		if f.Expr != nil {
			f2.Expr = format.Describe(f.Expr, columnName)
		}
		f2.ClusterPosition = slices.Index(md.ClusterSpec, f.ID) + 1
		out.Fields = append(out.Fields, f2)
	}
	if snap == nil {
		return out, nil
	}
	tf, _, err := store.ReadTracking(ctx, md, snap, is)
	if err != nil {
		return out, err
	}
	out.Tracking = &Tracking{SnapshotID: snap.SnapshotID, TrackingFile: snap.TrackingFile}
	for _, te := range tf.Entries {
		rf := RangeFile{FilePath: te.FilePath, FileFormat: te.FileFormat, RecordCount: te.RecordCount,
			FileSizeInBytes: te.FileSizeInBytes, Bounds: map[string]Bounds{}}
		for _, f := range is.ClusterFields() {
			if st := te.Stats[f.ID]; st != nil && st.HasGroupMax {
				rf.GroupMax = append(rf.GroupMax, valueString(f, st.GroupMax))
			}
		}
		for _, f := range is.Fields() {
			if st := te.Stats[f.ID]; st != nil && (st.LowerBound != nil || st.UpperBound != nil) {
				rf.Bounds[fmt.Sprint(f.ID)] = Bounds{Lower: valueString(f, st.LowerBound), Upper: valueString(f, st.UpperBound)}
			}
		}
		out.Tracking.RangeFiles = append(out.Tracking.RangeFiles, rf)
		out.Tracking.Records += te.RecordCount
		out.Tracking.Bytes += te.FileSizeInBytes
	}
	return out, nil
}

func valueString(f format.IndexField, v any) *string {
	if v == nil {
		return nil
	}
	s := format.FormatValue(f.Type, v)
	return &s
}

// ErrNoSuchSnapshot is returned (wrapped) by FindSnapshot when the index has
// no snapshot of that id or for that source table snapshot.
var ErrNoSuchSnapshot = errors.New("no index snapshot")

// FindSnapshot picks the index snapshot for a source table snapshot id, or
// with that index snapshot id; 0 means the current one.
func FindSnapshot(md *format.Metadata, id int64) (*format.Snapshot, error) {
	if id == 0 {
		if s := md.CurrentSnapshot(); s != nil {
			return s, nil
		}
		return nil, errors.New("the index has no snapshot yet: run build")
	}
	if s := md.SnapshotsForSource(id); len(s) > 0 {
		return s[0], nil
	}
	if s := md.SnapshotByID(id); s != nil {
		return s, nil
	}
	return nil, fmt.Errorf("%w for source snapshot (or with id) %d", ErrNoSuchSnapshot, id)
}

// FillBehind sets the CommitsBehind of entries against tbl's current
// snapshot.
func FillBehind(entries []Entry, tbl *table.Table) {
	head := tbl.CurrentSnapshot()
	for i := range entries {
		e := &entries[i]
		if e.SourceSnapshotID == nil || head == nil {
			continue
		}
		if chain, ok := lineage.Since(tbl, head, *e.SourceSnapshotID); ok {
			n := len(chain)
			e.CommitsBehind = &n
		}
	}
}

// List lists the indexes of a table, in the catalog's order. An index that
// cannot be loaded is listed as broken and does not hide the others; its
// error is also in the returned list of failures.
func List(ctx context.Context, cat indexcatalog.Catalog, id table.Identifier) ([]Entry, []error, error) {
	names, err := cat.List(ctx, id)
	if err != nil {
		return nil, nil, err
	}
	out := []Entry{}
	var broken []error
	for _, n := range names {
		md, loc, err := cat.Load(ctx, id, n)
		if err != nil && !errors.Is(err, format.ErrUnsupportedIndexType) {
			out = append(out, Entry{Index: n, Type: "BROKEN", MetadataLocation: loc, Broken: err.Error()})
			broken = append(broken, fmt.Errorf("index %s: %w", n, err))
			continue
		}
		e := Entry{Index: n, Type: md.Type, Snapshots: len(md.Snapshots), MetadataLocation: loc}
		if s := md.CurrentSnapshot(); s != nil {
			e.SourceSnapshotID = &s.SourceTableSnapshotID
		}
		out = append(out, e)
	}
	return out, broken, nil
}
