package objstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync/atomic"

	iceio "github.com/apache/iceberg-go/io"

	"github.com/streamidx/streamidx/format"
)

// RangeFile is an open range file. Close it when done.
type RangeFile struct {
	*format.RangeFileReader
	f *countingFile
}

// OpenRange opens the range file of tracking entry te for reading with is.
// The file must be the one te describes: a size or a record count other
// than te's means another file was put in its place (a partial restore of a
// backup, another snapshot's file), and is refused with a corruption error
// naming the file, as is a file that is no range file of the index. A
// failure of the storage is returned as it is, for the caller to retry. A
// range file in another format than Parquet (format.ErrUnsupportedFileFormat)
// or an encrypted one (format.ErrEncryptionNotSupported) is refused before
// it is opened: such files are valid, and not corrupt.
func (s *Store) OpenRange(ctx context.Context, te *format.TrackingEntry, is *format.IndexSchema, opts format.RangeFileReadOptions) (*RangeFile, error) {
	// Tracking entries name the format as Iceberg manifests do, in any case
	// ("PARQUET" from Java writers).
	if !strings.EqualFold(te.FileFormat, "parquet") {
		return nil, fmt.Errorf("range file %s is a %s file: streamidx reads Parquet range files only: %w",
			te.FilePath, te.FileFormat, format.ErrUnsupportedFileFormat)
	}
	if len(te.KeyMetadata) > 0 {
		return nil, fmt.Errorf("range file %s is encrypted (its tracking entry has key_metadata): %w",
			te.FilePath, format.ErrEncryptionNotSupported)
	}
	fsys, err := s.io(ctx, te.FilePath)
	if err != nil {
		return nil, err
	}
	f, err := fsys.Open(te.FilePath)
	if err != nil {
		return nil, fmt.Errorf("open range file %s: %w", te.FilePath, err)
	}
	size, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("open range file %s: %w", te.FilePath, err)
	}
	if size != te.FileSizeInBytes {
		f.Close()
		return nil, format.MarkCorruption(te.FilePath, fmt.Errorf("the range file is %d bytes, its tracking entry says %d: "+
			"it is not the file the index snapshot was written with", size, te.FileSizeInBytes))
	}
	cf := &countingFile{File: f}
	footer, cached := s.footers.get(te.FilePath)
	if cached && opts.Footer == nil {
		opts.Footer = footer
	}
	r, err := format.OpenRangeFile(cf, te.FilePath, is, opts)
	if err != nil {
		f.Close()
		return nil, err
	}
	if !cached && s.opts.FooterCacheBytes > 0 {
		footer := r.Footer()
		s.footers.put(te.FilePath, footer, int64(footer.Size()))
	}
	if n := r.NumRows(); n != te.RecordCount {
		err := format.MarkCorruption(te.FilePath, fmt.Errorf("the range file holds %d entries, its tracking entry says %d: "+
			"it is not the file the index snapshot was written with", n, te.RecordCount))
		return nil, errors.Join(err, r.Close(), f.Close())
	}
	return &RangeFile{RangeFileReader: r, f: cf}, nil
}

// BytesRead is what was read from storage so far.
func (r *RangeFile) BytesRead() int64 { return r.f.n.Load() }

// Close closes the reader and the file.
func (r *RangeFile) Close() error {
	return errors.Join(r.RangeFileReader.Close(), r.f.Close())
}

// countingFile counts the bytes read from a file: what a lookup costs in
// storage reads.
type countingFile struct {
	iceio.File
	n atomic.Int64
}

func (c *countingFile) ReadAt(p []byte, off int64) (int, error) {
	n, err := c.File.ReadAt(p, off)
	c.n.Add(int64(n))
	return n, err
}

func (c *countingFile) Read(p []byte) (int, error) {
	n, err := c.File.Read(p)
	c.n.Add(int64(n))
	return n, err
}
