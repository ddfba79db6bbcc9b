// Package updater keeps one index aligned with its source table: for each
// new source snapshot it computes the table delta (ingest), stages it
// durably (staging), merges it into the range files it touches (compactor)
// and publishes the index snapshot with a compare-and-swap (flush). A crash
// at any point leaves a state the next Step completes: sealed stages are
// reused, partial ones redone, and an index snapshot that was published is
// never published twice, because every update names the index snapshot it
// was built on.
//
// Concurrency: an Updater belongs to one goroutine. Several Updaters (in
// one process or many) may serve the same index; the compare-and-swap
// decides, and a loser's update is void and recomputed on the winner.
package updater

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"

	"github.com/streamidx/streamidx/compactor"
	"github.com/streamidx/streamidx/flush"
	"github.com/streamidx/streamidx/format"
	"github.com/streamidx/streamidx/indexcatalog"
	"github.com/streamidx/streamidx/ingest"
	"github.com/streamidx/streamidx/internal/objstore"
	"github.com/streamidx/streamidx/staging"
)

// Policy says which source snapshots get an index snapshot.
type Policy string

// Alignment policies. Either way an index snapshot never mixes two source
// states.
const (
	// PolicyEvery publishes one index snapshot per source snapshot.
	PolicyEvery Policy = "every"
	// PolicyLatest skips to the newest source snapshot when behind.
	PolicyLatest Policy = "latest"
)

// Options tune an Updater.
type Options struct {
	// Policy: every or latest. Default: every.
	Policy Policy
	// Range tunes range files (target size, row groups, IO properties).
	Range compactor.RangeWriterOptions
	// MinFileSize: rewritten files under it are merged with a neighbour.
	// Default: a quarter of the target size.
	MinFileSize int64
	// MemoryBudget and SpillDir tune full builds. Defaults: 512 MiB, temp dir.
	MemoryBudget int64
	SpillDir     string
	// Expire runs after every ExpireEvery commits. Default: 10 commits,
	// with flush's expiry defaults.
	Expire      flush.ExpireOptions
	ExpireEvery int
	// Logger. Default: discard.
	Logger *slog.Logger
	// Metrics. Default: unregistered metrics.
	Metrics *Metrics
}

// Updater keeps one index aligned with its table.
type Updater struct {
	cat     catalog.Catalog
	indexes indexcatalog.Catalog
	store   *staging.Store
	table   table.Identifier
	index   string
	opts    Options
	log     *slog.Logger
	sinceEx int
}

// New returns an Updater of index on table.
func New(cat catalog.Catalog, indexes indexcatalog.Catalog, store *staging.Store, tbl table.Identifier, index string, opts Options) *Updater {
	if opts.Policy == "" {
		opts.Policy = PolicyEvery
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Metrics == nil {
		opts.Metrics = NewMetrics(nil)
	}
	if opts.ExpireEvery <= 0 {
		opts.ExpireEvery = 10
	}
	if opts.Expire.IOProperties == nil {
		opts.Expire.IOProperties = opts.Range.IOProperties
	}
	return &Updater{cat: cat, indexes: indexes, store: store, table: tbl, index: index, opts: opts,
		log: opts.Logger.With("table", strings.Join(tbl, "."), "index", index)}
}

func (u *Updater) labels() []string { return []string{strings.Join(u.table, "."), u.index} }

// Step publishes index snapshots until the index is aligned with the
// table's current snapshot and returns how many it published. properties
// are added to the last index snapshot it publishes (e.g. feed offsets).
func (u *Updater) Step(ctx context.Context, properties map[string]string) (int, error) {
	published := 0
	for {
		if err := ctx.Err(); err != nil {
			return published, err
		}
		did, done, err := u.stepOnce(ctx, properties)
		if errors.Is(err, flush.ErrBaseMoved) {
			// Another writer published first; start again from its snapshot.
			u.opts.Metrics.CommitConflicts.WithLabelValues(u.labels()...).Inc()
			u.log.Info("another writer moved the index first; recomputing on its snapshot")
			continue
		}
		if did {
			published++
		}
		if err != nil {
			u.opts.Metrics.Errors.WithLabelValues(u.labels()...).Inc()
			return published, err
		}
		if done {
			return published, nil
		}
	}
}

// stepOnce publishes at most one index snapshot.
func (u *Updater) stepOnce(ctx context.Context, props map[string]string) (published, done bool, err error) {
	md, _, err := u.indexes.Load(ctx, u.table, u.index)
	if errors.Is(err, format.ErrUnsupportedIndexType) {
		u.log.Warn("index type not implemented: not maintained", "type", md.Type)
		return false, true, nil
	}
	if err != nil {
		return false, false, err
	}
	tbl, err := u.cat.LoadTable(ctx, u.table)
	if err != nil {
		return false, false, fmt.Errorf("load table: %w", err)
	}
	if err := format.CheckTable(md, tbl); err != nil {
		return false, false, err
	}
	target := tbl.CurrentSnapshot()
	if target == nil {
		return false, true, nil
	}
	cur := md.CurrentSnapshot()
	if cur == nil {
		return true, false, u.fullBuild(ctx, tbl, md, target, props)
	}
	if cur.SourceTableSnapshotID == target.SnapshotID {
		u.opts.Metrics.SnapshotsBehind.WithLabelValues(u.labels()...).Set(0)
		return false, true, nil
	}
	chain := ancestry(tbl, target, cur.SourceTableSnapshotID)
	if chain == nil {
		u.log.Info("index snapshot is not an ancestor of the table's current snapshot: full build",
			"index_source", cur.SourceTableSnapshotID, "table_snapshot", target.SnapshotID)
		return true, false, u.fullBuild(ctx, tbl, md, target, props)
	}
	u.opts.Metrics.SnapshotsBehind.WithLabelValues(u.labels()...).Set(float64(len(chain)))
	next := chain[0]
	if u.opts.Policy == PolicyLatest {
		next = target
	}
	var nextProps map[string]string
	if next.SnapshotID == target.SnapshotID {
		nextProps = props
	}
	err = u.incremental(ctx, tbl, md, cur, next, nextProps)
	switch {
	case errors.Is(err, compactor.ErrDeltaMismatch), errors.Is(err, compactor.ErrUnsortedRangeFile):
		u.log.Warn("incremental update does not apply: full build", "err", err)
		return true, false, u.fullBuild(ctx, tbl, md, next, nextProps)
	case err != nil:
		return false, false, err
	}
	return true, false, nil
}

// ancestry returns the snapshots after ancestor up to target, oldest first,
// or nil when ancestor is not an ancestor of target (a rollback, or expired
// history).
func ancestry(tbl *table.Table, target *table.Snapshot, ancestor int64) []*table.Snapshot {
	var chain []*table.Snapshot
	for s := target; s != nil; {
		if s.SnapshotID == ancestor {
			for i, j := 0, len(chain)-1; i < j; i, j = i+1, j-1 {
				chain[i], chain[j] = chain[j], chain[i]
			}
			return chain
		}
		chain = append(chain, s)
		if s.ParentSnapshotID == nil {
			return nil
		}
		s = tbl.SnapshotByID(*s.ParentSnapshotID)
	}
	return nil
}

func (u *Updater) fullBuild(ctx context.Context, tbl *table.Table, md *format.Metadata, snap *table.Snapshot, props map[string]string) error {
	began := time.Now()
	dir := objstore.Join(md.Location, "data")
	res, err := compactor.FullBuild(ctx, tbl, snap, md, dir, compactor.BuildOptions{
		RangeWriterOptions: u.opts.Range, MemoryBudget: u.opts.MemoryBudget, SpillDir: u.opts.SpillDir, Logger: u.log,
	})
	if err != nil {
		return fmt.Errorf("full build for source snapshot %d: %w", snap.SnapshotID, err)
	}
	is, err := format.NewIndexSchema(md, compactor.SnapshotSchema(tbl, snap))
	if err != nil {
		return err
	}
	var base int64
	if cur := md.CurrentSnapshot(); cur != nil {
		base = cur.SnapshotID
	}
	_, _, err = flush.Publish(ctx, u.indexes, flush.Publication{
		Table: u.table, Index: u.index, IndexUUID: md.IndexUUID, Schema: is, Entries: res.Entries,
		SourceSnapshotID: snap.SnapshotID, Properties: props, RequireBase: true, BaseSnapshotID: base,
	}, u.flushOptions())
	if err != nil {
		compactor.RemoveFiles(ctx, u.opts.Range.IOProperties, u.log, res.Entries)
		return err
	}
	u.opts.Metrics.FullBuilds.WithLabelValues(u.labels()...).Inc()
	u.committed(ctx, snap, res.Bytes, len(res.Entries), 0, began)
	return nil
}

func (u *Updater) flushOptions() flush.Options {
	retries := u.opts.Metrics.CommitRetries.WithLabelValues(u.labels()...)
	return flush.Options{IOProperties: u.opts.Range.IOProperties, Logger: u.opts.Logger, OnRetry: retries.Inc}
}

// stageName keys staged deltas by the index snapshot they apply to, so a
// stage is never applied on top of anything else.
func (u *Updater) stageName(base *format.Snapshot) string {
	return fmt.Sprintf("%s/%s@%d", strings.Join(u.table, "."), u.index, base.SnapshotID)
}

var errStopIteration = errors.New("stop")

func (u *Updater) incremental(ctx context.Context, tbl *table.Table, md *format.Metadata, cur *format.Snapshot, next *table.Snapshot, props map[string]string) error {
	began := time.Now()
	base := tbl.SnapshotByID(cur.SourceTableSnapshotID)
	is, err := format.NewIndexSchema(md, compactor.SnapshotSchema(tbl, next))
	if err != nil {
		return err
	}
	data, err := objstore.ReadFile(ctx, u.opts.Range.IOProperties, cur.TrackingFile)
	if err != nil {
		return err
	}
	prev, err := format.ReadTrackingFile(bytes.NewReader(data), cur.TrackingFile, is)
	if err != nil {
		return err
	}
	stage := u.stageName(cur)
	resolver := &indexResolver{is: is, entries: prev, props: u.opts.Range.IOProperties}
	if err := u.ensureStaged(ctx, tbl, is, stage, base, next, resolver); err != nil {
		return err
	}
	delta := func(yield func(key, value []byte, count int) bool) error {
		err := u.store.Iterate(stage, next.SnapshotID, func(k, v []byte, c int) error {
			if !yield(k, v, c) {
				return errStopIteration
			}
			return nil
		})
		if errors.Is(err, errStopIteration) {
			return nil
		}
		return err
	}
	res, err := compactor.Merge(ctx, is, prev, delta, objstore.Join(md.Location, "data"), compactor.MergeOptions{
		RangeWriterOptions: u.opts.Range, MinFileSize: u.opts.MinFileSize, Logger: u.log,
	})
	if err != nil {
		return fmt.Errorf("merge delta of source snapshot %d: %w", next.SnapshotID, err)
	}
	_, _, err = flush.Publish(ctx, u.indexes, flush.Publication{
		Table: u.table, Index: u.index, IndexUUID: md.IndexUUID, Schema: is, Entries: res.Entries,
		SourceSnapshotID: next.SnapshotID, Properties: props, RequireBase: true, BaseSnapshotID: cur.SnapshotID,
	}, u.flushOptions())
	if err != nil {
		compactor.RemoveFiles(ctx, u.opts.Range.IOProperties, u.log, newFiles(prev, res.Entries))
		if errors.Is(err, flush.ErrBaseMoved) {
			_ = u.store.Drop(stage, next.SnapshotID)
		}
		return err
	}
	if err := u.store.Drop(stage, next.SnapshotID); err != nil {
		u.log.Warn("could not drop a committed stage; it is dropped at the next start", "err", err)
	}
	l := u.labels()
	u.opts.Metrics.FilesRewritten.WithLabelValues(l...).Add(float64(res.Rewritten))
	u.opts.Metrics.FilesReused.WithLabelValues(l...).Add(float64(res.Reused))
	u.committed(ctx, next, res.BytesWritten, res.Written, res.Reused, began)
	return nil
}

// ensureStaged makes sure a sealed stage of the delta base -> next exists,
// computing it unless a previous run sealed it already.
func (u *Updater) ensureStaged(ctx context.Context, tbl *table.Table, is *format.IndexSchema, stage string, base, next *table.Snapshot, eq ingest.EqualityResolver) error {
	sealed, err := u.store.Sealed(stage)
	if err != nil {
		return err
	}
	for _, m := range sealed {
		if m.SourceSnapshotID == next.SnapshotID {
			u.log.Debug("reusing sealed stage", "source_snapshot", next.SnapshotID, "mutations", m.Mutations)
			return nil
		}
	}
	stager, err := u.store.Stage(stage, next.SnapshotID)
	if err != nil {
		return err
	}
	codec := staging.NewEntryCodec(is)
	var k, v []byte
	stats, err := ingest.ComputeDelta(ctx, tbl, base, next, is, ingest.DeltaOptions{Equality: eq}, func(entry format.Key, count int) error {
		var err error
		if k, err = codec.AppendKey(k[:0], entry); err != nil {
			return err
		}
		if v, err = codec.AppendValue(v[:0], entry); err != nil {
			return err
		}
		return stager.Add(k, v, count)
	})
	if err != nil {
		_ = stager.Abort()
		return fmt.Errorf("table delta of source snapshot %d: %w", next.SnapshotID, err)
	}
	if err := stager.Seal(staging.SealMeta{Ordinal: uint64(next.SequenceNumber), SourceSnapshotID: next.SnapshotID,
		SequenceNumber: next.SequenceNumber, TimestampMs: next.TimestampMs}); err != nil {
		return err
	}
	l := u.labels()
	u.opts.Metrics.StagedMutations.WithLabelValues(l...).Add(float64(stats.Inserts + stats.Deletes))
	u.opts.Metrics.EqualitySlowPath.WithLabelValues(l...).Add(float64(stats.EqualityDeleteSlowPath))
	return nil
}

func newFiles(prev, next []format.TrackingEntry) []format.TrackingEntry {
	old := map[string]bool{}
	for _, e := range prev {
		old[e.FilePath] = true
	}
	var out []format.TrackingEntry
	for _, e := range next {
		if !old[e.FilePath] {
			out = append(out, e)
		}
	}
	return out
}

func (u *Updater) committed(ctx context.Context, snap *table.Snapshot, bytes int64, written, reused int, began time.Time) {
	l := u.labels()
	u.opts.Metrics.Commits.WithLabelValues(l...).Inc()
	u.opts.Metrics.BytesWritten.WithLabelValues(l...).Add(float64(bytes))
	u.opts.Metrics.UpdateSeconds.WithLabelValues(l...).Observe(time.Since(began).Seconds())
	u.opts.Metrics.LagSeconds.WithLabelValues(l...).Set(time.Since(time.UnixMilli(snap.TimestampMs)).Seconds())
	u.log.Info("index updated", "source_snapshot", snap.SnapshotID, "files_written", written, "files_reused", reused,
		"bytes", bytes, "took", time.Since(began).Round(time.Millisecond))
	u.sinceEx++
	if u.sinceEx >= u.opts.ExpireEvery {
		u.sinceEx = 0
		u.expire(ctx)
	}
}

func (u *Updater) expire(ctx context.Context) {
	res, err := flush.Expire(ctx, u.indexes, u.table, u.index, func(md *format.Metadata) (*format.IndexSchema, error) {
		tbl, err := u.cat.LoadTable(ctx, u.table)
		if err != nil {
			return nil, err
		}
		return format.NewIndexSchema(md, tbl.Schema())
	}, u.opts.Expire)
	if err != nil {
		u.log.Warn("expiring index snapshots failed; retried later", "err", err)
		return
	}
	l := u.labels()
	u.opts.Metrics.SnapshotsExpired.WithLabelValues(l...).Add(float64(res.SnapshotsExpired))
	u.opts.Metrics.OrphanFilesDelete.WithLabelValues(l...).Add(float64(len(res.FilesDeleted)))
}

// Recover abandons the partial stages a crash left behind; sealed stages
// stay for Step to use or drop. Call it once at start.
func Recover(store *staging.Store, log *slog.Logger) error {
	refs, err := store.Unsealed()
	if err != nil {
		return err
	}
	for _, r := range refs {
		log.Info("abandoning a partial stage left by a crash", "stage", r.Index, "source_snapshot", r.SourceSnapshotID)
		if err := store.Abandon(r.Index, r.SourceSnapshotID); err != nil {
			return err
		}
	}
	return nil
}
