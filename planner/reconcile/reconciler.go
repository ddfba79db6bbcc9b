package reconcile

import (
	"context"
	"fmt"
	"sync"

	"github.com/RoaringBitmap/roaring/v2/roaring64"
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/iceberg-go"
	iceio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"

	"github.com/streamidx/streamidx/format"
	"github.com/streamidx/streamidx/internal/tablescan"
	"github.com/streamidx/streamidx/planner/source"
)

// reconciler makes the answer of an index snapshot built for table
// snapshot S exact for a later snapshot T that descends from S. The index
// holds exactly the live rows of S, so a match is still live at T unless
// its data file was removed or its row was deleted, by a position delete,
// a deletion vector or an equality delete that applies at T; rows added
// since S live in data files that S did not have, which are scanned.
type reconciler struct {
	fs      iceio.IO
	schema  *iceberg.Schema // of T
	opts    tablescan.Options
	deletes *tablescan.DeleteIndex // the delete files of T
	// sinceFrom is deletes less the equality delete files of S: what
	// decides whether a row of the index is still live at T.
	sinceFrom *tablescan.DeleteIndex
	live      map[string]tablescan.Entry // data files live at T, by path
	added     []tablescan.Entry          // live at T, not at S, in manifest order
	removed   int                        // live at S, not at T
	is        *format.IndexSchema

	// A reconciler is kept in the store's lookup cache and shared by the
	// lookups of one index snapshot and table snapshot: what it learns is
	// kept under mu.
	mu    sync.Mutex
	state map[string]*fileState // deletes at T of files with matches
	// entries of the live rows of the added data files, once computed
	// (addedEntries); addedDone is set then.
	addedMu   sync.Mutex
	entries   []arrow.RecordBatch
	addedRows int64
	addedDone bool
	// shared is set on a reconciler kept in the cache.
	shared bool
}

// maxCachedAddedRows bounds the rows of added data files whose index
// entries a cached reconciler keeps; beyond it each lookup scans them.
const maxCachedAddedRows = 1 << 20

// fileState is what decides whether a row of a data file live at both S
// and T is still live at T.
type fileState struct {
	deletes *tablescan.FileDeletes
	// eqCols[k] are the stored columns holding the equality fields of
	// deletes.Equality[k], in its FieldIDs order.
	eqCols [][]int
	// livePos, when set, are the live positions at T, read from the data
	// file because some equality field is not stored in the index.
	livePos *roaring64.Bitmap
}

func newReconciler(ctx context.Context, tbl *table.Table, from, to *table.Snapshot, schema *iceberg.Schema, is *format.IndexSchema, mem memory.Allocator) (*reconciler, error) {
	fsys, err := tbl.FS(ctx)
	if err != nil {
		return nil, fmt.Errorf("open table io: %w", err)
	}
	rc := &reconciler{
		fs: fsys, schema: schema, live: map[string]tablescan.Entry{}, state: map[string]*fileState{}, is: is,
		opts: tablescan.Options{NameMapping: tbl.NameMapping(), FormatVersion: tbl.Metadata().Version(), Allocator: mem},
	}
	return rc, rc.plan(ctx, tbl, from, to)
}

// plan lists the data files live at T, those added and removed since S,
// and the delete files of T.
func (rc *reconciler) plan(ctx context.Context, tbl *table.Table, from, to *table.Snapshot) error {
	fsys := rc.fs
	toManifests, err := tablescan.ManifestList(fsys, to)
	if err != nil {
		return err
	}
	// Without a snapshot to start from (a table scan), every data file of
	// to is added.
	var fromManifests []iceberg.ManifestFile
	if from != nil {
		if fromManifests, err = tablescan.ManifestList(fsys, from); err != nil {
			return err
		}
	}
	// Manifests are immutable: one listed by both snapshots lists the same
	// live files in both, so only the manifests of one side can differ.
	shared := map[string]bool{}
	for _, m := range fromManifests {
		shared[m.FilePath()] = true
	}
	var candidates []tablescan.Entry
	for _, m := range toManifests {
		if m.ManifestContent() != iceberg.ManifestContentData {
			continue
		}
		own := !shared[m.FilePath()]
		entries, err := tablescan.LiveEntries(ctx, fsys, m)
		if err != nil {
			return err
		}
		for _, e := range entries {
			rc.live[e.File.FilePath()] = e
			if own {
				candidates = append(candidates, e)
			}
		}
	}
	toPaths := map[string]bool{}
	for _, m := range toManifests {
		toPaths[m.FilePath()] = true
	}
	old := map[string]bool{}
	for _, m := range fromManifests {
		if m.ManifestContent() != iceberg.ManifestContentData || toPaths[m.FilePath()] {
			continue
		}
		entries, err := tablescan.LiveEntries(ctx, fsys, m)
		if err != nil {
			return err
		}
		for _, e := range entries {
			p := e.File.FilePath()
			old[p] = true
			if _, ok := rc.live[p]; !ok {
				rc.removed++
			}
		}
	}
	for _, df := range candidates {
		if !old[df.File.FilePath()] {
			rc.added = append(rc.added, df)
		}
	}
	if rc.deletes, err = tablescan.PlanDeletes(ctx, tbl, to); err != nil {
		return err
	}
	rc.sinceFrom = rc.deletes
	if from == nil {
		return nil
	}
	// The rows of the index were live at S: an equality delete file of S
	// applied to them already or never will (both files keep their
	// sequence numbers). Not so for data added since, which a rewrite may
	// commit with an older sequence number than such a delete file.
	atFrom, err := tablescan.PlanDeletes(ctx, tbl, from)
	if err != nil {
		return err
	}
	rc.sinceFrom = rc.deletes.WithoutEqualityOf(atFrom)
	return nil
}

// shareEqualityDeletes makes both delete indexes load equality delete
// files through shared (see tablescan.DeleteIndex.ShareEqualityDeletes).
func (rc *reconciler) shareEqualityDeletes(shared tablescan.SharedEqualityDeletes) {
	rc.deletes.ShareEqualityDeletes(shared)
	rc.sinceFrom.ShareEqualityDeletes(shared)
}

// Removed counts the data files live at S and not at T.
func (rc *reconciler) Removed() int { return rc.removed }

// Added lists the data files live at T and not at S.
func (rc *reconciler) Added() []string {
	if len(rc.added) == 0 {
		return nil
	}
	out := make([]string, len(rc.added))
	for i, df := range rc.added {
		out[i] = df.File.FilePath()
	}
	return out
}

// Drop clears keep[i] for the kept rows of an index batch whose row is no
// longer live at T, and returns how many it cleared.
func (rc *reconciler) Drop(ctx context.Context, sc *source.Columns, b arrow.RecordBatch, keep []bool) (int64, error) {
	files, ok1 := b.Column(sc.FileCol).(*array.String)
	positions, ok2 := b.Column(sc.PosCol).(*array.Int64)
	if !ok1 || !ok2 {
		return 0, fmt.Errorf("reconcile: _file and _pos columns are %s and %s", b.Column(sc.FileCol).DataType(), b.Column(sc.PosCol).DataType())
	}
	var dropped int64
	for i := range keep {
		if !keep[i] {
			continue
		}
		live, err := rc.isLive(ctx, sc, files.Value(i), positions.Value(i), b, i)
		if err != nil {
			return dropped, err
		}
		if !live {
			keep[i] = false
			dropped++
		}
	}
	return dropped, nil
}

func (rc *reconciler) isLive(ctx context.Context, sc *source.Columns, path string, pos int64, b arrow.RecordBatch, row int) (bool, error) {
	df, ok := rc.live[path]
	if !ok {
		return false, nil
	}
	st, err := rc.fileState(ctx, sc, df)
	if err != nil {
		return false, err
	}
	if st.livePos != nil {
		return st.livePos.Contains(uint64(pos)), nil
	}
	if st.deletes.Positions != nil && st.deletes.Positions.Contains(uint64(pos)) {
		return false, nil
	}
	for k, set := range st.deletes.Equality {
		tuple := make(format.Key, len(st.eqCols[k]))
		for j, c := range st.eqCols[k] {
			tuple[j] = format.ValueAtAs(sc.Fields[c].Type, b.Column(c), row)
		}
		deleted, err := set.Contains(tuple)
		if err != nil {
			return false, fmt.Errorf("reconcile %s: %w", path, err)
		}
		if deleted {
			return false, nil
		}
	}
	return true, nil
}

// fileState loads the deletes that apply at T to a data file. Equality
// deletes are tested on the entry's stored values when the index stores
// every equality field with the table's type; otherwise the file's live
// positions are read once.
func (rc *reconciler) fileState(ctx context.Context, sc *source.Columns, df tablescan.Entry) (*fileState, error) {
	path := df.File.FilePath()
	rc.mu.Lock()
	st, ok := rc.state[path]
	rc.mu.Unlock()
	if ok {
		return st, nil
	}
	deletes, err := rc.sinceFrom.Load(ctx, rc.fs, rc.schema, df.File, df.Seq, rc.opts)
	if err != nil {
		return nil, err
	}
	st = &fileState{deletes: deletes}
	for _, set := range deletes.Equality {
		cols, ok := rc.storedColumns(sc, set.FieldIDs)
		if !ok {
			if st.livePos, err = rc.livePositions(ctx, df, deletes); err != nil {
				return nil, err
			}
			break
		}
		st.eqCols = append(st.eqCols, cols)
	}
	rc.mu.Lock()
	rc.state[path] = st
	rc.mu.Unlock()
	return st, nil
}

// storedColumns finds the stored columns that hold source fields ids with
// the table snapshot's types.
func (rc *reconciler) storedColumns(sc *source.Columns, ids []int) ([]int, bool) {
	cols := make([]int, len(ids))
	for i, id := range ids {
		fid, ok := sc.Exact[id]
		if !ok {
			return nil, false
		}
		sf, ok := rc.schema.FindFieldByID(id)
		f, _ := rc.is.Field(fid)
		if !ok || !sf.Type.Equals(f.Type) {
			return nil, false
		}
		cols[i] = sc.ColOf[fid]
	}
	return cols, true
}

// livePositions reads the positions of a data file's live rows at T.
func (rc *reconciler) livePositions(ctx context.Context, df tablescan.Entry, deletes *tablescan.FileDeletes) (*roaring64.Bitmap, error) {
	live := roaring64.New()
	opts := rc.opts
	opts.Columns = []int{format.FieldIDPos}
	err := tablescan.ScanFile(ctx, rc.fs, rc.schema, df.File, deletes, opts, func(b arrow.RecordBatch) error {
		for _, p := range b.Column(0).(*array.Int64).Int64Values() {
			live.Add(uint64(p))
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read live positions of %s: %w", df.File.FilePath(), err)
	}
	return live, nil
}

// ScanAdded reads the data files added after S, computes the index entries
// of their live rows and calls fn with them. A cached reconciler computes
// the entries once and hands them to every lookup.
func (rc *reconciler) ScanAdded(ctx context.Context, sc *source.Columns, mem memory.Allocator, onFile func(), onRows func(int64), fn func(stored arrow.RecordBatch) error) error {
	if rc.shared {
		entries, rows, ok, err := rc.addedEntries(ctx, sc)
		if err != nil {
			return err
		}
		if ok {
			for range rc.added {
				onFile()
			}
			onRows(rows)
			for _, b := range entries {
				if err := fn(b); err != nil {
					return err
				}
			}
			return nil
		}
	}
	return rc.eachAdded(ctx, sc, mem, onFile, func(src, stored arrow.RecordBatch) error {
		onRows(src.NumRows())
		return fn(stored)
	})
}

// addedEntries returns the stored fields of the index entries of the live
// rows of the added data files, computed on first use and kept, and the
// rows read for them; ok is false when the added files hold more than
// maxCachedAddedRows rows, which each lookup scans instead.
func (rc *reconciler) addedEntries(ctx context.Context, sc *source.Columns) (entries []arrow.RecordBatch, rows int64, ok bool, err error) {
	rc.addedMu.Lock()
	defer rc.addedMu.Unlock()
	if rc.addedDone {
		return rc.entries, rc.addedRows, true, nil
	}
	var total int64
	for _, df := range rc.added {
		total += df.File.Count()
	}
	if total > maxCachedAddedRows {
		return nil, 0, false, nil
	}
	err = rc.eachAdded(ctx, sc, memory.DefaultAllocator, func() {}, func(src, stored arrow.RecordBatch) error {
		stored.Retain()
		entries = append(entries, stored)
		rows += src.NumRows()
		return nil
	})
	if err != nil {
		for _, b := range entries {
			b.Release()
		}
		return nil, 0, false, err
	}
	rc.entries, rc.addedRows, rc.addedDone = entries, rows, true
	return entries, rows, true, nil
}

// eachAdded calls fn with every batch of live rows of the added data files
// and the stored fields of their index entries, allocated with mem, and
// onFile before it reads each file.
func (rc *reconciler) eachAdded(ctx context.Context, sc *source.Columns, mem memory.Allocator, onFile func(), fn func(src, stored arrow.RecordBatch) error) error {
	cols, err := tablescan.TopLevelColumns(rc.schema, rc.is.SourceFieldIDs())
	if err != nil {
		return err
	}
	opts := rc.opts
	opts.Columns = cols
	opts.Allocator = mem
	for _, df := range rc.added {
		deletes, err := rc.deletes.Load(ctx, rc.fs, rc.schema, df.File, df.Seq, rc.opts)
		if err != nil {
			return err
		}
		onFile()
		err = tablescan.ScanFile(ctx, rc.fs, rc.schema, df.File, deletes, opts, func(src arrow.RecordBatch) error {
			entries, err := format.Entries(mem, rc.is, format.RecordColumns(src, rc.schema))
			if err != nil {
				return fmt.Errorf("index entries of %s: %w", df.File.FilePath(), err)
			}
			defer entries.Release()
			stored := sc.StoredOf(entries)
			defer stored.Release()
			return fn(src, stored)
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// size estimates the memory a cached reconciler holds: its lists of data
// and delete files and the entries of the added files it keeps (the
// content of equality delete files is cached apart, by file; deletion
// vectors and position deletes of the files with matches are small).
func (rc *reconciler) size() int64 {
	var added int64
	for _, df := range rc.added {
		added += df.File.Count()
	}
	return int64(len(rc.live)+rc.deletes.Len())*512 + min(added, maxCachedAddedRows)*int64(24+16*len(rc.is.StoredSchema().Fields()))
}
