package planner

import (
	"context"
	"errors"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/streamidx/streamidx/format"
	"github.com/streamidx/streamidx/internal/objstore"
	"github.com/streamidx/streamidx/internal/procs"
	"github.com/streamidx/streamidx/internal/tablemeta"
	"github.com/streamidx/streamidx/planner/source"
)

// Table is the table a lookup answers for: source.Metadata of its
// metadata file, or reconcile.Table of a table iceberg-go loaded, which
// can also answer for an index that lags the table snapshot.
type Table = source.Table

// ErrNoIndexSnapshot is returned (wrapped) when neither the requested table
// snapshot nor any of its ancestors has an index snapshot: the index must
// be built first.
var ErrNoIndexSnapshot = errors.New("no index snapshot for the table snapshot or any of its ancestors")

// ErrCannotReconcile is returned (wrapped) when the newest usable index
// snapshot is older than the requested table snapshot and the index stores
// no row locations (_file and _pos): without them entries of deleted rows
// cannot be told apart, so the result could not be exact.
var ErrCannotReconcile = errors.New("the index stores no row locations (_file, _pos), so it cannot be reconciled with a newer table snapshot")

// Options tune a Planner. The zero value selects the defaults.
type Options struct {
	// Store reads tracking and range files; its cache of decoded tracking
	// files serves every lookup through it. Default: a store for local
	// files only.
	Store *objstore.Store
	// MaxKeyRanges caps the clustering-key ranges one lookup enumerates (an
	// IN list times the values of other leading fields); beyond it the
	// ranges cover fewer leading fields, which reads more but stays exact.
	// Default: 65536.
	MaxKeyRanges int
	// BatchRows caps the entries of each batch read from a range file.
	// Default: 8192.
	BatchRows int
	// Allocator allocates the result batches. Default: memory.DefaultAllocator.
	Allocator memory.Allocator
	// Parallelism is how many goroutines read the range files of a wide
	// lookup (more than a few key ranges, no limit), each its own part of
	// the row groups; 1 reads them one after another. Default:
	// procs.Work().
	Parallelism int
}

func (o *Options) ensureDefaults() {
	if o.Store == nil {
		o.Store = objstore.Local()
	}
	if o.MaxKeyRanges <= 0 {
		o.MaxKeyRanges = 1 << 16
	}
	if o.BatchRows <= 0 {
		o.BatchRows = 8192
	}
	if o.Allocator == nil {
		o.Allocator = memory.DefaultAllocator
	}
	if o.Parallelism <= 0 {
		o.Parallelism = procs.Work()
	}
}

// Planner answers lookups through index snapshots. It is safe for
// concurrent use.
type Planner struct {
	opts     Options
	prepared preparedCache
}

// New returns a Planner.
func New(opts Options) *Planner {
	opts.ensureDefaults()
	return &Planner{opts: opts}
}

// Query is one lookup.
type Query struct {
	// Where is the predicate, in the language of Parse; empty matches every
	// entry.
	Where string
	// TableSnapshotID is the table snapshot the answer must be exact for.
	// Default (0): the table's current snapshot.
	TableSnapshotID int64
	// Limit stops the lookup after this many rows; 0 means no limit. The
	// rows returned are matches, but not necessarily the first in any order.
	Limit int64
	// Parsed, when set, is what Where parses to, for a caller that parsed
	// it already (to refuse a bad predicate before reading any catalog):
	// the lookup does not parse Where again.
	Parsed *Predicate
}

// predicate returns q's parsed predicate.
func (q Query) predicate() (*Predicate, error) {
	if q.Parsed != nil {
		return q.Parsed, nil
	}
	return Parse(q.Where)
}

// Result is the answer to a lookup: the matching entries, exact for the
// table snapshot, as Arrow record batches of the index's stored fields
// (identity and materialized, _file and _pos included when the index has
// them). The caller calls Release when done with the batches.
type Result struct {
	// Fields are the columns of the batches, in order.
	Fields []format.IndexField
	// Schema is the Arrow schema of the batches; fields carry their index
	// field IDs as PARQUET:field_id.
	Schema  *arrow.Schema
	Batches []arrow.RecordBatch
	// fileCol and posCol are the columns of _file and _pos in Batches,
	// -1 for an index that does not store them (see Locations).
	fileCol, posCol int
	// Truncated is set when the lookup stopped at Query.Limit rows; more
	// entries may match.
	Truncated bool
	Plan      Plan
	Stats     Stats
}

// add adds the counters of o, the statistics of a part of the same lookup.
func (s *Stats) add(o Stats) {
	s.RangeFilesRead += o.RangeFilesRead
	s.RowGroupsTotal += o.RowGroupsTotal
	s.RowGroupsRead += o.RowGroupsRead
	s.PagesTotal += o.PagesTotal
	s.PagesRead += o.PagesRead
	s.BytesRead += o.BytesRead
	s.EntriesScanned += o.EntriesScanned
	s.EntriesMatched += o.EntriesMatched
	s.EntriesDropped += o.EntriesDropped
	s.DataFilesScanned += o.DataFilesScanned
	s.DataRowsScanned += o.DataRowsScanned
	s.RowsAdded += o.RowsAdded
	s.Rows += o.Rows
}

// NumRows is the number of matching rows.
func (r *Result) NumRows() int64 { return r.Stats.Rows }

// Release releases the batches.
func (r *Result) Release() {
	for _, b := range r.Batches {
		b.Release()
	}
	r.Batches = nil
}

// Stats count what a lookup read.
type Stats struct {
	RangeFilesTotal int `json:"range_files_total"` // in the index snapshot
	RangeFilesRead  int `json:"range_files_read"`  // opened after pruning
	RowGroupsTotal  int `json:"row_groups_total"`  // in the range files read
	RowGroupsRead   int `json:"row_groups_read"`   // left after pruning by statistics
	// PagesTotal and PagesRead count the data pages of the leading filtered
	// cluster field in the row groups read, and those left after pruning by
	// the page index.
	PagesTotal int   `json:"pages_total"`
	PagesRead  int   `json:"pages_read"`
	BytesRead  int64 `json:"bytes_read"` // from range files
	// TrackingBytesRead is the size of the tracking file, or 0 when it came
	// from the cache.
	TrackingBytesRead int64 `json:"tracking_bytes_read"`
	EntriesScanned    int64 `json:"entries_scanned"` // entries decoded from range files
	EntriesMatched    int64 `json:"entries_matched"` // of those, matching the predicate
	// EntriesDropped are matches whose row was deleted, or whose data file
	// was removed, after the index snapshot's table snapshot.
	EntriesDropped int64 `json:"entries_dropped"`
	// DataFilesScanned and DataRowsScanned count data files added after
	// the index snapshot's table snapshot, which are read directly;
	// RowsAdded are the matches found there.
	DataFilesScanned int   `json:"data_files_scanned"`
	DataRowsScanned  int64 `json:"data_rows_scanned"`
	RowsAdded        int64 `json:"rows_added"`
	Rows             int64 `json:"rows"` // in the result
}

// Lookup answers q for table tbl through the index whose metadata is md:
// it picks the newest index snapshot built for the requested table snapshot
// or an ancestor of it, reads only the range files, row groups and rows
// the predicate can match, and, when that index snapshot is older than the
// table snapshot, corrects the answer with the deletes and data files
// committed since. The result is exact for the table snapshot. An index
// of a type the planner does not implement (VECTOR) is ignored, as the spec
// requires: the answer comes from a scan of the table (Plan.TableScan says
// so), with every primitive column and _file and _pos.
//
// Errors: *PredicateError for a predicate that does not parse or that the
// index cannot answer; format.ErrTableReplaced for an index of another table
// (one dropped and re-created under the same name), and format.ErrCorruption
// for a definition that does not fit the table (see format.CheckTable);
// ErrNoIndexSnapshot; ErrCannotReconcile.
func (p *Planner) Lookup(ctx context.Context, tbl Table, md *format.Metadata, q Query) (*Result, error) {
	if !md.Supported() {
		return p.scanTable(ctx, tbl, md, q)
	}
	run, snap, err := p.plan(ctx, tbl, md, q)
	if err != nil {
		return nil, err
	}
	if err := run.execute(ctx, md, snap); err != nil {
		run.res.Release()
		return nil, err
	}
	return run.res, nil
}

// Prepare does what every lookup through md at table snapshot id (0: the
// table's current one) does before it reads range files: it reads the
// tracking file of the index snapshot it would use and, when the index
// lags the table snapshot, reconciles the two. With a store that keeps a
// lookup cache, the lookups that follow find both ready: a service that
// prepares a new table snapshot before it answers for it keeps the
// reconciliation out of its answers' time.
func (p *Planner) Prepare(ctx context.Context, tbl Table, md *format.Metadata, id int64) error {
	run, _, err := p.prepare(ctx, tbl, md, id)
	if run != nil {
		run.res.Release()
	}
	return err
}

// prepare is Prepare, returning the run of a lookup without a predicate
// and the tracking file it would read (nil, nil for an index a table scan
// answers); the caller releases the run's result.
func (p *Planner) prepare(ctx context.Context, tbl Table, md *format.Metadata, id int64) (*run, *objstore.Tracking, error) {
	if !md.Supported() {
		return nil, nil, nil // a table scan has nothing to prepare
	}
	run, snap, err := p.plan(ctx, tbl, md, Query{TableSnapshotID: id})
	if err != nil {
		return nil, nil, err
	}
	t, _, err := p.opts.Store.ReadTracking(ctx, md, snap, run.is)
	return run, t, err
}

// Warmed is what Warm read into the lookup cache.
type Warmed struct {
	// Files is the range files whose pages Warm read, or found cached,
	// wholly or in part; Of is the range files of the index snapshot.
	Files, Of int
	// Bytes is the memory of the decoded pages read or found cached.
	Bytes int64
}

// Warm prepares md for the table's current snapshot as Prepare does, then
// reads the pages of its range files into the store's lookup cache, by the
// page index of the leading cluster field (what point and range lookups
// on the index's key read), in key order, until they hold budget bytes.
// A service that warms an index before it answers (at start, say) spares
// its first lookups the reading and decoding of pages: a freshly started
// service answered its first second of lookups tens of times slower than
// the next ones without it. Without a lookup cache, or for an index whose
// leading cluster field is not stored, it reads no pages.
func (p *Planner) Warm(ctx context.Context, tbl Table, md *format.Metadata, budget int64) (Warmed, error) {
	var w Warmed
	run, t, err := p.prepare(ctx, tbl, md, 0)
	if run != nil {
		defer run.res.Release()
	}
	if err != nil || t == nil {
		return w, err
	}
	w.Of = len(t.Entries)
	field := -1
	if cf := run.is.ClusterFields(); len(cf) > 0 && cf[0].Stored() {
		field = cf[0].ID
	}
	if !p.opts.Store.LookupCaching() || field < 0 {
		return w, nil
	}
	for i := range t.Entries {
		if w.Bytes >= budget {
			break
		}
		n, err := run.warmFile(ctx, &t.Entries[i], field, budget-w.Bytes)
		if err != nil {
			return w, err
		}
		w.Files++
		w.Bytes += n
	}
	return w, nil
}

// plan is a lookup up to the reading of range files: the index snapshot
// it reads, the predicate resolved, the reconciliation of a lagging index.
func (p *Planner) plan(ctx context.Context, tbl Table, md *format.Metadata, q Query) (*run, *format.Snapshot, error) {
	v := tbl.View()
	pt := p.prepareTable(md, v)
	if pt.check != nil {
		return nil, nil, pt.check
	}
	pred, err := q.predicate()
	if err != nil {
		return nil, nil, err
	}
	ch, err := pt.choose(v, md, q.TableSnapshotID)
	if err != nil {
		return nil, nil, err
	}
	target, snap, src, behind := ch.target, ch.snap, ch.source, ch.behind
	targetSchema, sourceSchema := ch.targetSchema, ch.sourceSchema
	pr, err := pt.prepare(md, targetSchema, sourceSchema)
	if err != nil {
		return nil, nil, err
	}
	if pr.isErr != nil {
		return nil, nil, fmt.Errorf("resolve index %s against table snapshot %d: %w", md.IndexUUID, target.ID, pr.isErr)
	}
	r, err := resolve(pred, pr.is, targetSchema, sourceSchema)
	if err != nil {
		return nil, nil, err
	}
	if behind > 0 && !pr.is.HasLocation() {
		return nil, nil, fmt.Errorf("index snapshot %d is for table snapshot %d, %d commits before %d: %w",
			snap.SnapshotID, src.ID, behind, target.ID, ErrCannotReconcile)
	}
	run := p.newRun(pr.columns, r, q.Limit)
	run.res.Plan = Plan{
		IndexUUID: md.IndexUUID, IndexSnapshotID: snap.SnapshotID, SourceSnapshotID: src.ID,
		TableSnapshotID: target.ID, CommitsBehind: behind, Predicate: pred.String(),
	}
	if behind > 0 {
		if err := run.reconcile(ctx, tbl, md, src.ID, target.ID, targetSchema); err != nil {
			run.res.Release()
			return nil, nil, fmt.Errorf("index snapshot %d is for table snapshot %d, %d commits before %d: %w",
				snap.SnapshotID, src.ID, behind, target.ID, err)
		}
	}
	return run, snap, nil
}

// chooseSnapshot walks from the target table snapshot to its ancestors and
// returns the newest index snapshot built for one of them, that table
// snapshot and how many commits lie between it and the target.
func chooseSnapshot(v *tablemeta.View, md *format.Metadata, target *tablemeta.Snapshot) (*format.Snapshot, *tablemeta.Snapshot, int, error) {
	for behind, s := range v.Ancestors(target) {
		if snaps := md.SnapshotsForSource(s.ID); len(snaps) > 0 {
			return snaps[0], s, behind, nil
		}
	}
	return nil, nil, 0, fmt.Errorf("table snapshot %d: %w", target.ID, ErrNoIndexSnapshot)
}
