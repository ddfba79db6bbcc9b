// Package extsort sorts byte records by key within a memory budget, as an
// external merge sort with S2-compressed runs on disk: the full build sorts
// index entries with it, and verify sorts the expected and actual entries.
//
// Concurrency: a Sorter belongs to one goroutine; Merge merges the sorters
// that several goroutines filled.
package extsort

import (
	"bufio"
	"bytes"
	"cmp"
	"container/heap"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"

	"github.com/klauspost/compress/s2"
)

// Sorter sorts records by key within a memory budget, as an external merge
// sort: records collect in memory; when they would pass the budget they are
// sorted and written to a run file, and Iterate merges the runs with what is
// still in memory. Each spilled record is written once and read once.
// Records with equal keys come out in the order they were added. A Sorter
// belongs to one goroutine.
type Sorter struct {
	budget int64
	dir    string // parent of the spill directory
	log    *slog.Logger
	// The records in memory: their bytes in arena chunks, and a sortRec
	// each in blocks of recBlock, which are never grown (a grown slice of
	// millions of records is copied again and again into fresh memory) and
	// hold no pointers, so the garbage collector does not scan them.
	arenas   [][]byte
	blocks   [][]sortRec
	nrecs    int
	memBytes int64
	count    int64
	tmp      string   // spill directory, once created
	lock     *os.File // its lock file, held until Close
	runs     []string // run files, in the order written
}

// sortRec is a record in memory: where its bytes are, and the first bytes
// of its key, on which most comparisons end. Chunks and offsets grow as
// records are added, so they also give the order of addition.
type sortRec struct {
	// The key's first 16 bytes, big-endian, zero-padded: enough for two
	// 64-bit fields, such as a clustering key and an identity, so that
	// comparing them rarely reads the key from its chunk.
	prefix     [2]uint64
	chunk, off uint32
	klen, vlen uint32
}

// arenaChunk is the size of the blocks records are copied into.
const arenaChunk = 4 << 20

// recBlock is the number of sortRecs in a block.
const recBlock = 1 << 16

// recOverhead approximates the memory a record costs beyond its bytes: its
// sortRec (32 bytes) in a block, and again in the slice that sorts them.
const recOverhead = 64

// NewSorter returns a Sorter that keeps at most about budget bytes of
// records in memory and spills under dir (the OS temp dir when empty). Its
// first spill removes the spill directories that killed processes left
// there.
func NewSorter(dir string, budget int64, log *slog.Logger) *Sorter {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Sorter{budget: budget, dir: dir, log: log}
}

// Add copies one record into the sorter.
func (s *Sorter) Add(key, value []byte) error {
	n := len(key) + len(value)
	if s.memBytes+int64(n+recOverhead) > s.budget && s.nrecs > 0 {
		if err := s.spill(); err != nil {
			return err
		}
	}
	if len(s.arenas) == 0 || cap(s.arenas[len(s.arenas)-1])-len(s.arenas[len(s.arenas)-1]) < n {
		// A new chunk, never a grown copy: records point into the old one.
		s.arenas = append(s.arenas, make([]byte, 0, max(arenaChunk, n)))
	}
	if s.nrecs == len(s.blocks)*recBlock {
		s.blocks = append(s.blocks, make([]sortRec, 0, recBlock))
	}
	c := len(s.arenas) - 1
	arena := s.arenas[c]
	off := len(arena)
	arena = append(arena, key...)
	s.arenas[c] = append(arena, value...)
	var p [16]byte
	copy(p[:], key)
	blk := &s.blocks[len(s.blocks)-1]
	*blk = append(*blk, sortRec{prefix: [2]uint64{binary.BigEndian.Uint64(p[:8]), binary.BigEndian.Uint64(p[8:])}, chunk: uint32(c), off: uint32(off), klen: uint32(len(key)), vlen: uint32(len(value))})
	s.nrecs++
	s.count++
	s.memBytes += int64(n + recOverhead)
	return nil
}

// Len is the number of records added.
func (s *Sorter) Len() int64 { return s.count }

// Spilled reports whether records went to disk.
func (s *Sorter) Spilled() bool { return len(s.runs) > 0 }

func (s *Sorter) key(r *sortRec) []byte {
	return s.arenas[r.chunk][r.off : r.off+r.klen : r.off+r.klen]
}

func (s *Sorter) value(r *sortRec) []byte {
	end := r.off + r.klen + r.vlen
	return s.arenas[r.chunk][r.off+r.klen : end : end]
}

// sorted returns the records in memory in key order, ties in the order
// added.
func (s *Sorter) sorted() []sortRec {
	recs := make([]sortRec, 0, s.nrecs)
	for i, b := range s.blocks {
		recs = append(recs, b...)
		s.blocks[i] = nil // collectable once copied: the records are not added to again
	}
	s.blocks = nil
	slices.SortFunc(recs, func(a, b sortRec) int {
		if a.prefix[0] != b.prefix[0] {
			return cmp.Compare(a.prefix[0], b.prefix[0])
		}
		if a.prefix[1] != b.prefix[1] {
			return cmp.Compare(a.prefix[1], b.prefix[1])
		}
		if c := bytes.Compare(s.key(&a), s.key(&b)); c != 0 {
			return c
		}
		if a.chunk != b.chunk {
			return cmp.Compare(a.chunk, b.chunk)
		}
		return cmp.Compare(a.off, b.off)
	})
	return recs
}

// release drops the records in memory.
func (s *Sorter) release() {
	s.arenas, s.blocks, s.nrecs, s.memBytes = nil, nil, 0, 0
}

// spill writes the records in memory, sorted, to a new run file:
// uvarint key length, uvarint value length, key, value; repeated.
func (s *Sorter) spill() error {
	if s.tmp == "" {
		removeStaleSpills(s.dir, s.log)
		tmp, err := os.MkdirTemp(s.dir, spillPrefix)
		if err != nil {
			return fmt.Errorf("create spill directory: %w", err)
		}
		s.tmp = tmp
		if s.lock, err = lockSpill(filepath.Join(tmp, spillLockName)); err != nil {
			return fmt.Errorf("lock spill directory: %w", err)
		}
		s.log.Debug("sort spills to disk", "dir", tmp, "records", s.count)
	}
	recs := s.sorted()
	path := filepath.Join(s.tmp, fmt.Sprintf("run-%06d", len(s.runs)))
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("create sort run: %w", err)
	}
	// Runs are compressed with S2: entries repeat long values (data file
	// paths) that would otherwise dominate the bytes written and read.
	zw := s2.NewWriter(f, s2.WriterConcurrency(1))
	w := bufio.NewWriterSize(zw, 1<<20)
	var hdr [2 * binary.MaxVarintLen64]byte
	for i := range recs {
		r := &recs[i]
		h := binary.AppendUvarint(hdr[:0], uint64(r.klen))
		h = binary.AppendUvarint(h, uint64(r.vlen))
		w.Write(h)
		w.Write(s.arenas[r.chunk][r.off : r.off+r.klen+r.vlen])
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return fmt.Errorf("write sort run %s: %w", path, err)
	}
	if err := zw.Close(); err != nil {
		f.Close()
		return fmt.Errorf("write sort run %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write sort run %s: %w", path, err)
	}
	s.runs = append(s.runs, path)
	s.release()
	return nil
}

// Iterate calls fn with every record in key order. The slices are valid only
// during the call. Iterate may be called once, after the last Add.
func (s *Sorter) Iterate(fn func(key, value []byte) error) error {
	return Merge([]*Sorter{s}, fn)
}

// Merge calls fn with the records of all sorters in key order, as Iterate
// does for one: goroutines that each filled a sorter of their own sort in
// parallel and merge once. Records with equal keys come in the order of
// sorters, then in the order added. The records each sorter still holds in
// memory are sorted in parallel. Merge may be called once, after the last
// Add to any of the sorters, and belongs to one goroutine.
func Merge(sorters []*Sorter, fn func(key, value []byte) error) error {
	mem := make([][]sortRec, len(sorters))
	var wg sync.WaitGroup
	for i, s := range sorters {
		wg.Go(func() { mem[i] = s.sorted() })
	}
	wg.Wait()
	if s := sorters[0]; len(sorters) == 1 && len(s.runs) == 0 {
		for i := range mem[0] {
			if err := fn(s.key(&mem[0][i]), s.value(&mem[0][i])); err != nil {
				return err
			}
		}
		return nil
	}
	h := &mergeHeap{}
	order := 0
	for i, s := range sorters {
		for _, path := range s.runs {
			f, err := os.Open(path)
			if err != nil {
				return fmt.Errorf("open sort run: %w", err)
			}
			defer f.Close()
			src := &runSource{r: bufio.NewReaderSize(s2.NewReader(f), 1<<20), order: order, path: path}
			order++
			if err := h.push(src); err != nil {
				return err
			}
		}
		if len(mem[i]) > 0 {
			if err := h.push(&runSource{sorter: s, mem: mem[i], order: order}); err != nil {
				return err
			}
			order++
		}
	}
	for h.Len() > 0 {
		top := (*h)[0]
		if err := fn(top.key, top.value); err != nil {
			return err
		}
		ok, err := top.next()
		if err != nil {
			return err
		}
		if ok {
			heap.Fix(h, 0)
		} else {
			heap.Pop(h)
		}
	}
	return nil
}

// runSource is one sorted input of the merge: a run file or the records
// still in memory.
type runSource struct {
	r          *bufio.Reader
	path       string
	sorter     *Sorter // whose records mem are
	mem        []sortRec
	order      int // earlier runs win ties, which keeps equal keys in insertion order
	key, value []byte
}

func (r *runSource) next() (bool, error) {
	if r.r == nil {
		if len(r.mem) == 0 {
			return false, nil
		}
		r.key, r.value, r.mem = r.sorter.key(&r.mem[0]), r.sorter.value(&r.mem[0]), r.mem[1:]
		return true, nil
	}
	kl, err := binary.ReadUvarint(r.r)
	if errors.Is(err, io.EOF) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("read sort run %s: %w", r.path, err)
	}
	vl, err := binary.ReadUvarint(r.r)
	if err != nil {
		return false, fmt.Errorf("read sort run %s: %w", r.path, err)
	}
	n := int(kl + vl)
	if cap(r.key) < n {
		r.key = make([]byte, n)
	}
	buf := r.key[:n]
	if _, err := io.ReadFull(r.r, buf); err != nil {
		return false, fmt.Errorf("read sort run %s: %w", r.path, err)
	}
	r.key, r.value = buf[:kl:kl], buf[kl:]
	return true, nil
}

type mergeHeap []*runSource

func (h mergeHeap) Len() int { return len(h) }
func (h mergeHeap) Less(i, j int) bool {
	if c := bytes.Compare(h[i].key, h[j].key); c != 0 {
		return c < 0
	}
	return h[i].order < h[j].order
}
func (h mergeHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *mergeHeap) Push(x any)   { *h = append(*h, x.(*runSource)) }
func (h *mergeHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

func (h *mergeHeap) push(src *runSource) error {
	ok, err := src.next()
	if err != nil {
		return err
	}
	if ok {
		heap.Push(h, src)
	}
	return nil
}

// Close releases memory and removes the spill files. It is idempotent.
func (s *Sorter) Close() error {
	s.release()
	s.runs = nil
	if s.tmp == "" {
		return nil
	}
	err := os.RemoveAll(s.tmp)
	if s.lock != nil {
		s.lock.Close()
		s.lock = nil
	}
	s.tmp = ""
	if err != nil {
		return fmt.Errorf("remove spill directory: %w", err)
	}
	return nil
}
