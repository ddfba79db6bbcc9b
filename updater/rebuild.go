package updater

import (
	"context"
	"errors"
	"fmt"

	"github.com/streamidx/streamidx/flush"
	"github.com/streamidx/streamidx/format"
	"github.com/streamidx/streamidx/internal/lineage"
)

// Rebuild publishes a full build of the table's current snapshot on top of
// the index's current snapshot, without reading any file of the index: it
// is how a caller recovers an index whose tracking or range files are
// corrupt. The index metadata must load (a corrupt metadata file is still
// an error). An update voided by another writer is not an error, as in
// Step.
func (u *Updater) Rebuild(ctx context.Context, props PropertiesFunc) (Stats, error) {
	var st Stats
	md, _, err := u.indexes.Load(ctx, u.table, u.index)
	if err != nil {
		return st, err
	}
	tbl, err := u.cat.LoadTable(ctx, u.table)
	if err != nil {
		return st, fmt.Errorf("load table: %w", err)
	}
	if err := format.CheckTable(md, lineage.View(tbl)); err != nil {
		return st, err
	}
	st.Table = tbl
	target := tbl.CurrentSnapshot()
	if target == nil {
		st.Aligned = true
		return st, nil
	}
	st.Paused, err = u.gated(func() error { return u.fullBuild(ctx, tbl, md, target, props, &st) })
	if errors.Is(err, flush.ErrBaseMoved) {
		st.CommitConflicts++
		return st, nil
	}
	if err == nil {
		st.IndexedSnapshotID, st.Aligned = target.SnapshotID, true
	}
	return st, err
}
