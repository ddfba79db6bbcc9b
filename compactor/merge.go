package compactor

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/iceberg-go"

	"github.com/streamidx/streamidx/format"
	"github.com/streamidx/streamidx/internal/procs"
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
	// MinFileSize is the size below which a range file counts as small: a
	// rewritten file under it absorbs the untouched file after it, and a
	// small untouched file next to a rewrite joins it when both fit in one
	// and a half targets. Default: TargetFileSize/2.
	MinFileSize int64
	// ReadBatchRows is the number of entries read at a time from a range
	// file being rewritten. Default: 65536.
	ReadBatchRows int
	// Logger receives one debug line per rewritten run. Default: discard.
	Logger *slog.Logger
	// Parallelism is the number of parts of the index rewritten at the
	// same time when a delta changes several range files. Default:
	// procs.Work() (GOMAXPROCS, less the Ps a serving process keeps for its lookups).
	Parallelism int
	// ParallelDeltaBytes is the largest delta (its keys and values) that a
	// merge holds in memory to cut it among parts; a larger one is merged
	// in one pass. Default: 64 MiB.
	ParallelDeltaBytes int64
	// DeltaRecords is at most how many records the delta yields, when the
	// caller knows (0: unknown): the merge sizes the buffer it holds the
	// delta in by it, where growing it took five times its size in
	// copies (a 10,000-key upsert: 7.2 MB against 1.4 MB).
	DeltaRecords int64
	// DecodeAllRowGroups decodes and encodes again every row group of a
	// rewritten file, those the delta does not touch included, instead of
	// copying the untouched ones as they are; for comparisons.
	DecodeAllRowGroups bool
	// Yield, when set, is called before each batch or row group of a range
	// file is merged, on the goroutine merging it; an error ends the merge.
	// The daemon's updates wait there for shorter ones (internal/pace).
	Yield func(context.Context) error
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
	// EntriesRewritten counts the entries written to the new files: those
	// of the replaced files that stayed, and those inserted.
	EntriesRewritten int64
	// Inserted and Deleted sum the delta's positive and negative counts.
	Inserted, Deleted int64
	// RowGroupsCopied counts the row groups of rewritten files that went
	// to the new files as they were, not decoded; EntriesCopied their
	// entries, which EntriesRewritten does not count.
	RowGroupsCopied int
	EntriesCopied   int64
}

// Merge applies delta to the index snapshot whose range files are prev and
// writes the changed ranges under dir. It reads only the range files that
// the delta's keys fall into, found by binary search on group_max_value
// (keys above the last file's go into the last file, keys below the first
// into the first), plus small neighbours it folds in, and carries every other
// tracking entry over unchanged. Consecutive affected files are rewritten as
// one run, split near TargetFileSize where the clustering key changes.
//
// A file being rewritten is read as Arrow batches. The rows between two
// changed keys, found by binary search on the staging keys of the batch's
// rows, go to the writer as slices of those batches: only the rows whose
// key the delta names are turned into values and matched with it. String
// and binary columns stay dictionaries until the writer needs them.
//
// A delta that changes several files, and fits in ParallelDeltaBytes, is
// cut at file boundaries into up to Parallelism parts merged at the same
// time, each with its own runs and writer (split, mendSeams).
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
		opts.MinFileSize = opts.TargetFileSize / 2
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Parallelism <= 0 {
		opts.Parallelism = procs.Work()
	}
	if opts.ParallelDeltaBytes <= 0 {
		opts.ParallelDeltaBytes = 64 << 20
	}
	opts.copyRowGroups = !opts.DecodeAllRowGroups && format.CanCopyRowGroups(is)
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
	defer stop()
	pull := func() (mutation, bool, error) {
		mu, ok := next()
		if !ok && deltaErr != nil {
			return mu, false, fmt.Errorf("read delta: %w", deltaErr)
		}
		return mu, ok, nil
	}
	var parts []*merger
	if opts.Parallelism > 1 && len(prev) > 1 {
		buffered, complete, err := m.bufferDelta(pull)
		if err != nil {
			return nil, err
		}
		if complete {
			if parts, err = m.split(buffered); err != nil {
				return nil, err
			}
		}
		pull = replay(buffered, pull)
	}
	if parts == nil {
		m.pull = pull
		parts = []*merger{m}
	}
	return m.run(parts)
}

// run merges each part, at the same time when there are several, joins
// their results in order and mends the seams between them. On error every
// file written is deleted.
func (m *merger) run(parts []*merger) (*MergeResult, error) {
	errs := make([]error, len(parts))
	if len(parts) == 1 {
		errs[0] = parts[0].merge()
	} else {
		ctx, cancel := context.WithCancel(m.ctx)
		defer cancel()
		var wg sync.WaitGroup
		for i, p := range parts {
			p.ctx = ctx
			wg.Go(func() {
				if errs[i] = p.merge(); errs[i] != nil {
					cancel() // the others' work is lost anyway
				}
			})
		}
		wg.Wait()
	}
	var written []format.TrackingEntry
	for _, p := range parts {
		if p.w != nil {
			p.w.Abort()
			p.written = append(p.written, p.w.Written()...)
		}
		written = append(written, p.written...)
	}
	res := &MergeResult{}
	for _, p := range parts {
		res.Inserted += p.res.Inserted
		res.Deleted += p.res.Deleted
		res.RowGroupsCopied += p.res.RowGroupsCopied
		res.EntriesCopied += p.res.EntriesCopied
	}
	err := firstError(errs)
	if err == nil {
		var mended []format.TrackingEntry
		res.Entries, mended, err = m.mendSeams(parts)
		written = append(written, mended...)
		res.RowGroupsCopied += m.seamCopied.RowGroupsCopied
		res.EntriesCopied += m.seamCopied.EntriesCopied
	}
	if err != nil {
		RemoveFiles(context.WithoutCancel(m.ctx), m.opts.Store, m.opts.Logger, written)
		return nil, err
	}
	old := make(map[string]bool, len(m.prev))
	for _, e := range m.prev {
		old[e.FilePath] = true
	}
	kept := map[string]bool{}
	for _, e := range res.Entries {
		kept[e.FilePath] = true
		if old[e.FilePath] {
			res.Reused++
			continue
		}
		res.Written++
		res.BytesWritten += e.FileSizeInBytes
		res.EntriesRewritten += e.RecordCount
	}
	res.EntriesRewritten -= min(res.EntriesCopied, res.EntriesRewritten)
	res.Rewritten = len(m.prev) - res.Reused
	// Files written and then folded into others at a seam.
	RemoveFiles(context.WithoutCancel(m.ctx), m.opts.Store, m.opts.Logger,
		slices.DeleteFunc(written, func(e format.TrackingEntry) bool { return kept[e.FilePath] }))
	return res, nil
}

// mendSeams joins the parts' range files in order. Where a part ends with a
// file under MinFileSize that it wrote, the file and the one after it are
// rewritten as one run, as a merge in one pass would have folded it into
// its neighbour. It also returns the files the mending wrote.
func (m *merger) mendSeams(parts []*merger) (entries, written []format.TrackingEntry, err error) {
	entries = parts[0].res.Entries
	for _, p := range parts[1:] {
		next := p.res.Entries
		if len(entries) == 0 || len(next) == 0 {
			entries = append(entries, next...)
			continue
		}
		last := entries[len(entries)-1]
		if m.opts.weight(last) >= m.opts.MinFileSize || slices.ContainsFunc(m.prev, func(e format.TrackingEntry) bool { return e.FilePath == last.FilePath }) {
			entries = append(entries, next...)
			continue
		}
		seam := m.part(0, 0, nil)
		seam.prev = []format.TrackingEntry{last, next[0]}
		err := seam.rewriteAll()
		if seam.w != nil {
			seam.w.Abort()
			seam.written = append(seam.written, seam.w.Written()...)
		}
		written = append(written, seam.written...)
		if err != nil {
			return nil, written, err
		}
		m.seamCopied.RowGroupsCopied += seam.res.RowGroupsCopied
		m.seamCopied.EntriesCopied += seam.res.EntriesCopied
		entries = append(append(entries[:len(entries)-1], seam.res.Entries...), next[1:]...)
	}
	return entries, written, nil
}

// rewriteAll rewrites every file of prev as one run, with no delta.
func (m *merger) rewriteAll() error {
	if err := m.openRun(); err != nil {
		return err
	}
	for i := range m.prev {
		if err := m.mergeFile(i, true); err != nil {
			return err
		}
	}
	return m.closeRun(0, len(m.prev)-1)
}

// firstError returns the first failure that is not a part stopped because
// another failed.
func firstError(errs []error) error {
	var cancelled error
	for _, err := range errs {
		switch {
		case err == nil:
		case errors.Is(err, context.Canceled) && cancelled == nil:
			cancelled = err
		case !errors.Is(err, context.Canceled):
			return err
		}
	}
	return cancelled
}

// bufferDelta reads the delta into memory, up to ParallelDeltaBytes of keys
// and values, checking its order as advance does, and reports whether it
// read all of it.
func (m *merger) bufferDelta(pull func() (mutation, bool, error)) (buffered []mutation, complete bool, err error) {
	var size int64
	var last []byte
	var arena mutationArena
	buffered = make([]mutation, 0, min(max(m.opts.DeltaRecords, 0), maxPresizedRecords))
	for size < m.opts.ParallelDeltaBytes {
		mu, ok, err := pull()
		if err != nil {
			return nil, false, err
		}
		if !ok {
			return buffered, true, nil
		}
		if last != nil && bytes.Compare(mu.key, last) < 0 {
			return nil, false, fmt.Errorf("merge: delta keys are out of order: %x after %x", mu.key, last)
		}
		if len(buffered)%4096 == 4095 {
			if err := m.ctx.Err(); err != nil {
				return nil, false, err
			}
		}
		mu = arena.own(mu)
		last = mu.key
		buffered = append(buffered, mu)
		size += int64(len(mu.key) + len(mu.value))
	}
	return buffered, false, nil
}

// maxPresizedRecords bounds the buffer a merge sizes from
// MergeOptions.DeltaRecords (18 MB of mutations): a larger delta grows it.
const maxPresizedRecords = 1 << 18

// replay pulls the buffered mutations, then the rest of the delta.
func replay(buffered []mutation, pull func() (mutation, bool, error)) func() (mutation, bool, error) {
	return func() (mutation, bool, error) {
		if len(buffered) > 0 {
			mu := buffered[0]
			buffered = buffered[1:]
			return mu, true, nil
		}
		return pull()
	}
}

// split cuts prev, at file boundaries, into up to Parallelism parts that
// each rewrite about the same bytes, and gives each part the mutations that
// fall into its files; it returns nil when fewer than two files change.
// Parts are merged at the same time: a change spread over the keys rewrites
// the whole index at the speed of all cores, not one. A run of rewritten
// files then ends at a cut: it does not fold a small file of the next part
// in, nor spread its entries over that part's first file; mendSeams makes
// up for the one case that leaves a file under MinFileSize.
func (m *merger) split(buffered []mutation) ([]*merger, error) {
	targets := make([]int, len(buffered))
	weight := make([]int64, len(m.prev)) // bytes of each file to rewrite
	target, touched := 0, 0
	var total int64
	for i, mu := range buffered {
		if mu.count == 0 {
			targets[i] = target
			continue
		}
		target = m.targetOf(target, mu.key)
		targets[i] = target
		if weight[target] == 0 {
			touched++
			weight[target] = max(m.opts.weight(m.prev[target]), 1)
			total += weight[target]
		}
	}
	// The merger that pulls a mutation finds its file without decoding
	// its key again.
	for i := range buffered {
		buffered[i].target, buffered[i].targeted = targets[i], true
	}
	if touched < 2 {
		return nil, nil
	}
	n := int64(min(m.opts.Parallelism, touched))
	var parts []*merger
	first, mu := 0, 0  // the first file and mutation of the part being cut
	var sum, cut int64 // bytes to rewrite up to file i, and up to the last cut
	for i := range m.prev {
		sum += weight[i]
		if i < len(m.prev)-1 {
			// Cut where the part comes nearest its share: before the next
			// file when taking it would overshoot more than leaving it.
			share := total * int64(len(parts)+1)
			last := int64(len(parts)) == n-1
			over := sum*n >= share || (sum+weight[i+1])*n-share > share-sum*n
			if last || sum == cut || !over {
				continue
			}
		}
		cut = sum
		end := mu
		for end < len(buffered) && targets[end] <= i {
			end++
		}
		parts = append(parts, m.part(first, i+1, buffered[mu:end]))
		first, mu = i+1, end
	}
	return parts, nil
}

// part is a merger of prev[from:to] with the given mutations, sharing m's
// settings.
func (m *merger) part(from, to int, muts []mutation) *merger {
	p := &merger{ctx: m.ctx, is: m.is, opts: m.opts, dir: m.dir, codec: m.codec, prev: m.prev[from:to], groupMax: m.groupMax[from:to],
		clusterTypes: m.clusterTypes, fields: m.fields, entrySchema: m.entrySchema, storedPos: m.storedPos, storedTypes: m.storedTypes,
		dictFields: m.dictFields, computed: m.computed, opaque: m.opaque, avgEntrySize: m.avgEntrySize, source: -1}
	for i := range muts {
		muts[i].target -= from
	}
	p.pull = replay(muts, func() (mutation, bool, error) { return mutation{}, false, nil })
	return p
}

// targetOf returns the file of prev, from index from on, that a delta
// key's entry falls into: the first whose group_max_value is at or above
// the key's cluster fields, else the last. The key begins with the
// encoding of its cluster fields, and each encoded field delimits itself,
// so the key's first bytes, as many as a group_max_value's encoding has,
// compare with it as the cluster fields do: where two encodings differ,
// neither has ended yet, and a key whose cluster fields are the maximum
// begins with its encoding (format.AppendKey).
func (m *merger) targetOf(from int, key []byte) int {
	le := func(i int) bool {
		g := m.groupMax[i]
		return bytes.Compare(key[:min(len(key), len(g))], g) <= 0
	}
	if from < len(m.groupMax) && le(from) {
		return from
	}
	t := from + sort.Search(len(m.groupMax)-from, func(i int) bool { return le(from + i) })
	return min(t, len(m.prev)-1)
}

// mutation is one record of a delta; key and value are copies owned by the
// merger once it is the head.
type mutation struct {
	key, value []byte
	count      int
	target     int // index in prev of the range file the key falls into
	// stable says that key and value stay good for the whole merge (a
	// buffered mutation's): a delta's are good only until it yields the
	// next.
	stable bool
	// targeted says that target is set (split set it), for prev of the
	// merger that pulls the mutation.
	targeted bool
}

// owned returns mu with its key and value copied into one allocation,
// unless they are stable already.
func (mu mutation) owned() mutation {
	if mu.stable {
		return mu
	}
	own := make([]byte, len(mu.key)+len(mu.value))
	copy(own, mu.key)
	copy(own[len(mu.key):], mu.value)
	mu.key, mu.value, mu.stable = own[:len(mu.key):len(mu.key)], own[len(mu.key):], true
	return mu
}

// mutationArena holds the keys and values of buffered mutations, in chunks:
// one allocation for many mutations where owned makes one each.
type mutationArena struct{ chunk []byte }

func (a *mutationArena) own(mu mutation) mutation {
	n := len(mu.key) + len(mu.value)
	if cap(a.chunk)-len(a.chunk) < n {
		a.chunk = make([]byte, 0, max(n, 256<<10))
	}
	k := len(a.chunk)
	a.chunk = append(append(a.chunk, mu.key...), mu.value...)
	mu.key, mu.value, mu.stable = a.chunk[k:k+len(mu.key):k+len(mu.key)], a.chunk[k+len(mu.key):len(a.chunk):len(a.chunk)], true
	return mu
}

// merger carries one Merge.
type merger struct {
	ctx   context.Context
	is    *format.IndexSchema
	opts  MergeOptions
	dir   string
	codec *format.EntryCodec
	prev  []format.TrackingEntry

	// groupMax holds the key encoding of each file of prev's
	// group_max_value (its cluster fields).
	groupMax     [][]byte
	clusterTypes []iceberg.Type
	fields       []format.IndexField
	entrySchema  *arrow.Schema // ArrowSchema(EntrySchema)
	storedPos    []int         // positions in fields of the stored fields, StoredSchema order
	storedTypes  []iceberg.Type
	dictFields   []int // IDs of stored string and binary fields, read as dictionaries
	computed     []int // positions of non-materialized fields computed from stored ones
	opaque       []int // positions of non-materialized fields that cannot be computed
	avgEntrySize float64

	pull func() (mutation, bool, error)
	// ahead holds mutations pulled past the head to see which row groups
	// the delta reaches (reaches), owned copies that next gives first.
	ahead   []mutation
	head    mutation
	hasHead bool
	// headKey and headValue hold the head's key and value when the delta
	// gave them as views.
	headKey, headValue []byte
	lastKey            []byte // of the last mutation pulled, for the order check
	pulled             int64

	w       *RangeWriter // the open run
	outputs []*outputBounds
	source  int                    // the file of prev whose rows are being written, -1 for inserted ones
	written []format.TrackingEntry // files of closed runs
	res     MergeResult
	// seamCopied counts the row groups (and their entries) that mending
	// the seams between parts copied.
	seamCopied MergeResult

	// Where the run stands in the file being read, for the writer's
	// estimate of what is still to come.
	cur       int   // index in prev of the file being read
	fileLeft  int64 // its rows after the batch being read
	batchRows int   // rows of the batch being read
	batchPos  int   // rows of that batch handed on

	group    group
	oldKey   []byte     // staging key of the last entry decoded from the file being merged
	keyBuf   []byte     // scratch: the staging key of an entry read
	checkBuf []byte     // scratch: the staging key of a mutation's entry
	encBuf   []byte     // scratch: the encoding of an entry's stored values
	stored   format.Key // scratch: an entry's stored values
	valBuf   []byte     // scratch: the value encoding of an entry read
	rowBuf   format.Key // scratch: the values of an entry read
	// rowOf is the row of the batch being merged that keyBuf holds the
	// key of, or -1: a changed key's row is asked for up to three times
	// (the group before ends at it, the seek for the next change starts
	// at it, the next group begins with it) and encoded once.
	rowOf int
	// allStored says that range files store every field of an entry, in
	// entry order: an entry's stored encoding is then its value encoding
	// (the delta's mutations' values), so a group matches a deleted entry
	// with an existing one by their bytes, without decoding either.
	allStored bool
	fileName  string
}

func newMerger(ctx context.Context, is *format.IndexSchema, prev []format.TrackingEntry, dir string, opts MergeOptions) (*merger, error) {
	m := &merger{ctx: ctx, is: is, opts: opts, dir: dir, prev: prev, codec: format.NewEntryCodec(is), rowOf: -1,
		clusterTypes: is.ClusterTypes(), fields: is.Fields(), source: -1}
	var err error
	if m.entrySchema, err = format.ArrowSchema(is.EntrySchema()); err != nil {
		return nil, err
	}
	for i, e := range prev {
		k, ok := e.GroupMaxKey(is)
		if !ok {
			return nil, fmt.Errorf("merge: tracking entry %d (%s) has no group_max_value for every cluster field", i, e.FilePath)
		}
		enc, err := format.AppendKey(nil, m.clusterTypes, k)
		if err != nil {
			return nil, fmt.Errorf("merge: tracking entry %d (%s): group_max_value: %w", i, e.FilePath, err)
		}
		m.groupMax = append(m.groupMax, enc)
	}
	available := map[int]bool{} // source fields and metadata columns stored in range files
	for i, f := range m.fields {
		if !f.Stored() {
			continue
		}
		m.storedPos = append(m.storedPos, i)
		m.storedTypes = append(m.storedTypes, f.Type)
		switch f.Type.(type) {
		case iceberg.StringType, iceberg.BinaryType:
			m.dictFields = append(m.dictFields, f.ID)
		}
		switch e := f.Expr.(type) {
		case nil:
			available[f.ID] = true
		case format.Ref:
			available[e.ID] = true
		}
	}
	m.allStored = len(m.storedPos) == len(m.fields)
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
		m.avgEntrySize = max(float64(size)/float64(rows), opts.minEntrySize())
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
	maxSize := m.opts.maxFileSize()
	next := 0 // the first file of prev not yet placed in the result
	for m.hasHead {
		start := m.head.target
		// Pull small untouched files before the run into it while they
		// fit in one file with the run's first file.
		size := m.opts.weight(m.prev[start])
		for start > next && m.opts.weight(m.prev[start-1]) < m.opts.MinFileSize &&
			size+m.opts.weight(m.prev[start-1]) <= maxSize {
			start--
			size += m.opts.weight(m.prev[start])
		}
		m.carry(next, start)
		if err := m.openRun(); err != nil {
			return err
		}
		cur := start
		extending, absorbed := true, false
		for {
			before := m.w.Files()
			if err := m.mergeFile(cur, true); err != nil {
				return err
			}
			if absorbed && m.w.Files() > before {
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
// run: when the run's open file is small (the writer then splits the two
// evenly if they do not fit in one), or when that file is small and both fit
// in one.
func (m *merger) absorbNext(cur int) bool {
	n := cur + 1
	if n >= len(m.prev) || m.hasHead && m.head.target <= n {
		return false
	}
	rows, open := m.w.open()
	if rows == 0 {
		return false
	}
	open = max(open, int64(float64(rows)*m.avgEntrySize))
	size := m.opts.weight(m.prev[n])
	return open < m.opts.MinFileSize || size < m.opts.MinFileSize && open+size <= m.opts.maxFileSize()
}

// carry places prev[from:to] in the result unchanged.
func (m *merger) carry(from, to int) {
	if from < to {
		m.res.Entries = append(m.res.Entries, m.prev[from:to]...)
		m.res.Reused += to - from
	}
}

func (m *merger) openRun() error {
	w, err := NewRangeWriter(m.ctx, m.is, m.dir, m.opts.RangeWriterOptions)
	if err != nil {
		return err
	}
	w.remaining, w.entrySize = m.remaining, m.avgEntrySize
	w.afterSplit = func() {
		// The entries that follow start a new file.
		m.outputs = append(m.outputs, m.newOutputBounds())
		if m.source >= 0 && len(m.opaque) > 0 {
			m.outputs[len(m.outputs)-1].files[m.source] = true
		}
	}
	m.w = w
	m.outputs = []*outputBounds{m.newOutputBounds()}
	return nil
}

// remaining estimates the entries the run still writes after those handed
// to the writer: the rest of the file being read and, when the delta goes
// on into it, the next file. Entries the delta inserts are not counted.
func (m *merger) remaining() int64 {
	n := int64(m.batchRows-m.batchPos) + m.fileLeft
	if m.hasHead && m.head.target == m.cur+1 && m.cur+1 < len(m.prev) {
		n += m.prev[m.cur+1].RecordCount
	}
	return n
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
	for _, e := range entries {
		m.res.EntriesRewritten += e.RecordCount
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
		mu, ok, err := m.next()
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
		if mu.targeted {
			target = mu.target
		} else if len(m.prev) > 0 {
			target = m.targetOf(m.head.target, mu.key) // keys come sorted: the target only moves forward
		}
		if mu.stable {
			m.head = mutation{key: mu.key, value: mu.value, count: mu.count, target: target, stable: true}
		} else {
			m.headKey, m.headValue = append(m.headKey[:0], mu.key...), append(m.headValue[:0], mu.value...)
			m.head = mutation{key: m.headKey, value: m.headValue, count: mu.count, target: target}
		}
		m.hasHead = true
		return nil
	}
}

// mergeFile merge-joins prev[idx] (when exists is true) with the mutations
// that fall into it and writes the result to the run.
func (m *merger) mergeFile(idx int, exists bool) error {
	m.oldKey = m.oldKey[:0]
	m.cur, m.fileLeft, m.batchRows, m.batchPos = idx, 0, 0, 0
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

// readFile streams the entries of prev[idx], a batch at a time, through
// mergeBatch.
func (m *merger) readFile(idx int) error {
	te := m.prev[idx]
	m.fileName = te.FilePath
	r, err := m.opts.Store.OpenRange(m.ctx, &te, m.is, format.RangeFileReadOptions{BatchRows: m.opts.ReadBatchRows, Allocator: m.opts.Allocator,
		DictionaryFields: m.dictFields})
	if err != nil {
		return err
	}
	defer r.Close()
	m.fileLeft = r.NumRows()
	batch := func(rec arrow.RecordBatch) error {
		if err := checkpoint(m.ctx, m.opts.Yield); err != nil {
			return err
		}
		ent, err := m.entryBatch(rec)
		if err != nil {
			return fmt.Errorf("merge range file %s: %w", te.FilePath, err)
		}
		defer ent.Release()
		m.fileLeft -= ent.NumRows()
		m.batchRows, m.batchPos, m.rowOf = int(ent.NumRows()), 0, -1
		err = m.mergeBatch(idx, ent)
		m.batchRows, m.batchPos = 0, 0
		return err
	}
	n := r.NumRowGroups()
	if !m.opts.copyRowGroups || n < 2 {
		return r.Read(m.ctx, nil, nil, batch)
	}
	// The row groups' statistics, taken once each: whether the delta
	// reaches a row group is asked of it up to three times.
	rows := make([]int64, n)
	stats := make([]map[int]*format.FieldStats, n)
	for g := range n {
		rows[g], stats[g] = r.RowGroupStats(g)
	}
	for g := 0; g < n; {
		if err := checkpoint(m.ctx, m.opts.Yield); err != nil {
			return err
		}
		if m.untouched(idx, stats[g]) {
			copied, err := m.w.CopyRowGroup(r.RangeFileReader, g, rows[g])
			if err != nil {
				return err
			}
			if copied {
				m.fileLeft -= rows[g]
				m.res.RowGroupsCopied++
				m.res.EntriesCopied += rows[g]
				g++
				continue
			}
		}
		// The row groups the delta reaches after this one are read with
		// it: a read costs a reader of every column.
		groups := []int{g}
		for g++; g < n; g++ {
			reached, err := m.reaches(stats[g-1], stats[g])
			if err != nil {
				return err
			}
			if !reached {
				break
			}
			groups = append(groups, g)
		}
		if err := r.Read(m.ctx, nil, groups, batch); err != nil {
			return err
		}
	}
	return nil
}

// peekLimit bounds the mutations reaches pulls ahead of the head (a
// variable for tests).
var peekLimit = 4096

// reaches reports whether the delta changes the row group of statistics
// ns of a file whose row group before it, of statistics bs, is about to be
// read: whether the first mutation above the largest value of the first
// cluster field in bs is at or below the one in ns. It answers true when it
// cannot tell: a statistic missing, or more than peekLimit mutations fall
// in the row group before, which then is most of what is to read.
func (m *merger) reaches(bs, ns map[int]*format.FieldStats) (bool, error) {
	f := m.is.ClusterFields()[0]
	if bs[f.ID] == nil || bs[f.ID].UpperBound == nil || ns[f.ID] == nil || ns[f.ID].UpperBound == nil {
		return true, nil
	}
	first := func(key []byte) (any, error) {
		k, _, err := format.DecodeKey(key, m.clusterTypes[:1])
		if err != nil {
			return nil, fmt.Errorf("merge: decode delta key %x: %w", key, err)
		}
		return k[0], nil
	}
	for i := -1; i < peekLimit; i++ {
		var mu mutation
		switch {
		case i < 0 && m.hasHead:
			mu = m.head
		case i < 0:
			return false, nil
		default:
			for len(m.ahead) <= i {
				next, ok, err := m.pull()
				if err != nil || !ok {
					return false, err
				}
				m.ahead = append(m.ahead, next.owned())
			}
			mu = m.ahead[i]
		}
		if mu.count == 0 {
			continue
		}
		v, err := first(mu.key)
		if err != nil {
			return false, err
		}
		if v == nil || format.Compare(f.Type, v, bs[f.ID].UpperBound) <= 0 {
			continue // in before, or null: first in cluster order
		}
		return format.Compare(f.Type, v, ns[f.ID].UpperBound) <= 0, nil
	}
	return true, nil
}

// next gives the next mutation of the delta: those reaches pulled ahead
// first.
func (m *merger) next() (mutation, bool, error) {
	if len(m.ahead) > 0 {
		mu := m.ahead[0]
		m.ahead = m.ahead[1:]
		return mu, true, nil
	}
	return m.pull()
}

// untouched reports whether the delta changes nothing in the row group of
// prev[idx] with the given statistics, the next to be read: no entry of the
// previous row group's last key waits for more, and the next change is past
// the file or above every value of the first cluster field in the row
// group (nulls, first in cluster order, are below any change).
func (m *merger) untouched(idx int, stats map[int]*format.FieldStats) bool {
	if m.group.active {
		return false
	}
	if !m.hasHead || m.head.target != idx {
		return true
	}
	f := m.is.ClusterFields()[0]
	st := stats[f.ID]
	if st == nil || st.UpperBound == nil {
		return false
	}
	head, _, err := format.DecodeKey(m.head.key, m.clusterTypes[:1])
	if err != nil || head[0] == nil {
		return false
	}
	return format.Compare(f.Type, head[0], st.UpperBound) > 0
}

// entryBatch turns a batch of a range file's stored columns into a batch of
// entries (ArrowSchema(EntrySchema)): stored columns in the index's current
// types (a file written before a type promotion holds the narrower type),
// non-materialized fields computed from them, those that cannot be
// computed null. String and binary columns stay the dictionaries the file
// stores them as (dictFields): an entry passed on unchanged is never turned
// into a string of its own, and the range writer copies each value once
// into the file it writes. A column of data file paths (_file), long and
// repeated on every row, is most of what a merge would otherwise copy.
func (m *merger) entryBatch(rec arrow.RecordBatch) (arrow.RecordBatch, error) {
	n := int(rec.NumRows())
	cols := make([]arrow.Array, len(m.fields))
	defer releaseAll(cols)
	fields := slices.Clone(m.entrySchema.Fields())
	for i, pos := range m.storedPos {
		col := rec.Column(i)
		want := m.entrySchema.Field(pos).Type
		if dict, ok := col.DataType().(*arrow.DictionaryType); ok && arrow.TypeEqual(dict.ValueType, want) {
			fields[pos].Type = dict
		} else if !arrow.TypeEqual(col.DataType(), want) {
			cast, err := compute.CastArray(m.ctx, col, compute.SafeCastOptions(want))
			if err != nil {
				return nil, fmt.Errorf("convert field %d from %s to %s: %w", m.fields[pos].ID, col.DataType(), want, err)
			}
			cols[pos] = cast
			continue
		}
		col.Retain()
		cols[pos] = col
	}
	stored := &storedColumns{m: m, cols: cols, n: n}
	defer releaseAll(stored.dense)
	for _, pos := range m.computed {
		f := m.fields[pos]
		arr, err := format.Evaluate(m.opts.Allocator, f.Expr, f.Type, stored)
		if err != nil {
			return nil, fmt.Errorf("compute field %d (%s): %w", f.ID, f.Expr, err)
		}
		cols[pos] = arr
	}
	for _, pos := range m.opaque {
		cols[pos] = array.MakeArrayOfNull(m.opts.Allocator, m.entrySchema.Field(pos).Type, n)
	}
	return array.NewRecordBatch(arrow.NewSchema(fields, nil), cols, int64(n)), nil
}

func releaseAll(arrs []arrow.Array) {
	for _, a := range arrs {
		if a != nil {
			a.Release()
		}
	}
}

// storedColumns lets expressions over identity fields and metadata columns
// be evaluated on the stored columns of an entry batch being assembled.
// Expressions see dictionary columns decoded, as plain arrays of their type.
type storedColumns struct {
	m     *merger
	cols  []arrow.Array // by position in fields
	n     int
	dense []arrow.Array // decoded dictionary columns, released with the batch
}

func (c *storedColumns) Len() int { return c.n }

func (c *storedColumns) Column(id int) (arrow.Array, error) {
	for _, pos := range c.m.storedPos {
		f := c.m.fields[pos]
		if r, isRef := f.Expr.(format.Ref); f.Kind == format.KindIdentity && f.ID == id || isRef && r.ID == id {
			col := c.cols[pos]
			if _, isDict := col.(*array.Dictionary); !isDict {
				return col, nil
			}
			dense, err := denseColumn(c.m.opts.Allocator, c.m.entrySchema.Field(pos).Type, []arrow.Array{col})
			if err != nil {
				return nil, err
			}
			c.dense = append(c.dense, dense)
			return dense, nil
		}
	}
	return nil, fmt.Errorf("field %d is not stored in range files", id)
}

// mergeBatch merges one batch of prev[idx]'s entries with the mutations that
// fall among them.
func (m *merger) mergeBatch(idx int, ent arrow.RecordBatch) error {
	n := int(ent.NumRows())
	i := 0
	for i < n {
		if m.group.active {
			// The group of the last row decoded may go on in this batch.
			key, err := m.decodeRow(ent, i)
			if err != nil {
				return err
			}
			if bytes.Equal(key, m.group.key) {
				if err := m.group.addOld(m, ent, i); err != nil {
					return err
				}
				i++
				m.batchPos = i
				continue
			}
			if err := m.resolveGroup(idx); err != nil {
				return err
			}
			continue
		}
		if !m.hasHead || m.head.target != idx {
			return m.pass(idx, ent, i, n)
		}
		// The rows before the first one at or after the head's key are
		// untouched.
		j, err := m.seek(ent, i, n)
		if err != nil {
			return err
		}
		if err := m.pass(idx, ent, i, j); err != nil {
			return err
		}
		if i = j; i == n {
			return nil // the head's key may be in the next batch
		}
		key, err := m.decodeRow(ent, i)
		if err != nil {
			return err
		}
		if bytes.Equal(key, m.head.key) {
			m.startGroup(key)
			if err := m.group.addOld(m, ent, i); err != nil {
				return err
			}
			i++
			m.batchPos = i
			continue
		}
		// The file holds no entry of the head's key: its mutations go
		// before row i.
		m.startGroup(m.head.key)
		if err := m.resolveGroup(-1); err != nil {
			return err
		}
	}
	return nil
}

// seek returns the first row in [from, n) of an entry batch whose staging
// key is at or above the head's (n if none). It gallops from from, so that
// a head just ahead costs a few decoded rows and one far ahead a binary
// search.
func (m *merger) seek(ent arrow.RecordBatch, from, n int) (int, error) {
	var err error
	below := func(i int) bool {
		if err != nil {
			return false
		}
		var key []byte
		if key, err = m.rowKey(ent, i); err != nil {
			return false
		}
		return bytes.Compare(key, m.head.key) < 0
	}
	lo, hi, step := from, from, 1
	for hi < n && below(hi) {
		lo, hi, step = hi+1, from+step, step*2
	}
	hi = min(hi, n)
	j := lo + sort.Search(hi-lo, func(d int) bool { return !below(lo + d) })
	return j, err
}

// pass writes rows [from, to) of a batch of prev[idx] unchanged.
func (m *merger) pass(idx int, ent arrow.RecordBatch, from, to int) error {
	if from >= to {
		return nil
	}
	m.source = idx
	if len(m.opaque) > 0 {
		m.outputs[len(m.outputs)-1].files[idx] = true
	}
	m.batchPos = to
	err := m.w.AddRows(ent, from, to)
	m.source = -1
	return err
}

// rowKey returns the staging key of row i of an entry batch (in keyBuf).
func (m *merger) rowKey(ent arrow.RecordBatch, i int) ([]byte, error) {
	if i == m.rowOf {
		return m.keyBuf, nil
	}
	m.rowOf = -1
	var err error
	if m.keyBuf, err = m.codec.AppendRowKey(m.keyBuf[:0], ent, i); err != nil {
		return nil, err
	}
	m.rowOf = i
	return m.keyBuf, nil
}

// decodeRow returns the staging key of row i, which the merge goes through
// in order; a key below the one decoded before means the file is not in
// staging-key order.
func (m *merger) decodeRow(ent arrow.RecordBatch, i int) ([]byte, error) {
	key, err := m.rowKey(ent, i)
	if err != nil {
		return nil, err
	}
	if len(m.oldKey) > 0 && bytes.Compare(key, m.oldKey) < 0 {
		return nil, fmt.Errorf("merge range file %s: entry %s: %w", m.fileName, m.describe(m.codec.Row(nil, ent, i)), ErrUnsortedRangeFile)
	}
	m.oldKey = append(m.oldKey[:0], key...)
	return key, nil
}

// group gathers the entries of one staging key that the delta changes: the
// existing ones and the mutations, matched by their stored values.
type group struct {
	active bool
	key    []byte
	items  []groupItem
}

type groupItem struct {
	stored []byte // encoding of the stored values
	// entry holds the values written: an inserted entry's when there is
	// one; nil for an existing entry when every field is stored (stored
	// decodes to it).
	entry format.Key
	old   int // existing copies
	count int // copies after the delta
}

func (m *merger) startGroup(key []byte) {
	m.group.active = true
	m.group.key = append(m.group.key[:0], key...)
	m.group.items = m.group.items[:0]
}

func (g *group) item(stored []byte) *groupItem {
	if it := g.find(stored); it != nil {
		return it
	}
	g.items = append(g.items, groupItem{stored: append([]byte(nil), stored...)})
	return &g.items[len(g.items)-1]
}

// find returns the item with the given stored encoding, or nil.
func (g *group) find(stored []byte) *groupItem {
	for i := range g.items {
		if bytes.Equal(g.items[i].stored, stored) {
			return &g.items[i]
		}
	}
	return nil
}

// addOld adds row i of an entry batch, an existing entry. Its values may
// point into the batch, which is released before the group may end: the
// group keeps the encoding of the stored values, and a copy of the values
// when they are not all stored.
func (g *group) addOld(m *merger, ent arrow.RecordBatch, i int) error {
	var it *groupItem
	if m.allStored {
		var err error
		if m.valBuf, err = m.codec.AppendRowValue(m.valBuf[:0], ent, i); err != nil {
			return fmt.Errorf("merge range file %s: %w", m.fileName, err)
		}
		it = g.item(m.valBuf)
	} else {
		entry := m.codec.Row(m.rowBuf, ent, i)
		m.rowBuf = entry
		enc, err := m.storedEncoding(entry)
		if err != nil {
			return err
		}
		if it = g.item(enc); it.entry == nil {
			it.entry = make(format.Key, len(entry))
			for i, v := range entry {
				it.entry[i] = ownValue(v)
			}
		}
	}
	it.old++
	it.count++
	return nil
}

// values returns the values of an item's entry, decoding those of an
// existing entry whose fields are all stored.
func (m *merger) values(it *groupItem) (format.Key, error) {
	if it.entry != nil {
		return it.entry, nil
	}
	entry, err := m.codec.DecodeValue(it.stored)
	if err != nil {
		return nil, fmt.Errorf("merge: %w", err)
	}
	it.entry = entry
	return entry, nil
}

// ownValue copies a string that may point into an Arrow buffer, which the
// reader recycles once the batch is released.
func ownValue(v any) any {
	if s, ok := v.(string); ok {
		return strings.Clone(s)
	}
	return v
}

// resolveGroup applies the mutations of the group's key and writes what
// remains. oldFile is the file the existing entries came from, or -1.
func (m *merger) resolveGroup(oldFile int) error {
	g := &m.group
	g.active = false
	for m.hasHead && bytes.Equal(m.head.key, g.key) {
		if m.allStored && m.head.count < 0 {
			// A delete of an existing entry: the same bytes.
			if it := g.find(m.head.value); it != nil {
				it.count += m.head.count
				if err := m.advance(); err != nil {
					return err
				}
				continue
			}
		}
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
		count := m.head.count
		if err := m.advance(); err != nil {
			return err
		}
		if len(g.items) == 0 && count > 0 && (!m.hasHead || !bytes.Equal(m.head.key, g.key)) {
			// A lone insert under a key the index does not hold (an
			// upsert's new version, whose location is in its key): nothing
			// to match it with.
			for range count {
				if err := m.emit(entry, -1); err != nil {
					return err
				}
			}
			return nil
		}
		enc, err := m.storedEncoding(entry)
		if err != nil {
			return err
		}
		it := g.item(enc)
		if count > 0 || it.entry == nil {
			it.entry = entry // an inserted entry carries every field's value
		}
		it.count += count
	}
	for i := range g.items {
		it := &g.items[i]
		if it.count == 0 {
			continue
		}
		entry, err := m.values(it)
		if err != nil {
			return err
		}
		if it.count < 0 {
			return fmt.Errorf("merge: the delta deletes %d copies of entry %s, the index holds %d: %w",
				it.old-it.count, m.describe(entry), it.old, ErrDeltaMismatch)
		}
		from := -1
		if it.old > 0 {
			from = oldFile
		}
		for range it.count {
			if err := m.emit(entry, from); err != nil {
				return err
			}
		}
	}
	return nil
}

func (m *merger) storedEncoding(entry format.Key) ([]byte, error) {
	m.stored = m.stored[:0]
	for _, pos := range m.storedPos {
		m.stored = append(m.stored, entry[pos])
	}
	var err error
	m.encBuf, err = format.AppendKey(m.encBuf[:0], m.storedTypes, m.stored)
	if err != nil {
		return nil, fmt.Errorf("merge: encode entry %s: %w", m.describe(entry), err)
	}
	return m.encBuf, nil
}

// emit writes one entry to the run; oldFile is the file of prev it came
// from, or -1 for an inserted entry.
func (m *merger) emit(entry format.Key, oldFile int) error {
	if err := m.w.Add(entry); err != nil {
		return err
	}
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
