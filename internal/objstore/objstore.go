// Package objstore writes immutable files through iceberg-go's IO so the same
// code serves local disks and object stores. On a local file system a file
// is written under a temporary name, fsynced, and renamed into place, so a
// reader or a crash never sees half a file; object stores make a completed
// upload visible at once.
package objstore

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"path"
	"strings"

	iceio "github.com/apache/iceberg-go/io"
	"github.com/google/uuid"
)

// Writer is a file being written. Close publishes it; Abort drops it.
type Writer struct {
	fsys      iceio.IO
	w         iceio.FileWriter
	location  string
	tmp       string // local only: the temporary name
	written   int64
	finalized bool
}

// Create starts writing a new file at location.
func Create(ctx context.Context, props map[string]string, location string) (*Writer, error) {
	fsys, err := iceio.LoadFS(ctx, props, location)
	if err != nil {
		return nil, fmt.Errorf("open storage for %s: %w", location, err)
	}
	wf, ok := fsys.(iceio.WriteFileIO)
	if !ok {
		return nil, fmt.Errorf("create %s: storage is read-only", location)
	}
	w := &Writer{fsys: fsys, location: location}
	target := location
	if _, local := fsys.(iceio.RenameIO); local {
		dir, base := path.Split(localPath(location))
		if mk, ok := fsys.(iceio.MkdirAllIO); ok {
			if err := mk.MkdirAll(dir); err != nil {
				return nil, fmt.Errorf("create directory %s: %w", dir, err)
			}
		}
		w.tmp = dir + "." + base + "." + uuid.NewString() + ".tmp"
		target = w.tmp
	}
	if w.w, err = wf.Create(target); err != nil {
		return nil, fmt.Errorf("create %s: %w", target, err)
	}
	return w, nil
}

// localPath strips a file:// scheme.
func localPath(location string) string {
	if u, err := url.Parse(location); err == nil && u.Scheme == "file" {
		return u.Path
	}
	return location
}

// Write implements io.Writer.
func (w *Writer) Write(p []byte) (int, error) {
	n, err := w.w.Write(p)
	w.written += int64(n)
	if err != nil {
		return n, fmt.Errorf("write %s: %w", w.location, err)
	}
	return n, nil
}

// Size is the number of bytes written so far.
func (w *Writer) Size() int64 { return w.written }

// Location is where the file is published.
func (w *Writer) Location() string { return w.location }

// Close makes the file durable and visible at its location.
func (w *Writer) Close() error {
	if w.finalized {
		return nil
	}
	w.finalized = true
	if w.tmp == "" {
		if err := w.w.Close(); err != nil {
			return fmt.Errorf("close %s: %w", w.location, err)
		}
		return nil
	}
	if s, ok := w.w.(interface{ Sync() error }); ok {
		if err := s.Sync(); err != nil {
			_ = w.w.Close()
			_ = w.fsys.Remove(w.tmp)
			return fmt.Errorf("sync %s: %w", w.location, err)
		}
	}
	if err := w.w.Close(); err != nil {
		_ = w.fsys.Remove(w.tmp)
		return fmt.Errorf("close %s: %w", w.location, err)
	}
	if err := w.fsys.(iceio.RenameIO).Rename(w.tmp, localPath(w.location)); err != nil {
		_ = w.fsys.Remove(w.tmp)
		return fmt.Errorf("publish %s: %w", w.location, err)
	}
	return syncDir(w.fsys, path.Dir(localPath(w.location)))
}

// Abort drops a file that will not be published.
func (w *Writer) Abort() {
	if w.finalized {
		return
	}
	w.finalized = true
	_ = w.w.Close()
	if w.tmp != "" {
		_ = w.fsys.Remove(w.tmp)
	} else {
		_ = w.fsys.Remove(w.location)
	}
}

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

// ReadFile reads a whole file.
func ReadFile(ctx context.Context, props map[string]string, location string) ([]byte, error) {
	fsys, err := iceio.LoadFS(ctx, props, location)
	if err != nil {
		return nil, fmt.Errorf("open storage for %s: %w", location, err)
	}
	f, err := fsys.Open(location)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", location, err)
	}
	defer f.Close()
	data, err := io.ReadAll(f)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", location, err)
	}
	return data, nil
}

// Join appends path elements to a location URI or path.
func Join(location string, elems ...string) string {
	return strings.TrimRight(location, "/") + "/" + strings.Join(elems, "/")
}

// Remove deletes a file.
func Remove(ctx context.Context, props map[string]string, location string) error {
	fsys, err := iceio.LoadFS(ctx, props, location)
	if err != nil {
		return fmt.Errorf("open storage for %s: %w", location, err)
	}
	if err := fsys.Remove(location); err != nil {
		return fmt.Errorf("remove %s: %w", location, err)
	}
	return nil
}
