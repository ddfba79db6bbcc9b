//go:build wip_tracking

package format

import "fmt"

// CorruptFileError is a temporary copy, kept only while format/errors.go is
// being written, of the error for a file that cannot be decoded.
type CorruptFileError struct {
	Path string
	Err  error
}

func (e *CorruptFileError) Error() string { return fmt.Sprintf("corrupt file %s: %v", e.Path, e.Err) }

func (e *CorruptFileError) Unwrap() error { return e.Err }
