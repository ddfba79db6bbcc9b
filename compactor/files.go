package compactor

import (
	"context"
	"log/slog"

	"github.com/streamidx/streamidx/format"
	"github.com/streamidx/streamidx/internal/objstore"
)

// RemoveFiles deletes range files that no snapshot references, best effort:
// a file left behind is an orphan for clean-up, never a correctness issue.
// A nil log discards the failures.
func RemoveFiles(ctx context.Context, store *objstore.Store, log *slog.Logger, entries []format.TrackingEntry) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	locs := make([]string, len(entries))
	for i, e := range entries {
		locs[i] = e.FilePath
	}
	store.RemoveQuietly(ctx, log, "unreferenced range file", locs...)
}
