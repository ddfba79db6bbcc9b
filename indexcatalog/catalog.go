package indexcatalog

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/streamidx/streamidx/format"
	"github.com/streamidx/streamidx/internal/objstore"
)

// ErrCommitConflict is returned (wrapped) by Commit when the base metadata
// file is no longer the current one: another writer committed first. Nothing
// of the rejected commit is visible; the caller re-reads the index and
// retries on top of the winner, or gives the update up. It is a retry error.
var ErrCommitConflict = errors.New("index commit conflict: base metadata is no longer current")

// ErrIndexNotFound is returned (wrapped) when the catalog has no index of
// that name on the table.
var ErrIndexNotFound = errors.New("index not found")

// ErrIndexExists is returned (wrapped) by Create when the table already has
// an index of that name.
var ErrIndexExists = errors.New("index already exists")

// ErrClosed is returned by every method of a catalog after Close.
var ErrClosed = errors.New("index catalog is closed")

// Catalog maps (table, index name) to the location of the index's current
// metadata file. A table is its namespace levels followed by its name, as
// in an Iceberg table identifier.
type Catalog interface {
	// Create registers a new index and writes md as its first metadata file.
	// It fails with ErrIndexExists if the name is taken. On success md holds
	// what was written (its last-updated-ms, and for the FS catalog its
	// location when it was empty).
	Create(ctx context.Context, table []string, name string, md *format.Metadata) (location string, err error)
	// Load returns the current metadata and its location. For an index type
	// this module does not implement, it returns the metadata and its
	// location together with an error wrapping format.ErrUnsupportedIndexType,
	// so callers can list such an index but plan no reads from it.
	Load(ctx context.Context, table []string, name string) (*format.Metadata, string, error)
	// Commit writes md as a new metadata file and makes it current only if
	// base is still the current location; otherwise it fails with
	// ErrCommitConflict and removes the file it wrote. md must belong to the
	// same index as base (same index-uuid). The commit appends base to the
	// metadata log, trims the log to write.metadata.previous-versions-max
	// entries and, when write.metadata.delete-after-commit.enabled is true,
	// deletes the trimmed files after the swap. On success md holds what was
	// written (last-updated-ms and metadata-log).
	Commit(ctx context.Context, table []string, name, base string, md *format.Metadata) (location string, err error)
	// List returns the names of the table's indexes in byte order; a table
	// without indexes has none, which is not an error.
	List(ctx context.Context, table []string) ([]string, error)
	// Drop removes the index from the catalog. It deletes no index data: the
	// FS catalog deletes the metadata files, which are its catalog entry.
	Drop(ctx context.Context, table []string, name string) error
	// Close releases what the catalog holds; it is idempotent.
	Close() error
}

// Option configures a catalog.
type Option func(*options)

type options struct {
	store  *objstore.Store
	logger *slog.Logger
}

// WithStore sets the storage gateway metadata files are read, published
// and deleted through, shared with the rest of the process. The default is
// a store of its own for local files only.
func WithStore(s *objstore.Store) Option {
	return func(o *options) { o.store = s }
}

// WithLogger sets the logger for best-effort clean-ups that fail without
// failing the operation, such as deleting a trimmed metadata file. The
// default discards.
func WithLogger(l *slog.Logger) Option {
	return func(o *options) { o.logger = l }
}

func buildOptions(opts []Option) options {
	o := options{logger: slog.New(slog.DiscardHandler)}
	for _, opt := range opts {
		opt(&o)
	}
	if o.logger == nil {
		o.logger = slog.New(slog.DiscardHandler)
	}
	if o.store == nil {
		o.store = objstore.New(objstore.Options{Logger: o.logger})
	}
	return o
}

// ident is a checked (table, index name) pair.
type ident struct {
	namespace []string
	table     string
	index     string
}

func (id ident) String() string {
	return fmt.Sprintf("%s of table %s.%s", id.index, strings.Join(id.namespace, "."), id.table)
}

// newIdent checks a table identifier and an index name. Every level must be
// usable as a directory name, so that an index can move between the SQL and
// the FS catalog.
func newIdent(table []string, index string) (ident, error) {
	if err := checkTable(table); err != nil {
		return ident{}, err
	}
	if err := checkName("index name", index); err != nil {
		return ident{}, err
	}
	return ident{namespace: table[:len(table)-1], table: table[len(table)-1], index: index}, nil
}

func checkTable(table []string) error {
	if len(table) < 2 {
		return fmt.Errorf("table identifier %q: want namespace levels and a table name", table)
	}
	for _, level := range table {
		if err := checkName("table identifier level", level); err != nil {
			return fmt.Errorf("table identifier %q: %w", table, err)
		}
	}
	return nil
}

func checkName(what, s string) error {
	if s == "" || s == "." || s == ".." || strings.ContainsAny(s, "/\\\x00") {
		return fmt.Errorf("%s %q: must be non-empty, not . or .., and without / \\ or NUL", what, s)
	}
	return nil
}

// CorruptMetadataError reports an index metadata file that exists but is not
// a readable index metadata file, or breaks a rule of the spec. The catalog
// points at it, so the index is unusable until an operator replaces the
// file; retrying does not help. It carries the one corruption marker:
// format.IsCorruption holds for it and format.CorruptPath gives its Location.
type CorruptMetadataError struct {
	Location string
	Err      error
}

func (e *CorruptMetadataError) Error() string {
	return fmt.Sprintf("corrupt index metadata file %s: %v", e.Location, e.Err)
}

func (e *CorruptMetadataError) Unwrap() error { return e.Err }

// Is makes every CorruptMetadataError match format.ErrCorruption.
func (e *CorruptMetadataError) Is(target error) bool { return target == format.ErrCorruption }

// As lets errors.As find a *format.CorruptFileError naming the metadata file,
// which is how format.CorruptPath finds the file of any corruption.
func (e *CorruptMetadataError) As(target any) bool {
	if t, ok := target.(**format.CorruptFileError); ok {
		*t = &format.CorruptFileError{Path: e.Location, Err: e.Err}
		return true
	}
	return false
}

// CommitWithRetry loads the index, applies update to its current metadata
// and commits the result, and on ErrCommitConflict starts again from the
// winner's metadata after a short jittered pause, up to maxAttempts times
// (at least once). update receives a private copy it may change and return;
// it must be safe to call again. It returns the committed metadata and its
// location. Any error other than a conflict ends the loop at once; after
// the last attempt the error wraps ErrCommitConflict.
func CommitWithRetry(ctx context.Context, cat Catalog, table []string, name string,
	update func(base *format.Metadata) (*format.Metadata, error), maxAttempts int) (*format.Metadata, string, error) {
	maxAttempts = max(maxAttempts, 1)
	var lastErr error
	for attempt := range maxAttempts {
		if attempt > 0 {
			if err := sleepJittered(ctx, attempt); err != nil {
				return nil, "", fmt.Errorf("commit index %s of %q: %w (last attempt: %w)", name, table, err, lastErr)
			}
		}
		base, baseLoc, err := cat.Load(ctx, table, name)
		if err != nil {
			return nil, "", err
		}
		next, err := update(base)
		if err != nil {
			return nil, "", fmt.Errorf("update index %s of %q: %w", name, table, err)
		}
		if next == nil {
			return nil, "", fmt.Errorf("update index %s of %q: update returned no metadata", name, table)
		}
		loc, err := cat.Commit(ctx, table, name, baseLoc, next)
		if err == nil {
			return next, loc, nil
		}
		if !errors.Is(err, ErrCommitConflict) {
			return nil, "", err
		}
		lastErr = err
	}
	return nil, "", fmt.Errorf("commit index %s of %q: gave up after %d attempts: %w", name, table, maxAttempts, lastErr)
}

// sleepJittered waits about 1ms·2^attempt, capped at 64ms, spread over half
// to the whole of that so that retrying writers do not collide again.
func sleepJittered(ctx context.Context, attempt int) error {
	ceiling := time.Millisecond << min(attempt, 6)
	d := ceiling/2 + rand.N(ceiling/2+1)
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
