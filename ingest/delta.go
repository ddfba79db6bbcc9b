package ingest

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"iter"
	"maps"
	"slices"
	"sync"

	"github.com/RoaringBitmap/roaring/v2/roaring64"
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/iceberg-go"
	iceio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"
	"golang.org/x/sync/errgroup"

	"github.com/streamidx/streamidx/format"
	"github.com/streamidx/streamidx/internal/lineage"
	"github.com/streamidx/streamidx/internal/tablescan"
)

// Sink receives the mutations of a table delta: an index entry (its values
// in EntrySchema order) and +1 for an insert or -1 for a delete. The entry
// and the values it holds are valid only during the call: a sink encodes or
// copies what it keeps. An error stops the delta and is returned by
// ComputeDelta.
type Sink func(entry format.Key, count int) error

// DeltaStats say what a table delta read and emitted; they feed metrics.
type DeltaStats struct {
	DataFilesAdded     int   // data files live in the new snapshot and not in the old
	DataFilesRemoved   int   // data files live in the old snapshot and not in the new
	DeleteFilesAdded   int   // delete files live in the new snapshot and not in the old
	DeleteFilesRemoved int   // delete files live in the old snapshot and not in the new
	FilesScanned       int   // data files whose rows were read
	Inserts            int64 // mutations with count +1
	Deletes            int64 // mutations with count -1

	// EqualityDeleteSlowPath counts the data files read in full because an
	// equality delete file may apply to them and no EqualityResolver could
	// narrow it down to positions.
	EqualityDeleteSlowPath int
	// EqualityKeyReads counts the data files of which only the equality
	// columns were read because an equality delete file stopped applying
	// to them (the rewrite of equality deletes into deletion vectors
	// removes them): the live positions before and after are compared, and
	// only rows whose liveness changed are read in full.
	EqualityKeyReads int
	// EqualityResolves counts the calls to the EqualityResolver: one per
	// set of equality fields, however many equality delete files the
	// delta adds (an updater that skips snapshots meets one per commit).
	EqualityResolves int
	// RewriteSnapshots counts the snapshots of streamidx rewrite-deletes
	// that made up the whole delta, taken at their word: nothing read
	// (see lineage.OnlyRewritesDeletes).
	RewriteSnapshots int
	// EqualityFromIndex counts the data files whose rows removed by added
	// equality deletes were deleted as the index's entries say, without
	// reading the file (see EqualityEntryResolver).
	EqualityFromIndex int
}

// add adds the counts of what another part of the delta read and emitted
// (the data files it reads whole: see delta.run).
func (s *DeltaStats) add(o DeltaStats) {
	s.FilesScanned += o.FilesScanned
	s.Inserts += o.Inserts
	s.Deletes += o.Deletes
	s.EqualityDeleteSlowPath += o.EqualityDeleteSlowPath
	s.EqualityKeyReads += o.EqualityKeyReads
	s.EqualityResolves += o.EqualityResolves
	s.EqualityFromIndex += o.EqualityFromIndex
}

// EqualityResolver finds, through an index of the old snapshot, the rows an
// equality delete may remove, so that the delta reads those positions
// instead of every data file the delete may apply to.
type EqualityResolver interface {
	// ResolveEquality returns, by data file location, the positions of
	// every row live in the old snapshot whose values of fieldIDs equal one
	// of tuples (each holds the values of fieldIDs in that order, as
	// canonical Go values; nil is null, and null equals null). Extra
	// positions cost reading time but never correctness; a missing one makes
	// the delta wrong. ok is false when the resolver cannot answer for these
	// fields (no index has them as its leading cluster fields); the delta
	// then reads every candidate data file.
	ResolveEquality(ctx context.Context, fieldIDs []int, tuples []format.Key) (positions map[string][]int64, ok bool, err error)
}

// EqualityEntryResolver is an EqualityResolver that can also answer with
// the index entries of the rows it finds (every field, in EntrySchema order,
// _file and _pos among them). A row an added equality delete removes is
// then deleted from the index as its entry says, without reading its data
// file: an upsert's old versions lie anywhere in the table's largest files.
type EqualityEntryResolver interface {
	EqualityResolver
	// ResolveEqualityEntries is ResolveEquality answered with entries; ok
	// is false when it cannot answer so (ResolveEquality may still).
	ResolveEqualityEntries(ctx context.Context, fieldIDs []int, tuples []format.Key) (entries []format.Key, ok bool, err error)
}

// DeltaOptions tune ComputeDelta.
type DeltaOptions struct {
	// Equality resolves equality deletes to positions through an index.
	// Default: none; every data file an equality delete may apply to is read.
	Equality EqualityResolver
	// BatchRows is how many rows are read from a data file at a time.
	// Default tablescan.DefaultBatchRows.
	BatchRows int
	// Allocator allocates the Arrow buffers. Default memory.DefaultAllocator.
	Allocator memory.Allocator
}

// ComputeDelta emits the mutations that turn the index entries of the live
// rows of snapshot old into those of snapshot snap: after applying them to a
// multiset holding exactly the entries of old, it holds exactly the entries
// of snap. old is usually snap's parent, but any earlier snapshot of the
// table works, which lets an updater that fell behind skip to the newest
// snapshot; a nil old (the table's first snapshot) makes every live row of
// snap an insert. Entries are computed by format.Entries with is, whatever
// schema each snapshot was written with.
//
// The delta reads only the data files whose live rows may differ: files
// live in one snapshot only, and files live in both whose applicable delete
// files differ (spec rules: position deletes and deletion vectors, equality
// deletes of a higher sequence number in the same partition or of an
// unpartitioned spec). Manifests that both snapshots list are read only when
// delete files changed. A file read on both sides is compared position by
// position, streaming both sides in position order, so memory is bounded by
// a batch per side; a row live in both with the same entry cancels out, and
// where only positions changed, only those positions are read out. Mutations
// come in file order, not cluster order; staging sorts them.
//
// A delta made only of snapshots that streamidx rewrite-deletes committed
// (lineage.OnlyRewritesDeletes) is empty and reads nothing.
func ComputeDelta(ctx context.Context, tbl *table.Table, old, snap *table.Snapshot, is *format.IndexSchema, opts DeltaOptions, sink Sink) (DeltaStats, error) {
	if snap == nil {
		return DeltaStats{}, errors.New("compute table delta: no snapshot given")
	}
	if n := lineage.OnlyRewritesDeletes(tbl, old, snap); n > 0 {
		// The rewrite changed no live row: its own deletion vectors hold
		// exactly the rows its removed equality deletes deleted, which it
		// read from the index of its base snapshot. Reading the data files
		// again would only confirm it.
		return DeltaStats{RewriteSnapshots: n}, nil
	}
	if opts.Allocator == nil {
		opts.Allocator = memory.DefaultAllocator
	}
	fs, err := tbl.FS(ctx)
	if err != nil {
		return DeltaStats{}, fmt.Errorf("open table io: %w", err)
	}
	d := &delta{
		ctx: ctx, tbl: tbl, fs: fs, is: is, codec: format.NewEntryCodec(is), opts: opts, sink: sink,
		resolved: map[string]*resolution{}, fileAt: -1, posAt: -1, identity: map[int]int{},
	}
	for i, f := range is.Fields() {
		if f.Kind == format.KindIdentity {
			d.identity[f.ID] = i // an identity field has its source field's ID
			continue
		}
		ref, ok := f.Expr.(format.Ref)
		switch {
		case !ok || f.Kind != format.KindMaterialized:
		case ref.ID == format.FieldIDFile:
			d.fileAt = i
		case ref.ID == format.FieldIDPos:
			d.posAt = i
		default:
			if _, have := d.identity[ref.ID]; !have {
				d.identity[ref.ID] = i
			}
		}
	}
	if d.old, err = d.openSide(old); err != nil {
		return d.stats, err
	}
	if d.new, err = d.openSide(snap); err != nil {
		return d.stats, err
	}
	if err := d.run(); err != nil {
		return d.stats, fmt.Errorf("delta of snapshot %d: %w", snap.SnapshotID, err)
	}
	return d.stats, nil
}

// side is one of the two snapshots being compared.
type side struct {
	snap      *table.Snapshot // nil: the empty table
	schema    *iceberg.Schema
	manifests []iceberg.ManifestFile
	deletes   *tablescan.DeleteIndex
	scan      tablescan.Options // columns: what the index reads, with _pos
	posCol    int               // column of _pos in scanned batches
}

// resolution is what the EqualityResolver said about one delete file: the
// positions it names by data file, and when it answered with entries, those
// too.
type resolution struct {
	ok      bool
	byFile  map[string][]int64
	entries map[string][]format.Key
}

type delta struct {
	ctx      context.Context
	tbl      *table.Table
	fs       iceio.IO
	is       *format.IndexSchema
	codec    *format.EntryCodec
	opts     DeltaOptions
	sink     Sink
	old, new *side
	stats    DeltaStats
	resolved map[string]*resolution // by equality delete file location
	// addedEq groups the equality delete files live in the new snapshot
	// only by their equality field IDs, so that each group is resolved in
	// one call.
	addedEq map[string][]iceberg.DataFile
	// eqNewOnly and eqOldOnly hold the equality delete files live in one
	// snapshot only (see tablescan.DeleteIndex.EqualityNotIn).
	eqNewOnly, eqOldOnly *tablescan.DeleteIndex
	// fileAt and posAt are the places of _file and _pos in an entry (-1:
	// none); identity maps a source field ID to the place of the entry
	// field that holds its value unchanged.
	fileAt, posAt int
	identity      map[int]int
}

func (d *delta) openSide(snap *table.Snapshot) (*side, error) {
	s := &side{snap: snap, schema: lineage.SnapshotSchema(d.tbl, snap)}
	if snap != nil {
		var err error
		if s.manifests, err = tablescan.ManifestList(d.fs, snap); err != nil {
			return nil, err
		}
	}
	deletes, err := tablescan.PlanDeletes(d.ctx, d.tbl, snap)
	if err != nil {
		return nil, err
	}
	s.deletes = deletes
	columns, err := tablescan.TopLevelColumns(s.schema, d.is.SourceFieldIDs())
	if err != nil {
		return nil, err
	}
	s.posCol = slices.Index(columns, format.FieldIDPos)
	if s.posCol < 0 {
		s.posCol = len(columns)
		columns = append(columns, format.FieldIDPos)
	}
	s.scan = tablescan.Options{
		Columns:       columns,
		BatchRows:     d.opts.BatchRows,
		NameMapping:   d.tbl.NameMapping(),
		FormatVersion: d.tbl.Metadata().Version(),
		Allocator:     d.opts.Allocator,
	}
	return s, nil
}

func (d *delta) run() error {
	listedOld := map[string]bool{}
	for _, m := range d.old.manifests {
		listedOld[m.FilePath()] = true
	}
	listedNew := map[string]bool{}
	for _, m := range d.new.manifests {
		listedNew[m.FilePath()] = true
	}
	// A manifest file is immutable, so one both snapshots list contributes
	// the same live files to both: only the others can hold differences.
	var common []iceberg.ManifestFile
	var onlyOld, onlyNew []iceberg.ManifestFile
	for _, m := range d.old.manifests {
		if !listedNew[m.FilePath()] {
			onlyOld = append(onlyOld, m)
		}
	}
	for _, m := range d.new.manifests {
		if listedOld[m.FilePath()] {
			common = append(common, m)
		} else {
			onlyNew = append(onlyNew, m)
		}
	}
	dataOld, delOld, err := d.liveFiles(onlyOld)
	if err != nil {
		return err
	}
	dataNew, delNew, err := d.liveFiles(onlyNew)
	if err != nil {
		return err
	}
	d.addedEq = map[string][]iceberg.DataFile{}
	for _, p := range slices.Sorted(maps.Keys(delNew)) {
		if _, ok := delOld[p]; ok {
			continue
		}
		d.stats.DeleteFilesAdded++
		if df := delNew[p]; df.ContentType() == iceberg.EntryContentEqDeletes {
			k := equalityGroup(df)
			d.addedEq[k] = append(d.addedEq[k], df)
		}
	}
	for p := range delOld {
		if _, ok := delNew[p]; !ok {
			d.stats.DeleteFilesRemoved++
		}
	}

	var both []tablescan.Entry // live in both and listed by manifests of one only
	var added, removed []tablescan.Entry
	for _, ref := range sortedRefs(dataNew) {
		if _, ok := dataOld[ref.File.FilePath()]; ok {
			both = append(both, ref)
		} else {
			added = append(added, ref)
		}
	}
	for _, ref := range sortedRefs(dataOld) {
		if _, ok := dataNew[ref.File.FilePath()]; !ok {
			removed = append(removed, ref)
		}
	}
	d.stats.DataFilesAdded, d.stats.DataFilesRemoved = len(added), len(removed)
	if d.stats.DeleteFilesAdded+d.stats.DeleteFilesRemoved == 0 {
		// The delete state of a file depends only on the live delete files,
		// so files live in both are unchanged.
		return d.diffWholeFiles(added, removed)
	}
	// The files live in one snapshot only are read whole while the files
	// live in both are compared where their deletes changed: an upsert adds
	// a data file and deletes rows of older ones, and the two take a core
	// each. The whole files get a delta of their own (stats, context), the
	// sink is taken by one at a time.
	g, gctx := errgroup.WithContext(d.ctx)
	var mu sync.Mutex
	sink := d.sink
	d.sink = func(entry format.Key, count int) error {
		mu.Lock()
		defer mu.Unlock()
		return sink(entry, count)
	}
	whole := *d
	whole.ctx, whole.stats = gctx, DeltaStats{}
	d.ctx = gctx
	g.Go(func() error { return whole.diffWholeFiles(added, removed) })
	g.Go(func() error { return d.diffChanged(both, common) }) // the first error stops the other
	err = g.Wait()
	d.stats.add(whole.stats)
	return err
}

// diffWholeFiles emits the entries of the data files added (inserts) and
// removed (deletes).
func (d *delta) diffWholeFiles(added, removed []tablescan.Entry) error {
	for _, ref := range added {
		if err := d.diffWhole(nil, d.new, ref); err != nil {
			return err
		}
	}
	for _, ref := range removed {
		if err := d.diffWhole(d.old, nil, ref); err != nil {
			return err
		}
	}
	return nil
}

// diffChanged compares the data files live in both snapshots whose
// deletes changed: both (listed by manifests of one snapshot only) and the
// files of the manifests common lists.
func (d *delta) diffChanged(both []tablescan.Entry, common []iceberg.ManifestFile) error {
	d.eqNewOnly, d.eqOldOnly = d.new.deletes.EqualityNotIn(d.old.deletes), d.old.deletes.EqualityNotIn(d.new.deletes)
	var plans []*bothPlan
	plan := func(ref tablescan.Entry) error {
		p, err := d.planBoth(ref)
		if p != nil {
			plans = append(plans, p)
		}
		return err
	}
	for _, ref := range both {
		if err := plan(ref); err != nil {
			return err
		}
	}
	for _, m := range common {
		if m.ManifestContent() != iceberg.ManifestContentData {
			continue
		}
		entries, err := tablescan.LiveEntries(d.ctx, d.fs, m)
		if err != nil {
			return err
		}
		for _, e := range entries {
			if err := plan(e); err != nil {
				return err
			}
		}
	}
	for _, p := range plans {
		if err := d.ctx.Err(); err != nil {
			return err
		}
		if err := d.diffBoth(p); err != nil {
			return err
		}
	}
	return nil
}

// liveFiles reads the live entries of manifests: data files and delete
// files, by location.
func (d *delta) liveFiles(manifests []iceberg.ManifestFile) (map[string]tablescan.Entry, map[string]iceberg.DataFile, error) {
	data, deletes := map[string]tablescan.Entry{}, map[string]iceberg.DataFile{}
	for _, m := range manifests {
		entries, err := tablescan.LiveEntries(d.ctx, d.fs, m)
		if err != nil {
			return nil, nil, err
		}
		for _, e := range entries {
			if e.File.ContentType() == iceberg.EntryContentData {
				data[e.File.FilePath()] = e
			} else {
				deletes[e.File.FilePath()] = e.File
			}
		}
	}
	return data, deletes, nil
}

// missingFrom returns the files of l that other lacks, by location.
func missingFrom(l, other []tablescan.DeleteFile) []tablescan.DeleteFile {
	if len(l) == 0 {
		return nil
	}
	in := make(map[string]bool, len(other))
	for _, y := range other {
		in[y.File.FilePath()] = true
	}
	var out []tablescan.DeleteFile
	for _, x := range l {
		if !in[x.File.FilePath()] {
			out = append(out, x)
		}
	}
	return out
}

func sortedRefs(m map[string]tablescan.Entry) []tablescan.Entry {
	out := make([]tablescan.Entry, 0, len(m))
	for _, r := range m {
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b tablescan.Entry) int { return cmp.Compare(a.File.FilePath(), b.File.FilePath()) })
	return out
}

// diffWhole emits a file live on one side only: all its live rows go
// (-1, from old) or come (+1, from new).
func (d *delta) diffWhole(old, new *side, ref tablescan.Entry) error {
	var delOld, delNew *tablescan.FileDeletes
	var err error
	if old != nil {
		if delOld, err = old.deletes.Load(d.ctx, d.fs, old.schema, ref.File, ref.Seq, old.scan); err != nil {
			return err
		}
	}
	if new != nil {
		if delNew, err = new.deletes.Load(d.ctx, d.fs, new.schema, ref.File, ref.Seq, new.scan); err != nil {
			return err
		}
	}
	return d.diffFile(ref.File, delOld, delNew)
}

// bothPlan says where to compare a data file live in both snapshots.
type bothPlan struct {
	ref       tablescan.Entry
	positions bool              // its position deletes differ: compare where they do
	whole     bool              // an equality delete no resolver narrowed: compare every row
	keys      bool              // an equality delete stopped applying: compare live positions by the equality columns
	explicit  *roaring64.Bitmap // positions an EqualityResolver named
	// entries are the index entries at explicit, when every resolution
	// that named them gave entries (indexed); see deleteIndexed.
	entries []format.Key
	indexed bool
}

// planBoth decides whether a file live in both snapshots may have changed:
// only if the delete files that apply to it differ. A changed position
// delete or deletion vector (a replacing vector included) limits the
// comparison to the positions the two states differ at; an added equality
// delete to the positions the resolver names, or without one, to none: the
// whole file is compared. A removed equality delete may bring rows back
// that are in no index of the old snapshot; which ones is decided by
// reading only the equality columns (keys), and the rows whose liveness
// changed are compared. It returns nil for an unchanged file.
func (d *delta) planBoth(ref tablescan.Entry) (*bothPlan, error) {
	// What applies in the new snapshot only, and in the old only: the
	// position deletes compared file by file (a new deletion vector hides
	// the position delete files it replaces), the equality deletes taken
	// from those that one snapshot holds and the other does not.
	posOld := d.old.deletes.ApplicablePositions(ref.File, ref.Seq)
	posNew := d.new.deletes.ApplicablePositions(ref.File, ref.Seq)
	newOnly := append(missingFrom(posNew, posOld), d.eqNewOnly.Applicable(ref.File, ref.Seq)...)
	oldOnly := append(missingFrom(posOld, posNew), d.eqOldOnly.Applicable(ref.File, ref.Seq)...)
	p := &bothPlan{ref: ref, explicit: roaring64.New(), indexed: true}
	seen := map[*resolution]bool{} // the delete files of a group share one
	changed := false
	classify := func(x tablescan.DeleteFile, added bool) error {
		changed = true
		if x.File.ContentType() == iceberg.EntryContentPosDeletes {
			p.positions = true
			return nil
		}
		if !added {
			p.keys = true
			return nil
		}
		r, err := d.resolve(x.File)
		if err != nil {
			return err
		}
		if !r.ok {
			p.whole = true
			return nil
		}
		for _, pos := range r.byFile[ref.File.FilePath()] {
			if pos >= 0 {
				p.explicit.Add(uint64(pos))
			}
		}
		if !seen[r] {
			seen[r] = true
			p.entries = append(p.entries, r.entries[ref.File.FilePath()]...)
			p.indexed = p.indexed && r.entries != nil
		}
		return nil
	}
	for _, x := range newOnly {
		if err := classify(x, true); err != nil {
			return nil, err
		}
	}
	for _, x := range oldOnly {
		if err := classify(x, false); err != nil {
			return nil, err
		}
	}
	if !changed || !p.positions && !p.whole && !p.keys && p.explicit.IsEmpty() {
		return nil, nil
	}
	return p, nil
}

// diffBoth compares a file live in both snapshots as planned.
func (d *delta) diffBoth(p *bothPlan) error {
	ref := p.ref
	// How many of the file's rows the comparison tests: all of them when it
	// reads the whole file or its equality columns, else the ones the
	// resolvers named. The delete states are loaded for that many rows: an
	// upsert reaches a few rows of each older file, and merging the
	// equality deletes of the table's whole history for each of them cost
	// more than the rest of an update (see tablescan.DeleteIndex.LoadFor).
	named := !p.whole && !p.keys && !p.positions
	rows := ref.File.Count()
	if named {
		rows = max(int64(len(p.entries)), int64(p.explicit.GetCardinality()))
	}
	delNew, err := d.new.deletes.LoadFor(d.ctx, d.fs, d.new.schema, ref.File, ref.Seq, d.new.scan, rows)
	if err != nil {
		return err
	}
	if named && p.indexed {
		if done, err := d.deleteIndexed(p, delNew); done || err != nil {
			return err
		}
	}
	delOld, err := d.old.deletes.LoadFor(d.ctx, d.fs, d.old.schema, ref.File, ref.Seq, d.old.scan, rows)
	if err != nil {
		return err
	}
	if p.whole {
		d.stats.EqualityDeleteSlowPath++
		return d.diffFile(ref.File, delOld, delNew)
	}
	keep := p.explicit
	switch {
	case p.keys:
		// The positions live on exactly one side are the rows whose
		// liveness changed, whatever changed it: the removed equality
		// delete, the position deletes, the added equality deletes.
		d.stats.EqualityKeyReads++
		liveOld, liveNew, err := d.liveBoth(ref.File, delOld, delNew)
		if err != nil {
			return err
		}
		keep = roaring64.Xor(liveOld, liveNew)
	case p.positions:
		posOld, err := positionsOf(delOld)
		if err != nil {
			return err
		}
		posNew, err := positionsOf(delNew)
		if err != nil {
			return err
		}
		keep.Or(roaring64.Xor(posOld, posNew))
	}
	if keep.IsEmpty() {
		return nil
	}
	return d.diffFile(ref.File, restrict(delOld, keep), restrict(delNew, keep))
}

// deleteIndexed emits the deletes of a file that only added equality
// deletes changed, from the entries the resolver read in the index of the
// old snapshot: each is live there, and is deleted when the new delete
// state removes it (the resolver may name rows that no added delete
// removes: rows of another partition, or of keys of another group). done is
// false, and nothing is emitted, when some equality set of the new state
// tests a field that the entries do not hold as it is in the row: then the
// file is read.
func (d *delta) deleteIndexed(p *bothPlan, delNew *tablescan.FileDeletes) (done bool, err error) {
	tuples := make([][]int, len(delNew.Equality)) // by set: the places in an entry of its fields
	for i, set := range delNew.Equality {
		for _, id := range set.FieldIDs {
			at, ok := d.identity[id]
			if !ok {
				return false, nil
			}
			tuples[i] = append(tuples[i], at)
		}
	}
	d.stats.EqualityFromIndex++
	emitted := roaring64.New() // a row named by two resolutions is deleted once
	var tuple format.Key
	for _, e := range p.entries {
		pos, ok := e[d.posAt].(int64)
		if !ok || !emitted.CheckedAdd(uint64(pos)) {
			continue
		}
		dead := delNew.Positions != nil && delNew.Positions.Contains(uint64(pos))
		for i, set := range delNew.Equality {
			if dead {
				break
			}
			tuple = tuple[:0]
			for _, at := range tuples[i] {
				tuple = append(tuple, e[at])
			}
			if dead, err = set.Contains(tuple); err != nil {
				return true, fmt.Errorf("equality deletes of %s: %w", p.ref.File.FilePath(), err)
			}
		}
		if !dead {
			continue
		}
		d.stats.Deletes++
		if err := d.sink(e, -1); err != nil {
			return true, err
		}
	}
	return true, nil
}

// livePositions returns the positions of the rows of file live under
// deletes on side s, reading no column but keyCols, the columns the
// equality deletes of both sides compare (so that both sides read the
// same, and a read is never of no column at all).
// liveBoth returns the positions of file's rows live under its old and its
// new delete state: from one read of the file's equality columns when both
// snapshots read it with the same schema, else from a scan under each.
func (d *delta) liveBoth(file iceberg.DataFile, delOld, delNew *tablescan.FileDeletes) (liveOld, liveNew *roaring64.Bitmap, err error) {
	if d.old.schema.ID == d.new.schema.ID {
		live, err := tablescan.LiveRows(d.ctx, d.fs, d.new.schema, file, []*tablescan.FileDeletes{delOld, delNew}, d.new.scan)
		if err != nil {
			return nil, nil, fmt.Errorf("live positions of %s: %w", file.FilePath(), err)
		}
		return live[0], live[1], nil
	}
	var keyCols []int
	for _, set := range slices.Concat(delOld.Equality, delNew.Equality) {
		for _, id := range set.FieldIDs {
			if !slices.Contains(keyCols, id) {
				keyCols = append(keyCols, id)
			}
		}
	}
	if liveOld, err = d.livePositions(d.old, file, delOld, keyCols); err != nil {
		return nil, nil, err
	}
	if liveNew, err = d.livePositions(d.new, file, delNew, keyCols); err != nil {
		return nil, nil, err
	}
	return liveOld, liveNew, nil
}

func (d *delta) livePositions(s *side, file iceberg.DataFile, deletes *tablescan.FileDeletes, keyCols []int) (*roaring64.Bitmap, error) {
	opts := s.scan
	opts.Columns = append(slices.Clone(keyCols), format.FieldIDPos)
	posCol := len(keyCols)
	out := roaring64.New()
	err := tablescan.ScanFile(d.ctx, d.fs, s.schema, file, deletes, opts, func(rec arrow.RecordBatch) error {
		pos, ok := rec.Column(posCol).(*array.Int64)
		if !ok {
			return fmt.Errorf("scan of %s: _pos is %s", file.FilePath(), rec.Column(posCol).DataType())
		}
		for i := range pos.Len() {
			out.Add(uint64(pos.Value(i)))
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("live positions of %s: %w", file.FilePath(), err)
	}
	return out, nil
}

func positionsOf(fd *tablescan.FileDeletes) (*roaring64.Bitmap, error) {
	return tablescan.FromDV(fd.Positions)
}

// restrict returns the delete state fd limited to the rows at keep, so that
// a scan reads only the row groups holding them and passes on only them.
func restrict(fd *tablescan.FileDeletes, keep *roaring64.Bitmap) *tablescan.FileDeletes {
	return &tablescan.FileDeletes{Positions: fd.Positions, Equality: fd.Equality, Within: keep}
}

// equalityGroup names the equality fields of an equality delete file, in
// the order its tuples hold them.
func equalityGroup(del iceberg.DataFile) string { return fmt.Sprint(del.EqualityFieldIDs()) }

// resolve says which rows of the old snapshot an equality delete file may
// remove. The first file of a group of added files with the same equality
// fields resolves the tuples of the whole group in one call, whose answer
// every file of the group shares: one pass over the index whether the
// delta spans one commit or a hundred, where a call per file would read
// the index once per skipped commit. A file thus also names rows that only
// the group's other files delete, which costs reading those positions, never
// correctness: a row live on both sides with the same entry cancels out.
func (d *delta) resolve(del iceberg.DataFile) (*resolution, error) {
	if r, ok := d.resolved[del.FilePath()]; ok {
		return r, nil
	}
	group := []iceberg.DataFile{del}
	if files := d.addedEq[equalityGroup(del)]; slices.ContainsFunc(files, func(f iceberg.DataFile) bool { return f.FilePath() == del.FilePath() }) {
		group = files
	}
	r := &resolution{}
	if d.opts.Equality != nil {
		ids := del.EqualityFieldIDs()
		var tuples []format.Key
		for _, f := range group {
			t, err := d.equalityTuples(f, ids)
			if err != nil {
				return nil, err
			}
			tuples = append(tuples, t...)
		}
		d.stats.EqualityResolves++
		if er, ok := d.opts.Equality.(EqualityEntryResolver); ok && d.posAt >= 0 && d.fileAt >= 0 {
			entries, ok, err := er.ResolveEqualityEntries(d.ctx, ids, tuples)
			if err != nil {
				return nil, fmt.Errorf("resolve equality deletes of %s and %d more: %w", del.FilePath(), len(group)-1, err)
			}
			if ok {
				r.ok, r.byFile, r.entries = true, map[string][]int64{}, map[string][]format.Key{}
				for _, e := range entries {
					path, _ := e[d.fileAt].(string)
					pos, _ := e[d.posAt].(int64)
					r.byFile[path] = append(r.byFile[path], pos)
					r.entries[path] = append(r.entries[path], e)
				}
			}
		}
		if !r.ok {
			byFile, ok, err := d.opts.Equality.ResolveEquality(d.ctx, ids, tuples)
			if err != nil {
				return nil, fmt.Errorf("resolve equality deletes of %s and %d more: %w", del.FilePath(), len(group)-1, err)
			}
			r.ok, r.byFile = ok, byFile
		}
	}
	for _, f := range group {
		d.resolved[f.FilePath()] = r
	}
	return r, nil
}

// dataView lets the data file reader read an equality delete file, which
// is a Parquet file of the equality columns under their field IDs.
type dataView struct{ iceberg.DataFile }

func (dataView) ContentType() iceberg.ManifestEntryContent { return iceberg.EntryContentData }

// equalityTuples reads the rows of an equality delete file as the values of
// ids, typed by the new snapshot's schema.
func (d *delta) equalityTuples(del iceberg.DataFile, ids []int) ([]format.Key, error) {
	types := make([]iceberg.Type, len(ids))
	for i, id := range ids {
		f, ok := d.new.schema.FindFieldByID(id)
		if !ok {
			return nil, fmt.Errorf("equality delete file %s: field %d is not in the schema", del.FilePath(), id)
		}
		types[i] = f.Type
	}
	opts := d.new.scan
	opts.Columns = ids
	var tuples []format.Key
	err := tablescan.ScanFile(d.ctx, d.fs, d.new.schema, dataView{del}, nil, opts, func(rec arrow.RecordBatch) error {
		for i := range int(rec.NumRows()) {
			t := make(format.Key, len(ids))
			for j := range ids {
				t[j] = format.ValueAtAs(types[j], rec.Column(j), i)
			}
			tuples = append(tuples, t)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read equality delete file %s: %w", del.FilePath(), err)
	}
	return tuples, nil
}

// diffFile compares the live rows of one data file under two delete states
// (nil: the file is not live on that side) position by position and emits
// the difference.
func (d *delta) diffFile(file iceberg.DataFile, delOld, delNew *tablescan.FileDeletes) error {
	d.stats.FilesScanned++
	oldRows, err := d.open(d.old, file, delOld)
	if err != nil {
		return err
	}
	defer oldRows.close()
	newRows, err := d.open(d.new, file, delNew)
	if err != nil {
		return err
	}
	defer newRows.close()
	for !oldRows.done || !newRows.done {
		switch {
		case newRows.done || !oldRows.done && oldRows.pos() < newRows.pos():
			if err := d.emit(oldRows, -1); err != nil {
				return err
			}
			err = oldRows.advance()
		case oldRows.done || newRows.pos() < oldRows.pos():
			if err := d.emit(newRows, +1); err != nil {
				return err
			}
			err = newRows.advance()
		default:
			if err := oldRows.load(d.codec); err != nil {
				return err
			}
			if err := newRows.load(d.codec); err != nil {
				return err
			}
			if !bytes.Equal(oldRows.val, newRows.val) {
				if err := d.emit(oldRows, -1); err != nil {
					return err
				}
				if err := d.emit(newRows, +1); err != nil {
					return err
				}
			}
			if err = oldRows.advance(); err == nil {
				err = newRows.advance()
			}
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func (d *delta) emit(c *rowCursor, count int) error {
	c.row = d.codec.Row(c.row, c.batch.entries, c.i)
	if count > 0 {
		d.stats.Inserts++
	} else {
		d.stats.Deletes++
	}
	return d.sink(c.row, count)
}

// rowBatch is a batch of entries with the file positions of their rows.
type rowBatch struct {
	entries arrow.RecordBatch
	pos     *array.Int64
}

// rowCursor walks the live rows of one data file on one side, in position
// order, pulling batches from the scan as it goes.
type rowCursor struct {
	next  func() (rowBatch, error, bool)
	stop  func()
	batch rowBatch
	i     int
	done  bool
	row   format.Key
	val   []byte
}

var errStopped = errors.New("scan stopped")

// open starts reading file on side s under deletes; a nil deletes gives a
// cursor that is done at once.
func (d *delta) open(s *side, file iceberg.DataFile, deletes *tablescan.FileDeletes) (*rowCursor, error) {
	c := &rowCursor{done: true}
	if deletes == nil {
		return c, nil
	}
	seq := func(yield func(rowBatch, error) bool) {
		stopped := false
		err := tablescan.ScanFile(d.ctx, d.fs, s.schema, file, deletes, s.scan, func(src arrow.RecordBatch) error {
			entries, err := format.Entries(d.opts.Allocator, d.is, format.RecordColumns(src, s.schema))
			if err != nil {
				return fmt.Errorf("index entries of %s: %w", file.FilePath(), err)
			}
			defer entries.Release()
			pos, ok := src.Column(s.posCol).(*array.Int64)
			if !ok {
				return fmt.Errorf("scan of %s: _pos is %s", file.FilePath(), src.Column(s.posCol).DataType())
			}
			if !yield(rowBatch{entries: entries, pos: pos}, nil) {
				stopped = true
				return errStopped
			}
			return nil
		})
		if err != nil && !stopped {
			yield(rowBatch{}, err)
		}
	}
	c.next, c.stop = iter.Pull2(iter.Seq2[rowBatch, error](seq))
	c.done = false
	c.i = -1
	if err := c.advance(); err != nil {
		c.stop()
		return nil, err
	}
	return c, nil
}

func (c *rowCursor) close() {
	if c.stop != nil {
		c.stop()
	}
}

func (c *rowCursor) advance() error {
	c.i++
	for c.batch.entries == nil || c.i >= int(c.batch.entries.NumRows()) {
		b, err, ok := c.next()
		if !ok {
			c.done, c.batch = true, rowBatch{}
			return nil
		}
		if err != nil {
			c.done = true
			return err
		}
		c.batch, c.i = b, 0
	}
	return nil
}

func (c *rowCursor) pos() int64 { return c.batch.pos.Value(c.i) }

// load reads the current row's entry and its encoding.
func (c *rowCursor) load(codec *format.EntryCodec) error {
	c.row = codec.Row(c.row, c.batch.entries, c.i)
	var err error
	c.val, err = codec.AppendValue(c.val[:0], c.row)
	return err
}
