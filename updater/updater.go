package updater

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"

	"github.com/streamidx/streamidx/compactor"
	"github.com/streamidx/streamidx/flush"
	"github.com/streamidx/streamidx/format"
	"github.com/streamidx/streamidx/indexcatalog"
	"github.com/streamidx/streamidx/ingest"
	"github.com/streamidx/streamidx/internal/indexdef"
	"github.com/streamidx/streamidx/internal/lineage"
	"github.com/streamidx/streamidx/internal/objstore"
	"github.com/streamidx/streamidx/internal/pace"
	"github.com/streamidx/streamidx/planner"
	"github.com/streamidx/streamidx/staging"
)

// Policy says which source snapshots get an index snapshot.
type Policy string

// Alignment policies: an index snapshot never mixes two source states.
const (
	// PolicyEvery publishes one index snapshot per source snapshot.
	PolicyEvery Policy = "every"
	// PolicyLatest skips to the newest source snapshot when behind.
	PolicyLatest Policy = "latest"
	// PolicyAdaptive is every while the index keeps up, and latest once it
	// is more than AdaptiveMaxSnapshots snapshots or AdaptiveMaxLag behind.
	PolicyAdaptive Policy = "adaptive"
)

// Options tune an Updater.
type Options struct {
	// Policy: every, latest or adaptive. Default: every.
	Policy Policy
	// AdaptiveMaxSnapshots is how many source snapshots newer than the
	// indexed one policy adaptive tolerates before it skips to the newest.
	// Default: 10.
	AdaptiveMaxSnapshots int
	// AdaptiveMaxLag is how long the oldest source snapshot not yet indexed
	// may have waited (since its commit) before policy adaptive skips to
	// the newest. Default: 10s.
	AdaptiveMaxLag time.Duration
	// Now is the clock of AdaptiveMaxLag. Default: time.Now.
	Now func() time.Time
	// Range tunes range files (target size, row groups) and holds the store
	// every index file is read and written through. Default: compactor's
	// defaults and local files.
	Range compactor.RangeWriterOptions
	// MinFileSize: rewritten files under it are merged with a neighbour.
	// Default: a quarter of the target size.
	MinFileSize int64
	// MergeParallelism is how many parts of the index a merge rewrites at
	// once (compactor.MergeOptions.Parallelism). Default: procs.Work()
	// (GOMAXPROCS, less the Ps a serving process keeps for its lookups).
	MergeParallelism int
	// MemoryBudget bounds the entries a full build sorts in memory.
	// Default: 512 MiB.
	MemoryBudget int64
	// SpillDir holds a full build's spilled sort. Default: the OS temp dir.
	SpillDir string
	// Expire tunes the expiry that runs after every ExpireEvery commits.
	// Default: flush's expiry defaults, with Range's store, and References
	// of the updater's own (pass one to share it among a process's
	// updaters).
	Expire flush.ExpireOptions
	// ExpireEvery is how many commits pass between expiries. Default: 10.
	ExpireEvery int
	// Gate, when set, is shared by the updaters of one process: a step that
	// has run longer than its threshold waits in its merge or build while
	// a shorter step of another index runs (internal/pace). Default: none.
	Gate *pace.Gate
	// Events is the change feed that events-fed indexes (source: events)
	// follow. Default: none; such an index then follows the table like any
	// other.
	Events EventFeed
	// Logger. Default: discard.
	Logger *slog.Logger
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
	// ahead describes the stage the last step staged for the following
	// snapshot while it published, for the step that uses it.
	ahead *stagedAhead
	// peersNeeded is set while the equality deletes of this index's updates
	// resolve through other indexes only (see resolver).
	peersNeeded atomic.Bool
	// job is the current step's place under Options.Gate.
	job *pace.Job
}

// stagedAhead is a stage computed ahead of its step.
type stagedAhead struct {
	stage  string
	source int64
	staged Publication // StagedMutations and EqualitySlowPathFiles
}

// New returns an Updater of index on table.
func New(cat catalog.Catalog, indexes indexcatalog.Catalog, store *staging.Store, tbl table.Identifier, index string, opts Options) *Updater {
	if opts.Policy == "" {
		opts.Policy = PolicyEvery
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.ExpireEvery <= 0 {
		opts.ExpireEvery = 10
	}
	if opts.AdaptiveMaxSnapshots <= 0 {
		opts.AdaptiveMaxSnapshots = 10
	}
	if opts.AdaptiveMaxLag <= 0 {
		opts.AdaptiveMaxLag = 10 * time.Second
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Range.Store == nil {
		opts.Range.Store = objstore.Local()
	}
	if opts.Expire.Store == nil {
		opts.Expire.Store = opts.Range.Store
	}
	if opts.Expire.References == nil {
		// An updater expires again and again: each tracking file is read
		// once, not at every expiry while it is retained.
		opts.Expire.References = flush.NewReferences()
	}
	return &Updater{cat: cat, indexes: indexes, store: store, table: tbl, index: index, opts: opts,
		log: opts.Logger.With("table", strings.Join(tbl, "."), "index", index)}
}

// PropertiesFunc returns the properties to record in the index snapshot
// about to be published for source snapshot snap of tbl (nil for none). It
// is called just before the compare-and-swap, so it may name everything
// snap covers: snap itself and its ancestors.
type PropertiesFunc func(tbl *table.Table, snap *table.Snapshot) map[string]string

// Step moves the index one index snapshot closer to the table's current
// snapshot: it publishes at most one, and Stats.Aligned says whether more
// remain. An update voided by another writer's commit is not an error: it
// is counted in Stats.CommitConflicts and the next Step starts from the
// winner's snapshot. props, when not nil, gives the properties of the
// snapshot published.
func (u *Updater) Step(ctx context.Context, props PropertiesFunc) (Stats, error) {
	var st Stats
	if err := ctx.Err(); err != nil {
		return st, err
	}
	paused, err := u.gated(func() error { return u.step(ctx, props, &st) })
	st.Paused = paused
	if errors.Is(err, flush.ErrBaseMoved) {
		st.CommitConflicts++
		u.log.Info("another writer moved the index first; recomputing on its snapshot")
		return st, nil
	}
	return st, err
}

func (u *Updater) step(ctx context.Context, props PropertiesFunc, st *Stats) error {
	md, _, err := u.indexes.Load(ctx, u.table, u.index)
	if err != nil {
		return err
	}
	tbl, err := u.cat.LoadTable(ctx, u.table)
	if err != nil {
		return fmt.Errorf("load table: %w", err)
	}
	if err := format.CheckTable(md, lineage.View(tbl)); err != nil {
		return err
	}
	st.Table = tbl
	cur := md.CurrentSnapshot()
	if cur != nil {
		st.IndexedSnapshotID = cur.SourceTableSnapshotID
	}
	target := tbl.CurrentSnapshot()
	if target == nil {
		st.Aligned = true
		return nil
	}
	// Published up to the table's current snapshot: nothing more to do.
	defer func() { st.Aligned = st.Aligned || st.IndexedSnapshotID == target.SnapshotID }()
	if u.opts.Events != nil && indexdef.EventsFed(md) {
		return u.stepEvents(ctx, tbl, md, target, props, st)
	}
	if cur == nil {
		return u.fullBuild(ctx, tbl, md, target, props, st)
	}
	if cur.SourceTableSnapshotID == target.SnapshotID {
		st.Aligned = true
		return nil
	}
	chain, ok := lineage.Since(tbl, target, cur.SourceTableSnapshotID)
	if !ok {
		u.log.Info("index snapshot is not an ancestor of the table's current snapshot: full build",
			"index_source", cur.SourceTableSnapshotID, "table_snapshot", target.SnapshotID)
		return u.fullBuild(ctx, tbl, md, target, props, st)
	}
	next := u.choose(chain)
	if next != chain[0] && u.peersNeeded.Load() {
		next = u.peerCovered(ctx, chain, next)
	}
	base := tbl.SnapshotByID(cur.SourceTableSnapshotID)
	err = u.incremental(ctx, tbl, md, cur, chain, next, props, st, func(is *format.IndexSchema, stage string, resolver *resolver, pub *Publication) error {
		return u.ensureStaged(ctx, tbl, is, stage, base, next, resolver, pub)
	})
	if errors.Is(err, compactor.ErrDeltaMismatch) || errors.Is(err, compactor.ErrUnsortedRangeFile) {
		u.log.Warn("incremental update does not apply: full build", "err", err)
		return u.fullBuild(ctx, tbl, md, next, props, st)
	}
	return err
}

// gated runs one step (or rebuild) as a job under Options.Gate and returns
// how long its merge or build paused for shorter updates.
func (u *Updater) gated(run func() error) (time.Duration, error) {
	u.job = u.opts.Gate.Start()
	err := run()
	u.job.Done()
	paused := u.job.Waited()
	u.job = nil
	return paused, err
}

// choose picks, from the source snapshots newer than the indexed one
// (oldest first), the one the next index snapshot is for.
func (u *Updater) choose(chain []*table.Snapshot) *table.Snapshot {
	newest := chain[len(chain)-1]
	switch u.opts.Policy {
	case PolicyLatest:
		return newest
	case PolicyAdaptive:
		waited := u.opts.Now().Sub(time.UnixMilli(chain[0].TimestampMs))
		if len(chain) > u.opts.AdaptiveMaxSnapshots || waited > u.opts.AdaptiveMaxLag {
			return newest
		}
	}
	return chain[0]
}

// following returns the snapshot that the step after the one publishing
// next will most likely be for, when it is known already: the snapshot
// after next in chain, unless the policy skips to the newest.
func (u *Updater) following(chain []*table.Snapshot, next *table.Snapshot) *table.Snapshot {
	i := slices.IndexFunc(chain, func(s *table.Snapshot) bool { return s.SnapshotID == next.SnapshotID })
	if i < 0 || i+1 >= len(chain) {
		return nil
	}
	if after := u.choose(chain[i+1:]); after == chain[i+1] {
		return after
	}
	return nil
}

func (u *Updater) fullBuild(ctx context.Context, tbl *table.Table, md *format.Metadata, snap *table.Snapshot, props PropertiesFunc, st *Stats) error {
	began := time.Now()
	var base int64
	if cur := md.CurrentSnapshot(); cur != nil {
		base = cur.SnapshotID
	}
	res, err := BuildAndPublish(ctx, u.indexes, tbl, u.index, md, snap, BuildOptions{
		Build: compactor.BuildOptions{
			RangeWriterOptions: u.opts.Range, MemoryBudget: u.opts.MemoryBudget, SpillDir: u.opts.SpillDir, Logger: u.log,
			Yield: u.job.Yield,
		},
		Properties:  properties(props, tbl, snap),
		RequireBase: true, BaseSnapshotID: base,
		OnRetry: func() { st.CommitRetries++ },
	})
	if err != nil {
		return err
	}
	u.committed(ctx, snap, &Publication{FullBuild: true, FilesWritten: len(res.Entries), BytesWritten: res.Bytes, EntriesRewritten: res.Rows},
		began, time.Now(), st)
	return nil
}

// properties evaluates props for the snapshot about to be published.
func properties(props PropertiesFunc, tbl *table.Table, snap *table.Snapshot) map[string]string {
	if props == nil {
		return nil
	}
	return props(tbl, snap)
}

// stageName keys staged deltas by the index snapshot they apply to (its
// id), so a stage is never applied on top of anything else.
func (u *Updater) stageName(indexSnapshotID int64) string {
	return fmt.Sprintf("%s/%s@%d", strings.Join(u.table, "."), u.index, indexSnapshotID)
}

var errStopIteration = errors.New("stop")

// stageFunc makes sure the sealed stage of the delta that incremental
// merges exists.
type stageFunc func(is *format.IndexSchema, stage string, resolver *resolver, pub *Publication) error

// incremental merges the delta that stageDelta stages onto the current
// index snapshot cur and publishes the index snapshot for next. chain, when
// given, holds the source snapshots newer than cur's (oldest first): the
// delta of the one after next is then staged while next's publishes.
func (u *Updater) incremental(ctx context.Context, tbl *table.Table, md *format.Metadata, cur *format.Snapshot, chain []*table.Snapshot,
	next *table.Snapshot, props PropertiesFunc, st *Stats, stageDelta stageFunc) error {
	began := time.Now()
	is, err := format.NewIndexSchema(md, lineage.SnapshotSchema(tbl, next))
	if err != nil {
		return err
	}
	t, _, err := u.opts.Range.Store.ReadTracking(ctx, md, cur, is)
	if err != nil {
		return err
	}
	prev := t.Entries
	stage := u.stageName(cur.SnapshotID)
	resolver := u.newResolver(tbl, tbl.SnapshotByID(cur.SourceTableSnapshotID), planner.NewSnapshotReader(u.opts.Range.Store, is, prev))
	pub := &Publication{}
	if err := stageDelta(is, stage, resolver, pub); err != nil {
		return err
	}
	staged := time.Now()
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
		RangeWriterOptions: u.opts.Range, MinFileSize: u.opts.MinFileSize, Parallelism: u.opts.MergeParallelism, Logger: u.log,
		Yield: u.job.Yield, DeltaRecords: pub.StagedMutations,
	})
	if err != nil {
		return fmt.Errorf("merge delta of source snapshot %d: %w", next.SnapshotID, err)
	}
	// The snapshot about to be published gets its id now, so that the delta
	// of the following source snapshot can be staged under its name while
	// it commits.
	merged := time.Now()
	snapID := flush.NewSnapshotID(md)
	var ahead *stagingAhead
	if after := u.following(chain, next); after != nil {
		ahead = u.stageAhead(ctx, tbl, md, snapID, next, after, res.Entries)
	}
	_, _, err = flush.Publish(ctx, u.indexes, flush.Publication{
		Table: u.table, Index: u.index, IndexUUID: md.IndexUUID, Schema: is, Entries: res.Entries,
		SourceSnapshotID: next.SnapshotID, Properties: properties(props, tbl, next), RequireBase: true, BaseSnapshotID: cur.SnapshotID,
		SnapshotID: snapID,
	}, flush.Options{Store: u.opts.Range.Store, Logger: u.opts.Logger, OnRetry: func() { st.CommitRetries++ }})
	if err != nil {
		ahead.abandon()
		compactor.RemoveFiles(ctx, u.opts.Range.Store, u.log, newFiles(prev, res.Entries))
		if errors.Is(err, flush.ErrBaseMoved) {
			_ = u.store.Drop(stage, next.SnapshotID)
		}
		return err
	}
	committed := time.Now()
	pub.Staged, pub.Merged, pub.Published = staged.Sub(began), merged.Sub(staged), committed.Sub(merged)
	// Every stage that applies to the previous index snapshot is spent.
	u.dropStages(stage)
	pub.FilesWritten, pub.FilesRewritten, pub.FilesReused, pub.BytesWritten = res.Written, res.Rewritten, res.Reused, res.BytesWritten
	pub.EntriesRewritten, pub.EntriesCopied, pub.RowGroupsCopied = res.EntriesRewritten, res.EntriesCopied, res.RowGroupsCopied
	pub.Skipped = max(0, slices.IndexFunc(chain, func(s *table.Snapshot) bool { return s.SnapshotID == next.SnapshotID }))
	u.ahead = ahead.wait()
	u.committed(ctx, next, pub, began, committed, st)
	return nil
}

// dropStages drops the sealed stages named stage: once the index moved past
// the snapshot they apply to, none of them can be used.
func (u *Updater) dropStages(stage string) {
	sealed, err := u.store.Sealed(stage)
	if err == nil {
		for _, m := range sealed {
			if err = u.store.Drop(stage, m.SourceSnapshotID); err != nil {
				break
			}
		}
	}
	if err != nil {
		u.log.Warn("could not drop a spent stage", "stage", stage, "err", err)
	}
}

// stagingAhead is the delta of the following source snapshot being staged
// while the current update publishes.
type stagingAhead struct {
	stage  string
	source int64
	cancel context.CancelFunc
	done   chan struct{}
	pub    Publication
	err    error
	u      *Updater
}

// stageAhead starts staging the delta from next to after, on top of the
// range files entries that the index snapshot snapID (about to be
// published for next) will hold, under that snapshot's stage name. It may
// fail or be abandoned: the step for after then stages it again.
func (u *Updater) stageAhead(ctx context.Context, tbl *table.Table, md *format.Metadata, snapID int64, next, after *table.Snapshot,
	entries []format.TrackingEntry) *stagingAhead {
	is, err := format.NewIndexSchema(md, lineage.SnapshotSchema(tbl, after))
	if err != nil {
		return nil
	}
	ctx, cancel := context.WithCancel(ctx)
	a := &stagingAhead{stage: u.stageName(snapID), source: after.SnapshotID, cancel: cancel, done: make(chan struct{}), u: u}
	go func() {
		defer close(a.done)
		resolver := u.newResolver(tbl, next, planner.NewSnapshotReader(u.opts.Range.Store, is, entries))
		a.err = u.ensureStaged(ctx, tbl, is, a.stage, next, after, resolver, &a.pub)
	}()
	return a
}

// abandon stops the staging and drops what it staged: the snapshot it was
// named after was not published.
func (a *stagingAhead) abandon() {
	if a == nil {
		return
	}
	a.cancel()
	<-a.done
	_ = a.u.store.Drop(a.stage, a.source)
}

// wait waits for the staging to end and describes the stage, or returns nil
// when it failed (the next step stages again).
func (a *stagingAhead) wait() *stagedAhead {
	if a == nil {
		return nil
	}
	<-a.done
	a.cancel()
	if a.err != nil {
		a.u.log.Debug("staging the next delta ahead failed; the next step stages it", "source_snapshot", a.source, "err", a.err)
		return nil
	}
	return &stagedAhead{stage: a.stage, source: a.source, staged: a.pub}
}

// ensureStaged makes sure a sealed stage of the delta base -> next exists,
// computing it unless a previous run sealed it already.
func (u *Updater) ensureStaged(ctx context.Context, tbl *table.Table, is *format.IndexSchema, stage string, base, next *table.Snapshot,
	eq ingest.EqualityResolver, pub *Publication) error {
	sealed, err := u.store.Sealed(stage)
	if err != nil {
		return err
	}
	for _, m := range sealed {
		if m.SourceSnapshotID == next.SnapshotID {
			u.log.Debug("reusing sealed stage", "source_snapshot", next.SnapshotID, "mutations", m.Mutations)
			if a := u.ahead; a != nil && a.stage == stage && a.source == next.SnapshotID {
				// Staged by the previous step while it published.
				pub.StagedMutations, pub.EqualitySlowPathFiles = a.staged.StagedMutations, a.staged.EqualitySlowPathFiles
				u.ahead = nil
			}
			return nil
		}
	}
	stager, err := u.store.Stage(stage, next.SnapshotID)
	if err != nil {
		return err
	}
	stager.Recomputable() // from the table's files, whenever it is lost
	codec := format.NewEntryCodec(is)
	var k, v []byte
	// The delta is computed while its mutations are written to the
	// staging store: two cores instead of one after the other.
	pipe := staging.NewPipe(stager)
	stats, err := ingest.ComputeDelta(ctx, tbl, base, next, is, ingest.DeltaOptions{Equality: eq}, func(entry format.Key, count int) error {
		var err error
		if k, err = codec.AppendKey(k[:0], entry); err != nil {
			return err
		}
		if v, err = codec.AppendValue(v[:0], entry); err != nil {
			return err
		}
		return pipe.Add(k, v, count)
	})
	if perr := pipe.Close(); err == nil && perr != nil {
		err = perr
	}
	if err != nil {
		_ = stager.Abort()
		return fmt.Errorf("table delta of source snapshot %d: %w", next.SnapshotID, err)
	}
	if err := stager.Seal(staging.SealMeta{Ordinal: uint64(next.SequenceNumber), SourceSnapshotID: next.SnapshotID,
		SequenceNumber: next.SequenceNumber, TimestampMs: next.TimestampMs}); err != nil {
		return err
	}
	pub.StagedMutations = stats.Inserts + stats.Deletes
	pub.EqualitySlowPathFiles = stats.EqualityDeleteSlowPath
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

// committed completes pub for snap, whose index snapshot committed at
// done, records it in st and runs expiry when it is due.
func (u *Updater) committed(ctx context.Context, snap *table.Snapshot, pub *Publication, began, done time.Time, st *Stats) {
	pub.SourceSnapshotID = snap.SnapshotID
	pub.SourceCommitted = time.UnixMilli(snap.TimestampMs)
	pub.Committed = done
	pub.Took = pub.Committed.Sub(began)
	st.Published = pub
	st.IndexedSnapshotID = snap.SnapshotID
	u.log.Info("index updated", "source_snapshot", snap.SnapshotID, "full_build", pub.FullBuild, "skipped", pub.Skipped,
		"files_written", pub.FilesWritten, "files_reused", pub.FilesReused, "entries", pub.EntriesRewritten, "row_groups_copied", pub.RowGroupsCopied, "bytes", pub.BytesWritten,
		"took", pub.Took.Round(time.Millisecond), "paused", u.job.Waited().Round(time.Millisecond))
	if !pub.FullBuild {
		u.log.Debug("incremental update phases", "source_snapshot", snap.SnapshotID, "staged", pub.Staged.Round(time.Millisecond),
			"merged", pub.Merged.Round(time.Millisecond), "published", pub.Published.Round(time.Millisecond))
	}
	u.sinceEx++
	if u.sinceEx >= u.opts.ExpireEvery {
		u.sinceEx = 0
		u.expire(ctx, st)
	}
}

func (u *Updater) expire(ctx context.Context, st *Stats) {
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
	st.SnapshotsExpired += res.SnapshotsExpired
	st.FilesDeleted += len(res.FilesDeleted)
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
