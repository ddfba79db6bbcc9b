// Package objstore is the one way streamidx reaches the files of an index,
// as Pebble's objstorage.Provider is Pebble's: it reads tracking files (and
// keeps the decoded ones in a small cache), opens range files, publishes new
// files, lists and removes them. Every read checks what it can against the
// metadata that points at the file, so a file swapped for another valid one
// is refused as corruption rather than read as if it were the right one.
//
// Storage is iceberg-go's IO, so local disks and object stores go through
// the same code, with one IO per scheme and host. On a local file system a
// new file is written under a temporary name, fsynced, linked to its final
// name (never replacing one) and its directory fsynced, so a reader or a
// crash never sees half a file. On an object store (S3) a file is uploaded
// to its location and appears whole when the upload completes, and a file
// that must not replace another is created with a conditional put
// (If-None-Match: *), which the store refuses when the key exists.
//
// Concurrency: a Store is safe for concurrent use and is meant to be shared
// by a process. A Writer and a RangeFile belong to one goroutine.
package objstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/url"
	"strings"
	"sync"

	"github.com/apache/arrow-go/v18/parquet/metadata"
	iceio "github.com/apache/iceberg-go/io"
	"golang.org/x/sync/singleflight"

	"github.com/streamidx/streamidx/format"
)

// ErrNoConditionalCreate is returned (wrapped) when a file must be created
// only if it is absent on storage that cannot promise that: neither a local
// file system (a hard link) nor an object store reached through gocloud (a
// conditional put).
var ErrNoConditionalCreate = errors.New("storage cannot create a file only if it is absent")

// Options configure a Store. The zero value selects the defaults.
type Options struct {
	// IOProperties are passed to iceberg-go's IO when it opens storage for
	// a location, such as s3.endpoint or s3.region. Default: none, which is
	// enough for local files.
	IOProperties map[string]string
	// TrackingCacheFiles is how many decoded tracking files are kept, most
	// recently used first. Default: 32.
	TrackingCacheFiles int
	// FooterCacheBytes bounds the parsed Parquet footers of range files
	// kept, by their encoded size, so that a lookup opens a range file
	// without reading and decoding its footer again; 0 keeps none.
	// Default: 0.
	FooterCacheBytes int64
	// LookupCacheBytes bounds what lookups keep of the files they read, by
	// the memory it holds: decoded blocks of range files, their page
	// indexes and row-group statistics, and the reconciliations of index
	// snapshots with newer table snapshots (see Cached). 0 keeps none.
	// Default: 0.
	LookupCacheBytes int64
	// Logger receives what fails without failing the operation: a directory
	// fsync after a file became visible. Default: discard.
	Logger *slog.Logger
}

// Store reaches index files. Create one per process with New and pass it to
// every part that reads or writes index files.
type Store struct {
	opts     Options
	log      *slog.Logger
	tracking *lru[*Tracking]
	metadata *lru[*format.Metadata] // parsed index metadata files, by location
	footers  *lru[*metadata.FileMetaData]
	lookups  *lru[any]
	making   singleflight.Group // of lookup cache entries

	mu  sync.Mutex
	fss map[string]iceio.IO // by scheme and host
}

// New returns a Store.
func New(opts Options) *Store {
	if opts.TrackingCacheFiles <= 0 {
		opts.TrackingCacheFiles = 32
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Store{opts: opts, log: log, tracking: newLRU[*Tracking](opts.TrackingCacheFiles, 0), metadata: newLRU[*format.Metadata](metadataCacheFiles, metadataCacheBytes),
		footers: newLRU[*metadata.FileMetaData](0, opts.FooterCacheBytes), lookups: newLRU[any](0, opts.LookupCacheBytes),
		fss: map[string]iceio.IO{}}
}

// Local returns a Store with the default options: local files only.
func Local() *Store { return New(Options{}) }

// io returns the IO for a location, opened once per scheme and host since
// opening object-store IO builds a client. The IO outlives the call that
// made it, so it does not take the call's cancellation.
func (s *Store) io(ctx context.Context, location string) (iceio.IO, error) {
	key := "file"
	if u, err := url.Parse(location); err == nil && u.Scheme != "" && u.Scheme != "file" {
		key = u.Scheme + "://" + u.Host
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if fsys, ok := s.fss[key]; ok {
		return fsys, nil
	}
	fsys, err := iceio.LoadFS(context.WithoutCancel(ctx), s.opts.IOProperties, location)
	if err != nil {
		return nil, fmt.Errorf("open storage for %s: %w", location, err)
	}
	s.fss[key] = fsys
	return fsys, nil
}

// CanCreateExclusive reports whether the storage of location can create a
// file only if it is absent, which Create with Exclusive needs.
func (s *Store) CanCreateExclusive(ctx context.Context, location string) (bool, error) {
	fsys, err := s.io(ctx, location)
	if err != nil {
		return false, err
	}
	if isObjectStore(fsys) {
		return true, nil
	}
	_, renames := fsys.(iceio.RenameNoReplaceIO)
	_, writes := fsys.(iceio.WriteFileIO)
	return renames && writes, nil
}

// Open opens a file for reading, for files whose content the caller checks
// itself (a table's data file); index files have ReadTracking and
// OpenRange.
func (s *Store) Open(ctx context.Context, location string) (iceio.File, error) {
	fsys, err := s.io(ctx, location)
	if err != nil {
		return nil, err
	}
	f, err := fsys.Open(location)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", location, err)
	}
	return f, nil
}

// ReadFile reads a whole file. A missing file gives an error wrapping
// fs.ErrNotExist.
func (s *Store) ReadFile(ctx context.Context, location string) ([]byte, error) {
	fsys, err := s.io(ctx, location)
	if err != nil {
		return nil, err
	}
	var data []byte
	if rf, ok := fsys.(iceio.ReadFileIO); ok {
		data, err = rf.ReadFile(location)
	} else {
		var f iceio.File
		if f, err = fsys.Open(location); err == nil {
			data, err = io.ReadAll(f)
			f.Close()
		}
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", location, err)
	}
	return data, nil
}

// Remove deletes a file. A missing file gives an error wrapping
// fs.ErrNotExist.
func (s *Store) Remove(ctx context.Context, location string) error {
	fsys, err := s.io(ctx, location)
	if err != nil {
		return err
	}
	// A removed file's cached forms go with it; the location is not reused.
	s.tracking.remove(location)
	s.footers.remove(location)
	s.dropCached(location)
	if err := fsys.Remove(location); err != nil {
		return fmt.Errorf("remove %s: %w", location, err)
	}
	return nil
}

// RemoveQuietly deletes files whose loss only leaves garbage behind, and
// logs under why the ones it could not delete. Files already gone are
// fine.
func (s *Store) RemoveQuietly(ctx context.Context, log *slog.Logger, why string, locations ...string) {
	for _, loc := range locations {
		if err := s.Remove(ctx, loc); err != nil && !errors.Is(err, fs.ErrNotExist) {
			log.Warn("could not delete a file; it is left for clean-up", "file", loc, "reason", why, "err", err)
		}
	}
}

// Join appends path elements to a location URI or path.
func Join(location string, elems ...string) string {
	return strings.TrimRight(location, "/") + "/" + strings.Join(elems, "/")
}

// Dir returns the location of the directory holding location.
func Dir(location string) string {
	i := strings.LastIndexByte(location, '/')
	if i < 0 {
		return "."
	}
	return location[:i]
}

// Base returns the last element of a location.
func Base(location string) string {
	return location[strings.LastIndexByte(location, '/')+1:]
}
