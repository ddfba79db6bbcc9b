package format

import (
	"errors"
	"fmt"
)

// ErrCorruption is the one corruption marker of streamidx, in the spirit of
// Pebble's base.MarkCorruptionError: every layer that finds a file whose
// content contradicts what it must be (a range or tracking file, an index
// metadata file, a data or delete file of the table, a staged key) returns an
// error for which errors.Is(err, ErrCorruption) holds, naming the file.
// Retrying does not help: callers halt the affected index and tell an
// operator, and keep everything else running. Errors of the storage itself
// (a timeout, a refused connection) never carry it.
var ErrCorruption = errors.New("corruption")

// CorruptFileError reports a file that cannot be what it claims to be: not
// Parquet, truncated, or without the columns and types the index definition
// requires. It matches ErrCorruption.
type CorruptFileError struct {
	Path string
	Err  error
}

func (e *CorruptFileError) Error() string {
	return fmt.Sprintf("corrupt file %s: %v", e.Path, e.Err)
}

func (e *CorruptFileError) Unwrap() error { return e.Err }

// Is makes every CorruptFileError match ErrCorruption.
func (e *CorruptFileError) Is(target error) bool { return target == ErrCorruption }

// MarkCorruption returns err marked as a corruption of the file at path. A
// nil err gives nil; an err already marked for the same path is returned
// as it is.
func MarkCorruption(path string, err error) error {
	if err == nil {
		return nil
	}
	var c *CorruptFileError
	if errors.As(err, &c) && c.Path == path {
		return err
	}
	return &CorruptFileError{Path: path, Err: err}
}

// IsCorruption reports whether err marks a corruption: an error wrapping
// ErrCorruption or ErrCorruptKey.
func IsCorruption(err error) bool {
	return errors.Is(err, ErrCorruption) || errors.Is(err, ErrCorruptKey)
}

// CorruptPath returns the file a corruption error names, if it names one.
func CorruptPath(err error) (string, bool) {
	var c *CorruptFileError
	if errors.As(err, &c) {
		return c.Path, true
	}
	return "", false
}

// ErrEncryptionNotSupported is returned (wrapped) for an index snapshot
// whose tracking file is encrypted (its key-id is set) or a range file
// whose tracking entry carries key metadata: the files are valid, and
// streamidx cannot decrypt them. It is not a corruption.
var ErrEncryptionNotSupported = errors.New("encryption is not supported")

// ErrUnsupportedFileFormat is returned (wrapped) for a range file whose
// tracking entry names a format other than Parquet: Avro and ORC range
// files are valid by the spec, and streamidx reads Parquet only. It is not
// a corruption.
var ErrUnsupportedFileFormat = errors.New("range file format not supported")
