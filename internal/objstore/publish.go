package objstore

import (
	"context"
	"fmt"

	iceio "github.com/apache/iceberg-go/io"
	"github.com/google/uuid"
)

// CreateOptions tune Create.
type CreateOptions struct {
	// Exclusive makes Close fail with an error wrapping fs.ErrExist when
	// the location already holds a file, which makes publishing the file a
	// compare-and-swap (the file-system index catalog's commit): a hard link
	// on a local file system, a conditional put on an object store. Once
	// such a file is visible it is published: a failed directory fsync after
	// that is logged, not returned, since returning it would report as not
	// done a commit that readers already see. Storage without an exclusive
	// create refuses at Create with ErrNoConditionalCreate. Default: false.
	Exclusive bool
}

// Writer is a file being written. Close publishes it; Abort drops it.
type Writer struct {
	s         *Store
	fsys      iceio.IO
	w         iceio.FileWriter
	location  string
	exclusive bool
	tmp       string             // local only: the temporary name
	cancel    context.CancelFunc // object stores only: aborts the upload
	written   int64
	finalized bool
}

// Create starts writing a new file at location. Where the storage can
// rename (the local file system) it is written under a temporary name beside
// location and published by Close, replacing a file of that name unless
// Exclusive; elsewhere (object stores) it is uploaded to location, where it
// becomes visible when Close completes the upload, conditional on the key
// being absent when Exclusive.
func (s *Store) Create(ctx context.Context, location string, opts CreateOptions) (*Writer, error) {
	fsys, err := s.io(ctx, location)
	if err != nil {
		return nil, err
	}
	if isObjectStore(fsys) {
		fw, cancel, err := createObject(ctx, fsys, location, opts.Exclusive)
		if err != nil {
			return nil, err
		}
		return &Writer{s: s, fsys: fsys, w: fw, location: location, exclusive: opts.Exclusive, cancel: cancel}, nil
	}
	wf, ok := fsys.(iceio.WriteFileIO)
	if !ok {
		return nil, fmt.Errorf("create %s: storage is read-only", location)
	}
	w := &Writer{s: s, fsys: fsys, location: location, exclusive: opts.Exclusive}
	_, renames := fsys.(iceio.RenameIO)
	_, links := fsys.(iceio.RenameNoReplaceIO)
	switch {
	case opts.Exclusive && !links:
		return nil, fmt.Errorf("create %s: %w", location, ErrNoConditionalCreate)
	case opts.Exclusive || renames:
		w.tmp = Join(Dir(location), "."+Base(location)+"."+uuid.NewString()+".tmp")
	}
	target := location
	if w.tmp != "" {
		target = w.tmp
	}
	if w.w, err = wf.Create(target); err != nil {
		return nil, fmt.Errorf("create %s: %w", target, err)
	}
	return w, nil
}

// Publish writes data as a new file at location, as Create, Write and Close
// would.
func (s *Store) Publish(ctx context.Context, location string, data []byte, opts CreateOptions) error {
	w, err := s.Create(ctx, location, opts)
	if err != nil {
		return err
	}
	if _, err := w.Write(data); err != nil {
		w.Abort()
		return err
	}
	return w.Close()
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

// Close makes the file durable and visible at its location: on a local file
// system it fsyncs the temporary file, renames it to its final name (or,
// when exclusive, links it there, failing with fs.ErrExist when the name is
// taken) and fsyncs the directory; on an object store it completes the
// upload (failing with fs.ErrExist when exclusive and the key exists).
func (w *Writer) Close() error {
	if w.finalized {
		return nil
	}
	w.finalized = true
	if w.cancel != nil {
		defer w.cancel()
		return closeObject(w.w, w.location)
	}
	if w.tmp == "" {
		if err := w.w.Close(); err != nil {
			return fmt.Errorf("close %s: %w", w.location, err)
		}
		return nil
	}
	defer func() { _ = w.fsys.Remove(w.tmp) }() // gone once published; left by any failure before
	if s, ok := w.w.(interface{ Sync() error }); ok {
		if err := s.Sync(); err != nil {
			_ = w.w.Close()
			return fmt.Errorf("sync %s: %w", w.location, err)
		}
	}
	if err := w.w.Close(); err != nil {
		return fmt.Errorf("close %s: %w", w.location, err)
	}
	var err error
	if w.exclusive {
		err = w.fsys.(iceio.RenameNoReplaceIO).RenameNoReplace(w.tmp, w.location)
	} else {
		err = w.fsys.(iceio.RenameIO).Rename(w.tmp, w.location)
	}
	if err != nil {
		return fmt.Errorf("publish %s: %w", w.location, err)
	}
	if err := syncDir(w.fsys, Dir(w.location)); err != nil {
		if !w.exclusive {
			return err
		}
		w.s.log.Warn("file published but its directory entry may not be durable", "file", w.location, "err", err)
	}
	return nil
}

// Abort drops a file that will not be published.
func (w *Writer) Abort() {
	if w.finalized {
		return
	}
	w.finalized = true
	if w.cancel != nil {
		// An upload cancelled before Close never appears; removing the
		// location instead could delete a file another writer published.
		w.cancel()
		_ = w.w.Close()
		return
	}
	_ = w.w.Close()
	if w.tmp != "" {
		_ = w.fsys.Remove(w.tmp)
	} else {
		_ = w.fsys.Remove(w.location)
	}
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
