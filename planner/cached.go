package planner

import (
	"context"
	"strconv"

	"github.com/apache/arrow-go/v18/arrow/compute"

	"github.com/streamidx/streamidx/format"
	"github.com/streamidx/streamidx/internal/objstore"
)

// maxNarrowRanges is the most key ranges of a narrow lookup, which reads
// range files page by page (and through the store's lookup cache when it
// keeps one): a few keys land in a few pages; an IN of thousands of keys
// touches most pages, and reads column chunks whole as a scan does.
const maxNarrowRanges = 64

// fileInfo is what the cache keeps of a range file: its row groups' sizes
// and statistics, converted for the lookup's index schema.
type fileInfo struct {
	rows  []int64
	stats []map[int]*format.FieldStats
}

// lazyRange opens a range file on first use: a lookup served from the
// cache does not open its file at all.
type lazyRange struct {
	ru *run
	te *format.TrackingEntry
	rf *objstore.RangeFile
}

func (l *lazyRange) get(ctx context.Context) (*objstore.RangeFile, error) {
	if l.rf != nil {
		return l.rf, nil
	}
	rf, err := l.ru.p.opts.Store.OpenRange(ctx, l.te, l.ru.is, format.RangeFileReadOptions{BatchRows: l.ru.p.opts.BatchRows, Allocator: l.ru.mem, Streamed: true})
	if err != nil {
		return nil, err
	}
	l.rf = rf
	return rf, nil
}

func (l *lazyRange) close() error {
	if l.rf == nil {
		return nil
	}
	l.ru.res.Stats.BytesRead += l.rf.BytesRead()
	return l.rf.Close()
}

// cacheKey is the key of what a lookup keeps of a file in the store's
// lookup cache: kind, the numbers that say which part of the file, and the
// run's layout (see columns.layout). Built for every page a lookup reads,
// so without fmt.
func (ru *run) cacheKey(kind string, nums ...int64) string {
	b := make([]byte, 0, len(kind)+len(ru.layout)+1+len(nums)*8)
	b = append(b, kind...)
	for _, n := range nums {
		b = append(b, '/')
		b = strconv.AppendInt(b, n, 10)
	}
	b = append(b, '/')
	b = append(b, ru.layout...)
	return string(b)
}

// readCached is readRangeFile through the store's lookup cache: row-group
// statistics, the page index of the leading filtered cluster field and the
// decoded blocks of the pages a lookup keeps are read once and kept, so a
// lookup that finds them cached reads nothing from storage.
func (ru *run) readCached(ctx context.Context, te *format.TrackingEntry, fp *FilePlan, field int) (err error) {
	lr := &lazyRange{ru: ru, te: te}
	defer func() {
		if cerr := lr.close(); err == nil {
			err = cerr
		}
	}()
	st := &ru.res.Stats
	st.RangeFilesRead++
	info, err := ru.cachedGroups(ctx, lr)
	if err != nil {
		return err
	}
	var groups []int
	for g, rows := range info.rows {
		if _, pruned := ru.prunedByStats(info.stats[g]); rows > 0 && !pruned {
			groups = append(groups, g)
		}
	}
	fp.RowGroups, fp.RowGroupsRead = len(info.rows), len(groups)
	st.RowGroupsTotal += fp.RowGroups
	st.RowGroupsRead += fp.RowGroupsRead
	keys := ru.filterColumns()
	colOf := map[int]int{}
	for i, id := range keys {
		colOf[id] = i
	}
	ctx = compute.WithAllocator(ctx, ru.mem)
	for _, g := range groups {
		pages, err := ru.cachedPages(ctx, lr, info, g, field)
		if err != nil {
			return err
		}
		st.PagesTotal += len(pages)
		for _, p := range pages {
			stats := p.Stats
			if p.OnlyNulls {
				n := p.Rows
				stats = &format.FieldStats{ValueCount: &n, NullValueCount: &n, NanValueCount: new(int64)}
			}
			if stats != nil {
				if _, pruned := ru.prunedByStats(map[int]*format.FieldStats{field: stats}); pruned {
					continue
				}
			}
			st.PagesRead++
			blk, err := ru.cachedBlock(ctx, lr, g, p)
			if err != nil {
				return err
			}
			if err := ru.consumeBlock(ctx, blk, field, keys, colOf); err != nil {
				return err
			}
		}
	}
	return nil
}

// cachedGroups returns the row groups' sizes and statistics of lr's file,
// through the lookup cache.
func (ru *run) cachedGroups(ctx context.Context, lr *lazyRange) (*fileInfo, error) {
	return objstore.Cached(ctx, ru.p.opts.Store, lr.te.FilePath, ru.cacheKey("groups"), func(ctx context.Context) (*fileInfo, int64, error) {
		rf, err := lr.get(ctx)
		if err != nil {
			return nil, 0, err
		}
		fi := &fileInfo{}
		for g := range rf.NumRowGroups() {
			rows, stats := rf.RowGroupStats(g)
			fi.rows = append(fi.rows, rows)
			fi.stats = append(fi.stats, stats)
		}
		return fi, int64(len(fi.rows)) * int64(64+128*len(ru.schema.Fields())), nil
	})
}

// cachedPages returns the pages of row group g of lr's file by the page
// index of field, through the lookup cache; a row group without a page
// index is one page.
func (ru *run) cachedPages(ctx context.Context, lr *lazyRange, info *fileInfo, g, field int) ([]format.PageStats, error) {
	pages, err := objstore.Cached(ctx, ru.p.opts.Store, lr.te.FilePath, ru.cacheKey("pages", int64(g), int64(field)), func(ctx context.Context) ([]format.PageStats, int64, error) {
		rf, err := lr.get(ctx)
		if err != nil {
			return nil, 0, err
		}
		pages, err := rf.PageStats(g, field)
		return pages, int64(len(pages)) * 160, err
	})
	if err != nil {
		return nil, err
	}
	if len(pages) == 0 {
		pages = []format.PageStats{{FirstRow: 0, Rows: info.rows[g]}}
	}
	return pages, nil
}

// cachedBlock returns the decoded rows of page p of row group g of lr's
// file, through the lookup cache.
func (ru *run) cachedBlock(ctx context.Context, lr *lazyRange, g int, p format.PageStats) (*format.Block, error) {
	return objstore.Cached(ctx, ru.p.opts.Store, lr.te.FilePath, ru.cacheKey("block", int64(g), p.FirstRow, p.Rows), func(ctx context.Context) (*format.Block, int64, error) {
		rf, err := lr.get(ctx)
		if err != nil {
			return nil, 0, err
		}
		b, err := rf.ReadBlock(ctx, g, p.FirstRow, p.Rows)
		if err != nil {
			return nil, 0, err
		}
		return b, b.Bytes(), nil
	})
}

// warmFile reads every page of te's range file into the lookup cache, by
// the page index of field, until the blocks it holds reach budget bytes;
// it returns the bytes of the blocks it read or found.
func (ru *run) warmFile(ctx context.Context, te *format.TrackingEntry, field int, budget int64) (n int64, err error) {
	lr := &lazyRange{ru: ru, te: te}
	defer func() {
		if cerr := lr.close(); err == nil {
			err = cerr
		}
	}()
	info, err := ru.cachedGroups(ctx, lr)
	if err != nil {
		return 0, err
	}
	ctx = compute.WithAllocator(ctx, ru.mem)
	for g, rows := range info.rows {
		if rows == 0 {
			continue
		}
		pages, err := ru.cachedPages(ctx, lr, info, g, field)
		if err != nil {
			return n, err
		}
		for _, p := range pages {
			if n >= budget {
				return n, nil
			}
			if err := ctx.Err(); err != nil {
				return n, err
			}
			blk, err := ru.cachedBlock(ctx, lr, g, p)
			if err != nil {
				return n, err
			}
			n += blk.Bytes()
		}
	}
	return n, nil
}

// consumeBlock finds the matches of a block by the columns the filters
// test, then takes every stored field of just those rows. A filter on
// field, the leading cluster field, which ascends down the block, finds
// its candidates by binary search; the other filters test only those.
func (ru *run) consumeBlock(ctx context.Context, blk *format.Block, field int, keys []int, colOf map[int]int) error {
	st := &ru.res.Stats
	if rows, ok := ru.seek(blk, field); ok {
		st.EntriesScanned += int64(len(rows))
		return ru.consumeRows(ctx, blk, rows)
	}
	st.EntriesScanned += blk.NumRows()
	if len(keys) == 0 || len(keys) == len(ru.res.Fields) {
		b, err := blk.Rows(ctx, nil, nil)
		if err != nil {
			return err
		}
		defer b.Release()
		return ru.consume(ctx, b, true)
	}
	kb, err := blk.Rows(ctx, keys, nil)
	if err != nil {
		return err
	}
	keep, err := ru.match(kb, colOf)
	kb.Release()
	if err != nil {
		return err
	}
	var rows []int64
	for i, k := range keep {
		if k {
			rows = append(rows, int64(i))
		}
	}
	return ru.consumeRows(ctx, blk, rows)
}

// consumeRows takes every stored field of the given rows of a block (none:
// nothing) and keeps their matches.
func (ru *run) consumeRows(ctx context.Context, blk *format.Block, rows []int64) error {
	if len(rows) == 0 {
		return nil
	}
	b, err := blk.Rows(ctx, nil, rows)
	if err != nil {
		return err
	}
	defer b.Release()
	return ru.consume(ctx, b, true)
}

// seek returns the rows of a block that a filter on field admits, found
// by binary search, when the block allows it (see format.Block.SeekInts).
func (ru *run) seek(blk *format.Block, field int) ([]int64, bool) {
	for _, fl := range ru.r.filters {
		if fl.expr != nil || fl.fieldID != field {
			continue
		}
		switch {
		case fl.ints != nil:
			return blk.SeekInts(field, fl.ints.lo, fl.ints.hi)
		case fl.strs != nil:
			return blk.SeekStrings(field, fl.ascStrs)
		}
	}
	return nil, false
}
