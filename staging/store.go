package staging

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"math/bits"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// Conditions of a stage that callers act on.
var (
	// ErrStageSealed: the stage of this source snapshot is sealed already;
	// its delta is complete and must not be staged again.
	ErrStageSealed = errors.New("stage is sealed")
	// ErrStageNotSealed: the stage is not sealed (or does not exist), so its
	// delta is not complete and must not be compacted.
	ErrStageNotSealed = errors.New("stage is not sealed")
	// ErrStageBusy: a Stager of this process is writing the stage.
	ErrStageBusy = errors.New("stage is being written")
	// ErrStoreClosed: the store was closed.
	ErrStoreClosed = errors.New("staging store is closed")
	// ErrDiskFull: the staging file system has too little free space to
	// stage. It is a retry error: the stage being written is left
	// unsealed, nothing sealed is lost, and staging it again succeeds once
	// there is room again.
	ErrDiskFull = errors.New("staging disk is full")
)

// Defaults of StoreOptions.
const (
	DefaultMemTableSize = 16 << 20
	DefaultBatchBytes   = 512 << 10
)

// stagingL0Files is how many flushed memtables wait in Pebble's level 0
// before a compaction: 16 of the default size hold a stage of about two
// million mutations.
const stagingL0Files = 16

// StoreOptions configure a Store.
type StoreOptions struct {
	// Logger receives Pebble's messages (debug; its errors as warnings) and
	// the unsealed stages found at open. Default: discard.
	Logger *slog.Logger
	// MemTableSize is the size of each Pebble memtable; with the write
	// batches it bounds the memory of staging. Default DefaultMemTableSize.
	MemTableSize uint64
	// NoSync lets Seal, Drop and Abandon return before their write reaches
	// the disk: a crash, even of the process alone (Pebble buffers its log),
	// may then lose the most recent ones, though never part of a seal.
	// Default false: a seal is durable when Seal returns.
	NoSync bool
	// BatchBytes is the size at which a Stager writes its batch of
	// mutations to Pebble (without waiting for the disk). Default
	// DefaultBatchBytes.
	BatchBytes int
	// ReserveBytes is the disk space kept for Pebble to finish the writes
	// it has begun (memtable flushes, its manifest) when the disk fills:
	// Stage and every write of a Stager fail with ErrDiskFull while less
	// than this is free, and a ballast file of this size is deleted when a
	// write meets a full disk anyway. Default: 4 × MemTableSize.
	ReserveBytes uint64
	// FS is the file system the store lives on; tests inject disk errors
	// through it. Default: vfs.Default, the operating system's.
	FS vfs.FS
	// MemoryStageBytes is the memory that the recomputable stages of the
	// store (Stager.Recomputable) may hold in the process instead of in
	// Pebble, all together; a stage that outgrows what is left moves to
	// Pebble. Default DefaultMemoryStageBytes; negative: every stage goes
	// to Pebble.
	MemoryStageBytes int64
}

// EnsureDefaults fills unset fields with their defaults.
func (o *StoreOptions) EnsureDefaults() {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.MemTableSize == 0 {
		o.MemTableSize = DefaultMemTableSize
	}
	if o.BatchBytes <= 0 {
		o.BatchBytes = DefaultBatchBytes
	}
	if o.ReserveBytes == 0 {
		o.ReserveBytes = 4 * o.MemTableSize
	}
	if o.FS == nil {
		o.FS = vfs.Default
	}
	if o.MemoryStageBytes == 0 {
		o.MemoryStageBytes = DefaultMemoryStageBytes
	}
}

// SealMeta describes a sealed stage: which source commit its delta is for
// and where the feeds stood, so that the index commit built from it can
// record both.
type SealMeta struct {
	// Ordinal orders the stages of one index in source commit order, such as
	// the source snapshot's sequence number.
	Ordinal          uint64            `json:"ordinal"`
	SourceSnapshotID int64             `json:"source-snapshot-id"`
	SequenceNumber   int64             `json:"sequence-number"`
	TimestampMs      int64             `json:"timestamp-ms"`
	Offsets          map[string]string `json:"offsets,omitempty"`
	// Mutations is the number of Add calls of the stage; Seal sets it.
	Mutations int64 `json:"mutations"`
	// NetCount is the sum of the counts added; Seal sets it. The counts
	// Iterate reports always sum to it.
	NetCount int64 `json:"net-count"`
}

// StageRef names a stage.
type StageRef struct {
	Index            string
	SourceSnapshotID int64
}

// Store is the durable staging area of table deltas: a Pebble database with
// a write-ahead log, holding for each (index, source snapshot) a stage of
// entry mutations and, once complete, its seal.
//
// Layout. Keys of mutations are
//
//	0x01 | index | 0x00 | source snapshot ID (8 bytes, big-endian) | entry key | entry value
//
// and their values are the count (signed varint) and the entry key's length
// (uvarint). The entry key (format.EntryCodec.AppendKey) is an order-preserving,
// self-delimiting encoding, so a stage's keys sort in cluster order; the
// entry value follows it because the key alone need not identify an entry
// (a materialized value outside the clustering key, identity and location
// may differ between entries of one key). Counts of identical entries are
// summed by a Pebble merge operator, within a batch and across batches.
// Stage records are
//
//	0x02 | index | 0x00 | source snapshot ID  ->  0x00 (open) or 0x01 + SealMeta JSON (sealed)
//
// Durability. A Stager writes its batches without waiting for the disk and
// the seal with the last batch, synced. The write-ahead log is written and
// replayed in commit order, so what survives a crash is a prefix of the
// commits: a seal that survives implies every mutation of its stage did.
// A stage open after a restart is a partial one; Unsealed lists them for
// the caller to abandon and redo.
//
// A full disk. Pebble cannot survive a failed write of its write-ahead log
// or manifest: it panics, and its state in memory is then lost. So Pebble
// must never meet a full disk. Stage and Stager refuse to write (ErrDiskFull)
// while less than ReserveBytes is free, which stops a disk that staging
// fills. A disk that something else fills is met by a ballast file of
// ReserveBytes, allocated at open: the first write that fails with ENOSPC
// deletes it (Pebble's vfs.OnDiskFull) and is retried in the space it
// frees, and the store refuses to stage until there is room for the ballast
// and the reserve again. Only a disk refilled faster than Pebble can flush
// its memtables into the freed space still ends the process.
//
// A Store is safe for concurrent use; each Stager belongs to one goroutine.
type Store struct {
	dir    string
	lock   io.Closer // of the directory, held while the store is open
	db     *pebble.DB
	opts   StoreOptions
	wo     *pebble.WriteOptions
	closed atomic.Bool

	// full is set when a write met ENOSPC and the ballast was deleted, and
	// cleared when the ballast is back.
	full      atomic.Bool
	ballastMu sync.Mutex

	mu     sync.Mutex
	active map[string]bool // stage keys of Stagers in progress

	// Sealed memory stages (see memStage) by stage key, and the bytes of
	// MemoryStageBytes that memory stages hold, sealed or being written.
	memMu     sync.Mutex
	memStages map[string]*memStage
	memBytes  int64
	memSpare  []*memStage // buffers of dropped memory stages (see recycle)
}

const (
	spaceMutation byte = 0x01
	spaceStage    byte = 0x02

	stateOpen   byte = 0x00
	stateSealed byte = 0x01
)

// countMerger sums the counts of a key's merge operands.
var countMerger = &pebble.Merger{
	Name: "streamidx.staging.count.v1",
	Merge: func(_, value []byte) (pebble.ValueMerger, error) {
		m := &countMerge{}
		return m, m.add(value)
	},
}

type countMerge struct {
	count  int64
	keyLen uint64
}

func (m *countMerge) add(v []byte) error {
	c, keyLen, err := decodeCount(v)
	if err != nil {
		return err
	}
	m.count += c
	m.keyLen = keyLen
	return nil
}

func (m *countMerge) MergeNewer(v []byte) error { return m.add(v) }
func (m *countMerge) MergeOlder(v []byte) error { return m.add(v) }

func (m *countMerge) Finish(bool) ([]byte, io.Closer, error) {
	return encodeCount(nil, m.count, m.keyLen), nil, nil
}

func encodeCount(dst []byte, count int64, keyLen uint64) []byte {
	return binary.AppendUvarint(binary.AppendVarint(dst, count), keyLen)
}

func decodeCount(v []byte) (count int64, keyLen uint64, err error) {
	c, n := binary.Varint(v)
	if n <= 0 {
		return 0, 0, fmt.Errorf("staged count %x: bad varint", v)
	}
	l, m := binary.Uvarint(v[n:])
	if m <= 0 || n+m != len(v) {
		return 0, 0, fmt.Errorf("staged count %x: bad key length", v)
	}
	return c, l, nil
}

// ballastName is the ballast file in the store's directory; Pebble ignores
// files it did not name.
const ballastName = "STREAMIDX-BALLAST"

// lockName is the file a process locks to own a staging directory. It is
// not Pebble's LOCK: the store touches the directory before Pebble opens.
const lockName = "STREAMIDX-LOCK"

// ErrLocked is returned (wrapped) by OpenStore when another process holds
// the staging directory: two daemons must not share one.
var ErrLocked = errors.New("the staging directory is locked by another process")

// OpenStore opens (creating if needed) the staging store in dir. It fails
// with ErrDiskFull when dir's file system has no room for the ballast and
// the reserve.
func OpenStore(dir string, opts StoreOptions) (*Store, error) {
	opts.EnsureDefaults()
	s := &Store{dir: dir, opts: opts, wo: pebble.Sync, active: map[string]bool{}, memStages: map[string]*memStage{}}
	if opts.NoSync {
		s.wo = pebble.NoSync
	}
	if err := opts.FS.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("open staging store %s: %w", dir, err)
	}
	// The lock comes before anything else touches the directory: the
	// ballast below belongs to the process that holds it.
	lock, err := opts.FS.Lock(opts.FS.PathJoin(dir, lockName))
	if err != nil {
		if errors.Is(err, syscall.EAGAIN) || errors.Is(err, syscall.EACCES) {
			err = fmt.Errorf("%w (another streamidx run uses it; give each daemon its own --stage-dir)", ErrLocked)
		}
		return nil, fmt.Errorf("open staging store %s: %w", dir, err)
	}
	s.lock = lock
	opened := false
	defer func() {
		if !opened {
			lock.Close()
		}
	}()
	// A ballast left by the last run is allocated again below; until then
	// its space is free.
	if err := opts.FS.Remove(opts.FS.PathJoin(dir, ballastName)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("open staging store %s: %w", dir, err)
	}
	s.full.Store(true) // no ballast yet
	if err := s.room(); err != nil {
		return nil, fmt.Errorf("open staging store %s: %w", dir, err)
	}
	db, err := pebble.Open(dir, &pebble.Options{
		FS:           vfs.OnDiskFull(opts.FS, s.diskFull),
		Merger:       countMerger,
		MemTableSize: opts.MemTableSize,
		// A stage is written once, read once in key order and dropped: a
		// compaction of its flushed memtables is work spent on data about
		// to go. The merging read over a few dozen sorted files costs less,
		// so compactions wait for many more of them than Pebble's default.
		L0CompactionThreshold: stagingL0Files,
		L0StopWritesThreshold: 4 * stagingL0Files,
		Logger:                pebbleLogger{opts.Logger},
	})
	if err != nil {
		return nil, fmt.Errorf("open staging store %s: %w", dir, err)
	}
	s.db = db
	partial, err := s.Unsealed()
	if err != nil {
		return nil, errors.Join(err, db.Close())
	}
	for _, p := range partial {
		opts.Logger.Info("staging store holds a partial stage", "index", p.Index, "source_snapshot_id", p.SourceSnapshotID)
	}
	opened = true
	return s, nil
}

// diskFull is called by Pebble's vfs.OnDiskFull when a write fails with
// ENOSPC, while every other write waits: it frees the ballast for the
// write to be retried in. It works on the file system under the one Pebble
// writes through, which is blocked meanwhile.
func (s *Store) diskFull() {
	s.full.Store(true)
	err := s.opts.FS.Remove(s.opts.FS.PathJoin(s.dir, ballastName))
	s.opts.Logger.Warn("staging disk is full: freed the ballast for writes in flight; staging stops until there is room again",
		"dir", s.dir, "ballast_bytes", s.opts.ReserveBytes, "err", err)
}

// room fails with ErrDiskFull unless ReserveBytes are free besides the
// ballast. After the disk was full it first allocates the ballast again,
// once there is room for both.
func (s *Store) room() error {
	s.ballastMu.Lock()
	defer s.ballastMu.Unlock()
	need := s.opts.ReserveBytes
	if s.full.Load() {
		need *= 2
	}
	// Some file systems cannot tell their free space; the ballast then
	// still catches a full disk.
	if u, err := s.opts.FS.GetDiskUsage(s.dir); err == nil && u.AvailBytes < need {
		return fmt.Errorf("%w: %s has %d bytes free, staging needs %d (StoreOptions.ReserveBytes, twice after the disk was full)",
			ErrDiskFull, s.dir, u.AvailBytes, need)
	}
	if !s.full.Load() {
		return nil
	}
	// A flush that met the full disk is retried in the space the ballast
	// left: taking that space back before the flush is done would fail it
	// again, and a writer waiting on it would wait for good (a disk that
	// cannot tell its free space gives no other sign). Wait a little for
	// it, then give up for now.
	if !s.flushesSettled(ballastWait) {
		return fmt.Errorf("%w: %s: writes that met the full disk are still being retried", ErrDiskFull, s.dir)
	}
	if err := s.allocateBallast(); err != nil {
		return fmt.Errorf("%w: allocate the ballast: %w", ErrDiskFull, err)
	}
	s.full.Store(false)
	return nil
}

// allocateBallast creates the ballast file with ReserveBytes allocated. On
// Linux Preallocate reserves the blocks (fallocate); where the file system
// cannot, the ballast holds nothing and the reserve check alone protects.
func (s *Store) allocateBallast() error {
	path := s.opts.FS.PathJoin(s.dir, ballastName)
	f, err := s.opts.FS.Create(path, vfs.WriteCategoryUnspecified)
	if err != nil {
		return err
	}
	err = f.Preallocate(0, int64(s.opts.ReserveBytes))
	if err == nil {
		err = f.Sync()
	}
	if err = errors.Join(err, f.Close()); err != nil {
		_ = s.opts.FS.Remove(path)
		return err
	}
	return nil
}

// Close closes the store. Stagers must be finished first. It is idempotent.
func (s *Store) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	s.memMu.Lock()
	clear(s.memStages)
	s.memBytes = 0
	s.memSpare = nil
	s.memMu.Unlock()
	err := s.db.Close()
	if lerr := s.lock.Close(); err == nil {
		err = lerr
	}
	if err != nil {
		return fmt.Errorf("close staging store: %w", err)
	}
	return nil
}

func stagePrefix(space byte, index string, snap int64) []byte {
	k := make([]byte, 0, len(index)+10)
	k = append(k, space)
	k = append(k, index...)
	k = append(k, 0)
	return binary.BigEndian.AppendUint64(k, uint64(snap))
}

func indexPrefix(space byte, index string) []byte {
	return append(append([]byte{space}, index...), 0)
}

// prefixEnd is the smallest key greater than every key with prefix p.
func prefixEnd(p []byte) []byte {
	end := slices.Clone(p)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] < 0xFF {
			end[i]++
			return end[:i+1]
		}
	}
	return nil // every key; no prefix here is all 0xFF
}

func checkIndex(index string) error {
	if index == "" || strings.IndexByte(index, 0) >= 0 {
		return fmt.Errorf("index name %q: must be non-empty and without NUL bytes", index)
	}
	return nil
}

// stageState reads a stage record: found, whether sealed, and the meta.
func (s *Store) stageState(index string, snap int64) (found bool, meta SealMeta, sealed bool, err error) {
	if m := s.memStageOf(index, snap); m != nil {
		return true, m.meta, true, nil
	}
	v, closer, err := s.db.Get(stagePrefix(spaceStage, index, snap))
	if errors.Is(err, pebble.ErrNotFound) {
		return false, meta, false, nil
	}
	if err != nil {
		return false, meta, false, fmt.Errorf("read stage record of %s@%d: %w", index, snap, err)
	}
	defer closer.Close()
	sealed, meta, err = decodeStage(v)
	if err != nil {
		return false, meta, false, fmt.Errorf("stage record of %s@%d: %w", index, snap, err)
	}
	return true, meta, sealed, nil
}

func decodeStage(v []byte) (sealed bool, meta SealMeta, err error) {
	if len(v) == 0 {
		return false, meta, errors.New("empty record")
	}
	switch v[0] {
	case stateOpen:
		return false, meta, nil
	case stateSealed:
		if err := json.Unmarshal(v[1:], &meta); err != nil {
			return false, meta, fmt.Errorf("decode seal: %w", err)
		}
		return true, meta, nil
	}
	return false, meta, fmt.Errorf("unknown state %d", v[0])
}

// Stage starts writing the mutations of one source snapshot of one index.
// A partial stage left by a crash is discarded first; a sealed one is
// ErrStageSealed, and one a Stager of this process writes is ErrStageBusy.
func (s *Store) Stage(index string, sourceSnapshotID int64) (*Stager, error) {
	if err := checkIndex(index); err != nil {
		return nil, err
	}
	if s.closed.Load() {
		return nil, ErrStoreClosed
	}
	if err := s.room(); err != nil {
		return nil, fmt.Errorf("stage %s@%d: %w", index, sourceSnapshotID, err)
	}
	stageKey := stagePrefix(spaceStage, index, sourceSnapshotID)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.active[string(stageKey)] {
		return nil, fmt.Errorf("stage %s@%d: %w", index, sourceSnapshotID, ErrStageBusy)
	}
	found, _, sealed, err := s.stageState(index, sourceSnapshotID)
	if err != nil {
		return nil, err
	}
	if sealed {
		return nil, fmt.Errorf("stage %s@%d: %w", index, sourceSnapshotID, ErrStageSealed)
	}
	prefix := stagePrefix(spaceMutation, index, sourceSnapshotID)
	b := s.db.NewBatch()
	if found {
		if err := b.DeleteRange(prefix, prefixEnd(prefix), nil); err != nil {
			return nil, errors.Join(fmt.Errorf("discard partial stage %s@%d: %w", index, sourceSnapshotID, err), b.Close())
		}
	}
	if err := b.Set(stageKey, []byte{stateOpen}, nil); err != nil {
		return nil, errors.Join(fmt.Errorf("open stage %s@%d: %w", index, sourceSnapshotID, err), b.Close())
	}
	// Unsynced: if the record is lost in a crash, so is every mutation
	// written after it, and the stage simply never began.
	if err := b.Commit(pebble.NoSync); err != nil {
		return nil, errors.Join(fmt.Errorf("open stage %s@%d: %w", index, sourceSnapshotID, err), b.Close())
	}
	if err := b.Close(); err != nil {
		return nil, fmt.Errorf("open stage %s@%d: %w", index, sourceSnapshotID, err)
	}
	s.active[string(stageKey)] = true
	return &Stager{s: s, index: index, snap: sourceSnapshotID, prefix: prefix, stageKey: stageKey, batch: s.newBatch()}, nil
}

// newBatch returns a batch for a Stager, made big enough at once for
// BatchBytes of mutations and kept that big by Pebble for the next: a batch
// that starts small doubles its buffer a dozen times on the way to a few
// MiB, and each fresh buffer is copied into and faulted in page by page
// (in a profile of a daemon staging 10,000-upsert commits, that copying
// took 40% of the staging).
func (s *Store) newBatch() *pebble.Batch {
	size := 1 << bits.Len(uint(s.opts.BatchBytes)) // above BatchBytes, for the record that crosses it
	return s.db.NewBatch(pebble.WithInitialSizeBytes(size), pebble.WithMaxRetainedSizeBytes(size))
}

// Stager writes the mutations of one stage. Its delta is invisible to Sealed
// and Iterate until Seal. It belongs to one goroutine.
type Stager struct {
	s         *Store
	index     string
	snap      int64
	prefix    []byte
	stageKey  []byte
	batch     *pebble.Batch
	key, val  []byte
	mutations int64
	net       int64
	done      bool
	// recomputable: Seal does not wait for the disk (see Recomputable).
	recomputable bool
	// mem holds the stage while it is a memory stage; nil once in Pebble.
	mem *memStage
}

// Recomputable says that the stage's source can give its mutations again
// (a table delta, read from the table's own immutable files), so its Seal
// need not wait for the disk: the update that stages it saves a log sync.
// A crash of the machine then loses the stage whole or not at all, never a
// part of it: Pebble recovers a prefix of its log and the seal record is the
// stage's last, so a stage found sealed after a restart holds every
// mutation, and one not found is staged again from its source. Stages of
// change events, which Kafka may no longer hold, are not recomputable.
//
// A recomputable stage is held in memory while the store's
// MemoryStageBytes allow (see memStage), and moves to Pebble when they do
// not.
func (st *Stager) Recomputable() {
	st.recomputable = true
	if st.mutations == 0 && st.mem == nil && st.s.opts.MemoryStageBytes > 0 {
		st.mem = st.s.newMemStage(st.index)
	}
}

// Add stages one mutation: count copies of an entry (negative: deletes).
// entryKey is its format.EntryCodec key and entryValue its encoded values; both
// are copied. Counts of identical entries add up.
func (st *Stager) Add(entryKey, entryValue []byte, count int) error {
	if st.done {
		return fmt.Errorf("add to stage %s@%d: stager is finished", st.index, st.snap)
	}
	if st.s.closed.Load() {
		return ErrStoreClosed
	}
	st.mutations++
	st.net += int64(count)
	if st.mem != nil {
		ok, added := st.memAdd(entryKey, entryValue, count)
		if ok {
			return nil
		}
		if err := st.spill(); err != nil {
			return err
		}
		if added {
			return nil
		}
	}
	return st.pebbleAdd(entryKey, entryValue, count)
}

// pebbleAdd adds a mutation to the Stager's batch, writing the batch when
// it is full.
func (st *Stager) pebbleAdd(entryKey, entryValue []byte, count int) error {
	st.key = append(append(append(st.key[:0], st.prefix...), entryKey...), entryValue...)
	st.val = encodeCount(st.val[:0], int64(count), uint64(len(entryKey)))
	if err := st.batch.Merge(st.key, st.val, nil); err != nil {
		return fmt.Errorf("stage mutation of %s@%d: %w", st.index, st.snap, err)
	}
	if st.batch.Len() >= st.s.opts.BatchBytes {
		if err := st.s.room(); err != nil {
			return fmt.Errorf("write mutations of %s@%d: %w", st.index, st.snap, err)
		}
		if err := st.batch.Commit(pebble.NoSync); err != nil {
			return fmt.Errorf("write mutations of %s@%d: %w", st.index, st.snap, err)
		}
		st.batch.Reset()
	}
	return nil
}

// Seal writes the remaining mutations and the seal record in one batch and
// waits for the disk (unless StoreOptions.NoSync or Recomputable). Afterwards the stage is
// listed by Sealed and readable by Iterate. meta's SourceSnapshotID,
// Mutations and NetCount are set from the stage.
func (st *Stager) Seal(meta SealMeta) error {
	if st.done {
		return fmt.Errorf("seal stage %s@%d: stager is finished", st.index, st.snap)
	}
	if st.s.closed.Load() {
		return ErrStoreClosed
	}
	meta.SourceSnapshotID, meta.Mutations, meta.NetCount = st.snap, st.mutations, st.net
	if st.mem != nil {
		if err := st.memSeal(meta); err != nil {
			return err
		}
		st.finish()
		return nil
	}
	enc, err := json.Marshal(meta)
	if err != nil {
		return fmt.Errorf("encode seal of %s@%d: %w", st.index, st.snap, err)
	}
	if err := st.s.room(); err != nil {
		return fmt.Errorf("seal stage %s@%d: %w", st.index, st.snap, err)
	}
	if err := st.batch.Set(st.stageKey, append([]byte{stateSealed}, enc...), nil); err != nil {
		return fmt.Errorf("seal stage %s@%d: %w", st.index, st.snap, err)
	}
	wo := st.s.wo
	if st.recomputable {
		wo = pebble.NoSync
	}
	if err := st.batch.Commit(wo); err != nil {
		return fmt.Errorf("seal stage %s@%d: %w", st.index, st.snap, err)
	}
	st.finish()
	return nil
}

// Abort gives the stage up and removes what it wrote.
func (st *Stager) Abort() error {
	if st.done {
		return nil
	}
	st.finish()
	if st.s.closed.Load() {
		return nil // the open record stays and is reported as partial
	}
	return st.s.Abandon(st.index, st.snap)
}

func (st *Stager) finish() {
	st.done = true
	if st.mem != nil { // given up: a sealed one belongs to the store
		st.s.releaseMem(st.mem.reserved)
		st.s.memMu.Lock()
		st.s.recycle(st.mem)
		st.s.memMu.Unlock()
		st.mem = nil
	}
	_ = st.batch.Close()
	st.s.mu.Lock()
	delete(st.s.active, string(st.stageKey))
	st.s.mu.Unlock()
}

// Sealed lists the sealed stages of an index in Ordinal order (then source
// snapshot ID).
func (s *Store) Sealed(index string) ([]SealMeta, error) {
	if err := checkIndex(index); err != nil {
		return nil, err
	}
	var out []SealMeta
	err := s.stages(indexPrefix(spaceStage, index), func(_ StageRef, sealed bool, meta SealMeta) {
		if sealed {
			out = append(out, meta)
		}
	})
	if err != nil {
		return nil, err
	}
	s.memMu.Lock()
	for _, m := range s.memStages {
		if m.index == index {
			out = append(out, m.meta)
		}
	}
	s.memMu.Unlock()
	slices.SortFunc(out, func(a, b SealMeta) int {
		return cmp.Or(cmp.Compare(a.Ordinal, b.Ordinal), cmp.Compare(a.SourceSnapshotID, b.SourceSnapshotID))
	})
	return out, nil
}

// Unsealed lists the stages of every index that are open but have no
// Stager in this process: partial stages a crash left behind, to abandon
// (or restage, which discards them) and redo.
func (s *Store) Unsealed() ([]StageRef, error) {
	var out []StageRef
	err := s.stages([]byte{spaceStage}, func(ref StageRef, sealed bool, _ SealMeta) {
		if sealed {
			return
		}
		s.mu.Lock()
		active := s.active[string(stagePrefix(spaceStage, ref.Index, ref.SourceSnapshotID))]
		s.mu.Unlock()
		if !active {
			out = append(out, ref)
		}
	})
	return out, err
}

// stages calls fn for every stage record under prefix.
func (s *Store) stages(prefix []byte, fn func(ref StageRef, sealed bool, meta SealMeta)) error {
	if s.closed.Load() {
		return ErrStoreClosed
	}
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: prefix, UpperBound: prefixEnd(prefix)})
	if err != nil {
		return fmt.Errorf("list stages: %w", err)
	}
	for it.First(); it.Valid(); it.Next() {
		k := it.Key()
		sep := bytes.IndexByte(k[1:], 0) + 1
		if sep <= 0 || len(k) != sep+9 {
			return errors.Join(fmt.Errorf("list stages: malformed stage key %x", k), it.Close())
		}
		ref := StageRef{Index: string(k[1:sep]), SourceSnapshotID: int64(binary.BigEndian.Uint64(k[sep+1:]))}
		v, err := it.ValueAndErr()
		if err != nil {
			return errors.Join(fmt.Errorf("list stages: %w", err), it.Close())
		}
		sealed, meta, err := decodeStage(v)
		if err != nil {
			return errors.Join(fmt.Errorf("stage record of %s@%d: %w", ref.Index, ref.SourceSnapshotID, err), it.Close())
		}
		fn(ref, sealed, meta)
	}
	if err := it.Close(); err != nil {
		return fmt.Errorf("list stages: %w", err)
	}
	return nil
}

// Iterate calls fn with the mutations of a sealed stage in key order, which
// is cluster order: each distinct entry once, with the sum of its counts;
// entries whose counts cancel out are skipped. The slices are valid only
// during the call. An unsealed stage is ErrStageNotSealed.
func (s *Store) Iterate(index string, sourceSnapshotID int64, fn func(entryKey, entryValue []byte, count int) error) error {
	if err := checkIndex(index); err != nil {
		return err
	}
	if s.closed.Load() {
		return ErrStoreClosed
	}
	if found, err := s.iterateMem(index, sourceSnapshotID, fn); found {
		return err
	}
	_, _, sealed, err := s.stageState(index, sourceSnapshotID)
	if err != nil {
		return err
	}
	if !sealed {
		return fmt.Errorf("iterate stage %s@%d: %w", index, sourceSnapshotID, ErrStageNotSealed)
	}
	prefix := stagePrefix(spaceMutation, index, sourceSnapshotID)
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: prefix, UpperBound: prefixEnd(prefix)})
	if err != nil {
		return fmt.Errorf("iterate stage %s@%d: %w", index, sourceSnapshotID, err)
	}
	for it.First(); it.Valid(); it.Next() {
		v, err := it.ValueAndErr()
		if err != nil {
			return errors.Join(fmt.Errorf("iterate stage %s@%d: %w", index, sourceSnapshotID, err), it.Close())
		}
		count, keyLen, err := decodeCount(v)
		if err == nil && keyLen > uint64(len(it.Key())-len(prefix)) {
			err = fmt.Errorf("entry key length %d exceeds the record", keyLen)
		}
		if err != nil {
			return errors.Join(fmt.Errorf("iterate stage %s@%d: %w", index, sourceSnapshotID, err), it.Close())
		}
		if count == 0 {
			continue
		}
		rest := it.Key()[len(prefix):]
		if err := fn(rest[:keyLen], rest[keyLen:], int(count)); err != nil {
			return errors.Join(err, it.Close())
		}
	}
	if err := it.Close(); err != nil {
		return fmt.Errorf("iterate stage %s@%d: %w", index, sourceSnapshotID, err)
	}
	return nil
}

// Drop removes a stage and its seal, after the index commit that applied
// it. Dropping a stage that does not exist is not an error.
func (s *Store) Drop(index string, sourceSnapshotID int64) error {
	return s.remove(index, sourceSnapshotID, false)
}

// Abandon removes an unsealed stage, such as a partial one Unsealed lists.
// A sealed stage is ErrStageSealed: use Drop.
func (s *Store) Abandon(index string, sourceSnapshotID int64) error {
	return s.remove(index, sourceSnapshotID, true)
}

func (s *Store) remove(index string, snap int64, unsealedOnly bool) error {
	if err := checkIndex(index); err != nil {
		return err
	}
	if s.closed.Load() {
		return ErrStoreClosed
	}
	if s.memStageOf(index, snap) != nil {
		// A sealed memory stage has nothing in Pebble (memSeal).
		if unsealedOnly {
			return fmt.Errorf("abandon stage %s@%d: %w", index, snap, ErrStageSealed)
		}
		s.dropMem(index, snap)
		return nil
	}
	// Even a removal writes to Pebble's log; a stage that cannot be
	// removed now is removed, or discarded by Stage, later.
	if err := s.room(); err != nil {
		return fmt.Errorf("remove stage %s@%d: %w", index, snap, err)
	}
	stageKey := stagePrefix(spaceStage, index, snap)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.active[string(stageKey)] {
		return fmt.Errorf("remove stage %s@%d: %w", index, snap, ErrStageBusy)
	}
	if unsealedOnly {
		_, _, sealed, err := s.stageState(index, snap)
		if err != nil {
			return err
		}
		if sealed {
			return fmt.Errorf("abandon stage %s@%d: %w", index, snap, ErrStageSealed)
		}
	}
	prefix := stagePrefix(spaceMutation, index, snap)
	b := s.db.NewBatch()
	err := b.DeleteRange(prefix, prefixEnd(prefix), nil)
	if err == nil {
		err = b.Delete(stageKey, nil)
	}
	if err == nil {
		err = b.Commit(s.wo)
	}
	if err = errors.Join(err, b.Close()); err != nil {
		return fmt.Errorf("remove stage %s@%d: %w", index, snap, err)
	}
	return nil
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

// ballastWait bounds how long room waits for flushes in flight before it
// allocates the ballast again.
const ballastWait = 5 * time.Second

// flushesSettled reports whether the Pebble store has no flush in progress
// and no memtable waiting for one, waiting up to wait for it; true before
// the store is open (OpenStore checks for room first).
func (s *Store) flushesSettled(wait time.Duration) bool {
	if s.db == nil {
		return true
	}
	deadline := time.Now().Add(wait)
	for {
		m := s.db.Metrics()
		if m.Flush.NumInProgress == 0 && m.MemTable.Count <= 1 {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
}
