package updater

import (
	"context"
	"sync"

	"github.com/apache/iceberg-go/table"

	"github.com/streamidx/streamidx/format"
	"github.com/streamidx/streamidx/internal/lineage"
	"github.com/streamidx/streamidx/planner"
)

// resolver resolves the equality deletes of a table delta base -> next
// through the index being updated and, for the fields it cannot answer
// (its leading cluster fields are not the equality fields: a bucketed
// index meets a primary-key upsert), through the table's other indexes at
// an index snapshot of exactly base. Without it, such an index reads every
// data file an equality delete applies to, on every commit: the whole of a
// CDC table's oldest files.
//
// Entries (ingest.EqualityEntryResolver) come from the index being updated
// only: a delete must name the entry as that index holds it. A peer that
// fails to answer (its files expired under it, say) is skipped with a
// warning: the delta then reads the data files, which is slower but exact.
type resolver struct {
	u    *Updater
	tbl  *table.Table
	base *table.Snapshot
	own  *planner.SnapshotReader

	once  sync.Once
	peers []*planner.SnapshotReader
}

func (u *Updater) newResolver(tbl *table.Table, base *table.Snapshot, own *planner.SnapshotReader) *resolver {
	return &resolver{u: u, tbl: tbl, base: base, own: own}
}

func (r *resolver) ResolveEquality(ctx context.Context, fieldIDs []int, tuples []format.Key) (map[string][]int64, bool, error) {
	if m, ok, err := r.own.ResolveEquality(ctx, fieldIDs, tuples); ok || err != nil {
		r.u.peersNeeded.Store(false)
		return m, ok, err
	}
	r.u.peersNeeded.Store(true)
	r.once.Do(func() { r.peers = r.u.peerReaders(ctx, r.tbl, r.base) })
	for _, p := range r.peers {
		m, ok, err := p.ResolveEquality(ctx, fieldIDs, tuples)
		if err != nil {
			if ctx.Err() != nil {
				return nil, false, ctx.Err()
			}
			r.u.log.Warn("resolving equality deletes through another index failed; reading the data files instead", "err", err)
			continue
		}
		if ok {
			return m, true, nil
		}
	}
	return nil, false, nil
}

func (r *resolver) ResolveEqualityEntries(ctx context.Context, fieldIDs []int, tuples []format.Key) ([]format.Key, bool, error) {
	return r.own.ResolveEqualityEntries(ctx, fieldIDs, tuples)
}

// peers returns the metadata of the table's other indexes, by name; one
// that cannot be listed or loaded is left out (a debug line says why).
func (u *Updater) peers(ctx context.Context) map[string]*format.Metadata {
	names, err := u.indexes.List(ctx, u.table)
	if err != nil {
		u.log.Debug("listing the table's indexes", "err", err)
		return nil
	}
	out := map[string]*format.Metadata{}
	for _, name := range names {
		if name == u.index {
			continue
		}
		if md, _, err := u.indexes.Load(ctx, u.table, name); err == nil {
			out[name] = md
		} else {
			u.log.Debug("loading another index of the table", "index", name, "err", err)
		}
	}
	return out
}

// peerReaders opens the table's other indexes at their index snapshot for
// source snapshot base, where they have one; an index that cannot be read
// is left out.
func (u *Updater) peerReaders(ctx context.Context, tbl *table.Table, base *table.Snapshot) []*planner.SnapshotReader {
	var out []*planner.SnapshotReader
	for name, md := range u.peers(ctx) {
		var snap *format.Snapshot
		for i := range md.Snapshots {
			if s := &md.Snapshots[i]; s.SourceTableSnapshotID == base.SnapshotID {
				snap = s
			}
		}
		if snap == nil || format.CheckTable(md, lineage.View(tbl)) != nil {
			continue
		}
		is, err := format.NewIndexSchema(md, lineage.SnapshotSchema(tbl, base))
		if err != nil {
			continue
		}
		tf, _, err := u.opts.Range.Store.ReadTracking(ctx, md, snap, is)
		if err != nil {
			u.log.Debug("reading another index to resolve equality deletes", "index", name, "err", err)
			continue
		}
		if r := planner.NewSnapshotReader(u.opts.Range.Store, is, tf.Entries); r.HasLocation() {
			out = append(out, r)
		}
	}
	return out
}

// peerCovered returns, when the policy skips ahead to next and this index
// resolves its equality deletes through other indexes, the newest snapshot of
// chain that one of them has an index snapshot of: the update after this one
// starts from it and can resolve through that index, where from next it would
// most likely read every data file its deletes apply to (the other index,
// skipping too, would not have next). next when none has one.
func (u *Updater) peerCovered(ctx context.Context, chain []*table.Snapshot, next *table.Snapshot) *table.Snapshot {
	covered := map[int64]bool{}
	for _, md := range u.peers(ctx) {
		for _, s := range md.Snapshots {
			covered[s.SourceTableSnapshotID] = true
		}
	}
	for i := len(chain) - 1; i >= 0; i-- {
		if covered[chain[i].SnapshotID] {
			if chain[i] != next {
				u.log.Debug("skipping to the newest snapshot another index covers", "source_snapshot", chain[i].SnapshotID, "newest", next.SnapshotID)
			}
			return chain[i]
		}
	}
	return next
}
