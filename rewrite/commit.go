package rewrite

import (
	"context"
	"fmt"
	"log/slog"
	"slices"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"

	"github.com/streamidx/streamidx/internal/lineage"
	"github.com/streamidx/streamidx/internal/tablescan"
)

// snapshotProperty marks the snapshots a rewrite commits: indexes fed by
// change events move over them without events, since they change no row.
const snapshotProperty = lineage.RewriteDeletesProperty

// execute writes the plan's delete files and commits them. It reports
// false when another writer's commit invalidated the plan: the files are
// removed and the caller plans again.
func (p *plan) execute(ctx context.Context, cat catalog.Catalog, id table.Identifier, res *Result, opts *Options, log *slog.Logger) (bool, error) {
	if head := p.tbl.CurrentSnapshot(); head.SnapshotID != p.snap.SnapshotID {
		// Planned on an ancestor of the head (Options.AtIndexed): the
		// commits since must have left what the plan touches alone.
		lf, err := readLive(ctx, p.tbl, p.fs, head)
		if err != nil {
			return false, err
		}
		why := p.stillHolds(p.tbl, lf)
		if why != "" {
			rebased, err := p.rebase(ctx, head, lf)
			if err != nil {
				return false, err
			}
			if rebased {
				why = p.stillHolds(p.tbl, lf)
				p.report(res)
			}
		}
		if why != "" {
			// Planning again would plan on the same index snapshot.
			return false, fmt.Errorf("index %s of %s: %w: it covers table snapshot %d and since then %s",
				res.Index, res.Table, ErrIndexLags, p.snap.SnapshotID, why)
		}
	}
	w, err := p.writeDeletes(ctx)
	if err != nil {
		return false, err
	}
	tbl := p.tbl
	attempts := 0
	for {
		if opts.beforeCommit != nil {
			opts.beforeCommit()
		}
		committed, err := p.commit(ctx, tbl, w)
		if err == nil {
			p.done(res, w, committed)
			return true, nil
		}
		// A commit that met another writer's fails in the catalog (a
		// moved head, ErrCommitFailed) or already in the requirement
		// check (the branch changed): either way the head moved. A
		// failure that leaves the head where it was is no conflict.
		base := tbl.CurrentSnapshot().SnapshotID
		fresh, lerr := cat.LoadTable(ctx, id)
		if lerr != nil {
			// Whether the commit landed is unknown: keep the files.
			return false, fmt.Errorf("commit the rewrite of equality deletes: %w (reloading the table failed too: %v)", err, lerr)
		}
		if fresh.CurrentSnapshot() == nil || fresh.CurrentSnapshot().SnapshotID == base {
			w.remove(p.fs)
			return false, fmt.Errorf("commit the rewrite of equality deletes: %w", err)
		}
		lf, lerr := readLive(ctx, fresh, p.fs, fresh.CurrentSnapshot())
		if lerr != nil {
			return false, fmt.Errorf("commit the rewrite of equality deletes: %w (reading the table after it failed too: %v)", err, lerr)
		}
		if p.landed(lf, w) {
			// The catalog took the commit and reported a failure.
			p.done(res, w, fresh)
			return true, nil
		}
		res.Conflicts++
		tbl = fresh
		why := p.stillHolds(tbl, lf)
		if why != "" {
			log.Info("another writer changed what the rewrite touches; planning again", "reason", why)
			w.remove(p.fs)
			return false, nil
		}
		if attempts++; attempts >= opts.MaxAttempts {
			w.remove(p.fs)
			return false, nil
		}
		log.Debug("another writer committed first; the plan still holds, committing on its snapshot",
			"snapshot", tbl.CurrentSnapshot().SnapshotID)
	}
}

// rebase moves a plan made on an ancestor of head onto head, when no
// snapshot since but a rewrite's removed a file: then what changed since
// for the data files it writes deletes for is only more deletes (another
// rewrite's deletion vectors or position delete files, or a writer's), and
// each file's new deletes are the plan's positions with those of head
// added, replacing head's deletion vector and the position delete files
// that name nothing else (as planned on head). It reports false, and
// changes nothing, when a file was removed by another writer, or when a
// data file it writes for is gone or has another sequence number.
func (p *plan) rebase(ctx context.Context, head *table.Snapshot, lf *liveFiles) (bool, error) {
	if !lineage.OnlyRewritesRemove(p.tbl, head, p.snap.SnapshotID) {
		return false, nil
	}
	type move struct {
		t    *target
		dels []iceberg.DataFile // its position deletes at head
		pos  []string
	}
	var moves []move
	for path, t := range p.targets {
		ref, live := lf.data[path]
		if !live || ref.Seq != t.seq {
			return false, nil
		}
		var dels []iceberg.DataFile
		var pos []string
		for _, d := range lf.deletes.Applicable(ref.File, ref.Seq) {
			if d.File.ContentType() == iceberg.EntryContentPosDeletes {
				dels = append(dels, d.File)
				pos = append(pos, d.File.FilePath())
			}
		}
		slices.Sort(pos)
		if !slices.Equal(pos, t.posDeletes) {
			moves = append(moves, move{t: t, dels: dels, pos: pos})
		}
	}
	opts := tablescan.Options{FormatVersion: p.tbl.Metadata().Version(), NameMapping: p.tbl.NameMapping()}
	posFiles := positionFiles{}
	for _, m := range moves {
		existing, err := posFiles.union(ctx, p.fs, m.dels, m.t.file.FilePath(), opts)
		if err != nil {
			return false, err
		}
		m.t.deleted.Or(existing)
		m.t.added = int64(m.t.deleted.GetCardinality() - existing.GetCardinality())
		m.t.posDeletes = m.pos
	}
	p.replacedDVs, p.replacedPos = nil, nil
	clear(p.touched)
	for path, t := range p.targets {
		if t.added == 0 {
			continue
		}
		if dv, ok := lf.dvs[path]; ok && p.tbl.Metadata().Version() >= 3 {
			p.replacedDVs = append(p.replacedDVs, dv)
		}
		for _, eq := range t.eqs {
			p.touched[eq]++
		}
	}
	if err := p.planReplacedPositionFiles(ctx, lf, opts); err != nil {
		return false, err
	}
	return true, nil
}

// done records a committed rewrite in res.
func (p *plan) done(res *Result, w *written, committed *table.Table) {
	res.CommittedSnapshotID = committed.CurrentSnapshot().SnapshotID
	if parent := committed.CurrentSnapshot().ParentSnapshotID; parent != nil {
		res.CommittedOn = *parent
	}
	res.EqualityFilesRemoved = len(p.eqFiles)
	res.DeleteFilesReplaced = len(p.replacedDVs) + len(p.replacedPos)
	res.DeleteFilesWritten = len(w.files)
	res.BytesWritten = w.bytes
}

// landed reports whether the snapshot lf describes holds this rewrite's
// commit: its new files are live, or, when it wrote none, the equality
// delete files it removes are gone.
func (p *plan) landed(lf *liveFiles, w *written) bool {
	if len(w.paths) > 0 {
		return lf.live[w.paths[0]]
	}
	for _, d := range p.eqFiles {
		if lf.live[d.File.FilePath()] {
			return false
		}
	}
	return true
}

// commit stages the plan on tbl's current snapshot and commits it, on the
// condition that the head is still that snapshot.
func (p *plan) commit(ctx context.Context, tbl *table.Table, w *written) (*table.Table, error) {
	tx := tbl.NewTransaction()
	if err := tx.AssertRefSnapshotID(table.MainBranch); err != nil {
		return nil, err
	}
	props := iceberg.Properties{snapshotProperty: "true"}
	if len(w.files) > 0 {
		rd := tx.NewRowDelta(props).AddDeletes(w.files...)
		if len(p.replacedDVs) > 0 {
			rd.RemoveDeletes(p.replacedDVs...)
		}
		if err := rd.Commit(ctx); err != nil {
			return nil, fmt.Errorf("stage the new position deletes: %w", err)
		}
	}
	rw := tx.NewRewrite(props)
	for _, d := range p.eqFiles {
		rw.DeleteFile(d.File)
	}
	for _, df := range p.replacedPos {
		rw.DeleteFile(df)
	}
	if err := rw.Commit(ctx); err != nil {
		return nil, fmt.Errorf("stage the removal of equality delete files: %w", err)
	}
	return tx.Commit(ctx)
}

// stillHolds checks the plan against tbl's current snapshot, which another
// writer committed after the plan's: it still holds when every file it
// removes is live, every data file it writes deletes for is live with the
// same position deletes, and every data file an equality delete it removes
// applies to is one it covers. It returns why not, or "".
func (p *plan) stillHolds(tbl *table.Table, lf *liveFiles) string {
	snap := tbl.CurrentSnapshot()
	if !lineage.IsAncestor(tbl, snap.SnapshotID, p.snap.SnapshotID) {
		return fmt.Sprintf("snapshot %d does not descend from the planned snapshot %d", snap.SnapshotID, p.snap.SnapshotID)
	}
	for _, d := range p.eqFiles {
		if !lf.live[d.File.FilePath()] {
			return "equality delete file " + d.File.FilePath() + " was removed"
		}
	}
	for _, df := range slices.Concat(p.replacedDVs, p.replacedPos) {
		if !lf.live[df.FilePath()] {
			return "delete file " + df.FilePath() + " was removed"
		}
	}
	removed := map[string]bool{}
	for _, d := range p.eqFiles {
		removed[d.File.FilePath()] = true
	}
	schema := tbl.Schema()
	for path, ref := range lf.data {
		var pos []string
		applies := false
		for _, d := range lf.deletes.Applicable(ref.File, ref.Seq) {
			if d.File.ContentType() == iceberg.EntryContentEqDeletes {
				applies = applies || removed[d.File.FilePath()] && tablescan.EqualityMayDelete(schema, d.File, ref.File)
			} else {
				pos = append(pos, d.File.FilePath())
			}
		}
		t, planned := p.targets[path]
		if !applies && (!planned || t.added == 0) {
			continue
		}
		if !planned || t.seq != ref.Seq {
			return "data file " + path + " now has a removed equality delete applying to it"
		}
		slices.Sort(pos)
		if !slices.Equal(pos, t.posDeletes) {
			return "the position deletes of data file " + path + " changed"
		}
	}
	for path, t := range p.targets {
		if _, ok := lf.data[path]; !ok && t.added > 0 {
			return "data file " + path + " was removed"
		}
	}
	return ""
}
