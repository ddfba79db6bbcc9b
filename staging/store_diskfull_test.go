package staging

import (
	"errors"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/streamidx/streamidx/format"
)

// smallDisk is the real file system behind a disk of limited capacity, as
// Pebble's vfs sees it: a write, or a preallocation, that would take the
// files beyond capacity fails with ENOSPC, and removing a file frees what
// it held. With reportFree unset it cannot tell its free space, as some
// file systems cannot; then only a write finds out that the disk is full.
type smallDisk struct {
	vfs.FS
	mu         sync.Mutex
	capacity   int64
	held       map[string]int64 // bytes each file holds
	refused    int              // writes refused with ENOSPC
	reportFree bool
}

func newSmallDisk(capacity int64, reportFree bool) *smallDisk {
	return &smallDisk{FS: vfs.Default, capacity: capacity, held: map[string]int64{}, reportFree: reportFree}
}

func (d *smallDisk) usedLocked() int64 {
	var n int64
	for _, b := range d.held {
		n += b
	}
	return n
}

// setFree makes the disk hold free bytes beyond what its files hold.
func (d *smallDisk) setFree(free int64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.capacity = d.usedLocked() + free
}

func (d *smallDisk) refusals() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.refused
}

// grow makes path hold at least end bytes, or fails with ENOSPC.
func (d *smallDisk) grow(path string, end int64) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	cur := d.held[path]
	if end <= cur {
		return nil
	}
	if d.usedLocked()+end-cur > d.capacity {
		d.refused++
		return &os.PathError{Op: "write", Path: path, Err: syscall.ENOSPC}
	}
	d.held[path] = end
	return nil
}

func (d *smallDisk) move(from, to string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.held[to] = d.held[from]
	delete(d.held, from)
}

func (d *smallDisk) drop(pred func(path string) bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for p := range d.held {
		if pred(p) {
			delete(d.held, p)
		}
	}
}

func (d *smallDisk) Create(name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := d.FS.Create(name, c)
	if err != nil {
		return nil, err
	}
	d.drop(func(p string) bool { return p == name })
	return &smallFile{File: f, d: d, path: name}, nil
}

func (d *smallDisk) OpenReadWrite(name string, c vfs.DiskWriteCategory, opts ...vfs.OpenOption) (vfs.File, error) {
	f, err := d.FS.OpenReadWrite(name, c, opts...)
	if err != nil {
		return nil, err
	}
	return &smallFile{File: f, d: d, path: name}, nil
}

func (d *smallDisk) ReuseForWrite(oldname, newname string, c vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := d.FS.ReuseForWrite(oldname, newname, c)
	if err != nil {
		return nil, err
	}
	d.move(oldname, newname)
	return &smallFile{File: f, d: d, path: newname}, nil
}

func (d *smallDisk) Rename(oldname, newname string) error {
	if err := d.FS.Rename(oldname, newname); err != nil {
		return err
	}
	d.move(oldname, newname)
	return nil
}

func (d *smallDisk) Remove(name string) error {
	if err := d.FS.Remove(name); err != nil {
		return err
	}
	d.drop(func(p string) bool { return p == name })
	return nil
}

func (d *smallDisk) RemoveAll(dir string) error {
	if err := d.FS.RemoveAll(dir); err != nil {
		return err
	}
	d.drop(func(p string) bool { return p == dir || strings.HasPrefix(p, dir+string(os.PathSeparator)) })
	return nil
}

func (d *smallDisk) GetDiskUsage(string) (vfs.DiskUsage, error) {
	if !d.reportFree {
		return vfs.DiskUsage{}, errors.New("this file system does not report its free space")
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	used := d.usedLocked()
	return vfs.DiskUsage{AvailBytes: uint64(max(d.capacity-used, 0)), TotalBytes: uint64(d.capacity), UsedBytes: uint64(used)}, nil
}

type smallFile struct {
	vfs.File
	d    *smallDisk
	path string
	pos  int64
}

func (f *smallFile) Write(p []byte) (int, error) {
	if err := f.d.grow(f.path, f.pos+int64(len(p))); err != nil {
		return 0, err
	}
	n, err := f.File.Write(p)
	f.pos += int64(n)
	return n, err
}

func (f *smallFile) WriteAt(p []byte, off int64) (int, error) {
	if err := f.d.grow(f.path, off+int64(len(p))); err != nil {
		return 0, err
	}
	return f.File.WriteAt(p, off)
}

func (f *smallFile) Preallocate(off, n int64) error {
	if err := f.d.grow(f.path, off+n); err != nil {
		return err
	}
	return f.File.Preallocate(off, n)
}

// bulky is entry i of the test index with a value that does not compress,
// so that a stage takes as much disk as it holds.
func bulky(t *testing.T, codec *format.EntryCodec, i int) (key, value []byte) {
	r := rand.New(rand.NewPCG(uint64(i), 1))
	b := make([]byte, 200)
	for j := range b {
		b[j] = 'a' + byte(r.IntN(26))
	}
	return encodeEntry(t, codec, format.Key{int64(i), string(b)})
}

// stageAll stages entries [0, n) of the test index and seals them.
func stageAll(t *testing.T, st *Stager, codec *format.EntryCodec, n int) error {
	for i := range n {
		k, v := bulky(t, codec, i)
		if err := st.Add(k, v, 1); err != nil {
			return err
		}
	}
	return st.Seal(SealMeta{Ordinal: 1})
}

// TestStoreSurvivesADiskFilledUnderIt fills the disk while a stage is
// written, so that Pebble's own writes meet ENOSPC.
func TestStoreSurvivesADiskFilledUnderIt(t *testing.T) {
	codec := storeTestIndex(t)
	disk := newSmallDisk(1<<30, false)
	s := openTestStore(t, t.TempDir(), StoreOptions{FS: disk, BatchBytes: 4 << 10, MemTableSize: 256 << 10})
	const n = 20000

	other := mustStage(t, s, "other", 1)
	if err := stageAll(t, other, codec, 10); err != nil {
		t.Fatal(err)
	}

	st := mustStage(t, s, "idx", 7)
	var err error
	for i := range n {
		if i == 1000 {
			disk.setFree(0) // something else fills the disk
		}
		k, v := bulky(t, codec, i)
		if err = st.Add(k, v, 1); err != nil {
			break
		}
	}
	if err == nil {
		err = st.Seal(SealMeta{Ordinal: 1})
	}
	if !errors.Is(err, ErrDiskFull) {
		t.Fatalf("staging while the disk fills: %v, want ErrDiskFull", err)
	}
	if disk.refusals() == 0 {
		t.Fatal("no write met the full disk: the test did not test it")
	}
	if err := st.Abort(); err != nil && !errors.Is(err, ErrDiskFull) {
		t.Fatalf("abort on a full disk: %v, want nil or ErrDiskFull", err)
	}
	if sealed, err := s.Sealed("idx"); err != nil || len(sealed) > 0 {
		t.Fatalf("sealed stages after a failure on a full disk: %+v %v, want none", sealed, err)
	}
	if _, err := s.Stage("idx", 7); !errors.Is(err, ErrDiskFull) {
		t.Fatalf("a new stage while the disk is full: %v, want ErrDiskFull", err)
	}

	// Space returns: the same stage is staged again and seals with every
	// mutation; the stage sealed before is intact.
	disk.setFree(1 << 30)
	st = mustStage(t, s, "idx", 7)
	if err := stageAll(t, st, codec, n); err != nil {
		t.Fatalf("staging after space returned: %v", err)
	}
	sealed, err := s.Sealed("idx")
	if err != nil || len(sealed) != 1 || sealed[0].Mutations != n || sealed[0].NetCount != n {
		t.Fatalf("sealed after space returned: %+v %v, want one stage of %d mutations", sealed, err, n)
	}
	if got := collect(t, s, "idx", 7); len(got) != n {
		t.Errorf("the stage holds %d mutations, want %d", len(got), n)
	}
	if got := collect(t, s, "other", 1); len(got) != 10 {
		t.Errorf("the stage sealed before the disk filled holds %d mutations, want 10", len(got))
	}
}

// TestStoreStopsShortOfAFullDisk lets staging fill the disk itself: it stops
// at the reserve, before any write fails.
func TestStoreStopsShortOfAFullDisk(t *testing.T) {
	codec := storeTestIndex(t)
	disk := newSmallDisk(1<<30, true)
	opts := StoreOptions{FS: disk, BatchBytes: 4 << 10, MemTableSize: 256 << 10}
	s := openTestStore(t, t.TempDir(), opts)
	disk.setFree(int64(4*opts.MemTableSize) + 256<<10) // the reserve and a little
	st := mustStage(t, s, "idx", 1)
	err := stageAll(t, st, codec, 20000)
	if !errors.Is(err, ErrDiskFull) {
		t.Fatalf("staging more than the disk holds: %v, want ErrDiskFull", err)
	}
	if disk.refusals() != 0 {
		t.Errorf("%d writes met the full disk; the reserve should have stopped staging first", disk.refusals())
	}
	if err := st.Abort(); err != nil && !errors.Is(err, ErrDiskFull) {
		t.Fatalf("abort at the reserve: %v, want nil or ErrDiskFull", err)
	}
	disk.setFree(1 << 30)
	st = mustStage(t, s, "idx", 1)
	if err := stageAll(t, st, codec, 20000); err != nil {
		t.Fatal(err)
	}
	if got := collect(t, s, "idx", 1); len(got) != 20000 {
		t.Errorf("%d mutations, want 20000", len(got))
	}
}

func TestOpenStoreNeedsRoomForTheReserve(t *testing.T) {
	disk := newSmallDisk(1<<20, true)
	if _, err := OpenStore(t.TempDir(), StoreOptions{FS: disk, MemTableSize: 256 << 10}); !errors.Is(err, ErrDiskFull) {
		t.Fatalf("open on a disk without room for the reserve: %v, want ErrDiskFull", err)
	}
}
