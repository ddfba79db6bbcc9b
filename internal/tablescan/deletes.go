package tablescan

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/RoaringBitmap/roaring/v2/roaring64"
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/iceberg-go"
	iceio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"
	"github.com/apache/iceberg-go/table/dv"

	"github.com/streamidx/streamidx/format"
)

// Entry is a live file of a manifest with its data sequence number, which
// decides the delete files that apply to a data file, and the data files a
// delete file applies to.
type Entry struct {
	File iceberg.DataFile
	Seq  int64
}

// DeleteFile is a live delete file of a snapshot.
type DeleteFile = Entry

// FileDeletes is the delete state that applies to one data file: the rows
// it removes are the union of Positions and of the rows matching any of
// Equality. The zero value deletes nothing.
type FileDeletes struct {
	// Positions are the deleted row positions, from deletion vectors and
	// position delete files; nil when there are none.
	Positions *dv.RoaringPositionBitmap
	// Equality are the equality delete sets that apply to the file.
	Equality []*EqualityDeletes
	// Within, when set, limits a scan to the rows at these positions, as
	// if every other row were deleted: row groups holding none of them are
	// not read, and the rows of the others are tested only at them. A
	// reader that knows which rows changed (the positions an equality
	// delete resolved to) reads those, not the file.
	Within *roaring64.Bitmap
}

// within reports whether a scan limited to Within reads any row of
// [start, start+n).
func (fd *FileDeletes) within(start, n int64) bool {
	if fd == nil || fd.Within == nil {
		return true
	}
	if n <= 0 {
		return false
	}
	below := uint64(0)
	if start > 0 {
		below = fd.Within.Rank(uint64(start - 1))
	}
	return fd.Within.Rank(uint64(start+n-1)) > below
}

// DeleteIndex says which delete files of a snapshot apply to which data
// file, by the spec's rules, and loads their content on demand. Loaded
// content is cached, because one delete file usually applies to many data
// files. It is safe for concurrent use.
type DeleteIndex struct {
	specs map[int]iceberg.PartitionSpec

	dvs        map[string]DeleteFile   // by referenced data file
	posByFile  map[string][]DeleteFile // position delete files that name their one data file
	posShared  []DeleteFile            // position delete files for any number of data files
	eqGlobal   []DeleteFile            // equality deletes of unpartitioned specs, by Seq
	eqByTuple  map[string][]DeleteFile // equality deletes by spec and partition, by Seq
	numDeletes int
	numRecords int64 // rows of the delete files, deleted positions and tuples

	mu       sync.Mutex
	posCache map[string]map[string]*dv.RoaringPositionBitmap // delete file -> data file -> positions
	eqCache  map[string]*EqualityDeletes                     // delete file -> its tuples
	shared   SharedEqualityDeletes
	// merged holds the most recently merged equality sets, by their
	// fields and delete files (mergedKeys, oldest first): the data files of
	// a CDC table written before a run of upserts all meet the same
	// equality delete files, which are merged once for all of them.
	merged     map[string]*EqualityDeletes
	mergedKeys []string
}

// mergedSets is how many merged equality sets a DeleteIndex keeps.
const mergedSets = 4

// SharedEqualityDeletes gives the content of an equality delete file read
// with schema, from a cache that outlives one DeleteIndex, or by calling
// read. Delete files are immutable, so one read serves every snapshot
// that holds the file.
type SharedEqualityDeletes func(ctx context.Context, del iceberg.DataFile, schema *iceberg.Schema, read func(context.Context) (*EqualityDeletes, error)) (*EqualityDeletes, error)

// ShareEqualityDeletes makes the index load equality delete files through
// shared, and keeps the sets of each file apart: a caller that shares them
// tests a few rows of a data file (a lookup's matches), for which merging
// the sets costs more than it saves. Call it before Load.
func (ix *DeleteIndex) ShareEqualityDeletes(shared SharedEqualityDeletes) { ix.shared = shared }

// PlanDeletes reads the delete manifests of snap and indexes its live delete
// files. A nil snap (a table without snapshots) gives an empty index.
func PlanDeletes(ctx context.Context, tbl *table.Table, snap *table.Snapshot) (*DeleteIndex, error) {
	fs, err := tbl.FS(ctx)
	if err != nil {
		return nil, fmt.Errorf("open table io: %w", err)
	}
	var manifests []iceberg.ManifestFile
	if snap != nil {
		if manifests, err = ManifestList(fs, snap); err != nil {
			return nil, err
		}
	}
	return planDeletes(ctx, fs, tbl.Metadata(), manifests)
}

func planDeletes(ctx context.Context, fs iceio.IO, meta table.Metadata, manifests []iceberg.ManifestFile) (*DeleteIndex, error) {
	ix := &DeleteIndex{
		specs:     map[int]iceberg.PartitionSpec{},
		dvs:       map[string]DeleteFile{},
		posByFile: map[string][]DeleteFile{},
		eqByTuple: map[string][]DeleteFile{},
		posCache:  map[string]map[string]*dv.RoaringPositionBitmap{},
		eqCache:   map[string]*EqualityDeletes{},
		merged:    map[string]*EqualityDeletes{},
	}
	for _, spec := range meta.PartitionSpecs() {
		ix.specs[spec.ID()] = spec
	}
	for _, m := range manifests {
		if m.ManifestContent() != iceberg.ManifestContentDeletes {
			continue
		}
		files, err := LiveEntries(ctx, fs, m)
		if err != nil {
			return nil, err
		}
		for _, d := range files {
			if err := ix.add(d); err != nil {
				return nil, fmt.Errorf("index delete manifest %s: %w", m.FilePath(), err)
			}
		}
	}
	slices.SortStableFunc(ix.eqGlobal, bySeq)
	for _, files := range ix.eqByTuple {
		slices.SortStableFunc(files, bySeq)
	}
	return ix, nil
}

func bySeq(a, b DeleteFile) int { return cmp.Compare(a.Seq, b.Seq) }

// ManifestList returns the manifests snapshot snap lists, from the
// process's cache of manifest lists when it holds snap's. A manifest list
// never changes once written, and the one of a table that commits every
// second lists thousands of manifests within hours: the daemon's update of
// each commit, and a service reconciling a lagging index with it, read the
// lists of the commit and of the one before, which were read already. The
// slice is shared: callers must not change it.
func ManifestList(fs iceio.IO, snap *table.Snapshot) ([]iceberg.ManifestFile, error) {
	loc := snap.ManifestList
	if l, ok := manifestLists.get(loc); ok && loc != "" {
		return l, nil
	}
	l, err := snap.Manifests(fs)
	if err != nil {
		return nil, fmt.Errorf("read manifest list of snapshot %d: %w", snap.SnapshotID, err)
	}
	if loc != "" {
		manifestLists.put(loc, l)
	}
	return l, nil
}

// ForgetManifests drops the manifest lists and manifests the process
// keeps (ManifestList, LiveEntries): what reads them next reads the files.
func ForgetManifests() {
	manifestLists.clear()
	manifestEntries.clear()
}

// manifestLists holds the most recently read manifest lists, up to 65,536
// manifests in all (a manifest file's entry in a list is a few hundred
// bytes).
var manifestLists = newSliceCache[iceberg.ManifestFile](1 << 16)

// manifestEntries caches the live entries of manifests, data and delete. A
// manifest file never changes once written, and every snapshot of a table
// that takes commits lists all its manifests again (a fast append adds one
// and merges none), so the table delta of each commit would otherwise read
// every manifest of the table: a cost that grows with each commit. It
// holds up to 65,536 entries (an entry is a data or delete file with its
// column statistics, one to a few kilobytes), whole manifests, the least
// recently added dropped first. One-off reads of every manifest (a build's
// scan planning) do not go through it.
var manifestEntries = newSliceCache[Entry](1 << 16)

// LiveEntries returns the live entries of manifest m (added or existing,
// not deleted), each file with its data sequence number, from the
// process's cache of manifests when it holds them.
func LiveEntries(ctx context.Context, fs iceio.IO, m iceberg.ManifestFile) ([]Entry, error) {
	return liveEntries(ctx, manifestEntries, fs, m)
}

func liveEntries(ctx context.Context, c *sliceCache[Entry], fs iceio.IO, m iceberg.ManifestFile) ([]Entry, error) {
	path := m.FilePath()
	if files, ok := c.get(path); ok {
		return files, nil
	}
	var files []Entry
	for e, err := range m.Entries(fs, true) {
		if err != nil {
			return nil, fmt.Errorf("read manifest %s: %w", path, err)
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		files = append(files, Entry{File: e.DataFile(), Seq: e.SequenceNum()})
	}
	c.put(path, files)
	return files, nil
}

// sliceCache holds slices read from immutable files, by the file's
// location, up to a number of elements in all, whole slices, the least
// recently added dropped first. It is safe for concurrent use.
type sliceCache[T any] struct {
	mu    sync.Mutex
	max   int
	held  int
	m     map[string][]T
	order []string // locations, least recently added first
}

func newSliceCache[T any](max int) *sliceCache[T] {
	return &sliceCache[T]{max: max, m: map[string][]T{}}
}

func (c *sliceCache[T]) get(loc string) ([]T, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	l, ok := c.m[loc]
	return l, ok
}

// put keeps l under loc unless it holds more than the cache's bound.
func (c *sliceCache[T]) put(loc string, l []T) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.m[loc]; ok || len(l) > c.max {
		return
	}
	for c.held+len(l) > c.max {
		c.held -= len(c.m[c.order[0]])
		delete(c.m, c.order[0])
		c.order = c.order[1:]
	}
	c.m[loc] = l
	c.held += len(l)
	c.order = append(c.order, loc)
}

func (c *sliceCache[T]) clear() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.m, c.order, c.held = map[string][]T{}, nil, 0
}

func (ix *DeleteIndex) add(d DeleteFile) error {
	df := d.File
	switch df.ContentType() {
	case iceberg.EntryContentPosDeletes:
		ref := df.ReferencedDataFile()
		if df.FileFormat() == iceberg.PuffinFile {
			if ref == nil {
				return fmt.Errorf("deletion vector %s names no data file", df.FilePath())
			}
			if old, ok := ix.dvs[*ref]; ok {
				return fmt.Errorf("data file %s has two live deletion vectors, %s and %s", *ref, old.File.FilePath(), df.FilePath())
			}
			ix.dvs[*ref] = d
		} else if ref != nil {
			ix.posByFile[*ref] = append(ix.posByFile[*ref], d)
		} else {
			ix.posShared = append(ix.posShared, d)
		}
	case iceberg.EntryContentEqDeletes:
		if len(df.EqualityFieldIDs()) == 0 {
			return fmt.Errorf("equality delete file %s has no equality field IDs", df.FilePath())
		}
		spec, ok := ix.specs[int(df.SpecID())]
		if !ok {
			return fmt.Errorf("equality delete file %s has unknown partition spec %d", df.FilePath(), df.SpecID())
		}
		if spec.IsUnpartitioned() {
			ix.eqGlobal = append(ix.eqGlobal, d)
		} else {
			k := partitionKey(df)
			ix.eqByTuple[k] = append(ix.eqByTuple[k], d)
		}
	default:
		return fmt.Errorf("delete manifest lists %s with content %s", df.FilePath(), df.ContentType())
	}
	ix.numDeletes++
	ix.numRecords += df.Count()
	return nil
}

// partitionKey identifies a file's partition: its spec and partition tuple.
// fmt prints maps sorted by key, and %#v keeps a null apart from the string
// "<nil>" and a string apart from bytes.
func partitionKey(df iceberg.DataFile) string {
	return fmt.Sprintf("%d/%#v", df.SpecID(), df.Partition())
}

// Len is the number of live delete files in the index.
func (ix *DeleteIndex) Len() int { return ix.numDeletes }

// Records is the number of rows of the live delete files: what their loaded
// content grows with.
func (ix *DeleteIndex) Records() int64 { return ix.numRecords }

// Applicable lists the delete files that apply to a data file of data
// sequence number dataSeq:
//   - its deletion vector, when the vector's sequence number is not lower;
//     a deletion vector supersedes the file's position delete files (the v3
//     spec lets readers ignore them; Java's reader does);
//   - otherwise the position delete files whose sequence number is not lower
//     and which may name the file (referenced_data_file, else the bounds of
//     file_path);
//   - equality delete files with a strictly higher sequence number, of an
//     unpartitioned spec or of the file's spec and partition.
func (ix *DeleteIndex) Applicable(file iceberg.DataFile, dataSeq int64) []DeleteFile {
	out := ix.ApplicablePositions(file, dataSeq)
	out = append(out, newerThan(ix.eqGlobal, dataSeq)...)
	return append(out, newerThan(ix.eqByTuple[partitionKey(file)], dataSeq)...)
}

// ApplicablePositions is the part of Applicable that deletes positions:
// the file's deletion vector, or else the position delete files that may
// name it.
func (ix *DeleteIndex) ApplicablePositions(file iceberg.DataFile, dataSeq int64) []DeleteFile {
	var out []DeleteFile
	path := file.FilePath()
	if d, ok := ix.dvs[path]; ok && d.Seq >= dataSeq {
		return append(out, d)
	}
	for _, d := range ix.posByFile[path] {
		if d.Seq >= dataSeq {
			out = append(out, d)
		}
	}
	for _, d := range ix.posShared {
		if d.Seq >= dataSeq && mayName(d.File, path) {
			out = append(out, d)
		}
	}
	return out
}

// EqualityNotIn returns an index that holds the equality delete files of ix
// that other lacks (by location), and nothing else. Whether an equality
// delete file applies to a data file depends on the two files alone (their
// sequence numbers and partitions), not on what else a snapshot holds, so
// Applicable of the result is what ix's equality deletes add for a data
// file to those of other: a delta between two snapshots of a table with
// thousands of live equality delete files meets only the few its commits
// added, rather than every one for every data file.
func (ix *DeleteIndex) EqualityNotIn(other *DeleteIndex) *DeleteIndex {
	in := map[string]bool{}
	for _, d := range other.eqGlobal {
		in[d.File.FilePath()] = true
	}
	for _, l := range other.eqByTuple {
		for _, d := range l {
			in[d.File.FilePath()] = true
		}
	}
	out := &DeleteIndex{specs: ix.specs, eqByTuple: map[string][]DeleteFile{}}
	keep := func(l []DeleteFile) []DeleteFile {
		var kept []DeleteFile
		for _, d := range l {
			if !in[d.File.FilePath()] {
				kept = append(kept, d)
				out.numDeletes++
				out.numRecords += d.File.Count()
			}
		}
		return kept
	}
	out.eqGlobal = keep(ix.eqGlobal)
	for k, l := range ix.eqByTuple {
		if kept := keep(l); len(kept) > 0 {
			out.eqByTuple[k] = kept
		}
	}
	return out
}

// WithoutEqualityOf returns an index that holds what ix holds, less the
// equality delete files that other holds too (by location). A reader
// that knows which rows were live at an earlier snapshot S of the table
// (an index built for S) asks only whether they are still live: every
// equality delete file of S had applied already, so ix of a later
// snapshot T WithoutEqualityOf S's index answers the same for those rows,
// and for the rows of data files added since S (older delete files do not
// apply to newer data), testing the few files committed since rather than
// every live one: of a CDC table with a commit a second, thousands.
// Position deletes and deletion vectors stay: testing them costs one
// bitmap per data file.
func (ix *DeleteIndex) WithoutEqualityOf(other *DeleteIndex) *DeleteIndex {
	eq := ix.EqualityNotIn(other)
	out := &DeleteIndex{
		specs: ix.specs, dvs: ix.dvs, posByFile: ix.posByFile, posShared: ix.posShared,
		eqGlobal: eq.eqGlobal, eqByTuple: eq.eqByTuple,
		posCache: map[string]map[string]*dv.RoaringPositionBitmap{}, eqCache: map[string]*EqualityDeletes{},
		shared: ix.shared, merged: map[string]*EqualityDeletes{},
	}
	out.numDeletes, out.numRecords = eq.numDeletes, eq.numRecords
	for _, d := range ix.dvs {
		out.numDeletes++
		out.numRecords += d.File.Count()
	}
	for _, l := range ix.posByFile {
		for _, d := range l {
			out.numDeletes++
			out.numRecords += d.File.Count()
		}
	}
	for _, d := range ix.posShared {
		out.numDeletes++
		out.numRecords += d.File.Count()
	}
	return out
}

// newerThan returns the files of sorted (by Seq) with Seq > seq.
func newerThan(sorted []DeleteFile, seq int64) []DeleteFile {
	i := sort.Search(len(sorted), func(i int) bool { return sorted[i].Seq > seq })
	return sorted[i:]
}

// mayName reports whether the file_path bounds of a position delete file
// admit path. Bounds are the UTF-8 bytes; a truncated lower bound is a
// prefix and a truncated upper bound is rounded up, so both stay bounds.
func mayName(del iceberg.DataFile, path string) bool {
	if lo, ok := del.LowerBoundValues()[format.FieldIDDeleteFilePath]; ok && strings.Compare(path, string(lo)) < 0 {
		return false
	}
	if hi, ok := del.UpperBoundValues()[format.FieldIDDeleteFilePath]; ok && strings.Compare(path, string(hi)) > 0 {
		return false
	}
	return true
}

// Load reads the delete files that apply to a data file of data sequence
// number dataSeq (see Applicable) into its delete state, for a caller that
// tests every row of the file (see LoadFor).
func (ix *DeleteIndex) Load(ctx context.Context, fs iceio.IO, schema *iceberg.Schema, file iceberg.DataFile, dataSeq int64, opts Options) (*FileDeletes, error) {
	return ix.LoadFor(ctx, fs, schema, file, dataSeq, opts, file.Count())
}

// LoadFor is Load for a caller that tests only rows of the file's rows
// against the state. Equality delete values are read as the types of schema, the
// schema the data is read with. Equality sets of the same fields come
// merged into one where testing rows rows against each would cost more than
// the merge, and a merge is shared by the data files the same delete files
// apply to. A caller that tests a few rows of each file (an update that
// knows from the index which rows an upsert reached) thus never pays for
// merging the equality deletes of a table's whole history once per file.
func (ix *DeleteIndex) LoadFor(ctx context.Context, fs iceio.IO, schema *iceberg.Schema, file iceberg.DataFile, dataSeq int64, opts Options, rows int64) (*FileDeletes, error) {
	opts.EnsureDefaults()
	out := &FileDeletes{}
	var eqPaths []string
	for _, d := range ix.Applicable(file, dataSeq) {
		df := d.File
		switch df.ContentType() {
		case iceberg.EntryContentPosDeletes:
			bm, err := ix.positions(ctx, fs, df, file.FilePath(), opts)
			if err != nil {
				return nil, err
			}
			if bm == nil {
				continue
			}
			if out.Positions == nil {
				out.Positions = dv.NewRoaringPositionBitmap()
			}
			out.Positions.Or(bm)
		case iceberg.EntryContentEqDeletes:
			set, err := ix.equality(ctx, fs, schema, df, opts)
			if err != nil {
				return nil, err
			}
			out.Equality = append(out.Equality, set)
			eqPaths = append(eqPaths, df.FilePath())
		}
	}
	out.Equality = ix.mergeEquality(out.Equality, eqPaths, rows)
	return out, nil
}

// mergeEquality merges the sets of each group of equal fields when a file
// of rows rows is worth it (see groupEquality); paths are the sets' delete
// files, which name a merge in the cache.
func (ix *DeleteIndex) mergeEquality(sets []*EqualityDeletes, paths []string, rows int64) []*EqualityDeletes {
	if len(sets) < 2 || ix.shared != nil {
		return sets
	}
	byFields := map[string][]int{} // indexes into sets
	var order []string
	for i, set := range sets {
		k := fmt.Sprint(set.FieldIDs)
		if _, ok := byFields[k]; !ok {
			order = append(order, k)
		}
		byFields[k] = append(byFields[k], i)
	}
	out := make([]*EqualityDeletes, 0, len(order))
	for _, k := range order {
		members := byFields[k]
		memberSets := make([]*EqualityDeletes, len(members))
		for j, i := range members {
			memberSets[j] = sets[i]
		}
		if !mergeWorth(memberSets, rows) {
			for _, i := range members {
				out = append(out, sets[i])
			}
			continue
		}
		var name strings.Builder
		name.WriteString(k)
		for _, i := range members {
			name.WriteByte(0)
			name.WriteString(paths[i])
		}
		ix.mu.Lock()
		m, ok := ix.merged[name.String()]
		ix.mu.Unlock()
		if !ok {
			m = mergeSets(memberSets)
			ix.mu.Lock()
			if _, ok := ix.merged[name.String()]; !ok {
				if len(ix.mergedKeys) == mergedSets {
					delete(ix.merged, ix.mergedKeys[0])
					ix.mergedKeys = ix.mergedKeys[1:]
				}
				ix.merged[name.String()] = m
				ix.mergedKeys = append(ix.mergedKeys, name.String())
			}
			ix.mu.Unlock()
		}
		out = append(out, m)
	}
	return out
}

func (ix *DeleteIndex) positions(ctx context.Context, fs iceio.IO, del iceberg.DataFile, dataPath string, opts Options) (*dv.RoaringPositionBitmap, error) {
	if del.FileFormat() == iceberg.PuffinFile {
		return ReadPositions(ctx, fs, del, dataPath, opts)
	}
	ix.mu.Lock()
	byFile, ok := ix.posCache[del.FilePath()]
	ix.mu.Unlock()
	if !ok {
		var err error
		if byFile, err = readPositionDeleteFile(ctx, fs, del, opts); err != nil {
			return nil, err
		}
		ix.mu.Lock()
		ix.posCache[del.FilePath()] = byFile
		ix.mu.Unlock()
	}
	return byFile[dataPath], nil
}

func (ix *DeleteIndex) equality(ctx context.Context, fs iceio.IO, schema *iceberg.Schema, del iceberg.DataFile, opts Options) (*EqualityDeletes, error) {
	ix.mu.Lock()
	set, ok := ix.eqCache[del.FilePath()]
	ix.mu.Unlock()
	if ok {
		return set, nil
	}
	read := func(ctx context.Context) (*EqualityDeletes, error) {
		return ReadEqualityDeletes(ctx, fs, schema, del, opts)
	}
	var err error
	if ix.shared != nil {
		set, err = ix.shared(ctx, del, schema, read)
	} else {
		set, err = read(ctx)
	}
	if err != nil {
		return nil, err
	}
	ix.mu.Lock()
	ix.eqCache[del.FilePath()] = set
	ix.mu.Unlock()
	return set, nil
}

// ReadPositions returns the positions of data file dataPath that a position
// delete file or deletion vector deletes; nil when it deletes none there.
func ReadPositions(ctx context.Context, fs iceio.IO, del iceberg.DataFile, dataPath string, opts Options) (*dv.RoaringPositionBitmap, error) {
	opts.EnsureDefaults()
	if del.ContentType() != iceberg.EntryContentPosDeletes {
		return nil, fmt.Errorf("read positions of %s: content is %s", del.FilePath(), del.ContentType())
	}
	if del.FileFormat() == iceberg.PuffinFile {
		if ref := del.ReferencedDataFile(); ref == nil || *ref != dataPath {
			return nil, nil
		}
		bm, err := dv.ReadDV(fs, del)
		if err != nil {
			return nil, fmt.Errorf("read deletion vector %s: %w", del.FilePath(), err)
		}
		return bm, nil
	}
	byFile, err := readPositionDeleteFile(ctx, fs, del, opts)
	if err != nil {
		return nil, err
	}
	return byFile[dataPath], nil
}

// ReadPositionDeleteFile returns every position a Parquet position delete
// file deletes, by data file location.
func ReadPositionDeleteFile(ctx context.Context, fs iceio.IO, del iceberg.DataFile, opts Options) (map[string]*dv.RoaringPositionBitmap, error) {
	opts.EnsureDefaults()
	return readPositionDeleteFile(ctx, fs, del, opts)
}

// readPositionDeleteFile reads a Parquet position delete file into the
// positions it deletes, by data file.
func readPositionDeleteFile(ctx context.Context, fs iceio.IO, del iceberg.DataFile, opts Options) (map[string]*dv.RoaringPositionBitmap, error) {
	if del.FileFormat() != iceberg.ParquetFile {
		return nil, fmt.Errorf("read position delete file %s: format %s is not supported", del.FilePath(), del.FileFormat())
	}
	out := map[string]*dv.RoaringPositionBitmap{}
	err := readDeleteFile(ctx, fs, del, iceberg.PositionalDeleteSchema, opts, func(rec arrow.RecordBatch) error {
		paths, ok1 := rec.Column(0).(*array.String)
		pos, ok2 := rec.Column(1).(*array.Int64)
		if !ok1 || !ok2 {
			return fmt.Errorf("read position delete file %s: columns are %s, %s", del.FilePath(), rec.Column(0).DataType(), rec.Column(1).DataType())
		}
		for i := range int(rec.NumRows()) {
			if paths.IsNull(i) || pos.IsNull(i) || pos.Value(i) < 0 {
				return format.MarkCorruption(del.FilePath(), fmt.Errorf("row %d is not a valid (file_path, pos)", i))
			}
			p := paths.Value(i)
			bm, ok := out[p]
			if !ok {
				bm = dv.NewRoaringPositionBitmap()
				out[p] = bm
			}
			bm.Set(uint64(pos.Value(i)))
		}
		return nil
	})
	return out, err
}

// ReadEqualityDeletes reads an equality delete file into the set of its
// tuples, with values of the types its equality fields have in schema.
// Equality fields must be top-level primitive columns of schema.
func ReadEqualityDeletes(ctx context.Context, fs iceio.IO, schema *iceberg.Schema, del iceberg.DataFile, opts Options) (*EqualityDeletes, error) {
	opts.EnsureDefaults()
	if del.ContentType() != iceberg.EntryContentEqDeletes {
		return nil, fmt.Errorf("read equality deletes of %s: content is %s", del.FilePath(), del.ContentType())
	}
	if del.FileFormat() != iceberg.ParquetFile {
		return nil, fmt.Errorf("read equality delete file %s: format %s is not supported", del.FilePath(), del.FileFormat())
	}
	set := NewEqualityDeletes(del.EqualityFieldIDs())
	fields, err := equalityFields(schema, set.FieldIDs)
	if err != nil {
		return nil, fmt.Errorf("read equality delete file %s: %w", del.FilePath(), err)
	}
	eqSchema := iceberg.NewSchema(0, fields...)
	err = readDeleteFile(ctx, fs, del, eqSchema, opts, func(rec arrow.RecordBatch) error {
		return set.addRows(rec.Columns(), int(rec.NumRows()))
	})
	if err != nil {
		return nil, err
	}
	return set, nil
}

// equalityFields returns the fields ids of schema, optional so a delete file
// may hold nulls for them.
func equalityFields(schema *iceberg.Schema, ids []int) ([]iceberg.NestedField, error) {
	fields := make([]iceberg.NestedField, len(ids))
	for i, id := range ids {
		if !isTopLevel(schema, id) {
			return nil, fmt.Errorf("equality field %d is not a top-level column of the schema", id)
		}
		f, _ := schema.FindFieldByID(id)
		if !format.IsPrimitive(f.Type) {
			return nil, fmt.Errorf("equality field %d has type %s, not a primitive", id, f.Type)
		}
		f.Required = false
		fields[i] = f
	}
	return fields, nil
}

func readDeleteFile(ctx context.Context, fs iceio.IO, del iceberg.DataFile, schema *iceberg.Schema, opts Options, fn func(arrow.RecordBatch) error) error {
	if del.KeyMetadata() != nil {
		return fmt.Errorf("read delete file %s: encrypted files are not supported", del.FilePath())
	}
	p, err := openParquet(fs, del.FilePath(), opts.NameMapping, opts.BatchRows, opts.Allocator)
	if err != nil {
		return err
	}
	if p.numRows() != del.Count() {
		return errJoinClose(format.MarkCorruption(del.FilePath(), fmt.Errorf("has %d rows, its manifest entry says %d", p.numRows(), del.Count())), p)
	}
	for _, f := range schema.Fields() {
		if !slices.Contains(p.topIDs, f.ID) {
			return errJoinClose(format.MarkCorruption(del.FilePath(), fmt.Errorf("has no column with field ID %d (%s)", f.ID, f.Name)), p)
		}
	}
	so := table.SchemaOptions{IncludeFieldIDs: true, FormatVersion: opts.FormatVersion}
	err = p.read(ctx, schema, so, nil, func(rec arrow.RecordBatch, _ int64) error { return fn(rec) })
	return errJoinClose(err, p)
}

// ToDV converts a roaring64 bitmap of positions into a deletion vector's
// bitmap. Both use the portable 64-bit roaring layout, so this is a copy of
// containers, where setting ranges or positions one by one would rebuild
// them.
func ToDV(b *roaring64.Bitmap) (*dv.RoaringPositionBitmap, error) {
	data, err := b.ToBytes()
	if err != nil {
		return nil, fmt.Errorf("serialize positions: %w", err)
	}
	out, err := dv.DeserializeRoaringPositionBitmap(data)
	if err != nil {
		return nil, fmt.Errorf("convert positions: %w", err)
	}
	return out, nil
}

// FromDV converts a deletion vector's bitmap into a roaring64 bitmap; nil
// gives an empty one.
func FromDV(d *dv.RoaringPositionBitmap) (*roaring64.Bitmap, error) {
	out := roaring64.New()
	if d == nil {
		return out, nil
	}
	var buf bytes.Buffer
	if err := d.Serialize(&buf); err != nil {
		return nil, fmt.Errorf("serialize positions: %w", err)
	}
	if _, err := out.ReadFrom(&buf); err != nil {
		return nil, fmt.Errorf("convert positions: %w", err)
	}
	return out, nil
}
