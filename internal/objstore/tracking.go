package objstore

import (
	"bytes"
	"context"
	"fmt"

	"github.com/streamidx/streamidx/format"
)

// Tracking is a decoded tracking file: the range files of an index
// snapshot, ready for binary search on their clustering keys. It is shared
// through the cache: callers must not modify it.
type Tracking struct {
	Entries []format.TrackingEntry
	// GroupMax[i] is the group_max_value key of Entries[i]; nil for every
	// entry when some entry lacks one.
	GroupMax []format.Key
	// Size is the size of the file in bytes.
	Size int64

	indexUUID  string // as the header says
	snapshotID int64
	schemaKey  string // what the entries were decoded as
	// ownerIndex and ownerSnapshot are the index and the snapshot that
	// referenced the file when it was read, which expiry releases it by.
	ownerIndex    string
	ownerSnapshot int64
}

// ReadTracking returns the tracking file of index snapshot snap of the
// index md, decoded with is, and the bytes read for it from storage (0 when
// the cache had it). The file must belong to that snapshot: a header naming
// another index or another snapshot means a tracking file was put in this
// one's place, and is refused with a corruption error naming the file.
// Files written before streamidx named the snapshot pass on what they do
// say. A file that cannot be decoded is a corruption too; a failure of the
// storage is returned as it is, for the caller to retry.
//
// Paths are resolved against the index location as the table spec's paths
// in metadata are: the snapshot's tracking-file and every entry's file_path
// come out as full URIs. An encrypted tracking file (the snapshot's key-id
// is set) is refused with format.ErrEncryptionNotSupported.
//
// Decoded files are cached by location (they are immutable once
// published), each with the schema it was decoded with, since an update
// may resolve the index against a newer table schema than a lookup does.
func (s *Store) ReadTracking(ctx context.Context, md *format.Metadata, snap *format.Snapshot, is *format.IndexSchema) (*Tracking, int64, error) {
	if snap.KeyID != "" {
		return nil, 0, fmt.Errorf("index snapshot %d: its tracking file is encrypted (key-id %q): %w",
			snap.SnapshotID, snap.KeyID, format.ErrEncryptionNotSupported)
	}
	loc, err := format.ResolvePath(md.Location, snap.TrackingFile)
	if err != nil {
		return nil, 0, fmt.Errorf("tracking file of index snapshot %d: %w", snap.SnapshotID, err)
	}
	key := is.Signature()
	if t, ok := s.tracking.get(loc); ok && t.schemaKey == key {
		return t, 0, t.check(loc, md, snap)
	}
	data, err := s.ReadFile(ctx, loc)
	if err != nil {
		return nil, 0, fmt.Errorf("read tracking file of index snapshot %d: %w", snap.SnapshotID, err)
	}
	tf, err := format.ReadTrackingFile(bytes.NewReader(data), loc, is)
	if err != nil {
		return nil, 0, err
	}
	// Range file paths another writer wrote relative to the index location
	// are resolved once here, so every reader, and every tracking file
	// written from these entries, has full URIs.
	for i := range tf.Entries {
		p, err := format.ResolvePath(md.Location, tf.Entries[i].FilePath)
		if err != nil {
			return nil, 0, format.MarkCorruption(loc, fmt.Errorf("entry %d: %w", i, err))
		}
		tf.Entries[i].FilePath = p
	}
	t := &Tracking{Entries: tf.Entries, GroupMax: make([]format.Key, len(tf.Entries)), Size: int64(len(data)),
		indexUUID: tf.IndexUUID, snapshotID: tf.SnapshotID, schemaKey: key, ownerIndex: md.IndexUUID, ownerSnapshot: snap.SnapshotID}
	for i := range t.Entries {
		k, ok := t.Entries[i].GroupMaxKey(is)
		if !ok {
			t.GroupMax = nil
			break
		}
		t.GroupMax[i] = k
	}
	if err := t.check(loc, md, snap); err != nil {
		return nil, 0, err
	}
	s.tracking.put(loc, t, t.Size)
	return t, int64(len(data)), nil
}

// ReleaseExpiredTracking drops the decoded tracking files of index md's
// snapshots that md no longer lists (expired, or rolled back), and returns
// how many it dropped. A process that reads an index's metadata calls it
// with the newest it read, so that the decoded files live as long as their
// snapshots do; the store also drops a tracking file it removes itself.
func (s *Store) ReleaseExpiredTracking(md *format.Metadata) int {
	live := map[int64]bool{}
	for _, sn := range md.Snapshots {
		live[sn.SnapshotID] = true
	}
	return s.tracking.removeIf(func(_ string, t *Tracking) bool {
		return t.ownerIndex == md.IndexUUID && !live[t.ownerSnapshot]
	})
}

// check refuses a tracking file whose header names another index or
// another snapshot than the one that references it.
func (t *Tracking) check(loc string, md *format.Metadata, snap *format.Snapshot) error {
	if t.indexUUID != "" && t.indexUUID != md.IndexUUID {
		return format.MarkCorruption(loc, fmt.Errorf("the tracking file belongs to index %s, not to index %s that references it: "+
			"another index's file was put in its place", t.indexUUID, md.IndexUUID))
	}
	if t.snapshotID != 0 && t.snapshotID != snap.SnapshotID {
		return format.MarkCorruption(loc, fmt.Errorf("the tracking file belongs to index snapshot %d, not to snapshot %d that references it: "+
			"another snapshot's file was put in its place", t.snapshotID, snap.SnapshotID))
	}
	return nil
}
