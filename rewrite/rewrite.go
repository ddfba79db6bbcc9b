package rewrite

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"

	"github.com/streamidx/streamidx/format"
	"github.com/streamidx/streamidx/indexcatalog"
	"github.com/streamidx/streamidx/internal/lineage"
	"github.com/streamidx/streamidx/internal/objstore"
	"github.com/streamidx/streamidx/planner"
)

// ErrIndexLags is returned (wrapped, with the lag) when the index does not
// describe the table's current snapshot and Options.Align is not set or
// could not catch up.
var ErrIndexLags = errors.New("the index does not describe the table's current snapshot")

// ErrNoLocationIndex is returned (wrapped) when the table has no index that
// stores row locations (_file and _pos), or the named index stores none.
var ErrNoLocationIndex = errors.New("no index with _file and _pos")

// ErrConflict is returned (wrapped) when other writers kept changing what
// the rewrite touches through every attempt: nothing was committed and
// every file the rewrite wrote was removed.
var ErrConflict = errors.New("the table kept changing under the rewrite")

// Options tune Run.
type Options struct {
	// Index names the index to resolve through; it must store _file and
	// _pos. Default: "", the table's first index (by name) that does.
	Index string
	// DryRun plans and reports without writing or committing anything.
	// Default: false.
	DryRun bool
	// MinFiles is the number of live equality delete files below which
	// Run does nothing. Default: 1.
	MinFiles int
	// MaxAttempts bounds the plans (and commits) tried while other writers
	// commit conflicting changes. Default: 5.
	MaxAttempts int
	// Align brings the named index up to the table's current snapshot (the
	// updater's steps); Run calls it when the index lags, and after its
	// commit so the index covers the rewrite. Default: nil, a lagging
	// index is refused with ErrIndexLags.
	Align func(ctx context.Context, index string) error
	// AtIndexed plans on the table snapshot the index's current snapshot
	// describes when the table has moved on from it (that snapshot must be
	// an ancestor of the table's head), instead of bringing the index up
	// first: the rewrite then needs nothing from the updater and runs
	// beside it, as the daemon's do. Before writing, the plan is checked
	// against the head the way it is after another writer's commit (see
	// the package documentation). Default: false.
	AtIndexed bool
	// Store reads the index's files. Default: local files.
	Store *objstore.Store
	// Logger. Default: discard.
	Logger *slog.Logger

	// beforeCommit runs before every commit attempt: tests commit as
	// another writer there. Default: nil.
	beforeCommit func()
}

func (o *Options) ensureDefaults() {
	if o.MinFiles <= 0 {
		o.MinFiles = 1
	}
	if o.MaxAttempts <= 0 {
		o.MaxAttempts = 5
	}
	if o.Store == nil {
		o.Store = objstore.Local()
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
}

// Result says what a rewrite planned and did. It is the dry run's report
// and the stats the daemon turns into metrics.
type Result struct {
	Table string `json:"table"`
	Index string `json:"index,omitempty"`
	// SnapshotID is the table snapshot the committed (or dry-run) plan was
	// made on; CommittedSnapshotID the snapshot the commit made current (0
	// when nothing was committed).
	SnapshotID          int64 `json:"snapshot-id"`
	CommittedSnapshotID int64 `json:"committed-snapshot-id,omitempty"`
	// CommittedOn is the parent of CommittedSnapshotID: SnapshotID, or a
	// later head when other writers committed after the plan's snapshot
	// (whose own equality deletes the plan did not see).
	CommittedOn int64 `json:"committed-on-snapshot-id,omitempty"`
	DryRun      bool  `json:"dry-run"`
	// Skipped says why nothing was planned ("" when something was).
	Skipped string `json:"skipped,omitempty"`
	// EqualityFiles are the live equality delete files of the snapshot;
	// DataFiles the data files that get new position deletes.
	EqualityFiles []EqualityFile `json:"equality-files"`
	DataFiles     []DataFile     `json:"data-files"`
	// EqualityFilesRemoved and DeleteFilesReplaced (deletion vectors and
	// position delete files) are what the commit removed; DeleteFilesWritten
	// and BytesWritten what it wrote; PositionsAdded the positions deleted
	// by position that were deleted by equality before.
	EqualityFilesRemoved int   `json:"equality-files-removed"`
	DeleteFilesReplaced  int   `json:"delete-files-replaced"`
	DeleteFilesWritten   int   `json:"delete-files-written"`
	BytesWritten         int64 `json:"bytes-written"`
	PositionsAdded       int64 `json:"positions-added"`
	// IndexEntriesRead counts the index entries read to find the live
	// positions of the data files that get new position deletes: the whole
	// index, or when the index is clustered by a column whose bounds the
	// data files record, the part their bounds cover.
	IndexEntriesRead int64 `json:"index-entries-read"`
	// Attempts counts plans made; Conflicts the commits that met another
	// writer's commit (each followed by a check of the plan against it).
	Attempts  int `json:"attempts"`
	Conflicts int `json:"conflicts"`
	// Took is the time from the start to the commit (or the dry run's
	// report), without bringing the index up to the rewrite after it.
	Took time.Duration `json:"took-ns"`
}

// EqualityFile is one equality delete file of the planned snapshot.
type EqualityFile struct {
	Path string `json:"path"`
	// Rows are the delete file's rows (deleted key tuples).
	Rows int64 `json:"rows"`
	// DataFilesTouched are the data files it applies to that get new
	// position deletes.
	DataFilesTouched int `json:"data-files-touched"`
}

// DataFile is one data file that gets new position deletes.
type DataFile struct {
	Path string `json:"path"`
	// PositionsAdded are the positions newly deleted by position; Deleted
	// all positions its new deletion vector (or position deletes) holds.
	PositionsAdded int64 `json:"positions-added"`
	Deleted        int64 `json:"deleted"`
}

// Run rewrites the live equality delete files of table's current snapshot
// into position deletes through an index that stores row locations, as
// the package documentation describes. A table without equality delete
// files (or with fewer than Options.MinFiles) is left alone and reported
// as skipped.
func Run(ctx context.Context, cat catalog.Catalog, indexes indexcatalog.Catalog, id table.Identifier, opts Options) (*Result, error) {
	opts.ensureDefaults()
	began := time.Now()
	res := &Result{Table: strings.Join(id, "."), DryRun: opts.DryRun}
	defer func() {
		if res.Took == 0 {
			res.Took = time.Since(began)
		}
	}()
	log := opts.Logger.With("table", res.Table)
	for res.Attempts < opts.MaxAttempts {
		res.Attempts++
		p, err := prepare(ctx, cat, indexes, id, &opts, res)
		if err != nil || p == nil {
			return res, err
		}
		res.SnapshotID = p.snap.SnapshotID
		p.report(res)
		if opts.DryRun {
			return res, nil
		}
		done, err := p.execute(ctx, cat, id, res, &opts, log)
		if err != nil {
			return res, err
		}
		if !done {
			continue
		}
		res.Took = time.Since(began)
		if opts.Align != nil {
			if err := opts.Align(ctx, res.Index); err != nil {
				return res, fmt.Errorf("bring index %s up to the rewrite: %w", res.Index, err)
			}
		}
		log.Info("equality deletes rewritten", "index", res.Index, "snapshot", res.CommittedSnapshotID,
			"equality_files_removed", res.EqualityFilesRemoved, "positions", res.PositionsAdded,
			"files_written", res.DeleteFilesWritten, "bytes", res.BytesWritten, "index_entries_read", res.IndexEntriesRead, "attempts", res.Attempts)
		return res, nil
	}
	return res, fmt.Errorf("rewrite equality deletes of %s: %w (%d attempts)", res.Table, ErrConflict, res.Attempts)
}

// prepare loads the table, picks the index, makes sure it describes the
// table snapshot to plan on (the current one, or with Options.AtIndexed an
// ancestor of it) and plans on it; nil when there is nothing to do
// (res.Skipped says why).
func prepare(ctx context.Context, cat catalog.Catalog, indexes indexcatalog.Catalog, id table.Identifier, opts *Options, res *Result) (*plan, error) {
	aligned := false
	for {
		tbl, err := cat.LoadTable(ctx, id)
		if err != nil {
			return nil, fmt.Errorf("load table %s: %w", res.Table, err)
		}
		if v := tbl.Metadata().Version(); v < 2 {
			return nil, fmt.Errorf("table %s has format version %d: only v2 and v3 tables have delete files", res.Table, v)
		}
		head := tbl.CurrentSnapshot()
		if head == nil {
			res.Skipped = "the table has no snapshot"
			return nil, nil
		}
		var (
			name string
			md   *format.Metadata
		)
		snap := head
		if opts.AtIndexed {
			if name, md, err = pickIndex(ctx, indexes, id, tbl, opts.Index); err != nil {
				return nil, err
			}
			if cur := md.CurrentSnapshot(); cur != nil && cur.SourceTableSnapshotID != head.SnapshotID &&
				lineage.IsAncestor(tbl, head.SnapshotID, cur.SourceTableSnapshotID) {
				snap = tbl.SnapshotByID(cur.SourceTableSnapshotID)
			}
		}
		eqFiles, err := equalityFiles(ctx, tbl, snap)
		if err != nil {
			return nil, err
		}
		if snap != head && len(eqFiles) > 0 && lineage.OnlyRewritesRemove(tbl, head, snap.SnapshotID) {
			// Those a rewrite since removed are done: planned on the
			// index's snapshot, the rewrite takes the rest.
			if eqFiles, err = stillLive(ctx, tbl, head, eqFiles); err != nil {
				return nil, err
			}
		}
		if len(eqFiles) == 0 || len(eqFiles) < opts.MinFiles {
			res.SnapshotID = snap.SnapshotID
			res.Skipped = fmt.Sprintf("%d live equality delete files, fewer than the minimum of %d", len(eqFiles), opts.MinFiles)
			if len(eqFiles) == 0 {
				res.Skipped = "no live equality delete files"
			}
			return nil, nil
		}
		if md == nil {
			if name, md, err = pickIndex(ctx, indexes, id, tbl, opts.Index); err != nil {
				return nil, err
			}
		}
		res.Index = name
		cur := md.CurrentSnapshot()
		if cur != nil && cur.SourceTableSnapshotID == snap.SnapshotID {
			is, err := format.NewIndexSchema(md, lineage.SnapshotSchema(tbl, snap))
			if err != nil {
				return nil, err
			}
			t, _, err := opts.Store.ReadTracking(ctx, md, cur, is)
			if err != nil {
				return nil, err
			}
			reader := planner.NewSnapshotReader(opts.Store, is, t.Entries)
			return planOn(ctx, tbl, snap, eqFiles, reader)
		}
		lag := describeLag(tbl, snap, cur)
		if opts.Align == nil || aligned {
			return nil, fmt.Errorf("index %s of %s: %w: %s", name, res.Table, ErrIndexLags, lag)
		}
		opts.Logger.Info("bringing the index up to the table before the rewrite", "table", res.Table, "index", name, "lag", lag)
		if err := opts.Align(ctx, name); err != nil {
			return nil, fmt.Errorf("bring index %s up to the table: %w", name, err)
		}
		// One alignment per plan: a table that commits faster than the
		// index follows is reported, not chased forever.
		aligned = true
	}
}

// describeLag names how far the index is behind the table.
func describeLag(tbl *table.Table, snap *table.Snapshot, cur *format.Snapshot) string {
	if cur == nil {
		return fmt.Sprintf("it has no snapshot yet; the table is at snapshot %d (build the index first)", snap.SnapshotID)
	}
	if chain, ok := lineage.Since(tbl, snap, cur.SourceTableSnapshotID); ok {
		return fmt.Sprintf("it covers table snapshot %d, the table is at %d, %d snapshots ahead (run `streamidx run --once` or let the daemon catch up)",
			cur.SourceTableSnapshotID, snap.SnapshotID, len(chain))
	}
	return fmt.Sprintf("it covers table snapshot %d, which is not an ancestor of the table's current snapshot %d (rebuild the index)",
		cur.SourceTableSnapshotID, snap.SnapshotID)
}

// pickIndex loads the named index, or the table's first index that stores
// row locations.
func pickIndex(ctx context.Context, indexes indexcatalog.Catalog, id table.Identifier, tbl *table.Table, name string) (string, *format.Metadata, error) {
	names := []string{name}
	if name == "" {
		var err error
		if names, err = indexes.List(ctx, id); err != nil {
			return "", nil, fmt.Errorf("list indexes: %w", err)
		}
	}
	for _, n := range names {
		md, _, err := indexes.Load(ctx, id, n)
		if err != nil {
			if name == "" && errors.Is(err, format.ErrUnsupportedIndexType) {
				continue
			}
			return "", nil, fmt.Errorf("load index %s: %w", n, err)
		}
		if err := format.CheckTable(md, lineage.View(tbl)); err != nil {
			return "", nil, err
		}
		is, err := format.NewIndexSchema(md, tbl.Schema())
		if err != nil {
			return "", nil, fmt.Errorf("index %s: %w", n, err)
		}
		if is.HasLocation() {
			return n, md, nil
		}
		if name != "" {
			return "", nil, fmt.Errorf("index %s: %w: it cannot tell which rows are live where", name, ErrNoLocationIndex)
		}
	}
	return "", nil, fmt.Errorf("table %s: %w (define one with materialized: [_file, _pos])", strings.Join(id, "."), ErrNoLocationIndex)
}
