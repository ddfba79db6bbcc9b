package indexcatalog

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/url"
	"sync"

	iceio "github.com/apache/iceberg-go/io"
	"github.com/google/uuid"

	"github.com/streamidx/streamidx/format"
)

// errNoConditionalCreate is returned when a file must be created only if it
// is absent on storage that cannot promise that through iceberg-go's IO.
var errNoConditionalCreate = errors.New("storage cannot create a file only if it is absent (object stores need If-None-Match, not supported yet)")

// ioCache opens iceberg-go IO per scheme and authority once, because opening
// object-store IO builds a client.
type ioCache struct {
	props map[string]string
	mu    sync.Mutex
	byKey map[string]iceio.IO
}

func newIOCache(props map[string]string) *ioCache {
	return &ioCache{props: props, byKey: map[string]iceio.IO{}}
}

func (c *ioCache) get(ctx context.Context, location string) (iceio.IO, error) {
	key := ""
	if u, err := url.Parse(location); err == nil && u.Scheme != "" && u.Scheme != "file" {
		key = u.Scheme + "://" + u.Host
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if fsys, ok := c.byKey[key]; ok {
		return fsys, nil
	}
	fsys, err := iceio.LoadFS(ctx, c.props, location)
	if err != nil {
		return nil, fmt.Errorf("open storage for %s: %w", location, err)
	}
	c.byKey[key] = fsys
	return fsys, nil
}

// publish writes a metadata file under its final name. With exclusive set it
// fails with an error wrapping fs.ErrExist when the name is taken.
//
// Storage that can rename without replacing (the local file system) gets the
// full treatment: write a temporary file beside the target, fsync it, link
// it to the final name, fsync the directory. Readers then never see a
// partial file, and a crash leaves at most a temporary file. Once the link
// exists every reader sees the file, so a failed directory fsync after it is
// logged rather than returned: failing then would report as not done a
// commit that is visible. Other storage gets one put through WriteFileIO,
// which object stores make atomic.
func publish(fsys iceio.IO, logger *slog.Logger, location string, data []byte, exclusive bool) error {
	if rn, ok := fsys.(iceio.RenameNoReplaceIO); ok {
		if wf, ok := fsys.(iceio.WriteFileIO); ok {
			return publishLocal(wf, rn, logger, location, data)
		}
	}
	if exclusive {
		return fmt.Errorf("write %s: %w", location, errNoConditionalCreate)
	}
	wf, ok := fsys.(iceio.WriteFileIO)
	if !ok {
		return fmt.Errorf("write %s: storage is read-only", location)
	}
	if err := wf.WriteFile(location, data); err != nil {
		return fmt.Errorf("write %s: %w", location, err)
	}
	return nil
}

func publishLocal(wf iceio.WriteFileIO, rn iceio.RenameNoReplaceIO, logger *slog.Logger, location string, data []byte) error {
	dir := parentLocation(location)
	tmp := joinLocation(dir, "."+baseName(location)+"."+uuid.NewString()+".tmp")
	w, err := wf.Create(tmp)
	if err != nil {
		return fmt.Errorf("create %s: %w", tmp, err)
	}
	published := false
	defer func() {
		if !published {
			_ = wf.Remove(tmp)
		}
	}()
	if _, err := w.Write(data); err != nil {
		_ = w.Close()
		return fmt.Errorf("write %s: %w", tmp, err)
	}
	if s, ok := w.(interface{ Sync() error }); ok {
		if err := s.Sync(); err != nil {
			_ = w.Close()
			return fmt.Errorf("sync %s: %w", tmp, err)
		}
	}
	if err := w.Close(); err != nil {
		return fmt.Errorf("close %s: %w", tmp, err)
	}
	if err := rn.RenameNoReplace(tmp, location); err != nil {
		return fmt.Errorf("publish %s: %w", location, err)
	}
	published = true
	if err := syncDir(wf, dir); err != nil {
		logger.Warn("metadata file published but its directory entry may not be durable", "file", location, "err", err)
	}
	return nil
}

// syncDir makes a new directory entry durable where the storage has
// directories that can be synced.
func syncDir(fsys iceio.IO, dir string) error {
	f, err := fsys.Open(dir)
	if err != nil {
		return fmt.Errorf("open directory %s: %w", dir, err)
	}
	defer f.Close()
	if s, ok := f.(interface{ Sync() error }); ok {
		if err := s.Sync(); err != nil {
			return fmt.Errorf("sync directory %s: %w", dir, err)
		}
	}
	return nil
}

// readMetadata reads, parses and validates a metadata file: every file the
// catalog hands out has passed the rules of format.Validate that need no
// table schema. A missing file wraps fs.ErrNotExist; a file written by a
// newer writer wraps format.ErrUnknownFormatVersion; one that is unreadable
// or breaks a rule is a *CorruptMetadataError; an index type this module
// does not implement returns the metadata with an error wrapping
// format.ErrUnsupportedIndexType.
func readMetadata(fsys iceio.IO, location string) (*format.Metadata, error) {
	data, err := readFile(fsys, location)
	if err != nil {
		return nil, fmt.Errorf("read index metadata %s: %w", location, err)
	}
	md, err := format.ParseMetadata(data)
	switch {
	case errors.Is(err, format.ErrUnsupportedIndexType):
		return md, err
	case errors.Is(err, format.ErrUnknownFormatVersion):
		return nil, fmt.Errorf("read index metadata %s: %w", location, err)
	case err != nil:
		return nil, &CorruptMetadataError{Location: location, Err: err}
	}
	if err := format.Validate(md, nil); err != nil {
		return nil, &CorruptMetadataError{Location: location, Err: err}
	}
	return md, nil
}

func readFile(fsys iceio.IO, location string) ([]byte, error) {
	if rf, ok := fsys.(iceio.ReadFileIO); ok {
		return rf.ReadFile(location)
	}
	f, err := fsys.Open(location)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}

// readDirNames lists a directory; a missing directory is empty.
func readDirNames(fsys iceio.IO, dir string) ([]fs.DirEntry, error) {
	f, err := fsys.Open(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", dir, err)
	}
	defer f.Close()
	rd, ok := f.(iceio.ReadDirFile)
	if !ok {
		return nil, fmt.Errorf("list %s: storage cannot list directories", dir)
	}
	entries, err := rd.ReadDir(-1)
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", dir, err)
	}
	return entries, nil
}

// removeQuietly deletes files whose loss only leaves garbage behind, and
// logs the ones it could not delete.
func removeQuietly(fsys iceio.IO, logger *slog.Logger, what string, locations ...string) {
	for _, loc := range locations {
		if err := fsys.Remove(loc); err != nil && !errors.Is(err, fs.ErrNotExist) {
			logger.Warn("could not delete index metadata file", "file", loc, "reason", what, "err", err)
		}
	}
}
