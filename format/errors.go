package format

import "fmt"

// CorruptFileError reports a file that cannot be what it claims to be: not
// Parquet, truncated, or without the columns and types the index definition
// requires. Retrying does not help, so callers halt and name the file to an
// operator rather than retry; errors of the storage itself are returned
// without it.
type CorruptFileError struct {
	Path string
	Err  error
}

func (e *CorruptFileError) Error() string {
	return fmt.Sprintf("corrupt file %s: %v", e.Path, e.Err)
}

func (e *CorruptFileError) Unwrap() error { return e.Err }
