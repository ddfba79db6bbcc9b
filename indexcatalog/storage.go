package indexcatalog

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/streamidx/streamidx/format"
	"github.com/streamidx/streamidx/internal/objstore"
)

// readMetadata reads and parses a metadata file. A missing file wraps
// fs.ErrNotExist; an unreadable one is a *CorruptMetadataError; an index
// type this module does not implement returns the metadata with an error
// wrapping format.ErrUnsupportedIndexType.
func readMetadata(ctx context.Context, store *objstore.Store, location string) (*format.Metadata, error) {
	data, err := store.ReadFile(ctx, location)
	if err != nil {
		return nil, fmt.Errorf("read index metadata %s: %w", location, err)
	}
	md, err := format.ParseMetadata(data)
	if errors.Is(err, format.ErrUnsupportedIndexType) {
		return md, err
	}
	if err != nil {
		return nil, &CorruptMetadataError{Location: location, Err: err}
	}
	return md, nil
}

// removeQuietly deletes metadata files whose loss only leaves garbage
// behind, and logs the ones it could not delete.
func removeQuietly(ctx context.Context, store *objstore.Store, logger *slog.Logger, what string, locations ...string) {
	store.RemoveQuietly(context.WithoutCancel(ctx), logger, what, locations...)
}
