package rewrite

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/RoaringBitmap/roaring/v2/roaring64"
	"github.com/apache/iceberg-go"
	iceio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"
	"github.com/apache/iceberg-go/table/dv"

	"github.com/streamidx/streamidx/format"
	"github.com/streamidx/streamidx/internal/tablescan"
	"github.com/streamidx/streamidx/planner"
)

// plan is a rewrite planned on one table snapshot.
type plan struct {
	tbl  *table.Table
	snap *table.Snapshot
	fs   iceio.IO
	// eqFiles are the equality delete files to remove, with their data
	// sequence numbers.
	eqFiles []tablescan.DeleteFile
	// targets are the data files an equality delete applies to, by
	// location.
	targets map[string]*target
	// replacedDVs are the live deletion vectors of targets that get a new
	// one; replacedPos the position delete files that name only targets
	// getting new position deletes (or files no longer live).
	replacedDVs, replacedPos []iceberg.DataFile
	// touched counts, per equality delete file, the targets it applies to
	// that get new position deletes.
	touched map[string]int
	// entriesRead counts the index entries read to find the live positions.
	entriesRead int64
}

// target is a data file that some equality delete applies to.
type target struct {
	file iceberg.DataFile
	seq  int64
	// posDeletes are the position delete files and deletion vector that
	// apply to it, by location: what a concurrent writer must not change.
	posDeletes []string
	// deleted is every position its rows are deleted at in the snapshot:
	// the existing position deletes and the positions the index does not
	// hold. added counts those that were deleted by equality only.
	deleted *roaring64.Bitmap
	added   int64
	// eqs are the equality delete files of the plan that apply to it.
	eqs []string
}

// equalityFiles lists the live equality delete files of snap.
func equalityFiles(ctx context.Context, tbl *table.Table, snap *table.Snapshot) ([]tablescan.DeleteFile, error) {
	fs, err := tbl.FS(ctx)
	if err != nil {
		return nil, fmt.Errorf("open table io: %w", err)
	}
	manifests, err := snap.Manifests(fs)
	if err != nil {
		return nil, fmt.Errorf("read manifest list of snapshot %d: %w", snap.SnapshotID, err)
	}
	var out []tablescan.DeleteFile
	for _, m := range manifests {
		if m.ManifestContent() != iceberg.ManifestContentDeletes {
			continue
		}
		for e, err := range m.Entries(fs, true) {
			if err != nil {
				return nil, fmt.Errorf("read delete manifest %s: %w", m.FilePath(), err)
			}
			if df := e.DataFile(); df.ContentType() == iceberg.EntryContentEqDeletes {
				out = append(out, tablescan.DeleteFile{File: df, Seq: e.SequenceNum()})
			}
		}
	}
	slices.SortFunc(out, func(a, b tablescan.DeleteFile) int { return cmp.Compare(a.File.FilePath(), b.File.FilePath()) })
	return out, nil
}

// stillLive keeps the equality delete files of eqFiles that are live in
// head.
func stillLive(ctx context.Context, tbl *table.Table, head *table.Snapshot, eqFiles []tablescan.DeleteFile) ([]tablescan.DeleteFile, error) {
	atHead, err := equalityFiles(ctx, tbl, head)
	if err != nil {
		return nil, err
	}
	live := make(map[string]bool, len(atHead))
	for _, d := range atHead {
		live[d.File.FilePath()] = true
	}
	return slices.DeleteFunc(eqFiles, func(d tablescan.DeleteFile) bool { return !live[d.File.FilePath()] }), nil
}

// liveFiles is what a snapshot holds: data files by location with their
// data sequence numbers, the delete index, and the live delete files.
type liveFiles struct {
	data    map[string]tablescan.DeleteFile // a data file and its sequence number
	deletes *tablescan.DeleteIndex
	live    map[string]bool             // every live data and delete file location
	dvs     map[string]iceberg.DataFile // live deletion vectors by data file
	posFile []iceberg.DataFile          // live Parquet position delete files
}

func readLive(ctx context.Context, tbl *table.Table, fs iceio.IO, snap *table.Snapshot) (*liveFiles, error) {
	deletes, err := tablescan.PlanDeletes(ctx, tbl, snap)
	if err != nil {
		return nil, err
	}
	lf := &liveFiles{data: map[string]tablescan.DeleteFile{}, deletes: deletes, live: map[string]bool{}, dvs: map[string]iceberg.DataFile{}}
	manifests, err := snap.Manifests(fs)
	if err != nil {
		return nil, fmt.Errorf("read manifest list of snapshot %d: %w", snap.SnapshotID, err)
	}
	for _, m := range manifests {
		for e, err := range m.Entries(fs, true) {
			if err != nil {
				return nil, fmt.Errorf("read manifest %s: %w", m.FilePath(), err)
			}
			df := e.DataFile()
			lf.live[df.FilePath()] = true
			switch {
			case df.ContentType() == iceberg.EntryContentData:
				lf.data[df.FilePath()] = tablescan.DeleteFile{File: df, Seq: e.SequenceNum()}
			case df.ContentType() != iceberg.EntryContentPosDeletes:
			case df.FileFormat() == iceberg.PuffinFile && df.ReferencedDataFile() != nil:
				lf.dvs[*df.ReferencedDataFile()] = df
			default:
				lf.posFile = append(lf.posFile, df)
			}
		}
	}
	return lf, nil
}

// planOn plans the rewrite of eqFiles on snap, with reader reading the
// index snapshot of snap.
func planOn(ctx context.Context, tbl *table.Table, snap *table.Snapshot, eqFiles []tablescan.DeleteFile, reader *planner.SnapshotReader) (*plan, error) {
	fs, err := tbl.FS(ctx)
	if err != nil {
		return nil, fmt.Errorf("open table io: %w", err)
	}
	lf, err := readLive(ctx, tbl, fs, snap)
	if err != nil {
		return nil, err
	}
	p := &plan{tbl: tbl, snap: snap, fs: fs, eqFiles: eqFiles, targets: map[string]*target{}, touched: map[string]int{}}
	schema := tbl.Schema()
	inPlan := make(map[string]bool, len(eqFiles))
	for _, d := range eqFiles {
		inPlan[d.File.FilePath()] = true
	}
	for path, ref := range lf.data {
		var eqs, pos []string
		for _, d := range lf.deletes.Applicable(ref.File, ref.Seq) {
			if d.File.ContentType() == iceberg.EntryContentEqDeletes {
				// A delete whose keys the data file's cannot be deletes
				// nothing there (a tail upsert's delete and the older data
				// files of other key ranges): the file is no target. Nor
				// is one only deletes left out of the plan apply to (a
				// rewrite since removed them).
				if inPlan[d.File.FilePath()] && tablescan.EqualityMayDelete(schema, d.File, ref.File) {
					eqs = append(eqs, d.File.FilePath())
				}
			} else {
				pos = append(pos, d.File.FilePath())
			}
		}
		if len(eqs) == 0 {
			continue
		}
		slices.Sort(pos)
		p.targets[path] = &target{file: ref.File, seq: ref.Seq, posDeletes: pos, eqs: eqs}
	}
	// Each target's key bounds narrow the entries read to the range files
	// and row groups that may hold its rows.
	wanted := make(map[string]*planner.KeyBounds, len(p.targets))
	for path, t := range p.targets {
		wanted[path] = reader.KeyBoundsOf(t.file)
	}
	live, err := reader.LivePositions(ctx, wanted)
	if err != nil {
		return nil, err
	}
	p.entriesRead = reader.RowsRead()
	opts := tablescan.Options{FormatVersion: tbl.Metadata().Version(), NameMapping: tbl.NameMapping()}
	posFiles := positionFiles{}
	for path, t := range p.targets {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		var dels []iceberg.DataFile
		for _, d := range lf.deletes.Applicable(t.file, t.seq) {
			if d.File.ContentType() == iceberg.EntryContentPosDeletes {
				dels = append(dels, d.File)
			}
		}
		existing, err := posFiles.union(ctx, fs, dels, path, opts)
		if err != nil {
			return nil, err
		}
		rows := uint64(max(t.file.Count(), 0))
		l := live[path]
		if !l.IsEmpty() && l.Maximum() >= rows {
			return nil, fmt.Errorf("index %w: it holds position %d of %s, which has %d rows", errNotDescribing, l.Maximum(), path, rows)
		}
		if roaring64.And(l, existing).GetCardinality() > 0 {
			return nil, fmt.Errorf("index %w: it holds rows of %s that position deletes delete", errNotDescribing, path)
		}
		t.deleted = roaring64.New()
		t.deleted.AddRange(0, rows)
		t.deleted.AndNot(l)
		t.deleted.Or(existing)
		t.added = int64(t.deleted.GetCardinality() - existing.GetCardinality())
		if t.added > 0 {
			for _, eq := range t.eqs {
				p.touched[eq]++
			}
		}
	}
	if tbl.Metadata().Version() >= 3 {
		for path, t := range p.targets {
			if old, ok := lf.dvs[path]; ok && t.added > 0 {
				p.replacedDVs = append(p.replacedDVs, old)
			}
		}
	}
	if err := p.planReplacedPositionFiles(ctx, lf, opts); err != nil {
		return nil, err
	}
	return p, nil
}

// positionFiles reads each Parquet position delete file once, however many
// data files it names.
type positionFiles map[string]map[string]*dv.RoaringPositionBitmap

func (pf positionFiles) positions(ctx context.Context, fs iceio.IO, del iceberg.DataFile, path string, opts tablescan.Options) (*dv.RoaringPositionBitmap, error) {
	if del.FileFormat() == iceberg.PuffinFile {
		return tablescan.ReadPositions(ctx, fs, del, path, opts)
	}
	byFile, ok := pf[del.FilePath()]
	if !ok {
		var err error
		if byFile, err = tablescan.ReadPositionDeleteFile(ctx, fs, del, opts); err != nil {
			return nil, err
		}
		pf[del.FilePath()] = byFile
	}
	return byFile[path], nil
}

// union returns every position of the data file at path that dels
// delete.
func (pf positionFiles) union(ctx context.Context, fs iceio.IO, dels []iceberg.DataFile, path string, opts tablescan.Options) (*roaring64.Bitmap, error) {
	out := roaring64.New()
	for _, del := range dels {
		bm, err := pf.positions(ctx, fs, del, path, opts)
		if err != nil {
			return nil, err
		}
		more, err := tablescan.FromDV(bm)
		if err != nil {
			return nil, err
		}
		out.Or(more)
	}
	return out, nil
}

// errNotDescribing words a contradiction between the index and the table
// it claims to describe; the rewrite refuses rather than bake it in.
var errNotDescribing = fmt.Errorf("%w: the index does not describe its table snapshot", format.ErrCorruption)

// planReplacedPositionFiles finds the Parquet position delete files that
// the new position deletes make redundant: every data file they name gets
// a complete new set, or is no longer live.
func (p *plan) planReplacedPositionFiles(ctx context.Context, lf *liveFiles, opts tablescan.Options) error {
	for _, df := range lf.posFile {
		byFile, err := tablescan.ReadPositionDeleteFile(ctx, p.fs, df, opts)
		if err != nil {
			return err
		}
		redundant, touchesNew := true, false
		for path := range byFile {
			if _, live := lf.data[path]; !live {
				continue
			}
			t, ok := p.targets[path]
			if !ok || t.added == 0 {
				redundant = false
				break
			}
			touchesNew = true
		}
		if redundant && touchesNew {
			p.replacedPos = append(p.replacedPos, df)
		}
	}
	return nil
}

// written lists the targets that get new position deletes, by location.
func (p *plan) written() []*target {
	var out []*target
	for _, t := range p.targets {
		if t.added > 0 {
			out = append(out, t)
		}
	}
	slices.SortFunc(out, func(a, b *target) int { return cmp.Compare(a.file.FilePath(), b.file.FilePath()) })
	return out
}

// report fills res with what the plan changes.
func (p *plan) report(res *Result) {
	res.EqualityFiles = res.EqualityFiles[:0]
	for _, d := range p.eqFiles {
		res.EqualityFiles = append(res.EqualityFiles, EqualityFile{
			Path: d.File.FilePath(), Rows: d.File.Count(), DataFilesTouched: p.touched[d.File.FilePath()],
		})
	}
	res.DataFiles = res.DataFiles[:0]
	res.PositionsAdded = 0
	res.IndexEntriesRead = p.entriesRead
	for _, t := range p.written() {
		res.DataFiles = append(res.DataFiles, DataFile{Path: t.file.FilePath(), PositionsAdded: t.added, Deleted: int64(t.deleted.GetCardinality())})
		res.PositionsAdded += t.added
	}
}
