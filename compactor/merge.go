package compactor

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"sort"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/iceberg-go"

	"github.com/streamidx/streamidx/format"
)

// Delta streams the mutations of one sealed delta, in staging-key order: for
// each, the staging key (format.EntryCodec.AppendKey of the entry), the
// encoded entry (EntryCodec.AppendValue, every EntrySchema field, the
// non-materialized ones included) and a signed count: +n inserts n copies of
// the entry, -n deletes n copies. Equal keys may repeat; their counts add
// up. key and value are valid only during the call to yield. A Delta is
// called once and stops when yield returns false; it returns the error that
// ended it early, if any.
type Delta func(yield func(key, value []byte, count int) bool) error

// ErrDeltaMismatch is returned (wrapped, naming the entry) when a delta
// deletes an entry the index does not hold, or a key does not encode its
// entry: the delta was not computed against this index snapshot. The index
// needs a full build; retrying the same merge fails again.
var ErrDeltaMismatch = errors.New("delta does not match the index")

// ErrUnsortedRangeFile is returned (wrapped, naming the file) when a range
// file to rewrite holds entries of one clustering key out of staging-key
// order. The spec allows any order there, but a merge-join needs identity
// order, which every streamidx writer produces; a file from another writer
// calls for a full build.
var ErrUnsortedRangeFile = errors.New("range file entries with equal clustering keys are not in identity order")

// MergeOptions tune an incremental merge.
type MergeOptions struct {
	RangeWriterOptions
	// MinFileSize is the size below which a rewritten range file is merged
	// with an untouched neighbour, and an untouched neighbour is pulled into
	// a rewrite, as long as the two fit in TargetFileSize. Default:
	// TargetFileSize/4.
	MinFileSize int64
	// Logger receives one debug line per rewritten run. Default: discard.
	Logger *slog.Logger
}

// MergeResult is what a merge wrote and kept.
type MergeResult struct {
	// Entries are the range files of the new index snapshot in cluster
	// order: those carried over unchanged (same path, same statistics) and
	// those written.
	Entries []format.TrackingEntry
	// Rewritten counts range files of the previous snapshot that were read
	// and replaced, Reused those carried over, Written the new files.
	Rewritten, Reused, Written int
	// BytesWritten is the size of the new files.
	BytesWritten int64
	// Inserted and Deleted sum the delta's positive and negative counts.
	Inserted, Deleted int64
}

// Merge applies delta to the index snapshot whose range files are prev and
// writes the changed ranges under dir. It reads only the range files that
// the delta's keys fall into, found by binary search on group_max_value
// (keys above the last file's go into the last file, keys below the first
// into the first), plus small neighbours it folds in, and carries every other
// tracking entry over unchanged. Consecutive affected files are rewritten as
// one run, split at TargetFileSize where the clustering key changes.
//
// Entries of rewritten files are matched with the delta as a multiset of
// stored values: each existing entry counts once; a result below zero fails
// with ErrDeltaMismatch. Statistics of a non-materialized field that cannot
// be computed from the stored fields are, in rewritten files, the union of
// the replaced files' bounds and the inserted values, with tight_bounds
// false; deletes only narrow the truth, so the union stays valid.
//
// Merge does not commit. On error the files it wrote are deleted.
func Merge(ctx context.Context, is *format.IndexSchema, prev []format.TrackingEntry, delta Delta, dir string, opts MergeOptions) (*MergeResult, error) {
	opts.ensureDefaults()
	if opts.MinFileSize <= 0 {
		opts.MinFileSize = opts.TargetFileSize / 4
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	m, err := newMerger(ctx, is, prev, dir, opts)
	if err != nil {
		return nil, err
	}
	var deltaErr error
	next, stop := iter.Pull(iter.Seq[mutation](func(yield func(mutation) bool) {
		deltaErr = delta(func(key, value []byte, count int) bool {
			return yield(mutation{key: key, value: value, count: count})
		})
	}))
	m.pull = func() (mutation, bool, error) {
		mu, ok := next()
		if !ok && deltaErr != nil {
			return mu, false, fmt.Errorf("read delta: %w", deltaErr)
		}
		return mu, ok, nil
	}
	err = m.merge()
	stop()
	if err != nil {
		if m.w != nil {
			m.w.Abort()
			m.written = append(m.written, m.w.Written()...)
		}
		RemoveFiles(context.WithoutCancel(ctx), opts.Store, opts.Logger, m.written)
		return nil, err
	}
	m.res.Written = len(m.written)
	return &m.res, nil
}

// mutation is one record of a delta; key and value are copies owned by the
// merger once it is the head.
type mutation struct {
	key, value []byte
	count      int
	target     int // index in prev of the range file the key falls into
}

// merger carries one Merge.
type merger struct {
	ctx   context.Context
	is    *format.IndexSchema
	opts  MergeOptions
	dir   string
	codec *format.EntryCodec
	prev  []format.TrackingEntry

	groupMax     []format.Key // of prev, by index
	clusterTypes []iceberg.Type
	fields       []format.IndexField
	storedPos    []int // positions in fields of the stored fields, StoredSchema order
	storedTypes  []iceberg.Type
	computed     []int // positions of non-materialized fields computed from stored ones
	opaque       []int // positions of non-materialized fields that cannot be computed
	avgEntrySize float64

	pull    func() (mutation, bool, error)
	head    mutation
	hasHead bool
	lastKey []byte // of the last mutation pulled, for the order check
	pulled  int64

	w        *RangeWriter // the open run
	rowsOpen int64        // entries in the run's open file
	outputs  []*outputBounds
	written  []format.TrackingEntry // files of closed runs
	res      MergeResult

	group    group
	oldKey   []byte // staging key of the last entry read from the file being merged
	keyBuf   []byte // scratch: the staging key of an entry read
	checkBuf []byte // scratch: the staging key of a mutation's entry
	encBuf   []byte // scratch: the encoding of an entry's stored values
	fileName string
}

func newMerger(ctx context.Context, is *format.IndexSchema, prev []format.TrackingEntry, dir string, opts MergeOptions) (*merger, error) {
	m := &merger{ctx: ctx, is: is, opts: opts, dir: dir, prev: prev, codec: format.NewEntryCodec(is),
		clusterTypes: is.ClusterTypes(), fields: is.Fields()}
	for i, e := range prev {
		k, ok := e.GroupMaxKey(is)
		if !ok {
			return nil, fmt.Errorf("merge: tracking entry %d (%s) has no group_max_value for every cluster field", i, e.FilePath)
		}
		m.groupMax = append(m.groupMax, k)
	}
	available := map[int]bool{} // source fields and metadata columns stored in range files
	for i, f := range m.fields {
		if !f.Stored() {
			continue
		}
		m.storedPos = append(m.storedPos, i)
		m.storedTypes = append(m.storedTypes, f.Type)
		switch e := f.Expr.(type) {
		case nil:
			available[f.ID] = true
		case format.Ref:
			available[e.ID] = true
		}
	}
	for i, f := range m.fields {
		if f.Stored() {
			continue
		}
		computable := true
		for _, id := range format.Refs(f.Expr) {
			computable = computable && available[id]
		}
		switch {
		case computable:
			m.computed = append(m.computed, i)
		case is.IsCluster(f.ID):
			return nil, fmt.Errorf("merge: cluster field %d (%s) refers to fields that range files do not store", f.ID, f.Expr)
		default:
			m.opaque = append(m.opaque, i)
		}
	}
	var size, rows int64
	for _, e := range prev {
		size += e.FileSizeInBytes
		rows += e.RecordCount
	}
	if rows > 0 {
		m.avgEntrySize = float64(size) / float64(rows)
	}
	return m, nil
}

// merge walks the delta once, rewriting runs of affected files and carrying
// the files between them.
func (m *merger) merge() error {
	if err := m.advance(); err != nil {
		return err
	}
	if len(m.prev) == 0 {
		if !m.hasHead {
			return nil
		}
		if err := m.openRun(); err != nil {
			return err
		}
		if err := m.mergeFile(0, false); err != nil {
			return err
		}
		return m.closeRun(0, -1)
	}
	next := 0 // the first file of prev not yet placed in the result
	for m.hasHead {
		start := m.head.target
		// Pull small untouched files before the run into it while they
		// fit in one file with the run's first file.
		size := m.prev[start].FileSizeInBytes
		for start > next && m.prev[start-1].FileSizeInBytes < m.opts.MinFileSize &&
			size+m.prev[start-1].FileSizeInBytes <= m.opts.TargetFileSize {
			start--
			size += m.prev[start].FileSizeInBytes
		}
		m.carry(next, start)
		if err := m.openRun(); err != nil {
			return err
		}
		cur := start
		extending, absorbed := true, false
		for {
			before := len(m.w.Written())
			if err := m.mergeFile(cur, true); err != nil {
				return err
			}
			if absorbed && len(m.w.Written()) > before {
				// The neighbour did not fit: extending further would only
				// push the remainder along the index.
				extending = false
			}
			if m.hasHead && m.head.target == cur+1 {
				cur, absorbed = cur+1, false
				continue
			}
			if extending && m.absorbNext(cur) {
				cur, absorbed = cur+1, true
				continue
			}
			break
		}
		if err := m.closeRun(start, cur); err != nil {
			return err
		}
		next = cur + 1
	}
	m.carry(next, len(m.prev))
	return nil
}

// absorbNext reports whether the untouched file after cur should join the
// run: when the run's open file or that file is small and both fit in one.
func (m *merger) absorbNext(cur int) bool {
	n := cur + 1
	if n >= len(m.prev) || m.hasHead && m.head.target <= n || m.rowsOpen == 0 {
		return false
	}
	open := max(m.w.openFileSize(), int64(float64(m.rowsOpen)*m.avgEntrySize))
	size := m.prev[n].FileSizeInBytes
	return (open < m.opts.MinFileSize || size < m.opts.MinFileSize) && open+size <= m.opts.TargetFileSize
}

// carry places prev[from:to] in the result unchanged.
func (m *merger) carry(from, to int) {
	if from < to {
		m.res.Entries = append(m.res.Entries, m.prev[from:to]...)
		m.res.Reused += to - from
	}
}

// openFileSize is the estimated size of the file being written, 0 if none.
func (w *RangeWriter) openFileSize() int64 {
	if w.file == nil {
		return 0
	}
	return w.file.EstimatedSize()
}

func (m *merger) openRun() error {
	w, err := NewRangeWriter(m.ctx, m.is, m.dir, m.opts.RangeWriterOptions)
	if err != nil {
		return err
	}
	m.w, m.rowsOpen = w, 0
	m.outputs = []*outputBounds{m.newOutputBounds()}
	return nil
}

// closeRun finishes the run that replaced prev[first:last+1] (none when last
// is below first) and adds its files to the result.
func (m *merger) closeRun(first, last int) error {
	w := m.w
	m.w = nil
	entries, err := w.Close()
	if err != nil {
		m.written = append(m.written, w.Written()...)
		return err
	}
	m.written = append(m.written, entries...)
	if len(m.opaque) > 0 {
		for i := range entries {
			m.outputs[i].apply(m, &entries[i])
		}
	}
	m.res.Entries = append(m.res.Entries, entries...)
	m.res.BytesWritten += w.BytesWritten()
	m.res.Rewritten += max(last-first+1, 0)
	m.opts.Logger.Debug("merged range files", "first", first, "last", last, "written", len(entries), "bytes", w.BytesWritten())
	return nil
}

// advance makes the next mutation with a non-zero count the head.
func (m *merger) advance() error {
	for {
		mu, ok, err := m.pull()
		if err != nil {
			return err
		}
		if !ok {
			m.hasHead = false
			return nil
		}
		if m.pulled++; m.pulled%4096 == 0 {
			if err := m.ctx.Err(); err != nil {
				return err
			}
		}
		if m.lastKey != nil && bytes.Compare(mu.key, m.lastKey) < 0 {
			return fmt.Errorf("merge: delta keys are out of order: %x after %x", mu.key, m.lastKey)
		}
		m.lastKey = append(m.lastKey[:0], mu.key...)
		if mu.count == 0 {
			continue
		}
		if mu.count > 0 {
			m.res.Inserted += int64(mu.count)
		} else {
			m.res.Deleted += int64(-mu.count)
		}
		target := m.head.target
		if len(m.prev) > 0 {
			cluster, _, err := format.DecodeKey(mu.key, m.clusterTypes)
			if err != nil {
				return fmt.Errorf("merge: decode delta key %x: %w", mu.key, err)
			}
			// Keys come sorted, so the target only moves forward.
			from := m.head.target
			target = from + sort.Search(len(m.groupMax)-from, func(i int) bool {
				return format.CompareKeys(m.clusterTypes, cluster, m.groupMax[from+i]) <= 0
			})
			target = min(target, len(m.prev)-1)
		}
		m.head = mutation{key: append(m.head.key[:0], mu.key...), value: append(m.head.value[:0], mu.value...),
			count: mu.count, target: target}
		m.hasHead = true
		return nil
	}
}

// mergeFile merge-joins prev[idx] (when exists is true) with the mutations
// that fall into it and writes the result to the run.
func (m *merger) mergeFile(idx int, exists bool) error {
	m.oldKey = m.oldKey[:0]
	if exists {
		if err := m.readFile(idx); err != nil {
			return err
		}
		if m.group.active {
			if err := m.resolveGroup(idx); err != nil {
				return err
			}
		}
	}
	for m.hasHead && m.head.target == idx {
		m.startGroup(m.head.key)
		if err := m.resolveGroup(-1); err != nil {
			return err
		}
	}
	return nil
}

// readFile streams the entries of prev[idx] through oldEntry.
func (m *merger) readFile(idx int) error {
	te := m.prev[idx]
	m.fileName = te.FilePath
	r, err := m.opts.Store.OpenRange(m.ctx, &te, m.is, format.RangeFileReadOptions{Allocator: m.opts.Allocator})
	if err != nil {
		return err
	}
	defer r.Close()
	entry := make(format.Key, len(m.fields))
	computed := make([]arrow.Array, len(m.computed))
	return r.Read(m.ctx, nil, nil, func(rec arrow.RecordBatch) error {
		cols := storedColumns{m: m, rec: rec}
		for i, pos := range m.computed {
			f := m.fields[pos]
			arr, err := format.Evaluate(m.opts.Allocator, f.Expr, f.Type, cols)
			if err != nil {
				releaseAll(computed[:i])
				return fmt.Errorf("compute field %d (%s) of range file %s: %w", f.ID, f.Expr, te.FilePath, err)
			}
			computed[i] = arr
		}
		defer releaseAll(computed)
		for row := range int(rec.NumRows()) {
			for i, pos := range m.storedPos {
				entry[pos] = ownValue(format.ValueAtAs(m.fields[pos].Type, rec.Column(i), row))
			}
			for i, pos := range m.computed {
				entry[pos] = ownValue(format.ValueAtAs(m.fields[pos].Type, computed[i], row))
			}
			if err := m.oldEntry(idx, entry); err != nil {
				return err
			}
		}
		return nil
	})
}

func releaseAll(arrs []arrow.Array) {
	for _, a := range arrs {
		if a != nil {
			a.Release()
		}
	}
}

// ownValue copies a string that may point into an Arrow buffer, which the
// reader recycles once the batch is released.
func ownValue(v any) any {
	if s, ok := v.(string); ok {
		return strings.Clone(s)
	}
	return v
}

// storedColumns lets expressions over identity fields and metadata columns
// be evaluated on a batch of stored fields.
type storedColumns struct {
	m   *merger
	rec arrow.RecordBatch
}

func (c storedColumns) Len() int { return int(c.rec.NumRows()) }

func (c storedColumns) Column(id int) (arrow.Array, error) {
	for i, pos := range c.m.storedPos {
		f := c.m.fields[pos]
		if r, isRef := f.Expr.(format.Ref); f.Kind == format.KindIdentity && f.ID == id || isRef && r.ID == id {
			return c.rec.Column(i), nil
		}
	}
	return nil, fmt.Errorf("field %d is not stored in range files", id)
}

// oldEntry takes the next entry of the file being merged.
func (m *merger) oldEntry(idx int, entry format.Key) error {
	var err error
	if m.keyBuf, err = m.codec.AppendKey(m.keyBuf[:0], entry); err != nil {
		return err
	}
	key := m.keyBuf
	if len(m.oldKey) > 0 && bytes.Compare(key, m.oldKey) < 0 {
		return fmt.Errorf("merge range file %s: entry %s: %w", m.fileName, m.describe(entry), ErrUnsortedRangeFile)
	}
	m.oldKey = append(m.oldKey[:0], key...)
	if m.group.active {
		if bytes.Equal(key, m.group.key) {
			return m.group.addOld(m, entry)
		}
		if err := m.resolveGroup(idx); err != nil {
			return err
		}
	}
	for m.hasHead && m.head.target == idx && bytes.Compare(m.head.key, key) < 0 {
		m.startGroup(m.head.key)
		if err := m.resolveGroup(-1); err != nil {
			return err
		}
	}
	if m.hasHead && m.head.target == idx && bytes.Equal(m.head.key, key) {
		m.startGroup(key)
		return m.group.addOld(m, entry)
	}
	return m.emit(entry, idx)
}

// group gathers the entries of one staging key that the delta changes: the
// existing ones and the mutations, matched by their stored values.
type group struct {
	active bool
	key    []byte
	items  []groupItem
}

type groupItem struct {
	stored []byte     // encoding of the stored values
	entry  format.Key // the values written: an inserted entry's when there is one
	old    int        // existing copies
	count  int        // copies after the delta
}

func (m *merger) startGroup(key []byte) {
	m.group.active = true
	m.group.key = append(m.group.key[:0], key...)
	m.group.items = m.group.items[:0]
}

func (g *group) item(stored []byte) *groupItem {
	for i := range g.items {
		if bytes.Equal(g.items[i].stored, stored) {
			return &g.items[i]
		}
	}
	g.items = append(g.items, groupItem{stored: append([]byte(nil), stored...)})
	return &g.items[len(g.items)-1]
}

func (g *group) addOld(m *merger, entry format.Key) error {
	enc, err := m.storedEncoding(entry)
	if err != nil {
		return err
	}
	it := g.item(enc)
	if it.entry == nil {
		it.entry = append(format.Key(nil), entry...)
	}
	it.old++
	it.count++
	return nil
}

// resolveGroup applies the mutations of the group's key and writes what
// remains. oldFile is the file the existing entries came from, or -1.
func (m *merger) resolveGroup(oldFile int) error {
	g := &m.group
	g.active = false
	for m.hasHead && bytes.Equal(m.head.key, g.key) {
		entry, err := m.codec.DecodeValue(m.head.value)
		if err != nil {
			return fmt.Errorf("merge: %w", err)
		}
		if m.checkBuf, err = m.codec.AppendKey(m.checkBuf[:0], entry); err != nil {
			return err
		}
		if !bytes.Equal(m.checkBuf, g.key) {
			return fmt.Errorf("merge: delta key %x does not encode its entry %s: %w", g.key, m.describe(entry), ErrDeltaMismatch)
		}
		enc, err := m.storedEncoding(entry)
		if err != nil {
			return err
		}
		it := g.item(enc)
		if m.head.count > 0 || it.entry == nil {
			it.entry = entry // an inserted entry carries every field's value
		}
		it.count += m.head.count
		if err := m.advance(); err != nil {
			return err
		}
	}
	for _, it := range g.items {
		if it.count < 0 {
			return fmt.Errorf("merge: the delta deletes %d copies of entry %s, the index holds %d: %w",
				it.old-it.count, m.describe(it.entry), it.old, ErrDeltaMismatch)
		}
		from := -1
		if it.old > 0 {
			from = oldFile
		}
		for range it.count {
			if err := m.emit(it.entry, from); err != nil {
				return err
			}
		}
	}
	return nil
}

func (m *merger) storedEncoding(entry format.Key) ([]byte, error) {
	stored := make(format.Key, len(m.storedPos))
	for i, pos := range m.storedPos {
		stored[i] = entry[pos]
	}
	var err error
	m.encBuf, err = format.AppendKey(m.encBuf[:0], m.storedTypes, stored)
	if err != nil {
		return nil, fmt.Errorf("merge: encode entry %s: %w", m.describe(entry), err)
	}
	return m.encBuf, nil
}

// emit writes one entry to the run; oldFile is the file of prev it came
// from, or -1 for an inserted entry.
func (m *merger) emit(entry format.Key, oldFile int) error {
	before := len(m.w.Written())
	if err := m.w.Add(entry); err != nil {
		return err
	}
	if len(m.w.Written()) > before {
		// Add closed the open file: the entry starts the next one.
		m.outputs = append(m.outputs, m.newOutputBounds())
		m.rowsOpen = 0
	}
	m.rowsOpen++
	if len(m.opaque) > 0 {
		m.outputs[len(m.outputs)-1].observe(m, entry, oldFile)
	}
	return nil
}

// describe names an entry by its stored values, for errors.
func (m *merger) describe(entry format.Key) string {
	var b strings.Builder
	b.WriteByte('(')
	for i, pos := range m.storedPos {
		if i > 0 {
			b.WriteString(", ")
		}
		f := m.fields[pos]
		fmt.Fprintf(&b, "%s=%s", f.Name, format.FormatValue(f.Type, entry[pos]))
	}
	b.WriteByte(')')
	return b.String()
}
