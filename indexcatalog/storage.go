package indexcatalog

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/streamidx/streamidx/format"
	"github.com/streamidx/streamidx/internal/objstore"
)

// readMetadata reads, parses and validates a metadata file: every file the
// catalog hands out has passed the rules of format.Validate that need no
// table schema. A missing file wraps fs.ErrNotExist; a file written by a
// newer writer wraps format.ErrUnknownFormatVersion; one that is unreadable
// or breaks a rule is a *CorruptMetadataError; an index type this module
// does not implement returns the metadata with an error wrapping
// format.ErrUnsupportedIndexType.
func readMetadata(ctx context.Context, store *objstore.Store, location string) (*format.Metadata, error) {
	return store.Metadata(ctx, location, func(data []byte) (*format.Metadata, error) {
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
	})
}

// ReadMetadata reads the index metadata file at location as Load does: a
// file that does not parse or breaks a rule of the spec is a
// *CorruptMetadataError; an index type this module does not implement
// comes with format.ErrUnsupportedIndexType. It is for tools that look at
// metadata files the catalog does not point at, such as those of the
// metadata log.
func ReadMetadata(ctx context.Context, store *objstore.Store, location string) (*format.Metadata, error) {
	return readMetadata(ctx, store, location)
}

// removeQuietly deletes metadata files whose loss only leaves garbage
// behind, and logs the ones it could not delete.
func removeQuietly(ctx context.Context, store *objstore.Store, logger *slog.Logger, what string, locations ...string) {
	store.RemoveQuietly(context.WithoutCancel(ctx), logger, what, locations...)
}
