package compactor

import (
	"context"
	"log/slog"

	"github.com/streamidx/streamidx/format"
	"github.com/streamidx/streamidx/internal/objstore"
)

// RemoveFiles deletes range files that no snapshot references, best effort:
// a file left behind is an orphan for clean-up, never a correctness issue.
func RemoveFiles(ctx context.Context, props map[string]string, log *slog.Logger, entries []format.TrackingEntry) {
	for _, e := range entries {
		if err := objstore.Remove(ctx, props, e.FilePath); err != nil && log != nil {
			log.Warn("could not remove unreferenced range file", "file", e.FilePath, "err", err)
		}
	}
}
