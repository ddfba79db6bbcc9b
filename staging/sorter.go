package staging

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"log/slog"
	"os"
	"slices"

	"github.com/cockroachdb/pebble/v2"
)

// Sorter sorts records by key within a memory budget. Records collect in
// memory; when they would pass half the budget they are sorted and written
// to a temporary Pebble store, whose memtables get a quarter, and Pebble
// merges the runs. Records with equal keys come out in the order they were
// added. A Sorter belongs to one goroutine.
type Sorter struct {
	budget   int64
	dir      string // parent of the temporary store
	log      *slog.Logger
	recs     []sortRec
	arena    []byte
	memBytes int64
	seq      uint64
	count    int64
	tmp      string
	db       *pebble.DB
}

type sortRec struct {
	key, value []byte
	seq        uint64
}

// recOverhead approximates the memory a record costs beyond its bytes.
const recOverhead = 64

// NewSorter returns a Sorter that keeps at most about budget bytes in
// memory and spills under dir (the OS temp dir when empty).
func NewSorter(dir string, budget int64, log *slog.Logger) *Sorter {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Sorter{budget: budget, dir: dir, log: log}
}

// Add copies one record into the sorter.
func (s *Sorter) Add(key, value []byte) error {
	size := int64(len(key)+len(value)) + recOverhead
	if s.memBytes+size > s.budget/2 && len(s.recs) > 0 {
		if err := s.spill(); err != nil {
			return err
		}
	}
	start := len(s.arena)
	s.arena = append(s.arena, key...)
	s.arena = append(s.arena, value...)
	s.recs = append(s.recs, sortRec{key: s.arena[start : start+len(key) : start+len(key)], value: s.arena[start+len(key):], seq: s.seq})
	s.seq++
	s.count++
	s.memBytes += size
	return nil
}

// Len is the number of records added.
func (s *Sorter) Len() int64 { return s.count }

// Spilled reports whether records went to disk.
func (s *Sorter) Spilled() bool { return s.db != nil }

func (s *Sorter) sortMem() {
	slices.SortFunc(s.recs, func(a, b sortRec) int {
		if c := bytes.Compare(a.key, b.key); c != 0 {
			return c
		}
		return int(a.seq - b.seq)
	})
}

func (s *Sorter) spill() error {
	if s.db == nil {
		tmp, err := os.MkdirTemp(s.dir, "streamidx-sort-")
		if err != nil {
			return fmt.Errorf("create spill directory: %w", err)
		}
		s.tmp = tmp
		memtable := uint64(max(s.budget/4, 4<<20))
		db, err := pebble.Open(tmp, &pebble.Options{
			DisableWAL:   true, // a sort is redone from its input after a crash
			MemTableSize: memtable,
			Logger:       pebbleLogger{s.log},
		})
		if err != nil {
			return fmt.Errorf("open spill store %s: %w", tmp, err)
		}
		s.db = db
		s.log.Debug("sort spills to disk", "dir", tmp, "records", s.count)
	}
	s.sortMem()
	b := s.db.NewBatch()
	var k []byte
	for _, r := range s.recs {
		k = binary.BigEndian.AppendUint64(appendEscaped(k[:0], r.key), r.seq)
		if err := b.Set(k, r.value, nil); err != nil {
			return fmt.Errorf("spill record: %w", err)
		}
		if b.Len() > 16<<20 {
			if err := b.Commit(pebble.NoSync); err != nil {
				return fmt.Errorf("spill records: %w", err)
			}
			b = s.db.NewBatch()
		}
	}
	if err := b.Commit(pebble.NoSync); err != nil {
		return fmt.Errorf("spill records: %w", err)
	}
	s.recs, s.arena, s.memBytes = s.recs[:0], s.arena[:0], 0
	return nil
}

// Iterate calls fn with every record in key order. The slices are valid only
// during the call. Iterate may be called once, after the last Add.
func (s *Sorter) Iterate(fn func(key, value []byte) error) error {
	if s.db == nil {
		s.sortMem()
		for _, r := range s.recs {
			if err := fn(r.key, r.value); err != nil {
				return err
			}
		}
		return nil
	}
	if len(s.recs) > 0 {
		if err := s.spill(); err != nil {
			return err
		}
	}
	it, err := s.db.NewIter(nil)
	if err != nil {
		return fmt.Errorf("read sorted records: %w", err)
	}
	var k []byte
	for it.First(); it.Valid(); it.Next() {
		stored := it.Key()
		k = unescape(k[:0], stored[:len(stored)-8])
		v, err := it.ValueAndErr()
		if err != nil {
			_ = it.Close()
			return fmt.Errorf("read sorted records: %w", err)
		}
		if err := fn(k, v); err != nil {
			_ = it.Close()
			return err
		}
	}
	if err := it.Close(); err != nil {
		return fmt.Errorf("read sorted records: %w", err)
	}
	return nil
}

// appendEscaped writes key so that no escaped key is a prefix of another and
// the order of escaped keys is the order of keys; the sequence number can
// then follow it without changing the order: 0x00 becomes 0x00 0xFF and the
// key ends with 0x00 0x01.
func appendEscaped(dst, key []byte) []byte {
	for _, c := range key {
		if c == 0 {
			dst = append(dst, 0, 0xFF)
		} else {
			dst = append(dst, c)
		}
	}
	return append(dst, 0, 1)
}

func unescape(dst, esc []byte) []byte {
	esc = esc[:len(esc)-2] // the terminator
	for i := 0; i < len(esc); i++ {
		dst = append(dst, esc[i])
		if esc[i] == 0 {
			i++ // skip the 0xFF of an escaped zero
		}
	}
	return dst
}

// Close releases memory and removes the spill store. It is idempotent.
func (s *Sorter) Close() error {
	s.recs, s.arena = nil, nil
	var err error
	if s.db != nil {
		err = s.db.Close()
		s.db = nil
	}
	if s.tmp != "" {
		if rmErr := os.RemoveAll(s.tmp); err == nil {
			err = rmErr
		}
		s.tmp = ""
	}
	return err
}

// pebbleLogger sends Pebble's messages to slog at debug level; its errors
// surface through the calls that fail.
type pebbleLogger struct{ log *slog.Logger }

func (l pebbleLogger) Infof(format string, args ...any) {
	l.log.Debug(fmt.Sprintf(format, args...), "component", "pebble")
}

func (l pebbleLogger) Errorf(format string, args ...any) {
	l.log.Warn(fmt.Sprintf(format, args...), "component", "pebble")
}

func (l pebbleLogger) Fatalf(format string, args ...any) {
	panic(fmt.Sprintf("pebble: "+format, args...))
}
