package updater

import (
	"errors"

	"github.com/streamidx/streamidx/flush"
	"github.com/streamidx/streamidx/format"
)

// IsHalt reports whether err is one that retrying cannot fix: a corrupt file
// (format.IsCorruption; format.CorruptPath names it), an index that was
// replaced under the updater, an index whose table was dropped and created
// anew, an index metadata file of a newer format, an index of a type
// streamidx does not implement, an index whose definition a schema change
// broke, one with an expression streamidx cannot evaluate, or one whose
// files are encrypted or not Parquet. The caller
// stops maintaining that index and tells an operator; every other error is
// transient and retried.
func IsHalt(err error) bool {
	return format.IsCorruption(err) || errors.Is(err, flush.ErrIndexReplaced) ||
		errors.Is(err, format.ErrTableReplaced) || errors.Is(err, format.ErrUnknownFormatVersion) ||
		errors.Is(err, format.ErrUnsupportedIndexType) || errors.Is(err, format.ErrIncompatibleSchema) ||
		errors.Is(err, format.ErrUnsupportedExpression) || errors.Is(err, format.ErrEncryptionNotSupported) ||
		errors.Is(err, format.ErrUnsupportedFileFormat)
}
