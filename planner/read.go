package planner

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/RoaringBitmap/roaring/v2/roaring64"
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/metadata"
	"github.com/apache/iceberg-go"
	"golang.org/x/sync/errgroup"

	"github.com/streamidx/streamidx/format"
	"github.com/streamidx/streamidx/internal/objstore"
	"github.com/streamidx/streamidx/planner/source"
)

// errLimit stops reading once the limit is reached.
var errLimit = errors.New("limit reached")

// run is the state of one lookup.
type run struct {
	p      *Planner
	is     *format.IndexSchema
	r      *resolved
	mem    memory.Allocator
	schema *arrow.Schema // of the stored fields
	colOf  map[int]int   // stored field ID -> column
	// fileCol and posCol are the columns of _file and _pos, or -1.
	fileCol, posCol int
	limit           int64
	recon           source.Reconciler
	// cols are the stored columns as a reconciler sees them.
	cols *source.Columns
	res  *Result
	// narrow is set when the lookup has few key ranges, which land in few
	// pages; cached when it then reads range files through the store's
	// lookup cache (readCached); layout is columns.layout.
	narrow bool
	cached bool
	layout string
}

func (p *Planner) newRun(c *columns, r *resolved, limit int64) *run {
	ru := &run{p: p, is: c.is, r: r, mem: p.opts.Allocator, schema: c.Schema, colOf: c.ColOf, fileCol: c.FileCol, posCol: c.PosCol, limit: limit, layout: c.Layout}
	cols := *c.Columns
	cols.Exact = r.exact
	ru.cols = &cols
	ru.res = &Result{Schema: c.Schema, Fields: c.Fields, fileCol: c.FileCol, posCol: c.PosCol}
	return ru
}

// reconcile makes the run correct its answer with tbl's reconciler from
// table snapshot from (0: none, a table scan) to to.
func (ru *run) reconcile(ctx context.Context, tbl Table, md *format.Metadata, from, to int64, schema *iceberg.Schema) error {
	rc, err := tbl.Reconcile(ctx, source.Request{Index: md, From: from, To: to, Schema: schema,
		IndexSchema: ru.is, Columns: ru.cols, Store: ru.p.opts.Store, Allocator: ru.p.opts.Allocator})
	if err != nil {
		return err
	}
	ru.recon = rc
	ru.res.Plan.RemovedDataFiles = rc.Removed()
	ru.res.Plan.AddedDataFiles = rc.Added()
	return nil
}

// scanAdded reads the live rows of the data files the reconciler found
// added since the index snapshot's table snapshot.
func (ru *run) scanAdded(ctx context.Context) error {
	st := &ru.res.Stats
	return ru.recon.ScanAdded(ctx, ru.cols, ru.mem, func() { st.DataFilesScanned++ },
		func(n int64) { st.DataRowsScanned += n },
		func(stored arrow.RecordBatch) error { return ru.consume(ctx, stored, false) })
}

// execute reads the index snapshot, then the data files added after it.
func (ru *run) execute(ctx context.Context, md *format.Metadata, snap *format.Snapshot) error {
	t, n, err := ru.p.opts.Store.ReadTracking(ctx, md, snap, ru.is)
	if err != nil {
		return err
	}
	st, plan := &ru.res.Stats, &ru.res.Plan
	st.TrackingBytesRead = n
	st.RangeFilesTotal = len(t.Entries)
	plan.Fields = fieldPlans(ru.r)
	types := ru.is.ClusterTypes()

	var ranges []keyRange
	why := make([]int, len(t.Entries))
	switch {
	case ru.r.none:
		for i := range why {
			why[i] = -1
		}
	case t.GroupMax == nil:
		plan.KeyPruningOff = "a tracking entry lacks group_max_value"
		ranges = []keyRange{{lo: keyBound{incl: true}, hi: keyBound{incl: true}}}
	default:
		ranges = keyRanges(ru.r, ru.p.opts.MaxKeyRanges)
		why = chooseFiles(types, t.GroupMax, ranges)
	}
	plan.KeyRanges = len(ranges)
	ru.narrow = len(ranges) <= maxNarrowRanges
	ru.cached = ru.p.opts.Store.LookupCaching() && ru.narrow
	for _, kr := range ranges[:min(len(ranges), maxExplainRanges)] {
		plan.KeyRangeSample = append(plan.KeyRangeSample, formatRange(types, kr))
	}
	var chosen []*format.TrackingEntry
	for i := range t.Entries {
		te := &t.Entries[i]
		if why[i] < 0 {
			plan.PrunedByKey++
			continue
		}
		if f, ok := ru.prunedByStats(te.Stats); ok {
			if plan.PrunedByStats == nil {
				plan.PrunedByStats = map[string]int{}
			}
			plan.PrunedByStats[f]++
			continue
		}
		chosen = append(chosen, te)
		plan.RangeFiles = append(plan.RangeFiles, FilePlan{Path: te.FilePath, Records: te.RecordCount, Bytes: te.FileSizeInBytes,
			KeyRange: formatRange(types, ranges[why[i]])})
	}
	// Many key ranges, or none the page index can use: the lookup reads
	// most row groups of its files, and reads them on every core.
	wide := !ru.narrow || ru.pageField() < 0
	if workers := ru.p.opts.Parallelism; wide && ru.limit == 0 && workers > 1 && len(chosen) > 0 {
		if err := ru.readParallel(ctx, chosen, plan.RangeFiles, workers); err != nil {
			return err
		}
	} else {
		for i, te := range chosen {
			err := ru.readRangeFile(ctx, te, &plan.RangeFiles[i])
			if errors.Is(err, errLimit) {
				plan.RangeFiles = plan.RangeFiles[:i+1]
				return nil
			}
			if err != nil {
				return err
			}
		}
	}
	if ru.recon != nil && !ru.r.none {
		err := ru.scanAdded(ctx)
		if errors.Is(err, errLimit) {
			return nil
		}
		return err
	}
	return nil
}

const maxExplainRanges = 10

// prunedByStats reports the first field whose statistics show that no
// entry of a file can match, by name.
func (ru *run) prunedByStats(stats map[int]*format.FieldStats) (string, bool) {
	for _, f := range ru.is.Fields() {
		if set, ok := ru.r.sets[f.ID]; ok && !mayMatch(set, stats[f.ID]) {
			return f.Name, true
		}
	}
	return "", false
}

// readParallel reads the chosen range files of a wide lookup (many key
// ranges, or none the page index can use; no limit) on up to workers
// goroutines: each file is opened once here, its row groups picked and
// split into as many parts as keep every worker busy, each part read with
// a reader of its own (given the footer already parsed) into a run of its
// own, and the parts' answers joined in file and row-group order, as a
// sequential read has them.
func (ru *run) readParallel(ctx context.Context, chosen []*format.TrackingEntry, plans []FilePlan, workers int) error {
	type part struct {
		te     *format.TrackingEntry
		rf     *objstore.RangeFile // opened here for the first part, by the worker for the others
		footer *metadata.FileMetaData
		groups []int
		sub    *run
	}
	per := max(1, (workers+len(chosen)-1)/len(chosen))
	var parts []*part
	defer func() {
		for _, pt := range parts {
			if pt.rf != nil {
				pt.rf.Close()
			}
		}
	}()
	for i, te := range chosen {
		rf, err := ru.openRange(ctx, te, nil)
		if err != nil {
			return err
		}
		groups := ru.rowGroups(rf, &plans[i])
		if len(groups) == 0 {
			ru.res.Stats.BytesRead += rf.BytesRead()
			rf.Close()
			continue
		}
		k := min(per, len(groups))
		for n := range k {
			pt := &part{te: te, footer: rf.Footer(), groups: groups[n*len(groups)/k : (n+1)*len(groups)/k], sub: ru.fork()}
			if n == 0 {
				pt.rf = rf
			}
			parts = append(parts, pt)
		}
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(workers)
	for _, pt := range parts {
		g.Go(func() error {
			if pt.rf == nil {
				rf, err := ru.openRange(gctx, pt.te, pt.footer)
				if err != nil {
					return err
				}
				pt.rf = rf
			}
			err := pt.sub.readGroups(gctx, pt.rf, pt.groups)
			pt.sub.res.Stats.BytesRead += pt.rf.BytesRead()
			return err
		})
	}
	err := g.Wait()
	for _, pt := range parts {
		ru.absorb(pt.sub)
	}
	return err
}

// fork returns a run that shares ru's lookup and collects its own answer.
func (ru *run) fork() *run {
	c := *ru
	c.res = &Result{Schema: ru.res.Schema, Fields: ru.res.Fields, fileCol: ru.res.fileCol, posCol: ru.res.posCol}
	return &c
}

// absorb adds the answer of a forked run to ru's.
func (ru *run) absorb(c *run) {
	ru.res.Batches = append(ru.res.Batches, c.res.Batches...)
	c.res.Batches = nil
	ru.res.Stats.add(c.res.Stats)
}

// readRangeFile reads the row groups of one range file that may match.
func (ru *run) readRangeFile(ctx context.Context, te *format.TrackingEntry, fp *FilePlan) error {
	if field := ru.pageField(); ru.cached && field >= 0 {
		return ru.readCached(ctx, te, fp, field)
	}
	rf, err := ru.openRange(ctx, te, nil)
	if err != nil {
		return err
	}
	defer rf.Close()
	defer func() { ru.res.Stats.BytesRead += rf.BytesRead() }()
	return ru.readGroups(ctx, rf, ru.rowGroups(rf, fp))
}

// openRange opens a range file for the lookup, with its footer when one
// was parsed already.
func (ru *run) openRange(ctx context.Context, te *format.TrackingEntry, footer *metadata.FileMetaData) (*objstore.RangeFile, error) {
	return ru.p.opts.Store.OpenRange(ctx, te, ru.is, format.RangeFileReadOptions{BatchRows: ru.p.opts.BatchRows, Allocator: ru.mem,
		Streamed: ru.narrow, Footer: footer})
}

// rowGroups picks the row groups of a range file that may match, and
// counts the file and them in its plan and the statistics.
func (ru *run) rowGroups(rf *objstore.RangeFile, fp *FilePlan) []int {
	var groups []int
	for g := range rf.NumRowGroups() {
		rows, stats := rf.RowGroupStats(g)
		if _, pruned := ru.prunedByStats(stats); rows > 0 && !pruned {
			groups = append(groups, g)
		}
	}
	st := &ru.res.Stats
	fp.RowGroups, fp.RowGroupsRead = rf.NumRowGroups(), len(groups)
	st.RangeFilesRead++
	st.RowGroupsTotal += fp.RowGroups
	st.RowGroupsRead += fp.RowGroupsRead
	return groups
}

// readGroups reads row groups of a range file and keeps the matches.
func (ru *run) readGroups(ctx context.Context, rf *objstore.RangeFile, groups []int) error {
	st := &ru.res.Stats
	if len(groups) == 0 {
		return nil // Read takes nil for every row group
	}
	keys := ru.filterColumns()
	if len(keys) == 0 || len(keys) == len(ru.res.Fields) {
		return rf.Read(ctx, nil, groups, func(b arrow.RecordBatch) error {
			st.EntriesScanned += b.NumRows()
			return ru.consume(ctx, b, true)
		})
	}
	// Find the matching rows by the columns the filters test, then read
	// every column of just those rows: decoding a row group's _file strings
	// would cost a point lookup more than all else.
	colOf := map[int]int{}
	for i, id := range keys {
		colOf[id] = i
	}
	ctx = compute.WithAllocator(ctx, ru.mem)
	for _, g := range groups {
		candidates, all, err := ru.candidateRows(rf.RangeFileReader, g)
		if err != nil {
			return err
		}
		if !all && len(candidates) == 0 {
			continue
		}
		if all && ru.onePass() {
			// Matches in every page: one pass decodes each column once,
			// straight into the values of the kept rows where the file's
			// columns allow.
			done, err := rf.ReadMatchingInts(ctx, g, keys, func(vals [][]int64, valid [][]bool, keep []bool) error {
				st.EntriesScanned += int64(len(keep))
				for _, fl := range ru.r.filters {
					i := colOf[fl.fieldID]
					sweepInts(fl.ints, vals[i], valid[i], keep)
				}
				return nil
			}, func(b arrow.RecordBatch) error { return ru.consume(ctx, b, true) })
			if err != nil {
				return err
			}
			if done {
				continue
			}
			err = rf.ReadMatching(ctx, g, func(b arrow.RecordBatch) ([]bool, error) {
				st.EntriesScanned += b.NumRows()
				return ru.match(b, fieldColumns(b.Schema()))
			}, func(b arrow.RecordBatch) error { return ru.consume(ctx, b, true) })
			if err != nil {
				return err
			}
			continue
		}
		var rows []int64
		var off int64
		collect := func(b arrow.RecordBatch) error {
			keep, err := ru.match(b, colOf)
			if err != nil {
				return err
			}
			for i, k := range keep {
				if !k {
					continue
				}
				if all {
					rows = append(rows, off+int64(i))
				} else {
					rows = append(rows, candidates[off+int64(i)])
				}
			}
			off += b.NumRows()
			st.EntriesScanned += b.NumRows()
			return nil
		}
		if all {
			err = rf.Read(ctx, keys, []int{g}, collect)
		} else {
			err = rf.ReadRows(ctx, keys, g, candidates, collect)
		}
		if err != nil {
			return err
		}
		if len(rows) == 0 {
			continue
		}
		err = rf.ReadRows(ctx, nil, g, rows, func(b arrow.RecordBatch) error { return ru.consume(ctx, b, true) })
		if err != nil {
			return err
		}
	}
	return nil
}

// onePass reports whether a row group none of whose pages is pruned is
// read in one pass (format.RangeFileReader.ReadMatching) rather than by
// its key columns first: when every filter tests an integer-like stored
// field, which that pass hands on as a plain column.
func (ru *run) onePass() bool {
	for _, fl := range ru.r.filters {
		if fl.expr != nil || fl.ints == nil {
			return false
		}
	}
	return len(ru.r.filters) > 0
}

// fieldColumns maps the field IDs of a schema's fields to their columns.
func fieldColumns(s *arrow.Schema) map[int]int {
	cols := make(map[int]int, s.NumFields())
	for i, f := range s.Fields() {
		v, _ := f.Metadata.GetValue(format.ParquetFieldIDKey)
		if id, err := strconv.Atoi(v); err == nil {
			cols[id] = i
		}
	}
	return cols
}

// candidateRows prunes the pages of row group g by the page index of the
// first cluster field the predicate restricts, and returns the rows of the
// pages that may match; all is true when no page could be pruned (or the
// file has no page index), and the whole row group is read.
func (ru *run) candidateRows(rf *format.RangeFileReader, g int) (rows []int64, all bool, err error) {
	field := ru.pageField()
	if field < 0 {
		return nil, true, nil
	}
	pages, err := rf.PageStats(g, field)
	if err != nil || len(pages) == 0 {
		return nil, true, err
	}
	st := &ru.res.Stats
	st.PagesTotal += len(pages)
	// The rows are listed only when some page is pruned: a lookup that
	// keeps every page (an IN of many keys) reads the row group whole, and
	// listing its rows one by one cost more than the decode.
	kept, n := make([]int, 0, len(pages)), int64(0)
	for i, p := range pages {
		stats := p.Stats
		if p.OnlyNulls {
			n := p.Rows
			stats = &format.FieldStats{ValueCount: &n, NullValueCount: &n, NanValueCount: new(int64)}
		}
		if _, pruned := ru.prunedByStats(map[int]*format.FieldStats{field: stats}); pruned {
			continue
		}
		kept = append(kept, i)
		n += pages[i].Rows
	}
	st.PagesRead += len(kept)
	if len(kept) == len(pages) {
		return nil, true, nil
	}
	rows = make([]int64, 0, n)
	for _, i := range kept {
		for r := pages[i].FirstRow; r < pages[i].FirstRow+pages[i].Rows; r++ {
			rows = append(rows, r)
		}
	}
	return rows, false, nil
}

// pageField is the first cluster field the predicate restricts that range
// files store, whose page index prunes pages, or -1.
func (ru *run) pageField() int {
	for _, f := range ru.is.ClusterFields() {
		if _, ok := ru.r.sets[f.ID]; ok && f.Stored() {
			return f.ID
		}
	}
	return -1
}

// filterColumns lists the stored fields the filters read.
func (ru *run) filterColumns() []int {
	var ids []int
	add := func(id int) {
		if !slices.Contains(ids, id) {
			ids = append(ids, id)
		}
	}
	for _, fl := range ru.r.filters {
		if fl.expr == nil {
			add(fl.fieldID)
			continue
		}
		for _, src := range format.Refs(fl.expr) {
			add(ru.r.exact[src])
		}
	}
	return ids
}

// match returns which rows of a batch pass every filter; colOf locates the
// stored fields among the batch's columns.
func (ru *run) match(b arrow.RecordBatch, colOf map[int]int) ([]bool, error) {
	keep := make([]bool, b.NumRows())
	for i := range keep {
		keep[i] = true
	}
	for _, fl := range ru.r.filters {
		if err := ru.apply(fl, b, colOf, keep); err != nil {
			return nil, err
		}
	}
	return keep, nil
}

// consume filters a batch of stored fields, from a range file (fromIndex)
// or computed from an added data file, and keeps the matches.
func (ru *run) consume(ctx context.Context, b arrow.RecordBatch, fromIndex bool) error {
	st := &ru.res.Stats
	keep, err := ru.match(b, ru.colOf)
	if err != nil {
		return err
	}
	count := int64(0)
	for i := range keep {
		if keep[i] {
			count++
		}
	}
	if fromIndex {
		st.EntriesMatched += count
		if ru.recon != nil && count > 0 {
			dropped, err := ru.recon.Drop(ctx, ru.cols, b, keep)
			if err != nil {
				return err
			}
			st.EntriesDropped += dropped
			count -= dropped
		}
	} else {
		st.RowsAdded += count
	}
	limited := false
	if ru.limit > 0 && st.Rows+count >= ru.limit {
		room := ru.limit - st.Rows
		for i := range keep {
			if keep[i] {
				if room == 0 {
					keep[i] = false
					count--
				} else {
					room--
				}
			}
		}
		limited = true
	}
	if count > 0 {
		out, err := ru.selectRows(ctx, b, keep, count)
		if err != nil {
			return err
		}
		ru.res.Batches = append(ru.res.Batches, out)
		st.Rows += count
	}
	if limited {
		ru.res.Truncated = true
		return errLimit
	}
	return nil
}

// apply clears keep[i] for the rows whose value is not in the filter's set.
func (ru *run) apply(fl filter, b arrow.RecordBatch, colOf map[int]int, keep []bool) error {
	var col arrow.Array
	if fl.expr == nil {
		col = b.Column(colOf[fl.fieldID])
	} else {
		arr, err := format.Evaluate(ru.mem, fl.expr, fl.typ, storedSource{ru, b, colOf})
		if err != nil {
			return fmt.Errorf("evaluate %s: %w", fl.name, err)
		}
		defer arr.Release()
		col = arr
	}
	if fl.ints != nil && applyInts(fl.ints, col, keep) {
		return nil
	}
	if fl.strs != nil && applyStrings(fl.strs, col, keep) {
		return nil
	}
	for i := range keep {
		if keep[i] {
			keep[i] = fl.set.contains(format.ValueAtAs(fl.typ, col, i))
		}
	}
	return nil
}

// storedSource lets expressions of non-stored index fields be evaluated
// over a batch of stored fields: a source column is the stored field that
// holds it unchanged.
type storedSource struct {
	ru    *run
	b     arrow.RecordBatch
	colOf map[int]int
}

func (s storedSource) Len() int { return int(s.b.NumRows()) }

func (s storedSource) Column(id int) (arrow.Array, error) {
	fid, ok := s.ru.r.exact[id]
	if !ok {
		return nil, fmt.Errorf("field %d is not stored in the index", id)
	}
	return s.b.Column(s.colOf[fid]), nil
}

// selectRows returns a new reference to the kept rows of b.
func (ru *run) selectRows(ctx context.Context, b arrow.RecordBatch, keep []bool, count int64) (arrow.RecordBatch, error) {
	if count == b.NumRows() {
		b.Retain()
		return b, nil
	}
	mb := array.NewBooleanBuilder(ru.mem)
	defer mb.Release()
	mb.AppendValues(keep, nil)
	mask := mb.NewArray()
	defer mask.Release()
	out, err := compute.FilterRecordBatch(compute.WithAllocator(ctx, ru.mem), b, mask, compute.DefaultFilterOptions())
	if err != nil {
		return nil, fmt.Errorf("select matching entries: %w", err)
	}
	return out, nil
}

// Locations returns the matching rows' positions by data file, for an
// index that stores _file and _pos; nil for one that does not. It is made
// from the batches when asked for: most lookups never ask.
func (r *Result) Locations() map[string]*roaring64.Bitmap {
	if r.fileCol < 0 || r.posCol < 0 {
		return nil
	}
	out := map[string]*roaring64.Bitmap{}
	for _, b := range r.Batches {
		files, fok := b.Column(r.fileCol).(*array.String)
		pos, pok := b.Column(r.posCol).(*array.Int64)
		if !fok || !pok {
			continue
		}
		var cur *roaring64.Bitmap
		curFile := ""
		for i := range int(b.NumRows()) {
			if files.IsNull(i) || pos.IsNull(i) {
				continue
			}
			if f := files.Value(i); cur == nil || f != curFile {
				curFile = f
				if cur = out[f]; cur == nil {
					cur = roaring64.New()
					out[f] = cur
				}
			}
			cur.Add(uint64(pos.Value(i)))
		}
	}
	return out
}
