package objstore

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strings"
	"time"

	iceio "github.com/apache/iceberg-go/io"
)

// ReadDir lists a directory: files and subdirectories, not recursively. A
// missing directory is empty.
func (s *Store) ReadDir(ctx context.Context, dir string) ([]fs.DirEntry, error) {
	fsys, err := s.io(ctx, dir)
	if err != nil {
		return nil, err
	}
	if isObjectStore(fsys) {
		return readObjectDir(ctx, fsys, dir)
	}
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

// FileInfo is a file found by Walk.
type FileInfo struct {
	Location string // in the form of the root's location
	Size     int64
	ModTime  time.Time
}

// Walk lists the files under root, recursively where the storage can walk
// (object stores and local disks through iceberg-go), else the files of
// root itself. A missing root is empty; files deleted while listing are
// left out.
func (s *Store) Walk(ctx context.Context, root string) ([]FileInfo, error) {
	fsys, err := s.io(ctx, root)
	if err != nil {
		return nil, err
	}
	var out []FileInfo
	add := func(p string, d fs.DirEntry) error {
		info, err := d.Info()
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("list %s: %w", p, err)
		}
		out = append(out, FileInfo{Location: relocate(root, p), Size: info.Size(), ModTime: info.ModTime()})
		return nil
	}
	if l, ok := fsys.(iceio.ListableIO); ok {
		err := l.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			switch {
			case errors.Is(err, fs.ErrNotExist):
				return nil
			case err != nil:
				return fmt.Errorf("list %s: %w", p, err)
			case d.IsDir():
				return ctx.Err()
			}
			return add(p, d)
		})
		if err != nil {
			return nil, err
		}
		return out, nil
	}
	entries, err := s.ReadDir(ctx, root)
	if err != nil {
		return nil, err
	}
	for _, d := range entries {
		if !d.IsDir() {
			if err := add(Join(root, d.Name()), d); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

// relocate rewrites a path that a storage walk reports (a local path, or a
// URI) in the form of root, the form that tracking files use.
func relocate(root, p string) string {
	r, c := CanonicalLocation(root), CanonicalLocation(p)
	if rel, ok := strings.CutPrefix(c, r+"/"); ok {
		return Join(root, rel)
	}
	return p
}

// CanonicalLocation lets a file:// URI and the local path it names compare
// equal. It does not decode escapes: a walk reports names as stored.
func CanonicalLocation(loc string) string {
	if rest, ok := strings.CutPrefix(loc, "file://"); ok {
		loc = strings.TrimPrefix(rest, "localhost")
	} else if rest, ok := strings.CutPrefix(loc, "file:"); ok && strings.HasPrefix(rest, "/") {
		loc = rest
	}
	if !strings.Contains(loc, "://") {
		return path.Clean(loc)
	}
	return strings.TrimRight(loc, "/")
}
