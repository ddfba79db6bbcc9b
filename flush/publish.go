package flush

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"time"

	"github.com/google/uuid"

	"github.com/streamidx/streamidx/format"
	"github.com/streamidx/streamidx/indexcatalog"
	"github.com/streamidx/streamidx/internal/objstore"
)

// ErrIndexReplaced is returned when the index was dropped and created anew
// while a snapshot for the old one was being published: its files belong to
// a definition that no longer exists. It is a halt error.
var ErrIndexReplaced = errors.New("index was replaced during the update")

// ErrBaseMoved is returned when the index moved past the snapshot an
// incremental update was computed on: another writer published first. The
// update is void (its files are removed); the caller reloads and starts
// from the new current snapshot. It is a retry error.
var ErrBaseMoved = errors.New("index moved past the snapshot the update was built on")

// Snapshot properties streamidx writes.
const (
	// PropRangeFiles, PropRecords and PropBytes summarise the snapshot.
	PropRangeFiles = "streamidx.range-files"
	PropRecords    = "streamidx.records"
	PropBytes      = "streamidx.range-bytes"
)

// Publication is one index snapshot to publish.
type Publication struct {
	Table []string
	Index string
	// IndexUUID is the index the files were written for; the commit is
	// refused if the catalog's index has another.
	IndexUUID        string
	Schema           *format.IndexSchema
	Entries          []format.TrackingEntry // range files in cluster order
	SourceSnapshotID int64
	// Properties are added to the index snapshot's properties, e.g. the
	// Kafka offsets it covers.
	Properties map[string]string
	// RequireBase makes the commit conditional on BaseSnapshotID still being
	// the current index snapshot (0: the index still has none), else it is
	// refused with ErrBaseMoved. An incremental update needs it, since it was
	// merged onto that snapshot; so does an updater's first build, so that
	// two updaters do not both publish one. Without it the snapshot is added
	// on top of whatever is current, as an explicit rebuild wants.
	RequireBase    bool
	BaseSnapshotID int64
	// SnapshotID, when not 0, is the id the new snapshot gets (from
	// NewSnapshotID), so that work for the next snapshot can be named after
	// it before it commits. Should another writer hold it by then, the
	// commit fails with ErrBaseMoved. Default: 0, a fresh random id.
	SnapshotID int64
}

// Options tune publishing.
type Options struct {
	// Store writes and removes the tracking file. Default: a store for
	// local files only.
	Store *objstore.Store
	// MaxAttempts bounds the compare-and-swap retries. Default: 20.
	MaxAttempts int
	// Logger. Default: discard.
	Logger *slog.Logger
	// Now is the clock. Default: time.Now.
	Now func() time.Time
	// OnRetry is called each time a compare-and-swap lost to another
	// writer and the commit is tried again on top of it. Default: none.
	OnRetry func()
}

func (o *Options) ensureDefaults() {
	if o.MaxAttempts <= 0 {
		o.MaxAttempts = 20
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Store == nil {
		o.Store = objstore.Local()
	}
}

// Publish writes the tracking file of p's range files, then commits a new
// index snapshot that references it with a compare-and-swap in the catalog,
// retrying on top of concurrent winners. Range files must already be
// durable. The tracking file names the index and the snapshot it belongs to
// (header keys index-uuid and snapshot-id), so that readers can refuse it
// in another snapshot's place. When the commit fails the tracking file is
// removed and the previous index snapshot stays current.
func Publish(ctx context.Context, cat indexcatalog.Catalog, p Publication, opts Options) (*format.Snapshot, string, error) {
	opts.ensureDefaults()
	md, _, err := cat.Load(ctx, p.Table, p.Index)
	if err != nil {
		return nil, "", err
	}
	if md.IndexUUID != p.IndexUUID {
		return nil, "", fmt.Errorf("publish index %s: %w", p.Index, ErrIndexReplaced)
	}
	snapID := p.SnapshotID
	switch {
	case snapID == 0:
		snapID = NewSnapshotID(md)
	case md.SnapshotByID(snapID) != nil:
		return nil, "", fmt.Errorf("publish index %s: snapshot id %d is taken: %w", p.Index, snapID, ErrBaseMoved)
	}
	trackingLoc, err := writeTracking(ctx, md.Location, snapID, p, opts)
	if err != nil {
		return nil, "", err
	}
	var rows, bytes int64
	for _, e := range p.Entries {
		rows += e.RecordCount
		bytes += e.FileSizeInBytes
	}
	props := map[string]string{
		PropRangeFiles: fmt.Sprint(len(p.Entries)),
		PropRecords:    fmt.Sprint(rows),
		PropBytes:      fmt.Sprint(bytes),
	}
	maps.Copy(props, p.Properties)
	var snap format.Snapshot
	attempts := 0
	committed, loc, err := indexcatalog.CommitWithRetry(ctx, cat, p.Table, p.Index, func(base *format.Metadata) (*format.Metadata, error) {
		if attempts++; attempts > 1 && opts.OnRetry != nil {
			opts.OnRetry()
		}
		if base.IndexUUID != p.IndexUUID {
			return nil, ErrIndexReplaced
		}
		if p.RequireBase {
			var current int64
			if cur := base.CurrentSnapshot(); cur != nil {
				current = cur.SnapshotID
			}
			if current != p.BaseSnapshotID {
				return nil, ErrBaseMoved
			}
		}
		if base.SnapshotByID(snapID) != nil {
			if p.SnapshotID != 0 {
				return nil, fmt.Errorf("snapshot id %d is taken: %w", snapID, ErrBaseMoved)
			}
			// Another writer took the id since: the tracking file names its
			// snapshot, so it is written again under a new one.
			snapID = NewSnapshotID(base)
			loc, err := writeTracking(ctx, md.Location, snapID, p, opts)
			if err != nil {
				return nil, err
			}
			removeQuietly(ctx, opts, trackingLoc)
			trackingLoc = loc
		}
		snap = format.Snapshot{
			SnapshotID:            snapID,
			SourceTableSnapshotID: p.SourceSnapshotID,
			TimestampMs:           opts.Now().UnixMilli(),
			TrackingFile:          trackingLoc,
			Properties:            props,
		}
		base.Snapshots = append(base.Snapshots, snap)
		return base, nil
	}, opts.MaxAttempts)
	if err != nil {
		removeQuietly(ctx, opts, trackingLoc)
		return nil, "", fmt.Errorf("publish index %s: %w", p.Index, err)
	}
	opts.Logger.Info("index snapshot published", "index", p.Index, "snapshot", snap.SnapshotID,
		"source_snapshot", p.SourceSnapshotID, "range_files", len(p.Entries), "records", rows, "metadata", loc)
	return committed.SnapshotByID(snap.SnapshotID), loc, nil
}

// writeTracking writes the tracking file of p for index snapshot snapID
// under the index's location and returns where.
func writeTracking(ctx context.Context, indexLoc string, snapID int64, p Publication, opts Options) (string, error) {
	loc := objstore.Join(indexLoc, "metadata", fmt.Sprintf("snap-%d-%s.avro", snapID, uuid.NewString()))
	w, err := opts.Store.Create(ctx, loc, objstore.CreateOptions{})
	if err != nil {
		return "", err
	}
	err = format.WriteTrackingFile(w, p.Schema, p.Entries, format.TrackingWriteOptions{IndexUUID: p.IndexUUID, SnapshotID: snapID})
	if err != nil {
		w.Abort()
		return "", fmt.Errorf("write tracking file %s: %w", loc, err)
	}
	return loc, w.Close()
}

func removeQuietly(ctx context.Context, opts Options, loc string) {
	opts.Store.RemoveQuietly(context.WithoutCancel(ctx), opts.Logger, "unreferenced tracking file", loc)
}

// NewSnapshotID picks a positive random 63-bit id not used by md.
func NewSnapshotID(md *format.Metadata) int64 {
	for {
		var b [8]byte
		_, _ = rand.Read(b[:])
		id := int64(binary.BigEndian.Uint64(b[:]) >> 1)
		if id != 0 && md.SnapshotByID(id) == nil {
			return id
		}
	}
}
