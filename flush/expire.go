package flush

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"path"
	"slices"
	"strings"
	"sync"
	"time"
	"unique"

	"github.com/streamidx/streamidx/format"
	"github.com/streamidx/streamidx/indexcatalog"
	"github.com/streamidx/streamidx/internal/objstore"
)

// ExpireOptions tune Expire.
type ExpireOptions struct {
	// RetainLast keeps the newest index snapshots; older ones expire.
	// Values below 1 select the default. Default: 10.
	RetainLast int
	// MaxAge expires index snapshots older than this, whatever RetainLast
	// says. Default: 0, no age limit.
	MaxAge time.Duration
	// OrphanGrace protects recent work from a concurrent writer that has
	// not committed yet: unreferenced files younger than this are kept, and
	// an index snapshot superseded less than this long ago does not expire,
	// since an update may be building on it. Default: 1h.
	OrphanGrace time.Duration
	// Store reads tracking files, lists and deletes files. Default: a store
	// for local files only.
	Store *objstore.Store
	// MaxAttempts bounds the compare-and-swap retries. Default: 20.
	MaxAttempts int
	// Logger. Default: discard.
	Logger *slog.Logger
	// Now is the clock. Default: time.Now.
	Now func() time.Time
	// DryRun reports what would expire and be deleted, and changes nothing.
	// Default: false.
	DryRun bool
	// References remembers the files each tracking file lists from one
	// expiry to the next. Default: none, which reads every retained
	// snapshot's tracking file at every expiry.
	References *References
}

// References remembers which range files each tracking file lists, so that
// expiries decode a tracking file once in its life (tracking files are
// immutable) rather than every retained one each time: a daemon committing
// every second retains an hour of index snapshots (see OrphanGrace), and
// reading all of their tracking files at every expiry made each one cost
// more than the updates between them. Safe for concurrent use; one per
// process serves every index.
type References struct {
	mu    sync.Mutex
	files map[string][]string // by index UUID and tracking file name
}

// NewReferences returns an empty References.
func NewReferences() *References { return &References{files: map[string][]string{}} }

func (r *References) get(key string) ([]string, bool) {
	if r == nil {
		return nil, false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	names, ok := r.files[key]
	return names, ok
}

func (r *References) put(key string, names []string) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.files[key] = names
}

// keep forgets the tracking files of index indexUUID that are not in live.
func (r *References) keep(indexUUID string, live map[string]bool) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	prefix := indexUUID + "/"
	for k := range r.files {
		if strings.HasPrefix(k, prefix) && !live[k] {
			delete(r.files, k)
		}
	}
}

// Len is how many tracking files are remembered.
func (r *References) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.files)
}

func (o *ExpireOptions) ensureDefaults() {
	if o.RetainLast < 1 {
		o.RetainLast = 10
	}
	if o.OrphanGrace <= 0 {
		o.OrphanGrace = time.Hour
	}
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

// ExpireResult is what Expire removed, or would remove in a dry run.
type ExpireResult struct {
	SnapshotsExpired int
	// FilesDeleted are the range and tracking files deleted.
	FilesDeleted []string
	BytesFreed   int64
}

// errNothingToExpire ends a commit whose expiry a concurrent writer already
// made.
var errNothingToExpire = errors.New("nothing to expire")

// Expire removes old index snapshots from the index's metadata, then
// deletes the range files under <location>/data and the tracking files
// (metadata/snap-*.avro) that no remaining snapshot references. A snapshot
// expires when it is not among the RetainLast newest or is older than
// MaxAge; the current snapshot never expires, nor one superseded less than
// OrphanGrace ago. Metadata files (*.metadata.json) are the catalog's and
// are never touched; nor is any file younger than OrphanGrace. is resolves
// the index schema that tracking files are read with.
//
// The trimmed metadata is committed with a compare-and-swap; on a conflict
// the expiry is worked out again on top of the winner, so a concurrent
// commit is never lost. A file that cannot be deleted is logged and left
// for the next run.
func Expire(ctx context.Context, cat indexcatalog.Catalog, table []string, index string,
	is func(*format.Metadata) (*format.IndexSchema, error), opts ExpireOptions) (*ExpireResult, error) {
	opts.ensureDefaults()
	now := opts.Now()
	md, _, err := cat.Load(ctx, table, index)
	if err != nil {
		return nil, err
	}
	res := &ExpireResult{}
	if expired := expiredSnapshots(md, now, opts); len(expired) > 0 {
		if opts.DryRun {
			md = withoutSnapshots(md, expired)
			res.SnapshotsExpired = len(expired)
		} else {
			committed, loc, err := indexcatalog.CommitWithRetry(ctx, cat, table, index, func(base *format.Metadata) (*format.Metadata, error) {
				expired := expiredSnapshots(base, now, opts)
				if len(expired) == 0 {
					return nil, errNothingToExpire
				}
				res.SnapshotsExpired = len(expired)
				return withoutSnapshots(base, expired), nil
			}, opts.MaxAttempts)
			switch {
			case errors.Is(err, errNothingToExpire):
				res.SnapshotsExpired = 0
				if md, _, err = cat.Load(ctx, table, index); err != nil {
					return nil, err
				}
			case err != nil:
				return nil, fmt.Errorf("expire snapshots of index %s: %w", index, err)
			default:
				md = committed
				opts.Logger.Info("index snapshots expired", "index", index, "expired", res.SnapshotsExpired,
					"remaining", len(md.Snapshots), "metadata", loc)
			}
		}
	}
	if err := deleteUnreferenced(ctx, md, is, now, opts, res); err != nil {
		return res, fmt.Errorf("delete unreferenced files of index %s: %w", index, err)
	}
	return res, nil
}

// expiredSnapshots returns the ids of the snapshots of md that expire at now.
func expiredSnapshots(md *format.Metadata, now time.Time, opts ExpireOptions) map[int64]bool {
	out := map[int64]bool{}
	n := len(md.Snapshots)
	settled := now.Add(-opts.OrphanGrace).UnixMilli()
	for i := 0; i < n-1; i++ { // the last is the current snapshot
		s := md.Snapshots[i]
		old := opts.MaxAge > 0 && s.TimestampMs < now.Add(-opts.MaxAge).UnixMilli()
		if i >= n-opts.RetainLast && !old {
			continue
		}
		if md.Snapshots[i+1].TimestampMs > settled {
			continue // superseded recently: an update may still be based on it
		}
		out[s.SnapshotID] = true
	}
	return out
}

func withoutSnapshots(md *format.Metadata, ids map[int64]bool) *format.Metadata {
	out := md.Clone()
	out.Snapshots = slices.DeleteFunc(out.Snapshots, func(s format.Snapshot) bool { return ids[s.SnapshotID] })
	return out
}

// deleteUnreferenced deletes (or, in a dry run, lists) the settled files
// under the index's data and metadata directories that no snapshot of md
// references.
func deleteUnreferenced(ctx context.Context, md *format.Metadata, is func(*format.Metadata) (*format.IndexSchema, error),
	now time.Time, opts ExpireOptions, res *ExpireResult) error {
	referenced, err := referencedFiles(ctx, md, is, opts)
	if err != nil {
		return err
	}
	for _, dir := range []struct {
		name string
		// deletable says which unreferenced files of the directory are the
		// index's to delete.
		deletable func(base string) bool
	}{
		{"data", func(string) bool { return true }},
		{"metadata", isTrackingFileName},
	} {
		root := objstore.Join(md.Location, dir.name)
		files, err := opts.Store.Walk(ctx, root)
		if err != nil {
			return err
		}
		for _, f := range files {
			switch {
			case referenced[fileName(f.Location)] || !dir.deletable(fileName(f.Location)):
				continue
			case f.ModTime.IsZero() || now.Sub(f.ModTime) < opts.OrphanGrace:
				continue // too young, or of unknown age: a writer may be about to commit it
			}
			if !opts.DryRun {
				if err := opts.Store.Remove(ctx, f.Location); err != nil && !errors.Is(err, fs.ErrNotExist) {
					opts.Logger.Warn("could not delete unreferenced index file", "file", f.Location, "err", err)
					continue
				}
			}
			res.FilesDeleted = append(res.FilesDeleted, f.Location)
			res.BytesFreed += f.Size
		}
	}
	if len(res.FilesDeleted) > 0 {
		opts.Logger.Info("unreferenced index files deleted", "files", len(res.FilesDeleted), "bytes", res.BytesFreed, "dry_run", opts.DryRun)
	}
	return nil
}

// isTrackingFileName matches the tracking files Publish writes and the
// temporary files a crash can leave of them.
func isTrackingFileName(base string) bool {
	return strings.HasPrefix(base, "snap-") && strings.HasSuffix(base, ".avro") ||
		strings.HasPrefix(base, ".snap-") && strings.HasSuffix(base, ".tmp")
}

// referencedFiles returns the names (see fileName) of the tracking files of
// md's snapshots and of the range files they list, reading only the
// tracking files opts.References does not know. A tracking file that
// cannot be read stops the clean-up: what it references is unknown.
func referencedFiles(ctx context.Context, md *format.Metadata, is func(*format.Metadata) (*format.IndexSchema, error), opts ExpireOptions) (map[string]bool, error) {
	out := map[string]bool{}
	if len(md.Snapshots) == 0 {
		return out, nil
	}
	var schema *format.IndexSchema
	live := make(map[string]bool, len(md.Snapshots))
	for i := range md.Snapshots {
		s := &md.Snapshots[i]
		name := fileName(s.TrackingFile)
		out[name] = true
		key := md.IndexUUID + "/" + name
		live[key] = true
		names, ok := opts.References.get(key)
		if !ok {
			if schema == nil {
				var err error
				if schema, err = is(md); err != nil {
					return nil, fmt.Errorf("resolve index schema: %w", err)
				}
			}
			t, _, err := opts.Store.ReadTracking(ctx, md, s, schema)
			if err != nil {
				return nil, fmt.Errorf("snapshot %d: %w", s.SnapshotID, err)
			}
			// One copy of each name however many snapshots list it (they
			// share most of their range files), not the entry's whole path.
			names = make([]string, len(t.Entries))
			for j, e := range t.Entries {
				names[j] = unique.Make(fileName(e.FilePath)).Value()
			}
			opts.References.put(key, names)
		}
		for _, n := range names {
			out[n] = true
		}
	}
	opts.References.keep(md.IndexUUID, live)
	return out, nil
}

// fileName is the last element of a location. Range and tracking files
// have unique names (UUIDs, snapshot ids), so a name identifies a file
// whatever form its location takes (URI or path, s3:// or s3a://).
func fileName(loc string) string {
	return path.Base(objstore.CanonicalLocation(loc))
}
