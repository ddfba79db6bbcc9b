// Package verify is the judge of every other part: it checks that an index
// snapshot holds exactly the live rows of its source table snapshot, and
// that its files follow the spec. It computes the expected entries by its
// own path, through iceberg-go's scan (its plan, and its reading of data
// files with their position deletes and deletion vectors applied), its own
// application of the equality deletes that plan names for each data file
// (see equalityDeletes), and, for row positions, the rows' _row_id on v3
// tables or a plain read of each data file; it shares no code with the
// scanner the builder uses. Expected and actual entries are compared as multisets by
// sorting both within a memory budget.
//
// Concurrency: a verification reads the table (expected side) and the
// index's range files (actual side) on two goroutines at once; until the
// final merge they share only the numbering of data file paths.
package verify

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"strings"
	"sync"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"

	"github.com/streamidx/streamidx/format"
	"github.com/streamidx/streamidx/internal/extsort"
	"github.com/streamidx/streamidx/internal/lineage"
	"github.com/streamidx/streamidx/internal/objstore"
)

// Options tune a verification.
type Options struct {
	// Store reads the index files and the table's data files. Default: a
	// store for local files only.
	Store *objstore.Store
	// MemoryBudget bounds each of the two sorts. Default: 256 MiB.
	MemoryBudget int64
	// SpillDir holds spilled sorts. Default: the OS temp dir.
	SpillDir string
	// SampleLimit caps the differing entries listed in the report. Default: 10.
	SampleLimit int
	// Logger. Default: discard.
	Logger *slog.Logger
}

// Report is the outcome of a verification.
type Report struct {
	IndexSnapshotID  int64
	SourceSnapshotID int64
	RangeFiles       int
	ExpectedEntries  int64 // live rows of the source snapshot
	IndexEntries     int64 // entries in the range files
	Missing          int64 // expected but not in the index
	Unexpected       int64 // in the index but not expected
	MissingSample    []string
	UnexpectedSample []string
	// FileProblems are violations of the spec by the index files: order,
	// overlapping ranges, group_max_value, counts, sizes, bounds.
	FileProblems []string
	// AmbiguousRows counts live rows whose data file holds identical rows
	// that were deleted: their positions are checked as a set (any of the
	// identical rows' positions), since no content can tell them apart.
	AmbiguousRows int64
}

// Exact reports whether the index snapshot is exactly right.
func (r *Report) Exact() bool {
	return r.Missing == 0 && r.Unexpected == 0 && len(r.FileProblems) == 0
}

// Summary is a short human-readable account of the report.
func (r *Report) Summary() string {
	var b strings.Builder
	verdict := "exact"
	if !r.Exact() {
		verdict = "DIFFERENT"
	}
	fmt.Fprintf(&b, "index snapshot %d for source snapshot %d: %s\n", r.IndexSnapshotID, r.SourceSnapshotID, verdict)
	fmt.Fprintf(&b, "  live rows %d, index entries %d, range files %d\n", r.ExpectedEntries, r.IndexEntries, r.RangeFiles)
	if r.Missing > 0 {
		fmt.Fprintf(&b, "  %d entries missing from the index, e.g.:\n", r.Missing)
		for _, s := range r.MissingSample {
			fmt.Fprintf(&b, "    - %s\n", s)
		}
	}
	if r.Unexpected > 0 {
		fmt.Fprintf(&b, "  %d entries in the index that should not be, e.g.:\n", r.Unexpected)
		for _, s := range r.UnexpectedSample {
			fmt.Fprintf(&b, "    + %s\n", s)
		}
	}
	if len(r.FileProblems) > 0 {
		fmt.Fprintf(&b, "  %d problems with index files:\n", len(r.FileProblems))
		for _, p := range r.FileProblems {
			fmt.Fprintf(&b, "    ! %s\n", p)
		}
	}
	return b.String()
}

func (o *Options) ensureDefaults() {
	if o.MemoryBudget <= 0 {
		o.MemoryBudget = 256 << 20
	}
	if o.SampleLimit <= 0 {
		o.SampleLimit = 10
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Store == nil {
		o.Store = objstore.Local()
	}
}

// Verify checks index snapshot snap of the index md on tbl. An index of
// another table (format.CheckTable) is an error, not a report.
func Verify(ctx context.Context, tbl *table.Table, md *format.Metadata, snap *format.Snapshot, opts Options) (*Report, error) {
	opts.ensureDefaults()
	if err := format.CheckTable(md, lineage.View(tbl)); err != nil {
		return nil, err
	}
	source := tbl.SnapshotByID(snap.SourceTableSnapshotID)
	if source == nil {
		return nil, fmt.Errorf("source table snapshot %d of index snapshot %d is not in the table (expired?)", snap.SourceTableSnapshotID, snap.SnapshotID)
	}
	schema := lineage.SnapshotSchema(tbl, source)
	is, err := format.NewIndexSchema(md, schema)
	if err != nil {
		return nil, fmt.Errorf("resolve index against the source schema: %w", err)
	}
	r := &Report{IndexSnapshotID: snap.SnapshotID, SourceSnapshotID: source.SnapshotID}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	v := &verifier{ctx: ctx, opts: opts, tbl: tbl, md: md, source: source, schema: schema, is: is, report: r,
		hasher: newRowHasher(), ambiguous: map[string]map[int64]int64{}}
	v.layout()

	expected := extsort.NewSorter(opts.SpillDir, opts.MemoryBudget, opts.Logger)
	defer expected.Close()
	actual := extsort.NewSorter(opts.SpillDir, opts.MemoryBudget, opts.Logger)
	defer actual.Close()
	// The two sides share only files until compare (the expected side
	// writes ambiguous and AmbiguousRows, the actual side RangeFiles and
	// FileProblems), so they run at once: the table scan and the range
	// files each keep a core busy. The first error stops both.
	var first error
	var once sync.Once
	fail := func(err error) {
		if err != nil {
			once.Do(func() { first = err; cancel() })
		}
	}
	var wg sync.WaitGroup
	wg.Go(func() { fail(v.actual(snap, actual)) })
	fail(v.expected(expected))
	wg.Wait()
	if first != nil {
		return nil, first
	}
	r.ExpectedEntries, r.IndexEntries = expected.Len(), actual.Len()
	if err := v.compare(expected, actual); err != nil {
		return nil, err
	}
	return r, nil
}

// verifier carries one verification.
type verifier struct {
	ctx    context.Context
	opts   Options
	tbl    *table.Table
	md     *format.Metadata
	source *table.Snapshot
	schema *iceberg.Schema
	is     *format.IndexSchema
	report *Report
	hasher *rowHasher

	stored []format.IndexField // the fields compared: those stored in range files
	// keyTypes are the types of the stored fields as compared: those of
	// stored, but _file is compared by its number in files.
	keyTypes []iceberg.Type
	filePos  int // position of _file among stored, or -1
	posPos   int // position of _pos among stored, or -1
	files    fileNumbers

	// ambiguous maps data file -> position -> placeholder for rows whose
	// position cannot be told from a deleted identical row's (see locator).
	// The expected side fills it; compare reads it once both sides are done.
	ambiguous map[string]map[int64]int64
}

func (v *verifier) layout() {
	v.filePos, v.posPos = -1, -1
	for _, f := range v.is.Fields() {
		if !f.Stored() {
			continue
		}
		if r, ok := f.Expr.(format.Ref); ok {
			switch r.ID {
			case format.FieldIDFile:
				v.filePos = len(v.stored)
			case format.FieldIDPos:
				v.posPos = len(v.stored)
			}
		}
		t := f.Type
		if len(v.stored) == v.filePos {
			t = iceberg.PrimitiveTypes.Int64
		}
		v.stored = append(v.stored, f)
		v.keyTypes = append(v.keyTypes, t)
	}
}

// fileNumbers numbers data file paths in the order they are first seen, so
// that entries are compared with _file as a number of a few bytes: the
// paths are long, and made most of the bytes sorted. Both sides number
// through the same fileNumbers, so equal paths get equal numbers and
// different paths different ones. Safe for concurrent use.
type fileNumbers struct {
	mu     sync.Mutex
	byPath map[string]int64
	paths  []string
}

func (f *fileNumbers) number(path string) int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	n, ok := f.byPath[path]
	if !ok {
		if f.byPath == nil {
			f.byPath = map[string]int64{}
		}
		n = int64(len(f.paths))
		f.byPath[path] = n
		f.paths = append(f.paths, path)
	}
	return n
}

func (f *fileNumbers) path(n int64) (string, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if n < 0 || n >= int64(len(f.paths)) {
		return "", false
	}
	return f.paths[n], true
}

// encode turns the stored values of an entry, _file as its number, into the
// bytes compared.
func (v *verifier) encode(dst []byte, entry format.Key) ([]byte, error) {
	return format.AppendKey(dst, v.keyTypes, entry)
}

func (v *verifier) describe(enc []byte) string {
	k, _, err := format.DecodeKey(enc, v.keyTypes)
	if err != nil {
		return fmt.Sprintf("<undecodable entry %x: %v>", enc, err)
	}
	parts := make([]string, len(k))
	for i, f := range v.stored {
		val := format.FormatValue(v.keyTypes[i], k[i])
		if n, ok := k[i].(int64); ok && i == v.filePos {
			path, _ := v.files.path(n)
			val = format.FormatValue(f.Type, path)
		}
		if i == v.posPos {
			if p, ok := k[i].(int64); ok && p < 0 {
				val = "<one of identical rows>"
			}
		}
		parts[i] = f.Name + "=" + val
	}
	return strings.Join(parts, " ")
}

// compare merges the two sorted multisets. Entries of rows with
// ambiguous positions (see locator) are set aside from both, their
// position swapped for their placeholder, and compared as multisets of
// their own.
func (v *verifier) compare(expected, actual *extsort.Sorter) error {
	if len(v.ambiguous) == 0 || v.filePos < 0 {
		return v.merge(v.sorted(expected, nil), v.sorted(actual, nil))
	}
	asideE := extsort.NewSorter(v.opts.SpillDir, v.opts.MemoryBudget, v.opts.Logger)
	defer asideE.Close()
	asideA := extsort.NewSorter(v.opts.SpillDir, v.opts.MemoryBudget, v.opts.Logger)
	defer asideA.Close()
	if err := v.merge(v.sorted(expected, asideE), v.sorted(actual, asideA)); err != nil {
		return err
	}
	return v.merge(v.sorted(asideE, nil), v.sorted(asideA, nil))
}

// merge counts the differences of two sorted streams of entries.
func (v *verifier) merge(expected, actual iter.Seq[sortedRec]) error {
	nextE, stopE := iter.Pull(expected)
	defer stopE()
	nextA, stopA := iter.Pull(actual)
	defer stopA()
	e, okE := nextE()
	a, okA := nextA()
	for okE || okA {
		if err := firstErr(e, a, okE, okA); err != nil {
			return err
		}
		var c int
		switch {
		case !okA:
			c = -1
		case !okE:
			c = 1
		default:
			c = bytes.Compare(e.key, a.key)
		}
		switch {
		case c == 0:
			e, okE = nextE()
			a, okA = nextA()
		case c < 0:
			v.report.Missing++
			if len(v.report.MissingSample) < v.opts.SampleLimit {
				v.report.MissingSample = append(v.report.MissingSample, v.describe(e.key))
			}
			e, okE = nextE()
		default:
			v.report.Unexpected++
			if len(v.report.UnexpectedSample) < v.opts.SampleLimit {
				v.report.UnexpectedSample = append(v.report.UnexpectedSample, v.describe(a.key))
			}
			a, okA = nextA()
		}
	}
	return nil
}

// aside gives the encoding of an entry with its placeholder position when
// the entry locates one of identical rows (ok), else nothing.
func (v *verifier) aside(enc []byte) (swapped []byte, ok bool, err error) {
	k, _, err := format.DecodeKey(enc, v.keyTypes)
	if err != nil {
		return nil, false, err
	}
	n, _ := k[v.filePos].(int64)
	path, _ := v.files.path(n)
	pos, isPos := k[v.posPos].(int64)
	p, amb := v.ambiguous[path][pos]
	if !isPos || !amb {
		return nil, false, nil
	}
	k[v.posPos] = p
	swapped, err = v.encode(nil, k)
	return swapped, err == nil, err
}

type sortedRec struct {
	key []byte
	err error
}

func firstErr(e, a sortedRec, okE, okA bool) error {
	if okE && e.err != nil {
		return e.err
	}
	if okA && a.err != nil {
		return a.err
	}
	return nil
}

// sorted yields the keys of a sorter in order; each is valid until the
// next is pulled. With aside, the entries of rows with ambiguous positions
// go there instead.
func (v *verifier) sorted(s, aside *extsort.Sorter) iter.Seq[sortedRec] {
	return func(yield func(sortedRec) bool) {
		errStop := errors.New("stop")
		err := s.Iterate(func(k, _ []byte) error {
			if aside != nil {
				swapped, ok, err := v.aside(k)
				if err != nil {
					return err
				}
				if ok {
					return aside.Add(swapped, nil)
				}
			}
			if !yield(sortedRec{key: k}) {
				return errStop
			}
			return nil
		})
		if err != nil && !errors.Is(err, errStop) {
			yield(sortedRec{err: err})
		}
	}
}
